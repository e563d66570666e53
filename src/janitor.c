/* SPDX-License-Identifier: Apache-2.0 */
/*
 * janitor.c - periodic maintenance, on two threads that never wait for each
 * other. The lease janitor keeps leases and waiters alive and talks only to
 * Redis: it wakes waiters whose re-check or deadline time came, gives back
 * orphaned grants, closes connections whose headers are late, and every third
 * of a waiter lease renews this gateway's mark in KEY_GATEWAYS that tells other
 * gateways this process and its waiters are alive (on a cluster also in the
 * KEY_GATEWAYS of each slot where it has waiters, which the grants there
 * read). Between those it sleeps until the earliest is due (a second at most)
 * or a parked client hangs up; as it stops it gives back the orphans left, their grace
 * period cut short (the requests that could take them back are answered);
 * whoever sets an earlier due time wakes it through util/alarm.h, so an idle
 * gateway's janitor does not spin on a tick. The backend
 * janitor does everything that needs Postgres or may take long: copying the
 * audit stream of stale Redis writes into Postgres (store/audit/audit_stream.c,
 * backing off while that fails), at once when a stale write pokes it, pruning
 * audit records past their retention (store/audit/audit.h), and every few seconds dropping a
 * bounded batch of idle names from the lease listing index (lease/lease_list.h), batch after
 * batch while they keep finding many, so names whose last lease expired unreleased do not pile up
 * however fast a client makes them; it sleeps until the next of these is due or a poke.
 * A stalled Postgres can thus delay audit rows, never a waiter, a grant or the liveness mark.
 */
#include "janitor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gateway.h"
#include "http/server.h"
#include "lease/doorbell.h"
#include "lease/kept_place.h"
#include "lease/lease_keys.h"
#include "lease/lease_list.h"
#include "lease/waiter.h"
#include "store/audit/audit.h"
#include "store/audit/audit_stream.h"
#include "store/backend/key_slot.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "util/alarm.h"
#include "util/budget.h"
#include "util/clock.h"
#include "util/join.h"
#include "util/log.h"

#define MAX_SLEEP_MS   1000 /* the lease janitor's longest sleep */
#define INDEX_PRUNE_MS 5000 /* between two pruning passes over the listing index */
#define PRUNE_WAIT_MS  1000 /* a pruning pass's wait for Redis in all (prune_indexes) */
#define PRUNE_BUSY     100  /* idle names a pass drops that make the next come at once */
#define PRUNE_BURST_MS 25   /* how long passes run back to back while each drops that many */
#define PRUNE_SOON_MS  100  /* then, from the end of the last, until the next pass */

static struct {
    pthread_t lease_thread;
    pthread_t backend_thread;
    bool started;
    atomic_bool stop; /* asks both janitor threads to end */
    pthread_mutex_t lock;
    pthread_cond_t poked; /* signalled when a stale write left an audit entry */
    bool poke;            /* a poke not yet served */
} jan = {.lock = PTHREAD_MUTEX_INITIALIZER, .poked = PTHREAD_COND_INITIALIZER};

/* On a cluster: renews this gateway's mark in the gateways key of every slot where it has waiters
 * (the key a grant in that slot reads, lease_keys.h), one call a slot, pipelined per primary. */
static int beat_slots(const char *lease, struct fg_error *err)
{
    unsigned char *seen = calloc(CLUSTER_SLOTS, 1);
    FG_ASSERT(seen != NULL);
    size_t n = waiter_slots(seen, CLUSTER_SLOTS) + kept_place_slots(seen, CLUSTER_SLOTS);
    struct slot_beat {
        char key[sizeof KEY_GATEWAYS + SLOT_TAG_MAX + 3];
        const char *keys[INSTANCE_BEAT_NKEYS];
    } *beats = calloc(n ? n : 1, sizeof *beats);
    struct redis_batch_call *calls = calloc(n ? n : 1, sizeof *calls);
    FG_ASSERT(beats != NULL && calls != NULL);
    const char *argv[INSTANCE_BEAT_NARGV] = {
        [INSTANCE_BEAT_ARGV_INSTANCE] = gw.instance_id,
        [INSTANCE_BEAT_ARGV_LEASE_MS] = lease,
        [INSTANCE_BEAT_ARGV_SLOT] = "1",
    };
    size_t used = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS && used < n; s++) {
        if (!seen[s])
            continue;
        slot_tag_key(beats[used].key, sizeof beats[used].key, KEY_GATEWAYS, s);
        beats[used].keys[INSTANCE_BEAT_KEY_GATEWAYS] = beats[used].key;
        calls[used] = (struct redis_batch_call){
            .script = SCRIPT_INSTANCE_BEAT, .keys = beats[used].keys, .argv = argv};
        used++;
    }
    int rc = used > 0 ? redis_batch(calls, used, err) : 0;
    for (size_t i = 0; i < used; i++)
        json_decref(calls[i].reply);
    free(calls);
    free(beats);
    free(seen);
    return rc;
}

