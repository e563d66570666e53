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
 * floor, since no key of the slot was written before, and neither does the
 * adoption of a slot that a live reshard moved, when the old owner and
 * Postgres vouch for its keys (adopt, docs/cluster.md "A moved slot"). Must
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

#include "lease/fence_slots.h"
#include "lease/lease_keys.h"
#include "lease/lease_request.h"
#include "store/backend/pg.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "store/backend/shared_keys.h"
#include "util/log.h"

/* Fences reserved at a time: one Postgres write per this many grants. */
#define FENCE_BLOCK 10000

/* How far one script can pass the limit (a semaphore grants up to its limit at
 * once); skipped after a loss, since nothing remembers what was issued. */
#define FENCE_OVERSHOOT SEMAPHORE_MAX_LIMIT

/* The highest fence issued ever: Redis's scripts count in doubles and print
 * numbers in JSON with 14 significant digits (cjson), so every fence stays
 * below 10^14, and no limit is raised past where a script's overshoot would
 * reach it. Past it the gateway issues no fence (503). */
#define FENCE_LAST       INT64_C(99999999999999)
#define FENCE_LAST_LIMIT (FENCE_LAST - FENCE_OVERSHOOT)

#define RUN_ID_MAX 64

/* The highest fence known to be reserved: a genuine token holds a fence above
 * it only where a script that issued several passed its limit, which the
 * sequence of its name tells (fence_check_issued). */
static _Atomic int64_t ceiling;

