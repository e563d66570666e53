/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fence.h - keeping the one fence sequence above every fence ever issued, also
 * after Redis loses its data. Called at start-up, on every new Redis connection,
 * and whenever a script answers "nofence" (the sequence is missing or its
 * reserved block is used up).
 */
#ifndef FG_FENCE_H
#define FG_FENCE_H

#include <stdint.h>

#include "util/error.h"

/* Reserves the next block of fences in Postgres and raises the Redis sequence
 * and its limit to it. Needs both backends. */
int fence_recover(struct fg_error *err) FG_WUR;

/* Connect hook of the Redis module: recovers on a new connection unless it
 * reaches the dataset this process verified last (same server run and
 * replication id). A Redis that restarted from a file lagging its last writes,
 * or a promoted replica, may hold a sequence below fences already issued;
 * until a recovery succeeds (Postgres down), the sequence is marked
 * unverified, and the command that made the connection fails (it might have
 * been a grant); the connection itself is kept. */
int fence_recover_on_connect(struct fg_error *err) FG_WUR;

/* Before issuing fences: succeeds at once unless the sequence is unverified,
 * then tries a recovery; fails with FG_ERR_BACKEND_UNAVAILABLE while it cannot. */
int fence_ensure_verified(struct fg_error *err) FG_WUR;

/*
 * Refuses a fence above every fence issued or reserved by any gateway
 * (FG_ERR_INVALID_FENCE_TOKEN), even in a correctly signed token: a leaked
 * signing key must not push a resource's fence out of reach. Costs nothing up
 * to the highest reservation this process has seen; above it, one Postgres
 * read (another gateway may have reserved more since).
 */
int fence_check_issued(int64_t fence, struct fg_error *err) FG_WUR;

#endif
