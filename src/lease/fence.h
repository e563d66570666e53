/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fence.h - keeping the one fence sequence above every fence ever issued, also
 * after Redis loses its data. Checked on every new Redis connection; recovered
 * then if Redis may have lost fences, and whenever a script answers "nofence"
 * (the sequence is missing, stopped, or its reserved block is used up).
 */
#ifndef FG_FENCE_H
#define FG_FENCE_H

#include <stdint.h>

#include "lease/lease_kind.h"
#include "util/error.h"

/* Reserves the next block of fences in Postgres and raises the Redis sequence
 * and its limit to it; after a loss (the sequence missing or not trusted), above
 * the old reservation plus the most a script can overshoot it, and raises the
 * Redis write floor to the new sequence. Needs both backends. */
int fence_recover(struct fg_error *err) FG_WUR;

struct lease_keys;

/* fence_recover for the sequence the lease with keys k issues from: with the
 * per-slot layout of a Redis Cluster (lease_keys.h), its slot's, raised above
 * a block of the same Postgres reservation and its limit set under the run_id
 * of the process that runs the raise (a slot a live reshard moved is adopted
 * without a loss when its keys can be vouched for: docs/cluster.md "A moved
 * slot"; while the move is under way, FG_ERR_BACKEND_UNAVAILABLE); else the
 * one sequence. */
int fence_recover_lease(const struct lease_keys *k, struct fg_error *err) FG_WUR;

/* fence_recover for the sequence of hash slot slot (with the per-slot layout;
 * else the one sequence): the one a fenced Redis write of a key in that slot
 * is judged against, whose recovery raises that slot's write floor. */
int fence_recover_slot(unsigned slot, struct fg_error *err) FG_WUR;

/* With the per-slot layout: makes the next fence of the lock or semaphore
 * called name above floor, the write floor of another slot that refused one of
 * its tokens (a block reserved above it, when its sequence is below: lua/lib_rw.lua
 * answers "floor"), so that a lease taken after that refusal may write there.
 * A no-op on one Redis, where the floor is the sequence's own. */
int fence_lift(const char *name, int64_t floor, struct fg_error *err) FG_WUR;

/* Connect hook of the Redis module, run before anything else on every new
 * connection: if the Redis process that answers is not the one the sequence was
 * last recovered on, or the sequence is missing, stops every gateway from
 * issuing fences (in Redis); the next script answering "nofence" recovers
 * (never this hook: it may run on the janitor thread). Fails,
 * so that the connection is dropped, only when Redis did not answer the check
 * (e.g. still loading its data). */
int fence_check_on_connect(struct fg_error *err) FG_WUR;

/*
 * Refuses a fence above every fence issued or reserved by any gateway
 * (FG_ERR_INVALID_FENCE_TOKEN), even in a correctly signed token of the lease
 * kind name: a leaked signing key must not push a resource's fence out of
 * reach. Costs nothing up to the highest reservation this process has seen;
 * above it, one Postgres read (another gateway may have reserved more since),
 * and above that one read of name's sequence in Redis (a script that issues
 * several fences may pass the reservation).
 */
int fence_check_issued(enum lease_kind kind, const char *name, int64_t fence,
                       struct fg_error *err) FG_WUR;

/* Fences Redis may still issue before it needs the next reservation in
 * Postgres, into *headroom; 0 when none may be issued until a recovery. One
 * read-only script call. On a cluster (the per-slot layout of lease_keys.h),
 * the least headroom of the slots whose sequence exists (0 for a slot that
 * waits for a recovery, and when no slot has a sequence yet). */
int fence_headroom(int64_t *headroom, struct fg_error *err) FG_WUR;

#endif
