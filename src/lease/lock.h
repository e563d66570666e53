/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lock.h - mutex locks on Redis: one call per state transition, each one Lua
 * script (lua/lock_*.lua). This module builds the keys and arguments and reads
 * the scripts' answers; it knows nothing of HTTP or of waiting connections.
 */
#ifndef FG_LOCK_H
#define FG_LOCK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth/token.h"
#include "lease/lease_request.h"
#include "lease/lease_result.h"
#include "util/error.h"

/*
 * One acquire attempt on lock name for lease_id, asking as wait says (a first
 * attempt, or one looking again: enum lease_acquire_wait). attach identifies
 * the connection asking. After a "nofence" answer, fences are reserved and the
 * attempt runs once more (lease_result.h).
 */
int lock_acquire(const char *name, const struct acquire_params *p, const char *lease_id,
                 enum lease_acquire_wait wait, const char *attach, struct lease_result *res,
                 struct fg_error *err) FG_WUR;

/* Gives up a queued or granted lease (see enum lease_cancel_mode). */
int lock_cancel(const char *name, const char *lease_id, const char *attach,
                enum lease_cancel_mode mode, struct lease_result *res, struct fg_error *err) FG_WUR;

/* Waiters ws[0..n) (at most LEASE_LEAVE_MAX) whose clients hung up leave the
 * queue of lock name in one script call; left[i] false: waiter i holds the
 * lock now and must be cancelled on its own (lock_cancel, drop). */
int lock_leave(const char *name, const struct lease_leaver *ws, size_t n, bool *left,
               struct fg_error *err) FG_WUR;

/* Releases the lease (with fence: a retried release looks it up) and hands
 * the lock to the next live waiter. */
int lock_release(const char *name, const char *lease_id, long long fence, struct lease_result *res,
                 struct fg_error *err) FG_WUR;

/* Extends the lease by ttl_ms (0: its own ttl), within max_hold_ms. */
int lock_renew(const char *name, const char *lease_id, long long ttl_ms, struct lease_result *res,
               struct fg_error *err) FG_WUR;

/* lock_renew for a lock set's attempt, whose connection is attach: outcome
 * LEASE_SUPERSEDED where a retry of its request_id took the lock over. */
int lock_renew_attached(const char *name, const char *lease_id, const char *attach,
                        long long ttl_ms, struct lease_result *res, struct fg_error *err) FG_WUR;

/* Revokes the lease with fence on lock name: the fence joins the revoked set
 * and, if that lease holds the lock, it ends and the lock passes on. Outcome
 * LEASE_REVOKED (it held) or LEASE_GONE. The durable record
 * (store/fenced/revocations.h) must be written first. */
int lock_revoke(const char *name, long long fence, struct lease_result *res,
                struct fg_error *err) FG_WUR;

/* Whether the lease with fence still holds lock name, or how it ended; mark: a
 * watcher waits for its end, so the lock is marked watched (lease_watch_mark_ms)
 * and its end published, where a look that waits for nothing leaves no mark. */
int lock_watch(const char *name, long long fence, bool mark, struct lease_watch *out,
               struct fg_error *err) FG_WUR;

/* The fence of lock name's current holder, 0 if none. */
int lock_holder_fence(const char *name, long long *fence, struct fg_error *err) FG_WUR;

/* The public status of lock name as a new JSON object (docs/api.md's fields),
 * with its first waiters (at most waiters of them) when waiters > 0. */
int lock_status(const char *name, long long waiters, json_t **out, struct fg_error *err) FG_WUR;

#endif
