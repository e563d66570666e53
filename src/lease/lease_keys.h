/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_keys.h - the Redis keys of one lock or semaphore, made from its name
 * in the order its scripts take them (lua/lib_lock.lua, lua/lib_sem.lua: its
 * own keys, then the common lease keys of lua/lib_lease.lua), with the names of
 * store/backend/redis_keys.h. Pure: no I/O.
 */
#ifndef FG_LEASE_KEYS_H
#define FG_LEASE_KEYS_H

#include "auth/token.h"
#include "lease/lease_kind.h"
#include "lease/lease_request.h"
#include "lua_scripts.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "util/names.h"

/* The longest key made from a name (prefix, name, tag end, one-letter suffix). */
#define LEASE_KEY_MAX (sizeof KEY_LOCK_PREFIX + NAME_MAX_LEN + sizeof KEY_TAG_END + 1)

struct lease_keys {
    char made[LIB_SEM_NKEYS][LEASE_KEY_MAX]; /* the keys made from the name, by script index */
    const char *key[LIB_SEM_NKEYS];          /* every key by script index: LIB_LOCK_KEY_* for a
                                                lock, LIB_SEM_KEY_* for a semaphore */
    size_t nkeys;                            /* LIB_LOCK_NKEYS or LIB_SEM_NKEYS */
    size_t common_at;                        /* where lib_lease.lua's keys start in key */
};

/* How the keys shared by all leases of a deployment are named. */
enum lease_keys_layout {
    LEASE_KEYS_ONE_REDIS, /* once for all leases: KEY_FENCE, KEY_GATEWAYS, ... (the default) */
    LEASE_KEYS_PER_SLOT,  /* one per hash slot of a Redis Cluster, "<key>:{T(s)}" for the slot s of
                             the lease's own keys (store/backend/key_slot.h, docs/cluster.md):
                             every key a lease script takes lives in one slot. The fence limit
                             is also named after the run_id of the process it is read on,
                             KEY_FENCE_LIMIT ":{T(s)}:<run_id>" (the Redis module writes the
                             run_id in, store/backend/redis.h): a restarted, promoted or new
                             owner of the slot finds none, and the sequence is recovered before
                             anything is granted there */
};

/* The layout in force. */
enum lease_keys_layout lease_keys_layout(void);

/* The keys of the fence sequence a lease's scripts issue from: of its slot,
 * or the deployment's on one Redis; each points into the struct or to a
 * static name. */
struct lease_fence_keys {
    const char *fence, *limit, *origin, *floor; /* KEY_FENCE, KEY_FENCE_LIMIT, ... */
    char made[2][LEASE_KEY_MAX];                /* the origin and floor of a slot */
};

/* Fills out with the fence keys of the lease whose keys are k (borrowed: out
 * points into k). */
void lease_keys_fence(const struct lease_keys *k, struct lease_fence_keys *out);

/* Sets the layout of every later lease_keys_init, and of the keys of fenced
 * Redis writes, revocations and the audit stream (store/backend/shared_keys.h);
 * at start-up, before any. */
void lease_keys_set_layout(enum lease_keys_layout layout);

/* Fills k with the keys of the lock or semaphore (kind) called name, the KEYS
 * of every lock or semaphore transition script (lua/lock_*.lua, sem_*.lua,
 * which the build checks): k->key[0..k->nkeys) point into k or to static
 * names. name must be a valid name (at most NAME_MAX_LEN bytes). */
void lease_keys_init(struct lease_keys *k, enum lease_kind kind, const char *name);

/* The hash slot of the keys of the lock or semaphore (kind) called name on the
 * per-slot layout; -1 on one Redis. */
int lease_keys_slot(enum lease_kind kind, const char *name);

/* The longest key a request's own id moves to (lease_keys_rid_moved). */
#define LEASE_RID_MOVED_MAX (LEASE_KEY_MAX + sizeof KEY_MOVED + LEASE_REQUEST_ID_MAX)

/* Writes into out the key to which a first try moves the one-id key's value
 * of k when it names request_id (lua/lib_lease.lua rid_take_first): the
 * one-id key, KEY_MOVED, request_id. Every acquire that carries request_id
 * names it, last (rid_moved). */
void lease_keys_rid_moved(const struct lease_keys *k, const char *request_id,
                          char out[LEASE_RID_MOVED_MAX]);

/* lease_keys_rid_moved for a lean try of an acquire, which names the key only
 * for a request with request_id (lease_keys_of_request): without one it
 * writes out empty, printing nothing. */
void lease_keys_rid_moved_of_request(const struct lease_keys *k, const char *request_id,
                                     char out[LEASE_RID_MOVED_MAX]);

/* The KEYS of the lock scripts that name only the keys they touch: the first
 * tries (lua/lock_acquire_fast.lua, lua/lock_release_fast.lua) and the renewal
 * (lua/lock_renew.lua), picked from the lock's keys k (borrowed), the first
 * try's rid_moved last (lease_keys_rid_moved): out holds
 * LOCK_ACQUIRE_FAST_NKEYS, LOCK_RELEASE_FAST_NKEYS or LOCK_RENEW_NKEYS entries. */
void lease_keys_lock_acquire_fast(const struct lease_keys *k, const char *rid_moved,
                                  const char **out);
void lease_keys_lock_release_fast(const struct lease_keys *k, const char **out);
void lease_keys_lock_renew(const struct lease_keys *k, const char **out);

/* The KEYS of a semaphore's first try (lua/sem_acquire_fast.lua), picked from
 * the semaphore's keys k (borrowed), rid_moved last: out holds
 * SEM_ACQUIRE_FAST_NKEYS entries. */
void lease_keys_sem_acquire_fast(const struct lease_keys *k, const char *rid_moved,
                                 const char **out);

/* How many of its nkeys KEYS a lean try of an acquire (the first tries, the
 * try beside other holders, the queue joins) names for a request with
 * request_id ("" for none): all of them, or without a request_id those before
 * first_rid_key, the first of the request ids' keys (rids or rid_until, then
 * rid_one, rid_moved), which such a script names last and touches only for a
 * request_id: a key costs Redis about as much as a command of the script. */
size_t lease_keys_of_request(size_t nkeys, size_t first_rid_key, const char *request_id);

/* The longest key of an end's record moved away (lease_keys_moved_end). */
#define LEASE_MOVED_END_MAX (LEASE_KEY_MAX + sizeof KEY_MOVED + 20)

/* Writes into out the key to which the next grant moves the end's record of
 * the lease with fence from record_key, a lock's holder key or a semaphore's
 * limit key (lua/lib_lease.lua end_move): record_key KEY_MOVED fence. A
 * retried release and a watch name it. */
void lease_keys_moved_end(const char *record_key, long long fence, char out[LEASE_MOVED_END_MAX]);

#endif
