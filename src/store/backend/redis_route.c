/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_route.c - routing across a Redis Cluster: the shared slot map and the
 * redirect loop of route_command. The map is read under a read lock by every
 * command and replaced whole under the write lock when a fetch succeeds; one
 * thread fetches at a time (the others route by the map they have, which a
 * MOVED corrects slot by slot meanwhile). Connections are the send function's
 * business; this file never opens a socket.
 */
#include "store/backend/redis_route.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/budget.h"
#include "util/clock.h"
#include "util/log.h"

struct route {
    struct redis_url url;       /* the seeds (and the URL's user and password) */
    pthread_rwlock_t lock;      /* guards map and known */
    struct cluster_map map;     /* the map in force */
    bool known;                 /* a map was read */
    atomic_bool stale;          /* fetch the map again (after a MOVED or a failure) */
    atomic_llong next_fetch_ms; /* no fetch for a stale map before this (clock_mono_ms) */
    atomic_bool fetch_failing;  /* the last fetch failed (logged once, until one succeeds) */
    pthread_mutex_t fetching;   /* held by the thread that fetches */
};

struct route *route_new(const struct redis_url *url)
{
    struct route *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->url = *url;
    pthread_rwlock_init(&r->lock, NULL);
    pthread_mutex_init(&r->fetching, NULL);
    return r;
}

void route_free(struct route *r)
{
    if (r == NULL)
        return;
    pthread_rwlock_destroy(&r->lock);
    pthread_mutex_destroy(&r->fetching);
    free(r);
}

/* The places to ask for a map, in order: the primaries of the map in force,
 * its other nodes, then the URL's seeds not named already. */
static int fetch_candidates(struct route *r, struct redis_endpoint *out)
{
    int n = 0;
    pthread_rwlock_rdlock(&r->lock);
    for (int pass = 0; pass < 2 && r->known; pass++)
        for (int i = 0; i < r->map.nnodes; i++)
            if (r->map.nodes[i].primary == (pass == 0))
                out[n++] = r->map.nodes[i].at;
    pthread_rwlock_unlock(&r->lock);
    for (int s = 0; s < r->url.nhosts; s++) {
        int k = 0;
        while (k < n && !cluster_endpoint_equal(&out[k], &r->url.hosts[s]))
            k++;
        if (k == n)
            out[n++] = r->url.hosts[s];
    }
    return n;
}

/* Asks the node at for its map into *map. */
static int fetch_from(const struct redis_endpoint *at, route_send_fn *send, void *ctx,
                      struct cluster_map *map, struct fg_error *err)
{
    const char *argv[] = {"CLUSTER", "SHARDS"};
    redisReply *reply = send(ctx, at, ROUTE_ANY_ROLE, 2, argv, NULL, err);
    if (reply == NULL)
        return -1;
    int rc = -1;
    if (reply->type == REDIS_REPLY_ERROR)
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s:%d: CLUSTER SHARDS: %s", at->host,
                at->port, reply->str);
    else if (cluster_map_from_shards(reply, at, map, err) != 0)
        rc = -1;
    else if (map->covered == 0)
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s:%d knows no slot owner", at->host,
                at->port);
    else
        rc = 0;
    freeReplyObject(reply);
    return rc;
}

/* Puts map in force (the caller holds fetching), logging a change of owners. */
static void install(struct route *r, const struct cluster_map *map)
{
    pthread_rwlock_wrlock(&r->lock);
    bool changed = !r->known || memcmp(r->map.owner, map->owner, sizeof map->owner) != 0;
    r->map = *map;
    r->known = true;
    pthread_rwlock_unlock(&r->lock);
    if (!changed)
        return;
    int primaries = 0;
    for (int i = 0; i < map->nnodes; i++)
        primaries += map->nodes[i].primary;
    log_message(map->covered == CLUSTER_SLOTS ? LOG_INFO : LOG_WARN, "redis_cluster_map",
                "slot map: %d primaries serve %d of %d slots", primaries, map->covered,
                CLUSTER_SLOTS);
}

