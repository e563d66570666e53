/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_list.h - pages of the live locks and semaphores, in name order, read
 * from the listing index that the lease scripts keep (lua/lib_lease.lua) by
 * one call of lua/lease_list.lua. A page never looks at more than a bounded
 * number of names, whatever the size of the keyspace. On a Redis Cluster each
 * slot has its own index (docs/cluster.md): a page reads the first names after
 * the cursor from all of them (pipelined per primary), merges them in name
 * order, and reads the status of the names it shows in their slots; the
 * cursor stays the last name looked at, one for the whole cluster. A page of
 * one name alone (q->upto the same as q->prefix) reads that name's slot only.
 */
#ifndef FG_LEASE_LIST_H
#define FG_LEASE_LIST_H

#include <jansson.h>
#include <stdbool.h>

#include "lease/list_query.h"
#include "util/error.h"

enum lease_list_kind {
    LEASE_LIST_LOCKS,
    LEASE_LIST_SEMAPHORES,
};

/* Holders shown per semaphore in a listing (the count covers them all). */

struct lease_page {
    json_t *items;               /* new array of API objects (owned by the caller) */
    bool more;                   /* another page may follow */
    char next[NAME_MAX_LEN + 1]; /* the cursor to continue after, when more */
};

/*
 * One page of kind matching q: items as docs/api.md "Listing leases" shows them
 * (locks: lock, held, fence, owner, expires_in_ms, waiting; semaphores:
 * semaphore, limit, holders, waiting and leases, the first holders' fence,
 * owner and expires_in_ms), with names up to q->upto when it is set. Never a
 * token. Fills *page.
 */
int lease_list(enum lease_list_kind kind, const struct list_query *q, struct lease_page *page,
               struct fg_error *err) FG_WUR;

/*
 * Drops idle names from the index of kind, looking at a bounded number of names
 * after `after` ("" from the start); page->more and page->next tell where to go
 * on (page->items stays NULL), *pruned how many names it dropped. For the
 * janitor.
 */
int lease_list_prune(enum lease_list_kind kind, const char *after, struct lease_page *page,
                     size_t *pruned, struct fg_error *err) FG_WUR;

/*
 * On a cluster (the per-slot layout of lease/lease_keys.h): drops idle names
 * from the indexes of kind of PRUNE_SLOTS slots from *slot on, looking at the
 * first names of each (one call a slot, pipelined per primary), and moves
 * *slot past them, round the slots; *pruned: how many names it dropped (of the
 * calls Redis answered). For the janitor.
 */
int lease_list_prune_slots(enum lease_list_kind kind, unsigned *slot, size_t *pruned,
                           struct fg_error *err) FG_WUR;

#endif