int janitor_beat(struct fg_error *err)
{
    char lease[24];
    snprintf(lease, sizeof lease, "%lld", gw.cfg->waiter_lease_ms);
    const char *keys[INSTANCE_BEAT_NKEYS] = {[INSTANCE_BEAT_KEY_GATEWAYS] = KEY_GATEWAYS};
    const char *argv[INSTANCE_BEAT_NARGV] = {
        [INSTANCE_BEAT_ARGV_INSTANCE] = gw.instance_id,
        [INSTANCE_BEAT_ARGV_LEASE_MS] = lease,
        [INSTANCE_BEAT_ARGV_SLOT] = "",
    };
    json_t *out = NULL;
    if (redis_script(SCRIPT_INSTANCE_BEAT, keys, argv, &out, err) != 0)
        return -1;
    json_decref(out);
    return lease_keys_layout() == LEASE_KEYS_PER_SLOT ? beat_slots(lease, err) : 0;
}

/* Walks each listing index one bounded batch further, starting over at its
 * end; on a cluster, the indexes of the next slots. Returns how many idle
 * names it dropped. The pass waits for Redis PRUNE_WAIT_MS in all
 * (util/budget.h; request_timeout_ms if less): no longer than the exit waits
 * for the backend janitor (main.c), so a pass under way at SIGTERM ends in
 * time. A pass cut short leaves its names to the next. */
static size_t prune_indexes(void)
{
    size_t dropped = 0;
    static char after[2][NAME_MAX_LEN + 1];
    static unsigned slot[2];
    static const enum lease_list_kind kinds[2] = {LEASE_LIST_LOCKS, LEASE_LIST_SEMAPHORES};
    int64_t wait_ms = gw.cfg->request_timeout_ms;
    budget_start(wait_ms < PRUNE_WAIT_MS ? wait_ms : PRUNE_WAIT_MS);
    for (int i = 0; i < 2; i++) {
        struct lease_page page;
        struct fg_error err = {0};
        size_t pruned = 0;
        if (lease_keys_layout() == LEASE_KEYS_PER_SLOT)
            (void)!lease_list_prune_slots(kinds[i], &slot[i], &pruned, &err);
        else if (lease_list_prune(kinds[i], after[i], &page, &pruned, &err) == 0)
            snprintf(after[i], sizeof after[i], "%s", page.more ? page.next : "");
        dropped += pruned;
    }
    budget_end();
    return dropped;
}

/* Prunes the listing indexes (prune_indexes) at now; returns when to prune next. While passes
 * keep finding many idle names (clients making names faster than a pass a few seconds drops, each
 * left to expire unreleased), it runs them back to back for PRUNE_BURST_MS and comes back after
 * PRUNE_SOON_MS, so the index stays within what its names' expiries leave, not what a client
 * makes. */
static int64_t prune_due(int64_t now)
{
    size_t dropped;
    do
        dropped = prune_indexes();
    while (dropped >= PRUNE_BUSY && clock_mono_ms() - now < PRUNE_BURST_MS &&
           !atomic_load(&jan.stop));
    return clock_mono_ms() + (dropped >= PRUNE_BUSY ? PRUNE_SOON_MS : INDEX_PRUNE_MS);
}

