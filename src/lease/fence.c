/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fence.c - keeping the one fence sequence above every fence ever issued.
 * Fences are reserved in Postgres in blocks before Redis may issue them
 * (lua/lib_lease.lua refuses to start past the reserved limit), so the
 * reservation is always above every fence ever issued. Two things can make
 * Redis forget: a restart from data older than its last writes (snapshot,
 * everysec AOF), a failover or a flush. The first thing every new connection
 * does is ask whether the Redis process that answers is the one the sequence
 * was last recovered on (lua/fence_check.lua); if not, the reserved limit is
 * deleted at once, in Redis, so no script of any gateway grants on any path
 * (acquire, release, renew, cancel, in-process hand-over) until a recovery
 * raises the sequence above the Postgres reservation plus the most one script
 * can overshoot it. Recovery runs where a script answered "nofence" (an
 * acquire or a write on an HTTP thread), never in the connect hook, so the
 * thread that keeps leases alive never waits for Postgres. A recovery after a loss also raises the
 * floor below which Redis-resource writes are refused (lua/lib_rw.lua). On a
 * Redis Cluster with the per-slot layout (lease_keys.h) each slot's sequence
 * is recovered the same way from the one Postgres reservation, its limit named
 * after the run_id of the process it was raised on: no connect hook there, a
 * process that did not raise it finds no limit and answers "nofence"; a
 * slot's first recovery ever (Postgres, fencegate.fence_slots) raises no write
 * floor, since no key of the slot was written before. Must
 * not: issue fences itself, talk to Postgres from the connect hook, or let a
 * connection on which the check did not run be used.
 */
#include "lease/fence.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/lease_keys.h"
#include "lease/lease_request.h"
#include "store/backend/pg.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "store/backend/shared_keys.h"
#include "store/backend/slot_scan.h"
#include "util/log.h"

/* Fences reserved at a time: one Postgres write per this many grants. */
#define FENCE_BLOCK 10000

/* How far one script can pass the limit (a semaphore grants up to its limit at
 * once); skipped after a loss, since nothing remembers what was issued. */
#define FENCE_OVERSHOOT SEMAPHORE_MAX_LIMIT

#define RUN_ID_MAX 64

/* The highest fence known to be issued or reserved, plus what one script may
 * pass its limit by: no genuine token holds a fence above it. */
static _Atomic int64_t ceiling;

static void ceiling_raise(int64_t reserved)
{
    int64_t seen = atomic_load(&ceiling), next = reserved + FENCE_OVERSHOOT;
    while (next > seen && !atomic_compare_exchange_weak(&ceiling, &seen, next))
        ;
}

/* The run_id of the Redis process last seen by a new connection. */
static struct {
    pthread_mutex_t lock;
    char run_id[RUN_ID_MAX];
} origin = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void origin_get(char *out)
{
    pthread_mutex_lock(&origin.lock);
    memcpy(out, origin.run_id, RUN_ID_MAX);
    pthread_mutex_unlock(&origin.lock);
}

static void origin_set(const char *run_id)
{
    pthread_mutex_lock(&origin.lock);
    snprintf(origin.run_id, RUN_ID_MAX, "%s", run_id);
    pthread_mutex_unlock(&origin.lock);
}

/* The one sequence of a single Redis. */
static const struct lease_fence_keys deployment = {.fence = KEY_FENCE,
                                                   .limit = KEY_FENCE_LIMIT,
                                                   .origin = KEY_FENCE_ORIGIN,
                                                   .floor = KEY_FENCE_FLOOR};

/* True for the sequence of a slot of a Redis Cluster: its limit is named after
 * the run_id it is read on (lease_keys.h), so it is trusted where that key
 * exists, and what stands for the origin in a read is that limit. */
static bool per_slot(const struct lease_fence_keys *fk)
{
    return fk->limit != deployment.limit;
}

/* The KEYS of lua/fence_read.lua for the sequence fk. Per slot the limit's
 * name carries the run_id it is read on, and a call has its run_id written
 * into one key only, so the fence stands for the origin (the sequence exists)
 * and read_answer takes the trust from the limit. */