/* Fetches and installs a map; the caller holds fetching. err is the last
 * node's failure, and is left alone when a node answers after others failed:
 * a caller may go on with it to the command it routes, whose error it is. */
static int fetch_locked(struct route *r, route_send_fn *send, void *ctx, struct fg_error *err)
{
    struct redis_endpoint *candidates =
        malloc(sizeof *candidates * (CLUSTER_MAX_NODES + REDIS_URL_MAX_HOSTS));
    struct cluster_map *map = malloc(sizeof *map);
    FG_ASSERT(candidates != NULL && map != NULL);
    int n = fetch_candidates(r, candidates), rc = -1;
    struct fg_error failed = {0};
    if (n == 0)
        fg_fail(&failed, FG_ERR_BACKEND_UNAVAILABLE, "redis: no cluster node to ask for the map");
    for (int i = 0; i < n && rc != 0; i++)
        rc = fetch_from(&candidates[i], send, ctx, map, &failed);
    if (rc != 0 && err != NULL)
        *err = failed;
    if (rc == 0) {
        install(r, map);
        atomic_store(&r->stale, false);
        if (atomic_exchange(&r->fetch_failing, false))
            log_message(LOG_INFO, "redis_cluster_map", "slot map fetched again");
    }
    atomic_store(&r->next_fetch_ms, clock_mono_ms() + ROUTE_REFRESH_MIN_MS);
    free(map);
    free(candidates);
    return rc;
}

int route_refresh(struct route *r, route_send_fn *send, void *ctx, struct fg_error *err)
{
    pthread_mutex_lock(&r->fetching);
    int rc = fetch_locked(r, send, ctx, err);
    pthread_mutex_unlock(&r->fetching);
    return rc;
}

/* Fetches a map when none is known (waiting for a fetch under way) or the one
 * in force is stale and due (unless another thread fetches already). A stale
 * map routes the call if the fetch fails, so that fetch takes
 * ROUTE_REFETCH_MS at most over every node asked (util/budget.h), where a
 * thread serving no request (the janitors' give-backs) would give each node
 * request_timeout_ms. */
static int ensure_map(struct route *r, route_send_fn *send, void *ctx, struct fg_error *err)
{
    pthread_rwlock_rdlock(&r->lock);
    bool known = r->known;
    pthread_rwlock_unlock(&r->lock);
    if (!known) {
        pthread_mutex_lock(&r->fetching);
        pthread_rwlock_rdlock(&r->lock);
        known = r->known;
        pthread_rwlock_unlock(&r->lock);
        int rc = known ? 0 : fetch_locked(r, send, ctx, err);
        pthread_mutex_unlock(&r->fetching);
        return rc;
    }
    if (atomic_load(&r->stale) && clock_mono_ms() >= atomic_load(&r->next_fetch_ms) &&
        pthread_mutex_trylock(&r->fetching) == 0) {
        struct fg_error failed = {0};
        struct budget_capped capped = budget_cap(ROUTE_REFETCH_MS);
        int rc = fetch_locked(r, send, ctx, &failed);
        budget_uncap(capped);
        if (rc != 0 && !atomic_exchange(&r->fetch_failing, true))
            log_message(LOG_WARN, "redis_cluster_map", "cannot fetch the slot map: %s", failed.msg);
        pthread_mutex_unlock(&r->fetching);
    }
    return 0;
}

int route_owner(struct route *r, unsigned slot, route_send_fn *send, void *ctx,
                struct redis_endpoint *at, struct fg_error *err)
{
    if (ensure_map(r, send, ctx, err) != 0)
        return fg_not_run(err);
    pthread_rwlock_rdlock(&r->lock);
    const struct cluster_node *owner = cluster_map_owner(&r->map, slot);
    if (owner != NULL)
        *at = owner->at;
    pthread_rwlock_unlock(&r->lock);
    if (owner != NULL)
        return 0;
    atomic_store(&r->stale, true);
    fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: no primary serves slot %u", slot);
    return fg_not_run(err);
}

