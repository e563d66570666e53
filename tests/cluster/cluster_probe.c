/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster_probe.c - load for the cluster lab: threads that INCR and GET keys
 * of random names through store/backend/redis_route.c, with a connection per thread
 * and node of their own (ROLE checked for primaries, ASKING sent on the same
 * connection before an ASK's retry). Each thread owns its keys and knows what
 * each counter must read, so a write lost or applied twice shows. Prints one
 * JSON line: answers, 503s, internal errors, counters found behind (lost
 * acknowledged writes) or ahead, and the wall-clock times of the first and
 * last 503.
 *
 * Usage: cluster_probe <redis-cluster:// URL> <threads> <seconds> <tag> [hash tags]:
 * with a comma-separated list of hash tags, every key carries one of them (so
 * the load falls on their slots). SIGTERM ends the run early (the summary is
 * printed all the same).
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/backend/redis_route.h"
#include "util/clock.h"

#define KEYS_PER_THREAD   256
#define MAX_CONNS         16
#define COMMAND_TIMEOUT_S 2 /* a loaded two-core machine stalls a node for hundreds of ms */

struct conn {
    struct redis_endpoint at;
    redisContext *ctx;
};

struct worker {
    pthread_t thread;
    int index;
    struct conn conns[MAX_CONNS];
    long long expected[KEYS_PER_THREAD]; /* what each counter reads; -1: unknown */
    long ok, unavailable, internal, behind, ahead;
    long long first_fail_ms, last_fail_ms;
};

static struct route *route;
static const char *tag;
static char *hot[64]; /* hash tags every key carries one of, when given */
static int nhot;
static atomic_llong stop_at_ms; /* SIGTERM ends the run early */
static struct redis_url url;

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static redisContext *open_conn(const struct redis_endpoint *at, unsigned flags,
                               struct fg_error *err)
{
    struct timeval connect_tv = {0, 500000}, tv = {COMMAND_TIMEOUT_S, 0};
    redisContext *ctx = redisConnectWithTimeout(at->host, at->port, connect_tv);
    if (ctx == NULL || ctx->err) {
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "connect %s:%d: %s", at->host, at->port,
                ctx ? ctx->errstr : "no memory");
        redisFree(ctx);
        return NULL;
    }
    redisSetTimeout(ctx, tv);
    if (flags & ROUTE_ANY_ROLE)
        return ctx;
    redisReply *role = redisCommand(ctx, "ROLE");
    bool primary = role != NULL && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
                   strcmp(role->element[0]->str, "master") == 0;
    freeReplyObject(role);
    if (!primary) {
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "%s:%d is not a primary", at->host, at->port);
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

/* The route_send_fn of the probe: one connection per node and thread. */
static redisReply *probe_send(void *arg, const struct redis_endpoint *at, unsigned flags, int argc,
                              const char **argv, const size_t *lens, struct fg_error *err)
{
    struct worker *w = arg;
    struct conn *c = NULL;
    for (int i = 0; i < MAX_CONNS && c == NULL; i++)
        if (w->conns[i].ctx != NULL && cluster_endpoint_equal(&w->conns[i].at, at))
            c = &w->conns[i];
    if (c != NULL && (flags & ROUTE_ANY_ROLE)) {
        /* Map fetches use a connection of their own, not checked for role. */
        c = NULL;
    }
    redisContext *ctx = c ? c->ctx : open_conn(at, flags, err);
    if (ctx == NULL)
        return NULL;
    if (flags & ROUTE_ASKING)
        redisAppendCommand(ctx, "ASKING");
    redisAppendCommandArgv(ctx, argc, argv, lens);
    void *reply = NULL;
    bool failed = false;
    if (flags & ROUTE_ASKING) {
        failed = redisGetReply(ctx, &reply) != REDIS_OK;
        freeReplyObject(reply);
        reply = NULL;
    }
    failed = failed || redisGetReply(ctx, &reply) != REDIS_OK;
    if (failed)
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "%s:%d: %s", at->host, at->port, ctx->errstr);
    if (flags & ROUTE_ANY_ROLE) {
        redisFree(ctx);
        return failed ? NULL : reply;
    }
    if (failed) {
        redisFree(ctx);
        if (c != NULL)
            c->ctx = NULL;
        return NULL;
    }
    if (c == NULL) {
        for (int i = 0; i < MAX_CONNS && c == NULL; i++)
            if (w->conns[i].ctx == NULL)
                c = &w->conns[i];
        if (c == NULL) {
            redisFree(ctx);
            return reply;
        }
        c->at = *at;
        c->ctx = ctx;
    }
    return reply;
}