static void slot_sequence_read_keys(const struct lease_fence_keys *fk, const char **keys)
{
    keys[FENCE_READ_KEY_FENCE] = fk->fence;
    keys[FENCE_READ_KEY_FENCE_ORIGIN] = per_slot(fk) ? fk->fence : fk->origin;
    keys[FENCE_READ_KEY_FENCE_LIMIT] = fk->limit;
}

/* Reads the answer out (borrowed) of lua/fence_read.lua on the sequence fk,
 * as read_issued says. Per slot the sequence is trusted where its limit
 * exists under the run_id of the node that read it. */
static void read_answer(const struct lease_fence_keys *fk, const json_t *out, int64_t *issued,
                        bool *trusted, bool *ready, int64_t *limit)
{
    *issued = (int64_t)json_integer_value(json_object_get(out, "fence"));
    *trusted = json_is_true(json_object_get(out, "trusted"));
    *ready = json_is_true(json_object_get(out, "ready"));
    *limit = (int64_t)json_integer_value(json_object_get(out, "limit"));
    if (per_slot(fk))
        *trusted = *issued != -1 && *limit != -1;
}

/* Reads the last fence issued (-1: missing), whether it can be trusted, whether
 * fences may be issued now (ready), and the reserved limit (-1: missing), of
 * the sequence fk. */
static int read_issued(const struct lease_fence_keys *fk, int64_t *issued, bool *trusted,
                       bool *ready, int64_t *limit, struct fg_error *err)
{
    const char *keys[FENCE_READ_NKEYS];
    slot_sequence_read_keys(fk, keys);
    json_t *out = NULL;
    if (redis_script(SCRIPT_FENCE_READ, keys, NULL, &out, err) != 0)
        return -1;
    read_answer(fk, out, issued, trusted, ready, limit);
    if (*ready)
        ceiling_raise(*limit);
    json_decref(out);
    return 0;
}

/* One recovery at a time in this process: threads that met a lost sequence at
 * once wait for the first, then find it ready and reserve nothing more. */
static pthread_mutex_t recovering = PTHREAD_MUTEX_INITIALIZER;

/* Recovers the sequence fk under the recovering lock, and makes its next fence
 * above min (-1: any): a trusted sequence below min gets a block reserved above
 * it (a slot's write floor that its tokens are below: fence_lift). */
static int recover_locked(const struct lease_fence_keys *fk, int64_t min, struct fg_error *err)
{
    int64_t issued = -1, floor = 0, limit = 0;
    bool trusted = false, ready = false;
    if (read_issued(fk, &issued, &trusted, &ready, &limit, err) != 0)
        return -1;
    if (ready && issued >= min)
        return 0;
    bool first = false; /* a slot recovered for the first time ever (fencegate.fence_slots) */
    int slot = !trusted && per_slot(fk) ? (int)key_slot(fk->fence, strlen(fk->fence)) : -1;
    if (pg_reserve_fences(trusted ? (issued > min ? issued : min) : -1, FENCE_BLOCK,
                          FENCE_OVERSHOOT, slot, &first, &floor, &limit, err) != 0)
        return -1;
    char floor_text[24], limit_text[24], run_id[RUN_ID_MAX];
    snprintf(floor_text, sizeof floor_text, "%" PRId64, floor);
    snprintf(limit_text, sizeof limit_text, "%" PRId64, limit);
    origin_get(run_id);
    const char *keys[FENCE_RAISE_NKEYS] = {
        [FENCE_RAISE_KEY_FENCE] = fk->fence,
        [FENCE_RAISE_KEY_FENCE_LIMIT] = fk->limit,
        [FENCE_RAISE_KEY_FENCE_ORIGIN] = fk->origin,
        [FENCE_RAISE_KEY_FENCE_FLOOR] = fk->floor,
    };
    const char *argv[FENCE_RAISE_NARGV] = {
        [FENCE_RAISE_ARGV_FLOOR] = floor_text,
        [FENCE_RAISE_ARGV_LIMIT] = limit_text,
        [FENCE_RAISE_ARGV_LOST] = trusted || first ? "0" : "1",
        [FENCE_RAISE_ARGV_RUN_ID] = per_slot(fk) ? "" : run_id, /* per slot: in the limit's name */
    };
    json_t *out = NULL;
    if (redis_script(SCRIPT_FENCE_RAISE, keys, argv, &out, err) != 0)
        return -1;
    json_decref(out);
    out = NULL;
    const char *floor_keys[RW_FLOOR_INIT_NKEYS] = {[RW_FLOOR_INIT_KEY_FENCE_FLOOR] = fk->floor};
    if (first && redis_script(SCRIPT_RW_FLOOR_INIT, floor_keys, NULL, &out, err) != 0)
        return -1;
    ceiling_raise(limit);
    log_event(trusted ? LOG_DEBUG : LOG_WARN, trusted ? "fences_reserved" : "fences_recovered",
              json_pack("{s:I, s:I, s:I}", "issued", (json_int_t)issued, "floor", (json_int_t)floor,
                        "limit", (json_int_t)limit));
    json_decref(out);
    return 0;
}

