/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kept_place.c - the table of queue places kept for a retry (kept_place.h):
 * a hash table by lease id, for the retry that forgets its place as it
 * registers, and a list the janitor walks for the places whose time is up.
 * One mutex guards both; the Redis calls of a reap run outside it.
 */
#include "lease/kept_place.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "auth/token.h"
#include "gateway.h"
#include "lease/key_quota.h"
#include "lease/lease_ops.h"
#include "store/backend/key_slot.h"
#include "util/alarm.h"
#include "util/clock.h"
#include "util/list.h"
#include "util/log.h"
#include "util/strmap.h"

/* Places a reap takes out of their queues at most, one script call each: the janitor's other
 * work (timers, hang-ups, the liveness beat) waits meanwhile. */
#define REAP_BATCH 64

/* A place kept in the queue of a lock or semaphore. */
struct kept_place {
    struct strmap_node by_id;        /* in places.by_id by lease id */
    struct list_link link;           /* on places.all */
    const struct lease_ops *kind;    /* lock or semaphore */
    struct key_quota *quota;         /* the places of its API key; NULL: auth off */
    int slot;                        /* cluster: the queue's hash slot; -1: none */
    int64_t until_ms;                /* monotonic: when it leaves its queue */
    char lease_id[LEASE_ID_LEN + 1]; /* the waiter's lease id in the queue */
    char attach[LEASE_ID_LEN + 1];   /* the attempt that queued it: a retry's differs */
    char name[];                     /* the lock or semaphore */
};

static struct {
    pthread_mutex_t lock;
    struct strmap by_id;
    struct strmap quotas; /* struct key_quota by key id: the places each key keeps */
    struct list_link all;
    long count;
} places = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .by_id = STRMAP_INIT,
            .quotas = STRMAP_INIT,
            .all = {&places.all, &places.all}};

/* Puts kp on the table. Caller holds places.lock. */
static void link_place(struct kept_place *kp)
{
    strmap_add(&places.by_id, &kp->by_id, kp->lease_id);
    list_push(&places.all, &kp->link);
    places.count++;
    if (kp->quota != NULL)
        kp->quota->count++;
}

/* Takes kp off the table. Caller holds places.lock. */
static void unlink_place(struct kept_place *kp)
{
    strmap_remove(&places.by_id, &kp->by_id);
    list_unlink(&kp->link);
    places.count--;
    if (kp->quota != NULL)
        kp->quota->count--;
}

bool kept_place_add(const struct lease_ops *kind, const char *name, const char *lease_id,
                    const char *attach, const char *key_id, int slot, int64_t until_ms)
{
    size_t name_len = strlen(name);
    struct kept_place *kp = calloc(1, sizeof *kp + name_len + 1);
    FG_ASSERT(kp != NULL);
    kp->kind = kind;
    kp->slot = slot;
    kp->until_ms = until_ms;
    snprintf(kp->lease_id, sizeof kp->lease_id, "%s", lease_id);
    snprintf(kp->attach, sizeof kp->attach, "%s", attach);
    memcpy(kp->name, name, name_len + 1);
    pthread_mutex_lock(&places.lock);
    struct strmap_node *node = strmap_find(&places.by_id, lease_id);
    struct kept_place *old = node != NULL ? STRMAP_ENTRY(node, struct kept_place, by_id) : NULL;
    if (old != NULL)
        unlink_place(old); /* kept before by an attempt this one took over */
    kp->quota = key_quota_of(&places.quotas, key_id);
    /* one key may not take the whole table: the others' hung-up waiters keep their places too */
    bool room = places.count < gw.cfg->max_waiters &&
                (kp->quota == NULL || kp->quota->count < gw.cfg->max_waiters_per_key);
    if (room) {
        link_place(kp);
        alarm_set(until_ms);
    }
    pthread_mutex_unlock(&places.lock);
    free(old);
    if (!room)
        free(kp);
    return room;
}

void kept_place_forget(const char *lease_id)
{
    pthread_mutex_lock(&places.lock);
    struct strmap_node *node = strmap_find(&places.by_id, lease_id);
    struct kept_place *kp = node != NULL ? STRMAP_ENTRY(node, struct kept_place, by_id) : NULL;
    if (kp != NULL)
        unlink_place(kp);
    pthread_mutex_unlock(&places.lock);
    free(kp);
}

/* Takes the place kp, whose time is up, out of its queue; a retry that took it over keeps it.
 * Returns false if Redis did not answer. */
static bool leave(struct kept_place *kp)
{
    struct lease_result res;
    struct fg_error err = {0};
    if (kp->kind->cancel(kp->name, kp->lease_id, kp->attach, LEASE_CANCEL_DROP, &res, &err) != 0) {
        log_message(LOG_WARN, "waiter_cleanup", "%s %s: %s", kp->kind->noun, kp->name, err.msg);
        return err.code != FG_ERR_BACKEND_UNAVAILABLE;
    }
    if (res.outcome == LEASE_CANCELED || res.outcome == LEASE_RELEASED)
        log_message(LOG_INFO, "place_left",
                    "%s %s: the place kept for a retry of its request_id "
                    "left the queue, nobody came back for it",
                    kp->kind->noun, kp->name);
    return true;
}

/* Puts the place kp back on the table, its time up at until_ms, unless a retry kept a place of
 * its lease id meanwhile (that one is newer): then frees it. */
static void put_back(struct kept_place *kp, int64_t until_ms)
{
    kp->until_ms = until_ms;
    pthread_mutex_lock(&places.lock);
    bool newer = strmap_find(&places.by_id, kp->lease_id) != NULL;
    if (!newer)
        link_place(kp);
    pthread_mutex_unlock(&places.lock);
    if (newer)
        free(kp);
    else
        alarm_set(until_ms);
}

int64_t kept_place_reap(int64_t now_ms)
{
    struct list_link due;
    list_init(&due);
    int64_t next = INT64_MAX;
    size_t ndue = 0;
    pthread_mutex_lock(&places.lock);
    for (struct list_link *l = places.all.next, *after; l != &places.all; l = after) {
        after = l->next;
        struct kept_place *kp = LIST_ENTRY(l, struct kept_place, link);
        if (kp->until_ms > now_ms || ndue == REAP_BATCH) {
            next = kp->until_ms < next ? kp->until_ms : next;
            continue;
        }
        unlink_place(kp);
        list_push(&due, &kp->link);
        ndue++;
    }
    pthread_mutex_unlock(&places.lock);
    struct kept_place *failed = NULL;
    int64_t retry_ms = INT64_MAX;
    while (!list_empty(&due)) {
        struct kept_place *kp = LIST_ENTRY(due.next, struct kept_place, link);
        list_unlink(&kp->link);
        if (failed != NULL) {
            put_back(kp, retry_ms); /* each would wait a whole deadline too */
        } else if (!leave(kp)) {
            failed = kp;
            retry_ms = clock_mono_ms() + GIVE_BACK_RETRY_MS;
        } else {
            free(kp);
        }
    }
    if (failed != NULL)
        put_back(failed, retry_ms); /* last: first on the table, so taken last next time */
    return retry_ms < next ? retry_ms : next;
}

size_t kept_place_slots(unsigned char *seen, size_t nslots)
{
    size_t added = 0;
    pthread_mutex_lock(&places.lock);
    for (struct list_link *l = places.all.next; l != &places.all; l = l->next)
        added += slot_seen(seen, nslots, LIST_ENTRY(l, struct kept_place, link)->slot);
    pthread_mutex_unlock(&places.lock);
    return added;
}
