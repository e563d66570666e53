/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pylock_pairs.c - redis-py's Lock in C, for as many connections as a Python
 * client cannot drive on this machine: N threads, one connection each,
 * looping acquire -> release for a fixed time with exactly the commands of
 * redis-py 4.3's Redis.lock(name, timeout=10): SET name token NX PX 10000,
 * then EVALSHA of its release script (GET, compare, DEL) with the same token.
 * Each connection has a lock name of its own. Prints pairs per second and
 * the pairs that failed.
 *
 * usage: pylock_pairs PORT CONNECTIONS SECONDS PREFIX
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* redis-py 4.3.4's Lock.LUA_RELEASE_SCRIPT, byte for byte. */
static const char release_script[] = "\n        local token = redis.call('get', KEYS[1])\n"
                                     "        if not token or token ~= ARGV[1] then\n"
                                     "            return 0\n"
                                     "        end\n"
                                     "        redis.call('del', KEYS[1])\n"
                                     "        return 1\n    ";

struct bench {
    int port, seconds;
    const char *prefix;
    char sha[41];
    atomic_long pairs, failures;
};

struct worker {
    struct bench *b;
    int id;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static redisContext *connect_or_exit(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (c == NULL || c->err) {
        fprintf(stderr, "pylock_pairs: cannot connect\n");
        exit(1);
    }
    return c;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    redisContext *c = connect_or_exit(b->port);
    char name[200], token[33];
    snprintf(name, sizeof name, "%s-%d", b->prefix, w->id);
    unsigned seed = (unsigned)w->id * 2654435761u;
    double end = now_s() + b->seconds;
    while (now_s() < end) {
        for (int i = 0; i < 32; i++) /* uuid1().hex: 32 hex digits */
            token[i] = "0123456789abcdef"[rand_r(&seed) & 15];
        token[32] = '\0';
        redisReply *r = redisCommand(c, "SET %s %s NX PX 10000", name, token);
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (ok) {
            r = redisCommand(c, "EVALSHA %s 1 %s %s", b->sha, name, token);
            ok = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
            freeReplyObject(r);
        }
        atomic_fetch_add(ok ? &b->pairs : &b->failures, 1);
        if (c->err)
            break;
    }
    redisFree(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: pylock_pairs PORT CONNECTIONS SECONDS PREFIX\n");
        return 2;
    }
    struct bench b = {.port = atoi(argv[1]), .seconds = atoi(argv[3]), .prefix = argv[4]};
    redisContext *c = connect_or_exit(b.port);
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", release_script);
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40) {
        fprintf(stderr, "pylock_pairs: SCRIPT LOAD failed\n");
        return 1;
    }
    memcpy(b.sha, r->str, 41);
    freeReplyObject(r);
    redisFree(c);
    int n = atoi(argv[2]);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    struct worker *workers = calloc((size_t)n, sizeof *workers);
    for (int i = 0; i < n; i++) {
        workers[i] = (struct worker){&b, i};
        pthread_create(&threads[i], NULL, run, &workers[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    printf("%.0f pairs/s, %ld failed\n", (double)atomic_load(&b.pairs) / b.seconds,
           atomic_load(&b.failures));
    free(threads);
    free(workers);
    return 0;
}