static void ceiling_raise(int64_t reserved)
{
    int64_t seen = atomic_load(&ceiling);
    int64_t next = reserved < FENCE_LAST ? reserved : FENCE_LAST;
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
 * exists. */
static bool per_slot(const struct lease_fence_keys *fk)
{
    return fk->limit != deployment.limit;
}

/* The KEYS of lua/fence_read.lua for the sequence fk (per slot the limit's
 * name hands the script the run_id of the process that runs it). */
static void sequence_read_keys(const struct lease_fence_keys *fk, const char **keys)
{
    keys[FENCE_READ_KEY_FENCE] = fk->fence;
    keys[FENCE_READ_KEY_FENCE_ORIGIN] = fk->origin;
    keys[FENCE_READ_KEY_FENCE_LIMIT] = fk->limit;
    keys[FENCE_READ_KEY_FENCE_FLOOR] = fk->floor;
}

/* What lua/fence_read.lua says of a sequence. */
struct sequence_state {
    int64_t issued;          /* the last fence issued; -1: missing */
    bool trusted;            /* it has not gone back since its limit was raised */
    bool ready;              /* trusted and below its limit: fences may be issued now */
    int64_t limit;           /* the reserved limit; -1: missing */
    bool floor;              /* the write floor exists */
    char origin[RUN_ID_MAX]; /* the run_id it was last recovered on; "" unknown */
    char here[RUN_ID_MAX];   /* per slot: the run_id of the process that answered */
};

/* Reads the answer out (borrowed) of lua/fence_read.lua on the sequence fk.
 * Per slot the sequence is trusted where its limit exists under the run_id of
 * the node that read it. */
static void read_answer(const struct lease_fence_keys *fk, const json_t *out,
                        struct sequence_state *st)
{
    st->issued = (int64_t)json_integer_value(json_object_get(out, "fence"));
    st->trusted = json_is_true(json_object_get(out, "trusted"));
    st->ready = json_is_true(json_object_get(out, "ready"));
    st->limit = (int64_t)json_integer_value(json_object_get(out, "limit"));
    st->floor = json_is_true(json_object_get(out, "floor"));
    const char *was = json_string_value(json_object_get(out, "origin"));
    const char *here = json_string_value(json_object_get(out, "here"));
    snprintf(st->origin, sizeof st->origin, "%s", was != NULL ? was : "");
    snprintf(st->here, sizeof st->here, "%s", here != NULL ? here : "");
    if (per_slot(fk)) { /* the origin is the adoption's business (adopt), not the trust's */
        st->trusted = st->issued != -1 && st->limit != -1;
        st->ready = st->trusted && st->issued < st->limit;
    }
}

/* Reads the state of the sequence fk into *st. */
static int read_issued(const struct lease_fence_keys *fk, struct sequence_state *st,
                       struct fg_error *err)
{
    const char *keys[FENCE_READ_NKEYS];
    sequence_read_keys(fk, keys);
    json_t *out = NULL;
    if (redis_script(SCRIPT_FENCE_READ, keys, NULL, &out, err) != 0)
        return -1;
    read_answer(fk, out, st);
    if (st->ready)
        ceiling_raise(st->limit);
    json_decref(out);
    return 0;
}

/* True for a run_id a process reported (not the placeholder of one that would
 * not say). */
static bool known_run_id(const char *run_id)
{
    return strlen(run_id) == REDIS_RUN_ID_LEN && strcmp(run_id, redis_run_id_here) != 0;
}

/*
 * Per slot, for a sequence not trusted where it is read: adopts it without a
 * loss when the slot's keys came whole from the process that last recovered
 * it by a live reshard (docs/cluster.md, "A moved slot"): the process st->here
 * holds the sequence, the write floor and the origin st->origin of another
 * process, which is still a primary and hands the slot to here in its own
 * view, with no replication history in common (redis_slot_handover); and
 * Postgres still names that process (or here) as the slot's owner, which it
 * then changes to here (pg_adopt_slot). *adopted tells whether it did. A
 * reshard still under way fails with FG_ERR_BACKEND_UNAVAILABLE (503, to be
 * retried): its keys are split between the two nodes.
 */
static int adopt(int slot, const struct sequence_state *st, bool *adopted, struct fg_error *err)
{
    *adopted = false;
    if (slot < 0 || st->trusted || st->issued == -1 || !st->floor || !known_run_id(st->origin) ||
        !known_run_id(st->here) || strcmp(st->origin, st->here) == 0)
        return 0;
    enum handover_verdict verdict = HANDOVER_LOST;
    const char *why = "";
    if (redis_slot_handover((unsigned)slot, st->origin, st->here, &verdict, &why, err) != 0)
        return -1;
    if (verdict == HANDOVER_MIGRATING)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: slot %d is moving: %s", slot, why);
    if (verdict == HANDOVER_TRUSTED && pg_adopt_slot(slot, st->origin, st->here, adopted, err) != 0)
        return -1;
    if (verdict == HANDOVER_TRUSTED && !*adopted)
        why = "Postgres names another owner: the slot was recovered elsewhere since";
    log_event(*adopted ? LOG_INFO : LOG_WARN, *adopted ? "fence_slot_adopted" : "fence_slot_lost",
              json_pack("{s:i, s:s, s:s, s:s}", "slot", slot, "from", st->origin, "to", st->here,
                        "why", why));
    return 0;
}

/* The failure of a recovery whose sequence reached its end: reached, the
 * fence issued or reserved that is past it. */
static int exhausted(int64_t reached, struct fg_error *err)
{
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                   "fences exhausted: %" PRId64
                   " reached, past the last fence the gateway issues (%" PRId64 ")",
                   reached, FENCE_LAST);
}

/* One recovery at a time in this process: threads that met a lost sequence at
 * once wait for the first, then find it ready and reserve nothing more. */
static pthread_mutex_t recovering = PTHREAD_MUTEX_INITIALIZER;

/* The KEY old_limit of lua/fence_raise.lua, into out: per slot, the limit of
 * the process the sequence was last recovered on (st->origin) when that is
 * not the one that reads it, which the raise deletes; else the origin key,
 * which it does not. */
static const char *old_limit(const struct lease_fence_keys *fk, const struct sequence_state *st,
                             char out[SHARED_KEY_MAX])
{
    size_t len = strlen(fk->limit);
    if (!per_slot(fk) || !known_run_id(st->origin) || strcmp(st->origin, st->here) == 0 ||
        len < REDIS_RUN_ID_LEN || len >= SHARED_KEY_MAX)
        return fk->origin;
    memcpy(out, fk->limit, len - REDIS_RUN_ID_LEN);
    memcpy(out + len - REDIS_RUN_ID_LEN, st->origin, REDIS_RUN_ID_LEN + 1);
    return out;
}

