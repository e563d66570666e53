/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doorbell.c - the doorbell subscriber threads and the list of orphaned grants
 * (and of the leases of acquires answered without a reply from Redis).
 * One thread follows this gateway's own channel (grants to its waiters), one
 * the shared channel CHANNEL_ENDED (leases that ended: wakes their watchers).
 * On every (re)subscription all waiters re-check, since messages published
 * while the subscription was down are lost; the doorbell is an accelerator, the
 * waiters' own timed re-checks are what make waiting correct. On a Redis
 * Cluster each channel is followed as one shard channel per slot
 * (redis_subscribe), which the scripts publish to in the slot of the lease.
 */
#include "lease/doorbell.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "lease/waiter.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "util/alarm.h"
#include "util/clock.h"
#include "util/join.h"
#include "util/log.h"
#include "util/metrics.h"

#define ORPHAN_GRACE_MS    200
#define ORPHANS_FIRST_ROOM 64 /* orphans the list first makes room for; it doubles from there */
#define MAX_KINDS          4

struct orphan {
    char kind;
    char lease_id[LEASE_ID_LEN + 1];
    char name[NAME_MAX_LEN + 1];
    char attach[LEASE_ID_LEN + 1]; /* given back only from this attempt ("": any) */
    int64_t due_ms;                /* when the janitor gives it back */
    bool has_grant;                /* grant is the script's answer, to deliver on adoption */
    bool drop;                     /* an unanswered acquire's lease (doorbell_add_unanswered) */
    struct lease_grant grant;
};

/* A list of orphans, grown as needed (orphan_room). */
struct orphan_list {
    struct orphan *at; /* owned, cap entries, the first n in use */
    size_t n;
    size_t cap;
};

static struct {
    pthread_t thread;
    pthread_t ended_thread; /* follows CHANNEL_ENDED */
    bool started;
    atomic_bool stop; /* asks the subscriber threads to end */
    char channel[64];
    pthread_mutex_t lock;
    struct orphan_list orphans;
    unsigned long forgotten; /* orphans not kept for want of room since the janitor's last round */
    struct {
        char kind;
        doorbell_orphan_fn fn;
    } kinds[MAX_KINDS];
    size_t nkinds;
} bell = {.lock = PTHREAD_MUTEX_INITIALIZER};

void doorbell_on_orphan(char kind, doorbell_orphan_fn fn)
{
    FG_ASSERT(bell.nkinds < MAX_KINDS);
    bell.kinds[bell.nkinds].kind = kind;
    bell.kinds[bell.nkinds++].fn = fn;
}

/* The orphans kept at most: as many leases as this process's acquires may leave unanswered at once,
 * one for each it may park (limits.max_waiters) and a lock set's for each HTTP thread. An orphan
 * (some 350 bytes) takes less than a parked acquire's connection, so a full list costs less than
 * the waiters this process is sized for. */
static size_t orphans_max(void)
{
    return (size_t)gw.cfg->max_waiters + (size_t)gw.cfg->http_threads * LOCKSET_MAX;
}

/* Room for one more orphan at the end of list, which grows by doubling up to limit entries.
 * Returns the entry, now counted in list->n, or NULL if the list has limit already. */
static struct orphan *orphan_room(struct orphan_list *list, size_t limit)
{
    if (list->n == list->cap) {
        if (list->cap >= limit)
            return NULL;
        size_t cap = list->cap > 0 ? 2 * list->cap : ORPHANS_FIRST_ROOM;
        list->cap = cap < limit ? cap : limit;
        list->at = realloc(list->at, list->cap * sizeof *list->at);
        FG_ASSERT(list->at != NULL);
    }
    return &list->at[list->n++];
}

/* Keeps o on the list to give back. Caller holds bell.lock. Returns false if the list is full: o
 * is forgotten (counted, and logged in the janitor's next round), its lease left to its ttl. */
static bool keep_orphan(const struct orphan *o)
{
    struct orphan *room = orphan_room(&bell.orphans, orphans_max());
    if (room == NULL) {
        bell.forgotten++;
        metrics_orphan_forgotten();
        return false;
    }
    *room = *o;
    return true;
}

