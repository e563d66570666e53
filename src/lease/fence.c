/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fence.c - fence sequence recovery. Fences are reserved in Postgres in blocks
 * before Redis may issue them (lua/lib_lease.lua refuses to start past the
 * reserved limit), so the reservation is always above every fence ever issued.
 * Recovery reads the last fence Redis issued, reserves the next block above it,
 * the old reservation and every stored fence, and raises the Redis sequence and
 * its limit in one script (never lowering either).
 *
 * A new Redis connection needs a recovery only if the dataset behind it may
 * not be the one this process verified last: the server's run_id and
 * replication id (redis_server_identity) change on a restart, a failover and
 * a promotion, and stay while one server process keeps its data in memory. So
 * the process uses one block until it is used up ("nofence"), however many
 * connections its threads open. Threads that meet a new dataset at once may
 * each recover (a block each): no lock is held across a recovery, which may
 * wait for a Postgres that is down.
 */
#include "lease/fence.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lease/lease_request.h"
#include "store/pg.h"
#include "store/redis.h"
#include "util/log.h"

/* Fences reserved at a time: one Postgres write per this many grants. */
#define FENCE_BLOCK 10000

/* How far one script can pass the limit (a semaphore grants up to its limit at
 * once); skipped when Redis lost the sequence, since nothing remembers it. */
#define FENCE_OVERSHOOT SEMAPHORE_MAX_LIMIT

/* A new Redis connection could not be followed by a recovery. */
static atomic_bool unverified;

/* The dataset the last successful recovery ran on ("" if none), under its lock. */
static struct {
    pthread_mutex_t lock;
    char identity[192];
} verified = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The highest fence known to be issued or reserved, plus what one script may
 * pass its limit by: no genuine token holds a fence above it. */
static _Atomic int64_t ceiling;

static void ceiling_raise(int64_t reserved)
{
    int64_t seen = atomic_load(&ceiling), next = reserved + FENCE_OVERSHOOT;
    while (next > seen && !atomic_compare_exchange_weak(&ceiling, &seen, next))
        ;
}

static int read_issued(int64_t *issued, struct fg_error *err)
{
    const char *argv[] = {"fg:fence"};
    json_t *out = NULL;
    if (redis_script("fence_read.lua", 1, argv, 1, &out, err) != 0)
        return -1;
    *issued = (int64_t)json_integer_value(json_object_get(out, "fence"));
    json_decref(out);
    return 0;
}

/* Reserves a block and raises the Redis sequence to it (see the top). */
static int recover(struct fg_error *err)
{
    int64_t issued = -1, floor = 0, limit = 0;
    if (read_issued(&issued, err) != 0 ||
        pg_reserve_fences(issued, FENCE_BLOCK, FENCE_OVERSHOOT, &floor, &limit, err) != 0)
        return -1;
    char floor_text[24], limit_text[24];
    snprintf(floor_text, sizeof floor_text, "%" PRId64, floor);
    snprintf(limit_text, sizeof limit_text, "%" PRId64, limit);
    const char *argv[] = {"fg:fence", "fg:fence_limit", floor_text, limit_text};
    json_t *out = NULL;
    if (redis_script("fence_raise.lua", 2, argv, 4, &out, err) != 0)
        return -1;
    ceiling_raise(limit);
    log_event(LOG_DEBUG, "fences_reserved",
              json_pack("{s:I, s:I, s:I}", "issued", (json_int_t)issued, "floor", (json_int_t)floor,
                        "limit", (json_int_t)limit));
    json_decref(out);
    return 0;
}

/* Recovers, then remembers identity ("" if unknown) as the verified dataset. */
static int recover_as(const char *identity, struct fg_error *err)
{
    if (recover(err) != 0)
        return -1;
    pthread_mutex_lock(&verified.lock);
    snprintf(verified.identity, sizeof verified.identity, "%s", identity);
    pthread_mutex_unlock(&verified.lock);
    return 0;
}

/* The identity of this thread's dataset, "" if Redis does not tell. */
static void current_identity(char *out, size_t cap)
{
    struct fg_error ignored = {0};
    if (redis_server_identity(out, cap, &ignored) != 0)
        out[0] = '\0';
}

/* Whether identity is the dataset verified last, and nothing failed since. */
static bool is_verified(const char *identity)
{
    pthread_mutex_lock(&verified.lock);
    bool same = identity[0] != '\0' && strcmp(identity, verified.identity) == 0;
    pthread_mutex_unlock(&verified.lock);
    return same && !atomic_load(&unverified);
}

int fence_recover(struct fg_error *err)
{
    char identity[sizeof verified.identity];
    current_identity(identity, sizeof identity);
    return recover_as(identity, err);
}

int fence_recover_on_connect(struct fg_error *err)
{
    char identity[sizeof verified.identity];
    current_identity(identity, sizeof identity);
    if (is_verified(identity))
        return 0;
    struct fg_error why = {0};
    if (recover_as(identity, &why) == 0) {
        atomic_store(&unverified, false);
        return 0;
    }
    atomic_store(&unverified, true);
    log_message(LOG_WARN, "fence_unverified", "no fences until Postgres answers: %s", why.msg);
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                   "the fence sequence is not verified since Redis reconnected: %s", why.msg);
}

int fence_ensure_verified(struct fg_error *err)
{
    if (!atomic_load(&unverified))
        return 0;
    struct fg_error why = {0};
    if (fence_recover(&why) != 0)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                       "the fence sequence is not verified since Redis reconnected: %s", why.msg);
    atomic_store(&unverified, false);
    log_message(LOG_INFO, "fence_verified", "fence sequence recovered");
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
