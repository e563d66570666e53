/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_keys.h - the name of every Redis key and channel the gateway uses, the one
 * place they are spelled. The C side includes this header; the Lua side gets
 * the same names as Lua constants (cmake/lua_scripts.cmake puts "local NAME =
 * '<value>'" before each script that mentions NAME), so no name is written in
 * two places. Only string macros belong here, each a sequence of string
 * literals and names defined above it: the generator reads nothing else.
 *
 * Scripts receive every key they touch in KEYS (lua/lib_lease.lua says why);
 * the exceptions: lua/lease_list.lua builds the keys of the locks and
 * semaphores it lists from the prefixes and suffixes below, and a first try
 * builds the keys it moves an end's record and a request id to (KEY_MOVED).
 */
#ifndef FG_REDIS_KEYS_H
#define FG_REDIS_KEYS_H

/* Every key and channel of the gateway starts with this; the Redis front end
 * never serves a key under it. */
#define KEY_PREFIX "fg:"

/* The fence sequence (lua/lib_lease.lua, lease/fence.h). */
#define KEY_FENCE        KEY_PREFIX "fence"        /* the last fence issued */
#define KEY_FENCE_LIMIT  KEY_PREFIX "fence_limit"  /* the highest fence reserved in Postgres */
#define KEY_FENCE_ORIGIN KEY_PREFIX "fence_origin" /* run_id the sequence is trusted on */
#define KEY_FENCE_FLOOR  KEY_PREFIX "fence_floor"  /* Redis writes below this fence are refused */

/* Live gateways: sorted set instance id -> alive until (Redis time, ms). */
#define KEY_GATEWAYS KEY_PREFIX "gateways"

/* The revoked fences, mirror of fencegate.revocations (store/fenced/revocations.h). */
#define KEY_REVOKED KEY_PREFIX "revoked"

/* Fenced Redis writes (lua/lib_rw.lua): the highest fence of application key K
 * is kept in KEY_WRITE_FENCE_PREFIX K; refused writes go to the audit stream,
 * and audit entries Postgres refused to the dead letters. */
#define KEY_WRITE_FENCE_PREFIX KEY_PREFIX "rf:"
#define KEY_AUDIT              KEY_PREFIX "audit"
#define KEY_AUDIT_DEAD         KEY_PREFIX "audit:dead"

/* The listing indexes of live locks and semaphores (lua/lib_lease.lua). */
#define KEY_LOCK_INDEX KEY_PREFIX "idx:lk"
#define KEY_SEM_INDEX  KEY_PREFIX "idx:sm"

/* The keys of lock N are KEY_LOCK_PREFIX N KEY_TAG_END <suffix>, those of
 * semaphore N KEY_SEM_PREFIX N KEY_TAG_END <suffix>: every key of one lock or
 * semaphore carries the hash tag {N}. */
#define KEY_LOCK_PREFIX KEY_PREFIX "lk:{"
#define KEY_SEM_PREFIX  KEY_PREFIX "sm:{"
#define KEY_TAG_END     "}:"

/* The suffixes (lua/lib_lock.lua, lua/lib_sem.lua, lua/lib_lease.lua). */
#define KEY_SUFFIX_HOLDERS     "h" /* lock: holder record; semaphore: holders by expiry */
#define KEY_SUFFIX_HOLDER_DATA "d" /* semaphore: holder records */
#define KEY_SUFFIX_QUEUE       "q" /* waiting lease ids by arrival */
#define KEY_SUFFIX_WAITERS     "w" /* waiter records */
#define KEY_SUFFIX_LIMIT       "l" /* semaphore: the limit in force */
#define KEY_SUFFIX_TICKETS     "t" /* arrival ticket counter */
#define KEY_SUFFIX_RIDS        "r" /* request_id -> lease id */
#define KEY_SUFFIX_RID_UNTIL   "e" /* request_id -> when it may be forgotten */
#define KEY_SUFFIX_RID_ONE     "i" /* "<lease id> <request_id>": one request id, while it lives */
#define KEY_SUFFIX_ENDED       "n" /* "<fence>|<reason>" of ended leases: retried releases, watchers */
#define KEY_SUFFIX_WATCHED     "v" /* present while a watcher waits for the news of an end */

/* What a first try moves out of a key K it writes over, to K KEY_MOVED X: the
 * end's record of the lease with fence X out of a lock's holder key or a
 * semaphore's limit key (lua/lib_lease.lua end_move), and out of the one-id
 * key (KEY_SUFFIX_RID_ONE) the request id X of a lease that is over
 * (rid_take_first). */
#define KEY_MOVED ":"

/* Pub/sub channels (lease/doorbell.h): ended leases, and the doorbell of the
 * gateway with instance id I, CHANNEL_BELL_PREFIX I. */
#define CHANNEL_ENDED       KEY_PREFIX "ended"
#define CHANNEL_BELL_PREFIX KEY_PREFIX "bell:"

#endif