static void remember_orphan(char kind, const char *lease, size_t lease_len, const char *name,
                            size_t name_len, const char *attach, const struct lease_grant *grant,
                            bool drop)
{
    if (lease_len != LEASE_ID_LEN || name_len == 0 || name_len > NAME_MAX_LEN)
        return;
    struct orphan o = {.kind = kind, .has_grant = grant != NULL, .drop = drop};
    memcpy(o.lease_id, lease, LEASE_ID_LEN);
    memcpy(o.name, name, name_len);
    snprintf(o.attach, sizeof o.attach, "%s", attach);
    if (grant != NULL)
        o.grant = *grant;
    pthread_mutex_lock(&bell.lock);
    o.due_ms = clock_mono_ms() + ORPHAN_GRACE_MS;
    if (keep_orphan(&o))
        alarm_set(o.due_ms);
    pthread_mutex_unlock(&bell.lock);
}

void doorbell_add_orphan(char kind, const char *lease_id, const char *name, const char *attach,
                         const struct lease_grant *grant)
{
    remember_orphan(kind, lease_id, strlen(lease_id), name, strlen(name), attach, grant, false);
}

void doorbell_add_unanswered(char kind, const char *lease_id, const char *name, const char *attach)
{
    remember_orphan(kind, lease_id, strlen(lease_id), name, strlen(name), attach, NULL, true);
}

bool doorbell_adopt(const char *lease_id)
{
    bool found = false, has_grant = false;
    struct lease_grant grant;
    pthread_mutex_lock(&bell.lock);
    size_t keep = 0;
    for (size_t i = 0; i < bell.orphans.n; i++) {
        struct orphan *o = &bell.orphans.at[i];
        if (strcmp(o->lease_id, lease_id) != 0) {
            if (keep < i) /* a long list is mostly left where it is */
                bell.orphans.at[keep] = *o;
            keep++;
            continue;
        }
        found = true;
        if (o->has_grant) {
            has_grant = true;
            grant = o->grant;
        }
    }
    bell.orphans.n = keep;
    pthread_mutex_unlock(&bell.lock);
    if (has_grant)
        return waiter_deliver(lease_id, &grant);
    return found && waiter_ring(lease_id);
}

/* Payload "<kind>|<lease>|<name>"; kind DOORBELL_WAKE only wakes a waiter, if there is one. */
static void on_message(const char *payload, size_t len, void *ctx)
{
    (void)ctx;
    if (len < LEASE_ID_LEN + 4 || payload[1] != '|' || payload[2 + LEASE_ID_LEN] != '|')
        return;
    char lease[LEASE_ID_LEN + 1];
    memcpy(lease, payload + 2, LEASE_ID_LEN);
    lease[LEASE_ID_LEN] = '\0';
    if (!waiter_ring(lease) && payload[0] != DOORBELL_WAKE)
        remember_orphan(payload[0], lease, LEASE_ID_LEN, payload + 3 + LEASE_ID_LEN,
                        len - 3 - LEASE_ID_LEN, "", NULL, false);
}

/* Payload "<kind>|<fence>|<reason>|<name>" (lib_lease.lua's mark_ended). */
static void on_ended(const char *payload, size_t len, void *ctx)
{
    (void)ctx;
    char text[NAME_MAX_LEN + 64];
    if (len < 6 || len >= sizeof text || payload[1] != '|')
        return;
    memcpy(text, payload, len);
    text[len] = '\0';
    char *end;
    long long fence = strtoll(text + 2, &end, 10);
    char *name = *end == '|' ? strchr(end + 1, '|') : NULL;
    if (fence <= 0 || name == NULL)
        return;
    waiter_ring_watchers(text[0], name + 1, fence);
}

static void on_subscribed(void *ctx)
{
    (void)ctx;
    waiter_wake_all(WAKE_TIMER);
}

static void *doorbell_main(void *arg)
{
    (void)arg;
    struct redis_subscriber sub = {bell.channel, on_message, on_subscribed, NULL};
    redis_subscribe(&sub, &bell.stop);
    return NULL;
}

static void *ended_main(void *arg)
{
    (void)arg;
    struct redis_subscriber sub = {CHANNEL_ENDED, on_ended, on_subscribed, NULL};
    redis_subscribe(&sub, &bell.stop);
    return NULL;
}

