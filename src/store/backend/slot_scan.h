/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slot_scan.h - which slots hold a key a Redis Cluster keeps per slot
 * (store/backend/shared_keys.h: an audit stream, its dead letters, a revoked
 * set): one EXISTS per slot, all of a primary's pipelined on its connection
 * (redis_batch), so that finding the few that exist among 16384 costs each
 * primary about one read and one write of its event loop.
 */
#ifndef FG_SLOT_SCAN_H
#define FG_SLOT_SCAN_H

#include <stdbool.h>

#include "store/backend/key_slot.h"
#include "util/error.h"

/* Sets has[s] (CLUSTER_SLOTS entries) for every slot s whose key named after
 * base (shared_key) exists; on one Redis only has[0], to true (the one key,
 * which callers read anyway). 0, or -1 with err when a primary did not
 * answer. */
int slot_scan(const char *base, bool has[CLUSTER_SLOTS], struct fg_error *err) FG_WUR;

#endif