static void note_fail(struct worker *w, const struct fg_error *err)
{
    long long now = wall_ms();
    if (err->code == FG_ERR_INTERNAL) {
        w->internal++;
        fprintf(stderr, "probe: internal: %s\n", err->msg);
    } else if (w->unavailable++ < 3) {
        fprintf(stderr, "probe: unavailable: %s\n", err->msg);
    }
    if (w->first_fail_ms == 0)
        w->first_fail_ms = now;
    w->last_fail_ms = now;
}

/* One operation on key k: INCR when its counter is known, GET to learn it otherwise. */
static void operate(struct worker *w, int k)
{
    char key[160];
    if (nhot > 0) /* names in the slots of the hash tags given */
        snprintf(key, sizeof key, "{%s}:probe:%s:%d:%d", hot[k % nhot], tag, w->index, k);
    else /* names spread over the slots */
        snprintf(key, sizeof key, "probe:%s:%d:%d:%08x", tag, w->index, k,
                 (unsigned)(k * 2654435761u));
    bool known = w->expected[k] >= 0;
    const char *argv[] = {known ? "INCR" : "GET", key};
    struct fg_error err = {0};
    redisReply *r = route_command(route, key_slot(key, strlen(key)), probe_send, w, 2, argv,
                                  NULL, &err);
    if (r == NULL) {
        note_fail(w, &err);
        clock_sleep_ms(20);
        w->expected[k] = -1; /* an INCR without answer may or may not have run */
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        err.code = FG_ERR_INTERNAL;
        snprintf(err.msg, sizeof err.msg, "%s", r->str);
        note_fail(w, &err);
        w->expected[k] = -1;
        freeReplyObject(r);
        return;
    }
    long long value = r->type == REDIS_REPLY_INTEGER  ? r->integer
                      : r->type == REDIS_REPLY_STRING ? atoll(r->str)
                                                      : 0;
    if (known) {
        if (value < w->expected[k] + 1)
            w->behind++;
        else if (value > w->expected[k] + 1)
            w->ahead++;
    }
    w->expected[k] = value;
    w->ok++;
    freeReplyObject(r);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    unsigned seed = (unsigned)w->index * 7919u + 1;
    for (int k = 0; k < KEYS_PER_THREAD; k++)
        w->expected[k] = -1;
    while (wall_ms() < atomic_load(&stop_at_ms))
        operate(w, (int)(rand_r(&seed) % KEYS_PER_THREAD));
    for (int i = 0; i < MAX_CONNS; i++)
        redisFree(w->conns[i].ctx);
    return NULL;
}

static void on_term(int sig)
{
    (void)sig;
    atomic_store(&stop_at_ms, 0);
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: cluster_probe <redis-cluster:// URL> <threads> <seconds> <tag> "
                        "[hash tags]\n");
        return 2;
    }
    struct fg_error err = {0};
    if (redis_url_parse(argv[1], &url, &err) != 0 || !url.cluster) {
        fprintf(stderr, "cluster_probe: %s\n", err.msg[0] ? err.msg : "not a cluster URL");
        return 2;
    }
    int nthreads = atoi(argv[2]);
    atomic_store(&stop_at_ms, wall_ms() + (long long)(atof(argv[3]) * 1000));
    signal(SIGTERM, on_term);
    tag = argv[4];
    for (char *t = argc == 6 ? strtok(argv[5], ",") : NULL; t != NULL && nhot < 64;
         t = strtok(NULL, ","))
        hot[nhot++] = t;
    route = route_new(&url);
    struct worker *workers = calloc((size_t)nthreads, sizeof *workers);
    for (int i = 0; i < nthreads; i++) {
        workers[i].index = i;
        pthread_create(&workers[i].thread, NULL, work, &workers[i]);
    }
    long ok = 0, unavailable = 0, internal = 0, behind = 0, ahead = 0;
    long long first = 0, last = 0;
    for (int i = 0; i < nthreads; i++) {
        struct worker *w = &workers[i];
        pthread_join(w->thread, NULL);
        ok += w->ok;
        unavailable += w->unavailable;
        internal += w->internal;
        behind += w->behind;
        ahead += w->ahead;
        if (w->first_fail_ms && (first == 0 || w->first_fail_ms < first))
            first = w->first_fail_ms;
        if (w->last_fail_ms > last)
            last = w->last_fail_ms;
    }
    printf(
        "{\"ok\": %ld, \"unavailable\": %ld, \"internal\": %ld, \"behind\": %ld, \"ahead\": %ld, "
        "\"first_fail_ms\": %lld, \"last_fail_ms\": %lld}\n",
        ok, unavailable, internal, behind, ahead, first, last);
    free(workers);
    route_free(route);
    return 0;
}