int doorbell_start(struct fg_error *err)
{
    snprintf(bell.channel, sizeof bell.channel, "%s%s", CHANNEL_BELL_PREFIX, gw.instance_id);
    if (pthread_create(&bell.thread, NULL, doorbell_main, NULL) != 0)
        return fg_fail(err, FG_ERR_INTERNAL, "cannot start the doorbell thread");
    if (pthread_create(&bell.ended_thread, NULL, ended_main, NULL) != 0) {
        redis_subscribe_stop(&bell.stop);
        pthread_join(bell.thread, NULL);
        return fg_fail(err, FG_ERR_INTERNAL, "cannot start the doorbell thread");
    }
    bell.started = true;
    return 0;
}

static doorbell_orphan_fn orphan_fn(char kind)
{
    for (size_t i = 0; i < bell.nkinds; i++)
        if (bell.kinds[i].kind == kind)
            return bell.kinds[i].fn;
    return NULL;
}

/* Puts the orphans of due[first..n) back on the list, each given back again at due_ms. */
static void put_back(struct orphan *due, size_t first, size_t n, int64_t due_ms)
{
    pthread_mutex_lock(&bell.lock);
    for (size_t i = first; i < n; i++) {
        due[i].due_ms = due_ms;
        (void)keep_orphan(&due[i]);
    }
    pthread_mutex_unlock(&bell.lock);
    alarm_set(due_ms);
}

/* Gives back o, unless its waiter turned up (a lease to drop has none: its request has ended,
 * or is ending as it is registered). Returns false if Redis did not answer. */
static bool give_back(const struct orphan *o)
{
    if (!o->drop && waiter_ring(o->lease_id))
        return true;
    doorbell_orphan_fn fn = orphan_fn(o->kind);
    struct fg_error err = {0};
    if (fn == NULL || fn(o->name, o->lease_id, o->attach, o->drop, &err) == 0)
        return true;
    bool outage = err.code == FG_ERR_BACKEND_UNAVAILABLE;
    log_message(LOG_WARN, "orphan_grant", "could not give back a grant on %s: %s%s", o->name,
                err.msg, outage ? " (tried again later)" : "");
    return !outage;
}

/* Takes the orphans due by now_ms off the list into due (owned by the caller) and says when the
 * next of those left falls due, and how many were forgotten since the last round. */
static int64_t take_due(int64_t now_ms, struct orphan_list *due, unsigned long *forgotten)
{
    int64_t next_ms = INT64_MAX;
    pthread_mutex_lock(&bell.lock);
    size_t keep = 0;
    for (size_t i = 0; i < bell.orphans.n; i++) {
        struct orphan *o = &bell.orphans.at[i];
        if (o->due_ms <= now_ms) {
            *orphan_room(due, SIZE_MAX) = *o;
            continue;
        }
        bell.orphans.at[keep++] = *o;
        next_ms = o->due_ms < next_ms ? o->due_ms : next_ms;
    }
    bell.orphans.n = keep;
    if (keep == 0) { /* the room an outage's long list took is let go once it is given back */
        free(bell.orphans.at);
        bell.orphans = (struct orphan_list){0};
    }
    *forgotten = bell.forgotten;
    bell.forgotten = 0;
    pthread_mutex_unlock(&bell.lock);
    return next_ms;
}

int64_t doorbell_reap_orphans(int64_t now_ms)
{
    struct orphan_list due = {0};
    unsigned long forgotten;
    int64_t next_ms = take_due(now_ms, &due, &forgotten);
    if (forgotten > 0)
        log_message(LOG_WARN, "orphans_full",
                    "%lu leases to give back found the list full (%zu): each is held until its ttl",
                    forgotten, orphans_max());
    for (size_t i = 0; i < due.n; i++) {
        if (give_back(&due.at[i]))
            continue;
        /* Redis did not answer: each of the rest would wait a whole deadline too, while waiters
         * fall due; they all wait for a later round, the one that failed last. */
        int64_t retry_ms = clock_mono_ms() + GIVE_BACK_RETRY_MS;
        put_back(due.at, i + 1, due.n, retry_ms);
        put_back(due.at, i, i + 1, retry_ms);
        next_ms = retry_ms < next_ms ? retry_ms : next_ms;
        break;
    }
    free(due.at);
    return next_ms;
}

void doorbell_stop_ask(void)
{
    if (bell.started)
        redis_subscribe_stop(&bell.stop);
}

bool doorbell_stop(int64_t until_ms)
{
    if (!bell.started)
        return true;
    doorbell_stop_ask();
    bool bell_ended = join_by(bell.thread, until_ms);
    bool ended_ended = join_by(bell.ended_thread, until_ms);
    bell.started = false;
    return bell_ended && ended_ended;
}
