/* SPDX-License-Identifier: Apache-2.0 */
/*
 * semaphore.h - counting semaphores on Redis: up to `limit` holders, each with
 * its own lease and fence, waiters served strictly in arrival order. One call
 * per state transition, each one Lua script (lua/sem_*.lua). This module builds
 * the keys and arguments and reads the scripts' answers; it knows nothing of
 * HTTP or of waiting connections.
 */
#ifndef FG_SEMAPHORE_H
#define FG_SEMAPHORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth/token.h"
#include "lease/lease_request.h"
#include "lease/lease_result.h"
#include "util/error.h"

/*
 * One acquire attempt on semaphore name for lease_id, asking as wait says (a
 * first attempt, or one looking again: enum lease_acquire_wait), with p->limit
 * as the caller's limit. attach identifies the connection asking. After a
 * "nofence" answer, fences are reserved and the attempt runs once more.
 */
int sem_acquire(const char *name, const struct acquire_params *p, const char *lease_id,
                enum lease_acquire_wait wait, const char *attach, struct lease_result *res,
                struct fg_error *err) FG_WUR;

/* Gives up a queued or granted lease (see enum lease_cancel_mode). */
int sem_cancel(const char *name, const char *lease_id, const char *attach,
               enum lease_cancel_mode mode, struct lease_result *res, struct fg_error *err) FG_WUR;

/* Waiters ws[0..n) (at most LEASE_LEAVE_MAX) whose clients hung up leave the
 * queue of semaphore name in one script call; left[i] false: waiter i holds a
 * slot now and must be cancelled on its own (sem_cancel, drop). */
int sem_leave(const char *name, const struct lease_leaver *ws, size_t n, bool *left,
              struct fg_error *err) FG_WUR;

/* Releases the lease's slot (with fence: a retried release looks it up) and
 * hands it to the oldest live waiter. */
int sem_release(const char *name, const char *lease_id, long long fence, struct lease_result *res,
                struct fg_error *err) FG_WUR;

/* Extends the lease by ttl_ms (0: its own ttl), within max_hold_ms. */
int sem_renew(const char *name, const char *lease_id, long long ttl_ms, struct lease_result *res,
              struct fg_error *err) FG_WUR;

/* Revokes the holder with fence of semaphore name: the fence joins the
 * revoked set and, if it holds a slot, it loses it and the slot passes on.
 * Outcome LEASE_REVOKED (it held) or LEASE_GONE. The durable record
 * (store/fenced/revocations.h) must be written first. */
int sem_revoke(const char *name, long long fence, struct lease_result *res,
               struct fg_error *err) FG_WUR;

/* Whether the holder with fence still holds a slot of name, or how it ended;
 * mark as lock_watch's. */
int sem_watch(const char *name, long long fence, bool mark, struct lease_watch *out,
              struct fg_error *err) FG_WUR;

/* The public status of semaphore name as a new JSON object (docs/api.md's fields),
 * with its first waiters (at most waiters of them) when waiters > 0. */
int sem_status(const char *name, long long waiters, json_t **out, struct fg_error *err) FG_WUR;

#endif