int fence_recover(struct fg_error *err)
{
    pthread_mutex_lock(&recovering);
    int rc = recover_locked(&deployment, -1, err);
    pthread_mutex_unlock(&recovering);
    return rc;
}

int fence_recover_lease(const struct lease_keys *k, struct fg_error *err)
{
    if (lease_keys_layout() != LEASE_KEYS_PER_SLOT)
        return fence_recover(err);
    struct lease_fence_keys fk;
    lease_keys_fence(k, &fk);
    pthread_mutex_lock(&recovering);
    int rc = recover_locked(&fk, -1, err);
    pthread_mutex_unlock(&recovering);
    return rc;
}

int fence_recover_slot(unsigned slot, struct fg_error *err)
{
    if (lease_keys_layout() != LEASE_KEYS_PER_SLOT)
        return fence_recover(err);
    char made[4][SHARED_KEY_MAX];
    shared_key(made[0], KEY_FENCE, slot);
    shared_fence_limit_key(made[1], slot);
    shared_key(made[2], KEY_FENCE_ORIGIN, slot);
    shared_key(made[3], KEY_FENCE_FLOOR, slot);
    const struct lease_fence_keys fk = {
        .fence = made[0], .limit = made[1], .origin = made[2], .floor = made[3]};
    pthread_mutex_lock(&recovering);
    int rc = recover_locked(&fk, -1, err);
    pthread_mutex_unlock(&recovering);
    return rc;
}

int fence_lift(const char *name, int64_t floor, struct fg_error *err)
{
    if (lease_keys_layout() != LEASE_KEYS_PER_SLOT)
        return 0;
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name); /* a semaphore of that name shares the slot */
    struct lease_fence_keys fk;
    lease_keys_fence(&k, &fk);
    pthread_mutex_lock(&recovering);
    int rc = recover_locked(&fk, floor, err);
    pthread_mutex_unlock(&recovering);
    return rc;
}

int fence_check_on_connect(struct fg_error *err)
{
    char run_id[RUN_ID_MAX];
    if (redis_run_id(run_id, sizeof run_id, err) != 0)
        return -1;
    origin_set(run_id);
    const char *keys[FENCE_CHECK_NKEYS] = {
        [FENCE_CHECK_KEY_FENCE] = KEY_FENCE,
        [FENCE_CHECK_KEY_FENCE_LIMIT] = KEY_FENCE_LIMIT,
        [FENCE_CHECK_KEY_FENCE_ORIGIN] = KEY_FENCE_ORIGIN,
        [FENCE_CHECK_KEY_FENCE_FLOOR] = KEY_FENCE_FLOOR,
        [FENCE_CHECK_KEY_REVOKED] = KEY_REVOKED,
    };
    const char *argv[FENCE_CHECK_NARGV] = {[FENCE_CHECK_ARGV_RUN_ID] = run_id};
    json_t *out = NULL;
    if (redis_script(SCRIPT_FENCE_CHECK, keys, argv, &out, err) != 0)
        return -1;
    if (json_is_true(json_object_get(out, "trusted")))
        ceiling_raise((int64_t)json_integer_value(json_object_get(out, "limit")));
    else
        log_message(LOG_WARN, "fence_unverified",
                    "Redis may have lost fences (restarted, failed over or flushed): none are "
                    "issued until they are reserved again in Postgres");
    json_decref(out);
    return 0;
}