/* Recovers the sequence fk under the recovering lock, and makes its next fence
 * above min (-1: any): a trusted sequence below min gets a block reserved above
 * it (a slot's write floor that its tokens are below: fence_lift), and one
 * whose write floor is missing gets it back. */
static int recover_locked(const struct lease_fence_keys *fk, int64_t min, struct fg_error *err)
{
    struct sequence_state st;
    if (read_issued(fk, &st, err) != 0)
        return -1;
    if (st.ready && st.issued >= min && st.floor)
        return 0;
    int slot = per_slot(fk) ? (int)key_slot(fk->fence, strlen(fk->fence)) : -1;
    bool adopted = false, first = false; /* first: recovered for the first time ever */
    if (adopt(slot, &st, &adopted, err) != 0)
        return -1;
    bool trusted = st.trusted || adopted;
    if (trusted &&
        st.issued >= FENCE_LAST_LIMIT) /* nothing is reserved for a sequence at its end */
        return exhausted(st.issued, err);
    int64_t floor = 0, limit = 0;
    if (pg_reserve_fences(trusted ? (st.issued > min ? st.issued : min) : -1, FENCE_BLOCK,
                          FENCE_OVERSHOOT, trusted ? -1 : slot, st.here, &first, &floor, &limit,
                          err) != 0)
        return -1;
    if (floor >= FENCE_LAST_LIMIT)
        return exhausted(limit, err);
    if (limit > FENCE_LAST_LIMIT)
        limit = FENCE_LAST_LIMIT;
    char floor_text[24], limit_text[24], run_id[RUN_ID_MAX], old[SHARED_KEY_MAX];
    snprintf(floor_text, sizeof floor_text, "%" PRId64, floor);
    snprintf(limit_text, sizeof limit_text, "%" PRId64, limit);
    origin_get(run_id);
    /* A trusted sequence without its write floor (lost alone, or never set
     * by a gateway that stopped between the two) is recovered as after a
     * loss: the floor comes back above every fence issued. */
    bool lost = (!trusted && !first) || (trusted && !st.floor);
    const char *keys[FENCE_RAISE_NKEYS] = {
        [FENCE_RAISE_KEY_FENCE] = fk->fence,
        [FENCE_RAISE_KEY_FENCE_LIMIT] = fk->limit,
        [FENCE_RAISE_KEY_FENCE_ORIGIN] = fk->origin,
        [FENCE_RAISE_KEY_FENCE_FLOOR] = fk->floor,
        [FENCE_RAISE_KEY_OLD_LIMIT] = old_limit(fk, &st, old),
    };
    const char *argv[FENCE_RAISE_NARGV] = {
        [FENCE_RAISE_ARGV_FLOOR] = floor_text,
        [FENCE_RAISE_ARGV_LIMIT] = limit_text,
        [FENCE_RAISE_ARGV_LOST] = lost ? "1" : "0",
        [FENCE_RAISE_ARGV_FIRST] = first ? "1" : "0",
        /* on one Redis the process seen at connect (per slot: the limit's name) */
        [FENCE_RAISE_ARGV_RUN_ID] = lost ? run_id : "",
        [FENCE_RAISE_ARGV_FROM] = adopted ? st.origin : "",
        [FENCE_RAISE_ARGV_ON] = adopted ? st.here : "",
    };
    json_t *out = NULL;
    if (redis_script(SCRIPT_FENCE_RAISE, keys, argv, &out, err) != 0)
        return -1;
    bool moved = json_is_true(json_object_get(out, "moved"));
    json_decref(out);
    if (moved)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: slot %d moved while it was adopted",
                       slot);
    ceiling_raise(limit);
    if (slot >= 0)
        fence_slots_add((unsigned)slot);
    log_event(lost ? LOG_WARN : LOG_DEBUG, lost ? "fences_recovered" : "fences_reserved",
              json_pack("{s:I, s:I, s:I}", "issued", (json_int_t)st.issued, "floor",
                        (json_int_t)floor, "limit", (json_int_t)limit));
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

