/* SPDX-License-Identifier: Apache-2.0 */
/*
 * raw_pairs.c - the Redis-only baseline of the lock benchmark: N connections,
 * each running acquire-then-release pairs with the gateway's own scripts
 * (EVALSHA of lua/lock_acquire.lua and lua/lock_release.lua, same keys and
 * arguments the gateway sends), for a fixed time. Prints pairs per second.
 *
 * usage: raw_pairs PORT ACQUIRE_SHA RELEASE_SHA CONNECTIONS SECONDS distinct|shared
 * With "shared" every connection uses one lock name and tries once (a busy
 * answer counts as an attempt, not a pair), which is what a raw client without
 * a queue can do.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bench {
    int port;
    const char *acquire_sha, *release_sha;
    int seconds;
    int shared;
    atomic_long pairs;
    atomic_long busy;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct worker {
    struct bench *b;
    int id;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    redisContext *c = redisConnect("127.0.0.1", b->port);
    if (c == NULL || c->err) {
        fprintf(stderr, "raw_pairs: cannot connect\n");
        exit(1);
    }
    char name[64], base[96], h[112], q[112], wk[112], lease[40];
    snprintf(name, sizeof name, b->shared ? "rawbench" : "rawbench-%d", w->id);
    snprintf(base, sizeof base, "fg:lk:{%s}:", name);
    snprintf(h, sizeof h, "%sh", base);
    snprintf(q, sizeof q, "%sq", base);
    snprintf(wk, sizeof wk, "%sw", base);
    double end = now_s() + b->seconds;
    for (long n = 0; now_s() < end; n++) {
        snprintf(lease, sizeof lease, "%08x%08x%016lx", w->id, (unsigned)rand(), n);
        const char *acq[] = {"EVALSHA", b->acquire_sha, "4", h, q, wk, "fg:fence", base, name,
                             lease, "", "10000", "1800000", "", "0", "rawinstance", "", "3000",
                             "10000", "1860000"};
        redisReply *r = redisCommandArgv(c, 20, acq, NULL);
        int granted = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "granted");
        freeReplyObject(r);
        if (!granted) {
            atomic_fetch_add(&b->busy, 1);
            continue;
        }
        const char *rel[] = {"EVALSHA", b->release_sha, "4", h, q, wk, "fg:fence", base, name,
                             lease, "3000", "3600000"};
        r = redisCommandArgv(c, 12, rel, NULL);
        freeReplyObject(r);
        atomic_fetch_add(&b->pairs, 1);
    }
    redisFree(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: raw_pairs PORT ACQUIRE_SHA RELEASE_SHA CONNECTIONS SECONDS "
                        "distinct|shared\n");
        return 1;
    }
    struct bench b = {.port = atoi(argv[1]),
                      .acquire_sha = argv[2],
                      .release_sha = argv[3],
                      .seconds = atoi(argv[5]),
                      .shared = strcmp(argv[6], "shared") == 0};
    int n = atoi(argv[4]);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    struct worker *workers = calloc((size_t)n, sizeof *workers);
    double start = now_s();
    for (int i = 0; i < n; i++) {
        workers[i] = (struct worker){&b, i};
        pthread_create(&threads[i], NULL, run, &workers[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    double elapsed = now_s() - start;
    printf("%.0f pairs/s (%ld pairs, %ld busy attempts, %.1f s)\n", (double)b.pairs / elapsed,
           (long)b.pairs, (long)b.busy, elapsed);
    free(threads);
    free(workers);
    return 0;
}