int fence_check_issued(int64_t fence, struct fg_error *err)
{
    if (fence <= atomic_load(&ceiling))
        return 0;
    int64_t reserved = 0;
    if (pg_reserved_fences(&reserved, err) != 0)
        return -1;
    ceiling_raise(reserved);
    if (fence <= atomic_load(&ceiling))
        return 0;
    log_event(
        LOG_WARN, "fence_beyond_issued",
        json_pack("{s:I, s:I}", "fence", (json_int_t)fence, "reserved", (json_int_t)reserved));
    return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                   "fence %" PRId64 " is above every fence this gateway issued", fence);
}

/* The keys of the sequence of one slot, as lease_keys.h names them for a
 * lease of the slot. */
struct slot_sequence {
    char fence[SHARED_KEY_MAX];
    char limit[SHARED_KEY_MAX];
    struct lease_fence_keys fk; /* fence and limit point above */
    const char *keys[FENCE_READ_NKEYS];
};

/* fence_headroom on a cluster (the per-slot layout): the least headroom of
 * the slots whose sequence exists (the slots in use: a slot's sequence is
 * made by the first lease there, found by slot_scan), one read-only script
 * call a slot in use, pipelined per primary. A slot in use that may not issue
 * (its node restarted or failed over, a recovery pending) counts 0, as the
 * one sequence of a single Redis does; so does a cluster with no slot in use. */
static int headroom_slots(int64_t *headroom, struct fg_error *err)
{
    bool *in_use = malloc(CLUSTER_SLOTS * sizeof *in_use);
    struct slot_sequence *seq = malloc(CLUSTER_SLOTS * sizeof *seq);
    struct redis_batch_call *reads = calloc(CLUSTER_SLOTS, sizeof *reads);
    FG_ASSERT(in_use != NULL && seq != NULL && reads != NULL);
    int rc = slot_scan(KEY_FENCE, in_use, err);
    size_t used = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS && rc == 0; s++) {
        if (!in_use[s])
            continue;
        struct slot_sequence *q = &seq[used];
        shared_key(q->fence, KEY_FENCE, s);
        shared_fence_limit_key(q->limit, s);
        q->fk = (struct lease_fence_keys){.fence = q->fence, .limit = q->limit};
        slot_sequence_read_keys(&q->fk, q->keys);
        reads[used++] = (struct redis_batch_call){.script = SCRIPT_FENCE_READ, .keys = q->keys};
    }
    if (rc == 0 && used > 0)
        rc = redis_batch(reads, used, err);
    *headroom = used > 0 ? INT64_MAX : 0;
    for (size_t i = 0; i < used && rc == 0; i++) {
        int64_t issued = -1, limit = -1;
        bool trusted = false, ready = false;
        read_answer(&seq[i].fk, reads[i].reply, &issued, &trusted, &ready, &limit);
        if (ready)
            ceiling_raise(limit);
        if ((ready ? limit - issued : 0) < *headroom)
            *headroom = ready ? limit - issued : 0;
    }
    for (size_t i = 0; i < used; i++)
        json_decref(reads[i].reply);
    free(reads);
    free(seq);
    free(in_use);
    return rc;
}

int fence_headroom(int64_t *headroom, struct fg_error *err)
{
    if (lease_keys_layout() == LEASE_KEYS_PER_SLOT)
        return headroom_slots(headroom, err);
    int64_t issued = -1, limit = -1;
    bool trusted = false, ready = false;
    if (read_issued(&deployment, &issued, &trusted, &ready, &limit, err) != 0)
        return -1;
    *headroom = ready ? limit - issued : 0;
    return 0;
}