/* Whether fence, above the reservation reserved, was issued by the sequence of
 * the lease kind name (a script that issued several passed its limit) into
 * *issued: at most the sequence's last fence. A sequence that is missing or
 * went back (Redis lost its data; its recovery skips what one script may
 * pass the limit by) answers for up to that much above the reservation. */
static int issued_past_reservation(enum lease_kind kind, const char *name, int64_t fence,
                                   int64_t reserved, bool *issued, struct fg_error *err)
{
    struct lease_fence_keys fk = deployment;
    struct lease_keys k; /* per slot, fk points into it */
    if (lease_keys_layout() == LEASE_KEYS_PER_SLOT) {
        lease_keys_init(&k, kind, name);
        lease_keys_fence(&k, &fk);
    }
    struct sequence_state st;
    if (read_issued(&fk, &st, err) != 0)
        return -1;
    *issued = st.trusted && st.issued != -1
                  ? fence <= st.issued
                  : reserved < FENCE_LAST_LIMIT && fence <= reserved + FENCE_OVERSHOOT;
    return 0;
}

int fence_check_issued(enum lease_kind kind, const char *name, int64_t fence, struct fg_error *err)
{
    if (fence <= atomic_load(&ceiling))
        return 0;
    int64_t reserved = 0;
    if (pg_reserved_fences(&reserved, err) != 0)
        return -1;
    ceiling_raise(reserved);
    if (fence <= atomic_load(&ceiling))
        return 0;
    bool issued = false;
    if (issued_past_reservation(kind, name, fence, reserved, &issued, err) != 0)
        return -1;
    if (issued)
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
    char origin[SHARED_KEY_MAX];
    char floor[SHARED_KEY_MAX];
    struct lease_fence_keys fk; /* its keys point above */
    const char *keys[FENCE_READ_NKEYS];
};

/* fence_headroom on a cluster (the per-slot layout): the least headroom of
 * the slots whose sequence exists (the slots in use: a slot's sequence is
 * made by the first lease there, as fence_slots.h knows them), one read-only
 * script call a slot in use, pipelined per primary. A slot in use that may not issue
 * (its node restarted or failed over, a recovery pending) counts 0, as the
 * one sequence of a single Redis does; so does a cluster with no slot in use. */
static int headroom_slots(int64_t *headroom, struct fg_error *err)
{
    bool *in_use = malloc(CLUSTER_SLOTS * sizeof *in_use);
    struct slot_sequence *seq = malloc(CLUSTER_SLOTS * sizeof *seq);
    struct redis_batch_call *reads = calloc(CLUSTER_SLOTS, sizeof *reads);
    FG_ASSERT(in_use != NULL && seq != NULL && reads != NULL);
    int rc = fence_slots_in_use(in_use, err);
    size_t used = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS && rc == 0; s++) {
        if (!in_use[s])
            continue;
        struct slot_sequence *q = &seq[used];
        shared_key(q->fence, KEY_FENCE, s);
        shared_fence_limit_key(q->limit, s);
        shared_key(q->origin, KEY_FENCE_ORIGIN, s);
        shared_key(q->floor, KEY_FENCE_FLOOR, s);
        q->fk = (struct lease_fence_keys){
            .fence = q->fence, .limit = q->limit, .origin = q->origin, .floor = q->floor};
        sequence_read_keys(&q->fk, q->keys);
        reads[used++] = (struct redis_batch_call){.script = SCRIPT_FENCE_READ, .keys = q->keys};
    }
    if (rc == 0 && used > 0)
        rc = redis_batch(reads, used, err);
    *headroom = used > 0 ? INT64_MAX : 0;
    for (size_t i = 0; i < used && rc == 0; i++) {
        struct sequence_state st;
        read_answer(&seq[i].fk, reads[i].reply, &st);
        if (st.ready)
            ceiling_raise(st.limit);
        if ((st.ready ? st.limit - st.issued : 0) < *headroom)
            *headroom = st.ready ? st.limit - st.issued : 0;
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
    struct sequence_state st;
    if (read_issued(&deployment, &st, err) != 0)
        return -1;
    *headroom = st.ready ? st.limit - st.issued : 0;
    return 0;
}