static int64_t earlier(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The time a beat may wait for Redis in all: until the next is due (a third
 * of waiter_lease_ms), request_timeout_ms at most. */
static int64_t beat_budget_ms(void)
{
    int64_t every = gw.cfg->waiter_lease_ms / 3;
    return every < gw.cfg->request_timeout_ms ? every : gw.cfg->request_timeout_ms;
}

/* Renews this gateway's liveness mark; returns when to renew it next. The
 * beat's calls, the slot map fetched for them on a cluster over every node
 * asked, share one budget (util/budget.h, beat_budget_ms) where each would
 * have had request_timeout_ms: a silent node holds the lease janitor, which
 * answers parked waiters at their deadlines, no longer than a beat's round,
 * and no longer than the exit waits for it. */
static int64_t beat(int64_t now_ms, bool *failing)
{
    struct fg_error err = {0};
    budget_start(beat_budget_ms());
    bool ok = janitor_beat(&err) == 0;
    budget_end();
    if (!ok && !*failing)
        log_message(LOG_WARN, "backend_down", "%s", err.msg);
    if (ok && *failing)
        log_message(LOG_INFO, "backend_up", "redis answers again");
    *failing = !ok;
    return now_ms + (ok ? gw.cfg->waiter_lease_ms / 3 : 200);
}

/* Does what is due, then sleeps until the next thing falls due (or a parked
 * client hangs up, or the alarm brings it forward): an idle gateway's janitor
 * wakes once a second at most. */
static void *lease_janitor_main(void *arg)
{
    (void)arg;
    int64_t next_beat = 0;
    bool beat_failing = false;
    for (;;) {
        alarm_plan();
        if (atomic_load(&jan.stop))
            break;
        int64_t now = clock_mono_ms();
        int64_t due = earlier(waiter_tick(now), doorbell_reap_orphans(now));
        due = earlier(due, http_server_reap_slow(now));
        due = earlier(due, kept_place_reap(now));
        if (now >= next_beat)
            next_beat = beat(now, &beat_failing);
        due = earlier(due, next_beat);
        alarm_woken(waiter_watch_hangups(alarm_sleep_ms(due, clock_mono_ms(), MAX_SLEEP_MS)));
    }
    (void)doorbell_reap_orphans(INT64_MAX); /* no waiter comes back for them now */
    redis_thread_done();
    return NULL;
}

/* Sleeps until due_ms (monotonic) or a poke, whichever comes first; true if poked. */
static bool backend_wait(int64_t due_ms)
{
    int64_t left = due_ms - clock_mono_ms();
    struct timespec until = clock_mono_at(due_ms);
    pthread_mutex_lock(&jan.lock);
    while (!jan.poke && !atomic_load(&jan.stop) && left > 0 &&
           pthread_cond_clockwait(&jan.poked, &jan.lock, CLOCK_MONOTONIC, &until) == 0)
        ;
    bool poked = jan.poke;
    jan.poke = false;
    pthread_mutex_unlock(&jan.lock);
    return poked;
}

/* Does what is due, then sleeps until the next of it (or a poke): an idle
 * gateway's backend janitor wakes for the audit stream's drain interval. */
static void *backend_janitor_main(void *arg)
{
    (void)arg;
    int64_t next_prune = 0, due = 0;
    while (!atomic_load(&jan.stop)) {
        bool poked = backend_wait(due);
        int64_t now = clock_mono_ms();
        due = audit_stream_tick(now, poked);
        due = earlier(due, audit_retention_tick(now, gw.cfg->audit_retention_days));
        if (now >= next_prune)
            next_prune = prune_due(now);
        due = earlier(due, next_prune);
    }
    redis_thread_done();
    return NULL;
}

/* Asks the backend janitor to drain the audit stream now (a stale write left an entry). Never
 * blocks on a backend. */
static void poke_audit(void)
{
    pthread_mutex_lock(&jan.lock);
    jan.poke = true;
    pthread_cond_signal(&jan.poked);
    pthread_mutex_unlock(&jan.lock);
}

int janitor_start(struct fg_error *err)
{
    audit_stream_on_entry(poke_audit);
    if (pthread_create(&jan.lease_thread, NULL, lease_janitor_main, NULL) != 0)
        return fg_fail(err, FG_ERR_INTERNAL, "cannot start the lease janitor thread");
    if (pthread_create(&jan.backend_thread, NULL, backend_janitor_main, NULL) != 0) {
        atomic_store(&jan.stop, true);
        pthread_join(jan.lease_thread, NULL);
        return fg_fail(err, FG_ERR_INTERNAL, "cannot start the backend janitor thread");
    }
    jan.started = true;
    return 0;
}

void janitor_stop_ask(void)
{
    if (!jan.started)
        return;
    pthread_mutex_lock(&jan.lock);
    atomic_store(&jan.stop, true);
    pthread_cond_signal(&jan.poked);
    pthread_mutex_unlock(&jan.lock);
    alarm_set(0);
}

bool janitor_stop(int64_t until_ms)
{
    if (!jan.started)
        return true;
    janitor_stop_ask();
    bool lease_ended = join_by(jan.lease_thread, until_ms);
    bool backend_ended = join_by(jan.backend_thread, until_ms);
    jan.started = false;
    return lease_ended && backend_ended;
}
