/* SPDX-License-Identifier: Apache-2.0 */
/*
 * key_quota.h - what one API key holds of a share that limits.max_waiters_per_key
 * bounds: a count per key id, in a map of its owner's (the parked waiters of
 * lease/waiter.c, the kept places of lease/kept_place.c), under its owner's
 * lock. Entries are never freed: there is one per key id that ever held
 * anything, a handful (the configured keys).
 */
#ifndef FG_KEY_QUOTA_H
#define FG_KEY_QUOTA_H

#include "util/strmap.h"

/* One key's share. */
struct key_quota {
    struct strmap_node node; /* in its owner's map, by key id */
    long count;              /* what the key holds now */
    char id[];               /* the key's id (the node's key) */
};

/* The quota of key_id in quotas, made on first use; NULL for no key_id (auth
 * is off). The caller holds the lock quotas is under. */
struct key_quota *key_quota_of(struct strmap *quotas, const char *key_id);

#endif
