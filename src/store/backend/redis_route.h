/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_route.h - commands routed across a Redis Cluster: the slot map every
 * thread shares (learnt from CLUSTER SHARDS, fetched again after a MOVED, a
 * node that did not answer, or CLUSTERDOWN), and the loop that sends a command
 * to its slot's primary and follows MOVED and ASK until a final answer. How a
 * command reaches a node is the caller's: it passes a send function, so the
 * same routing serves the gateway's connections and the cluster lab's probe.
 */
#ifndef FG_REDIS_ROUTE_H
#define FG_REDIS_ROUTE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>

#include "store/backend/redis_cluster.h"
#include "store/backend/redis_url.h"
#include "util/error.h"

/* A map is fetched again at most this often after failures (a MOVED, or no
 * map at all yet, fetches it at once). */
#define ROUTE_REFRESH_MIN_MS 100

/* A stale map's fetch takes at most this long over every node asked: the map in force routes
 * meanwhile (ensure_map). */
#define ROUTE_REFETCH_MS 1000

/* How a command is to be sent. */
enum route_send_flags {
    ROUTE_PRIMARY = 0,      /* to a primary: a connection must answer ROLE "master" */
    ROUTE_ASKING = 1 << 0,  /* send ASKING first, on the same connection (an ASK redirect) */
    ROUTE_ANY_ROLE = 1 << 1 /* any node will do (CLUSTER SHARDS): no role check */
};

/*
 * Sends argv (argc entries, lens their lengths or NULL for C strings; all
 * borrowed) to the node at, as flags say, and returns its reply (the caller's
 * to free), or NULL with err filled when the node could not be reached or
 * answered nothing.
 */
typedef redisReply *route_send_fn(void *ctx, const struct redis_endpoint *at, unsigned flags,
                                  int argc, const char **argv, const size_t *lens,
                                  struct fg_error *err);

/* The routing state of one cluster; opaque, shared by every thread. */
struct route;

/* A routing state for the seed nodes of url (copied); NULL without memory. */
struct route *route_new(const struct redis_url *url);

/* Frees r (no call may be under way). */
void route_free(struct route *r);

/*
 * Runs argv on the primary that serves slot, through send with ctx: fetches
 * the map first when there is none or it is due, follows up to
 * CLUSTER_MAX_REDIRECTS MOVED (noting each new owner and asking for a new map)
 * and ASK (ASKING, map unchanged) answers, waiting 1, 2, 4... ms before each
 * resend from the third on (while a slot changes hands its two nodes may each
 * name the other for a moment); waits out up to CLUSTER_SPLIT_WAITS TRYAGAIN
 * answers (2, 4 ... 64 ms, 126 in all: a migration splits a slot's keys for
 * as long as it takes to move them), resending to the owner after each, its
 * MOVED and ASK counted anew; and
 * returns the final reply (the caller's to free; it may be an error reply of
 * the command's own). NULL with err: FG_ERR_BACKEND_UNAVAILABLE when no node
 * serves the slot, the node did not answer, the cluster is down (CLUSTERDOWN),
 * the keys stayed split by a migration (TRYAGAIN) or the slot kept moving,
 * each but the node's silence marked not run (fg_not_run: no node ran argv);
 * FG_ERR_INTERNAL for a command across slots (CROSSSLOT).
 */
redisReply *route_command(struct route *r, unsigned slot, route_send_fn *send, void *ctx, int argc,
                          const char **argv, const size_t *lens, struct fg_error *err);

/*
 * Fetches the map now: asks CLUSTER SHARDS of the nodes of the last map
 * (primaries first), then of the URL's seeds, and keeps the first answer that
 * covers any slot. 0, or -1 with err when no node gave one.
 */
int route_refresh(struct route *r, route_send_fn *send, void *ctx, struct fg_error *err) FG_WUR;

/*
 * Copies the primary that serves slot into *at: fetches the map first when
 * there is none, or when it is stale and due (as route_command). -1 with err
 * marked not run (fg_not_run) when no map could be had, or
 * (FG_ERR_BACKEND_UNAVAILABLE, and the map marked stale) no node serves the
 * slot.
 */
int route_owner(struct route *r, unsigned slot, route_send_fn *send, void *ctx,
                struct redis_endpoint *at, struct fg_error *err) FG_WUR;

/* route_owner, but copies into *first the lowest slot that the primary
 * serving slot serves (cluster_map_home_slot). */
int route_home_slot(struct route *r, unsigned slot, route_send_fn *send, void *ctx, unsigned *home,
                    struct fg_error *err) FG_WUR;

/* Marks the map stale: the next route_owner or route_command due fetches it
 * (a slot was seen moving without a MOVED: a shard subscription ended, a
 * node was lost). */
void route_stale(struct route *r);

/* Copies every node of the current map, primaries first, into out (at most
 * cap; borrowed) and returns how many it copied; 0 before the first map. */
int route_nodes(struct route *r, struct redis_endpoint *out, int cap);

/* Copies the primaries that serve slots in the current map into out (at most
 * cap; borrowed) and returns how many there are (which may exceed cap); 0
 * before the first map. */
int route_primaries(struct route *r, struct redis_endpoint *out, int cap);

#endif
