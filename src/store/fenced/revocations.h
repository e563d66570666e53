/* SPDX-License-Identifier: Apache-2.0 */
/*
 * revocations.h - the record of revoked leases: rows of fencegate.revocations
 * in Postgres (the durable record, read by Postgres writes in their own
 * statement) and their mirror, the set KEY_REVOKED in Redis (read by the Redis
 * write scripts and added to by the revoke scripts; on a Redis Cluster one set
 * per slot name, revocations.c). The mirror is rebuilt from Postgres whenever a
 * script finds it missing, and a Redis that may have lost data (restarted,
 * failed over, flushed) loses the mirror too (lua/fence_check.lua; on a
 * cluster a set holds the run_id it was rebuilt on, lua/lib_rw.lua), so a
 * revocation survives gateway and Redis restarts and Redis rollbacks.
 */
#ifndef FG_REVOCATIONS_H
#define FG_REVOCATIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fglimits.h"
#include "store/backend/pg.h"
#include "store/backend/shared_keys.h"
#include "util/error.h"

/* Records that the lease with fence on name (kind "lock" or "semaphore") is
 * revoked for reason (borrowed), and on a Redis Cluster adds fence to every
 * revoked set that exists (found with one EXISTS per slot), so that
 * from its return no write script of any node takes it. Recording it twice is
 * not an error. */
int revocation_record(int64_t fence, const char *kind, const char *name, const char *reason,
                      struct fg_error *err) FG_WUR;

/*
 * Waits, after a revocation was recorded, until every transaction of a
 * gateway connection open at its first look (any that began before the record
 * was committed and has not ended) has ended, so that no write that read the
 * revocations before the record was committed (its statement's snapshot
 * older, a wait for a row lock in between) commits after the revoke answers;
 * a write whose statement began later reads the record. Transactions are
 * known by process and start, never by comparing times, so a step of the
 * clock hides none. Asks pg_stat_activity every 2 ms, up to wait_ms, then fails with
 * FG_ERR_BACKEND_UNAVAILABLE. Writes pay nothing for it. It sees nothing of
 * sessions with track_activities off, whose writes it cannot wait for, and
 * does not wait for them.
 */
int revocation_drain(int64_t wait_ms, struct fg_error *err) FG_WUR;

/* Whether the lease with fence was revoked (*revoked), and then why: the
 * reason given to the revoke, "" for none, into reason (cap bytes, cut; NULL
 * with cap 0 when only whether is asked). */
int revocation_find(int64_t fence, bool *revoked, char *reason, size_t cap,
                    struct fg_error *err) FG_WUR;

/* revocation_find on conn, a connection the caller holds (inside its
 * transaction, if one is open: a statement of its own, which reads every
 * revocation committed before it). */
int revocation_find_on(struct pg_conn *conn, int64_t fence, bool *revoked, char *reason, size_t cap,
                       struct fg_error *err) FG_WUR;

/* The name of the revoked set a write of a key in slot reads, into out:
 * KEY_REVOKED on one Redis; on a Redis Cluster that of the highest slot of the
 * primary that serves slot, by the slot map (redis_home_slot). */
int revocations_set_of(unsigned slot, char out[SHARED_KEY_MAX], struct fg_error *err) FG_WUR;

/* Adds every revoked fence of Postgres to the Redis set named set (creating
 * it); on a Redis Cluster the set is created before Postgres is read, and
 * stamped with the run_id of the process that holds it. */
int revocations_restore(const char *set, struct fg_error *err) FG_WUR;

#endif
