/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_cluster.h - the routing rules of Redis Cluster, as its specification
 * states them, for the Redis module (the slot of a key is store/backend/key_slot.h's):
 * the slot map read from a CLUSTER SHARDS reply, and what to do
 * with a node's answer (MOVED: the slot has a new owner; ASK: ask another node
 * once, after ASKING; TRYAGAIN: wait a little and ask again; CLUSTERDOWN:
 * come back later). Pure: it reads
 * hiredis replies but makes no connection and keeps no state of its own.
 */
#ifndef FG_REDIS_CLUSTER_H
#define FG_REDIS_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/backend/key_slot.h"
#include "store/backend/redis_url.h"
#include "util/error.h"

#define CLUSTER_MAX_NODES     128 /* nodes (primaries and replicas) one map keeps */
#define CLUSTER_MAX_REDIRECTS 5   /* MOVED and ASK one command follows before it gives up */
#define CLUSTER_SPLIT_WAITS   6   /* TRYAGAIN answers one command waits out (2, 4 ... 64 ms) */

/* One node of the cluster. */
struct cluster_node {
    struct redis_endpoint at; /* where to connect */
    char id[41];              /* the node id, 40 hex digits ("" when learnt from a MOVED) */
    bool primary;             /* serves slots */
};

/* Who serves which slot, as one node saw it. */
struct cluster_map {
    struct cluster_node nodes[CLUSTER_MAX_NODES]; /* every node known */
    int nnodes;                                   /* entries of nodes */
    int16_t owner[CLUSTER_SLOTS]; /* index in nodes of each slot's primary; -1: none */
    int covered;                  /* slots that have an owner */
};

/*
 * Reads a CLUSTER SHARDS reply (borrowed) into *map: for each shard that
 * serves slots, its primary (role "master", an online one before a failed one)
 * owns the shard's slot ranges; every other node is kept as a place to ask for
 * the next map. A node's address is its "endpoint", else its "ip", else the
 * host of asked (the node the reply came from: an unknown endpoint means
 * "where you reached me"). Fails with FG_ERR_BACKEND_UNAVAILABLE, naming what
 * is wrong, for a reply of another shape or slot ranges that overlap.
 */
int cluster_map_from_shards(const redisReply *shards, const struct redis_endpoint *asked,
                            struct cluster_map *map, struct fg_error *err) FG_WUR;

/* The primary serving slot in map (borrowed from map), or NULL when no node does. */
const struct cluster_node *cluster_map_owner(const struct cluster_map *map, unsigned slot);

/* The highest slot served by the primary that serves slot (slot itself when
 * none serves it): a slot that names one thing per primary, the same for every
 * slot of that primary while the map stands (the highest: redis-cli moves a
 * node's lowest slots first). */
unsigned cluster_map_home_slot(const struct cluster_map *map, unsigned slot);

/* What a node's reply says about routing. */
enum cluster_answer {
    CLUSTER_ANSWER_FINAL, /* not about routing: the command ran, or failed for its own reasons */
    CLUSTER_ANSWER_MOVED, /* MOVED <slot> <host>:<port>: the slot lives elsewhere for good */
    CLUSTER_ANSWER_ASK,  /* ASK <slot> <host>:<port>: the slot is migrating, its key may be there */
    CLUSTER_ANSWER_DOWN, /* CLUSTERDOWN: the cluster cannot serve the slot now */
    CLUSTER_ANSWER_TRYAGAIN,  /* TRYAGAIN: keys of one command are split by a migration */
    CLUSTER_ANSWER_CROSSSLOT, /* CROSSSLOT: the command named keys of several slots */
};

/* Where a MOVED or ASK points. */
struct cluster_redirect {
    unsigned slot;            /* the slot of the command's keys */
    struct redis_endpoint to; /* the node to ask */
};

/*
 * Classifies reply (borrowed), the answer of the node at asked. For MOVED and
 * ASK fills *redirect (an empty host in the reply means asked's host); a MOVED
 * or ASK it cannot read counts as FINAL, an error the caller reports as it is.
 */
enum cluster_answer cluster_answer_of(const redisReply *reply, const struct redis_endpoint *asked,
                                      struct cluster_redirect *redirect);

/* What the Redis module does next with a command. */
enum cluster_step {
    CLUSTER_STEP_DONE,   /* hand the reply to the caller */
    CLUSTER_STEP_FOLLOW, /* note the new owner (cluster_map_moved), fetch a new map, resend there */
    CLUSTER_STEP_ASKING, /* send ASKING and the command to the node named; the map stays */
    CLUSTER_STEP_WAIT,   /* its keys are split by a migration: wait, resend to the owner */
    CLUSTER_STEP_UNAVAILABLE, /* answer 503 with Retry-After: the cluster is down or moving */
    CLUSTER_STEP_BUG,         /* a command across slots: a broken key layout, never the client's */
};

/* The next step for answer, the answer to a command that has already followed
 * redirects MOVED or ASK replies and waited out waits TRYAGAIN answers; past
 * CLUSTER_MAX_REDIRECTS redirects or CLUSTER_SPLIT_WAITS waits it is 503. */
enum cluster_step cluster_step_of(enum cluster_answer answer, int redirects, int waits);

/*
 * Notes in map that redirect's slot is served by redirect->to (a MOVED),
 * adding that node as a primary when the map does not know it; the rest of
 * the map stays until a new one is read. Returns false, changing nothing, when
 * the map has no room for another node.
 */
bool cluster_map_moved(struct cluster_map *map, const struct cluster_redirect *redirect);

/* True if a and b name the same host and port. */
bool cluster_endpoint_equal(const struct redis_endpoint *a, const struct redis_endpoint *b);

#endif