int route_home_slot(struct route *r, unsigned slot, route_send_fn *send, void *ctx, unsigned *home,
                    struct fg_error *err)
{
    if (ensure_map(r, send, ctx, err) != 0)
        return -1;
    pthread_rwlock_rdlock(&r->lock);
    bool served = cluster_map_owner(&r->map, slot) != NULL;
    *home = cluster_map_home_slot(&r->map, slot);
    pthread_rwlock_unlock(&r->lock);
    if (served)
        return 0;
    atomic_store(&r->stale, true);
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: no primary serves slot %u", slot);
}

/* Before the redirects-th resend after a MOVED or ASK: from the second on, waits
 * 1, 2, 4... ms (while a slot changes hands its two nodes may each name the
 * other for a moment). */
static void redirect_pause(int redirects)
{
    if (redirects >= 2)
        clock_sleep_ms(1L << (redirects - 2));
}

redisReply *route_command(struct route *r, unsigned slot, route_send_fn *send, void *ctx, int argc,
                          const char **argv, const size_t *lens, struct fg_error *err)
{
    struct redis_endpoint at;
    unsigned flags = ROUTE_PRIMARY;
    for (int redirects = 0, waits = 0;;) {
        if (!(flags & ROUTE_ASKING) && route_owner(r, slot, send, ctx, &at, err) != 0)
            return NULL;
        redisReply *reply = send(ctx, &at, flags, argc, argv, lens, err);
        if (reply == NULL) {
            atomic_store(&r->stale, true); /* a failover may have moved the slot */
            return NULL;
        }
        struct cluster_redirect to;
        enum cluster_answer answer = cluster_answer_of(reply, &at, &to);
        switch (cluster_step_of(answer, redirects, waits)) {
        case CLUSTER_STEP_DONE: return reply;
        case CLUSTER_STEP_FOLLOW:
            pthread_rwlock_wrlock(&r->lock);
            cluster_map_moved(&r->map, &to);
            pthread_rwlock_unlock(&r->lock);
            atomic_store(&r->stale, true);
            flags = ROUTE_PRIMARY;
            redirect_pause(++redirects);
            break;
        case CLUSTER_STEP_ASKING:
            at = to.to;
            flags = ROUTE_ASKING;
            redirect_pause(++redirects);
            break;
        case CLUSTER_STEP_WAIT: /* the migration moves the rest of the keys meanwhile */
            clock_sleep_ms(2L << waits++);
            flags = ROUTE_PRIMARY;
            redirects = 0; /* the owner is asked anew, and may answer ASK again */
            break;
        case CLUSTER_STEP_UNAVAILABLE:
            atomic_store(&r->stale, true);
            fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s:%d: %s", at.host, at.port,
                    answer == CLUSTER_ANSWER_DOWN || answer == CLUSTER_ANSWER_TRYAGAIN
                        ? reply->str
                        : "the slot keeps moving");
            fg_not_run(err); /* every reply was one Redis gives before running a command */
            freeReplyObject(reply);
            return NULL;
        case CLUSTER_STEP_BUG:
            fg_fail(err, FG_ERR_INTERNAL, "redis: %s", reply->str);
            freeReplyObject(reply);
            return NULL;
        }
        freeReplyObject(reply);
    }
}

void route_stale(struct route *r)
{
    atomic_store(&r->stale, true);
}

int route_nodes(struct route *r, struct redis_endpoint *out, int cap)
{
    int n = 0;
    pthread_rwlock_rdlock(&r->lock);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; r->known && i < r->map.nnodes; i++)
            if (r->map.nodes[i].primary == (pass == 0) && n < cap)
                out[n++] = r->map.nodes[i].at;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

int route_primaries(struct route *r, struct redis_endpoint *out, int cap)
{
    int n = 0;
    pthread_rwlock_rdlock(&r->lock);
    for (int i = 0; r->known && i < r->map.nnodes; i++)
        if (r->map.nodes[i].primary) {
            if (n < cap)
                out[n] = r->map.nodes[i].at;
            n++;
        }
    pthread_rwlock_unlock(&r->lock);
    return n;
}
