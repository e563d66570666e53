/* SPDX-License-Identifier: Apache-2.0 */
/*
 * raw_pairs.c - the Redis-only baseline of the lock benchmark: N connections,
 * each running acquire-then-release pairs with the gateway's own scripts
 * (FCALL of the functions of lua/lock_acquire.lua and lua/lock_release.lua,
 * loaded first), for a fixed time. Prints pairs per second. The functions come
 * from the build's script table (lua_scripts.c), the keys from the gateway's
 * own lease/lease_keys.c, and the arguments are placed by the generated index
 * constants (lua_scripts.h), so the calls are the gateway's and cannot drift
 * from the scripts; built by bench/locks.sh against the build's generated/.
 *
 * usage: raw_pairs PORT CONNECTIONS SECONDS distinct|shared [semaphore|redis-py]
 *        raw_pairs acquire-args NAME LEASE
 * With "shared" every connection uses one lock name and tries once (a busy
 * answer counts as an attempt, not a pair), which is what a raw client without
 * a queue can do. With "semaphore" the pairs are those of lua/sem_acquire.lua
 * and lua/sem_release.lua on semaphores of limit 2 (http_pairs's
 * BENCH_SEMAPHORE_LIMIT=2) instead. With "redis-py" they are what redis-py
 * 4.3's Redis.lock(name, timeout=10) sends instead, the direct path the
 * gateway is compared with (bench/redis_cpu.py): SET name token NX PX 10000,
 * then EVALSHA of its release script (GET, compare, DEL) with the same token
 * (32 hex digits, as its uuid1().hex). "acquire-args" prints the function,
 * numkeys, KEYS and ARGV of an uncontended lock acquire of NAME by LEASE, one
 * a line (for redis-benchmark).
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "embedded.h"
#include "fglimits.h"
#include "lease/lease_keys.h"
#include "lease/lease_result.h"
#include "lua_scripts.h"

/* The acquire's and the release's arguments, as the gateway sends them with its defaults. */
#define RAW_TTL_MS      "10000"
#define RAW_CLAIM_MS    FG_STR(DEFAULT_WAITER_LEASE_MS)
#define RAW_INSTANCE    "rawinstance0000000000000000000000"
#define RAW_ATTACH      "rawattach00000000000000000000000"
#define RAW_MAX_WAITERS FG_STR(DEFAULT_MAX_WAITERS_PER_LOCK)
#define RAW_RID_TTL_MS  "1860000"
#define RAW_SEM_LIMIT   "2"
#define MAX_CALL_ARGS   (3 + LIB_SEM_NKEYS + SEM_ACQUIRE_NARGV)

/* redis-py 4.3.4's Lock.LUA_RELEASE_SCRIPT, byte for byte. */
static const char redis_py_release[] = "\n        local token = redis.call('get', KEYS[1])\n"
                                       "        if not token or token ~= ARGV[1] then\n"
                                       "            return 0\n"
                                       "        end\n"
                                       "        redis.call('del', KEYS[1])\n"
                                       "        return 1\n    ";

struct bench {
    int port;
    int seconds;
    int shared;
    int semaphore;
    int redis_py;     /* redis-py's Lock instead of the gateway's scripts */
    char release[41]; /* with redis_py: the SHA1 of its release script */
    atomic_long pairs;
    atomic_long busy;
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
        fprintf(stderr, "raw_pairs: cannot connect\n");
        exit(1);
    }
    return c;
}

/* Loads the function library of script, as the gateway does when Redis lacks it. */
static void load_or_exit(redisContext *c, enum fg_script script)
{
    redisReply *r = redisCommand(c, "FUNCTION LOAD %s", lua_scripts[script].source);
    if (r == NULL || (r->type == REDIS_REPLY_ERROR && strstr(r->str, "already exists") == NULL)) {
        fprintf(stderr, "raw_pairs: cannot load %s: %s\n", lua_scripts[script].name,
                r ? r->str : c->errstr);
        exit(1);
    }
    freeReplyObject(r);
}

/* Fills args with the arguments that the acquire scripts of locks and semaphores share, for an
 * uncontended acquire (wait "0") by lease; script is LOCK_ACQUIRE or SEM_ACQUIRE, whose generated
 * constants place them. */
#define SHARED_ACQUIRE_ARGS(script, args, name, lease)                                             \
    do {                                                                                           \
        (args)[script##_ARGV_NAME] = (name);                                                       \
        (args)[script##_ARGV_LEASE] = (lease);                                                     \
        (args)[script##_ARGV_REQUEST_ID] = "";                                                     \
        (args)[script##_ARGV_TTL_MS] = RAW_TTL_MS;                                                 \
        (args)[script##_ARGV_MAX_HOLD_MS] = FG_STR(DEFAULT_MAX_HOLD_MS);                           \
        (args)[script##_ARGV_OWNER] = "";                                                          \
        (args)[script##_ARGV_WAIT] = "0";                                                          \
        (args)[script##_ARGV_INSTANCE] = RAW_INSTANCE;                                             \
        (args)[script##_ARGV_ATTACH] = RAW_ATTACH;                                                 \
        (args)[script##_ARGV_CLAIM_MS] = RAW_CLAIM_MS;                                             \
        (args)[script##_ARGV_MAX_WAITERS] = RAW_MAX_WAITERS;                                       \
        (args)[script##_ARGV_REQUEST_ID_TTL_MS] = RAW_RID_TTL_MS;                                  \
    } while (0)

/* Fills args with the ARGV of an uncontended acquire of the lock by lease. */
static void acquire_args(const char **args, const char *name, const char *lease)
{
    SHARED_ACQUIRE_ARGS(LOCK_ACQUIRE, args, name, lease);
}

/* Fills args with the ARGV of an uncontended acquire of the semaphore by lease. */
static void sem_acquire_args(const char **args, const char *name, const char *lease)
{
    SHARED_ACQUIRE_ARGS(SEM_ACQUIRE, args, name, lease);
    args[SEM_ACQUIRE_ARGV_LIMIT] = RAW_SEM_LIMIT;
}

/* Fills args with the arguments that the release scripts of locks and semaphores share, for the
 * release of lease; script is LOCK_RELEASE or SEM_RELEASE. */
#define SHARED_RELEASE_ARGS(script, args, name, lease)                                             \
    do {                                                                                           \
        (args)[script##_ARGV_NAME] = (name);                                                       \
        (args)[script##_ARGV_LEASE] = (lease);                                                     \
        (args)[script##_ARGV_CLAIM_MS] = RAW_CLAIM_MS;                                             \
        (args)[script##_ARGV_INSTANCE] = RAW_INSTANCE;                                             \
    } while (0)

/* Fills args with the ARGV of the release of the lock's lease. */
static void release_args(const char **args, const char *name, const char *lease)
{
    SHARED_RELEASE_ARGS(LOCK_RELEASE, args, name, lease);
    args[LOCK_RELEASE_ARGV_MARKER_MS] = FG_STR(LEASE_RELEASED_KEPT_MS);
}

/* Fills args with the ARGV of the release of the semaphore's lease. */
static void sem_release_args(const char **args, const char *name, const char *lease)
{
    SHARED_RELEASE_ARGS(SEM_RELEASE, args, name, lease);
}

/* Fills cmd with FCALL of script, the keys k and its arguments args; returns the count. */
static int script_call(const char **cmd, enum fg_script script, const struct lease_keys *k,
                       const char *const *args, char *numkeys, size_t cap)
{
    snprintf(numkeys, cap, "%zu", k->nkeys);
    int n = 0;
    cmd[n++] = "FCALL";
    cmd[n++] = lua_scripts[script].function;
    cmd[n++] = numkeys;
    for (size_t i = 0; i < k->nkeys; i++)
        cmd[n++] = k->key[i];
    for (size_t i = 0; i < lua_scripts[script].nargv; i++)
        cmd[n++] = args[i];
    return n;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    redisContext *c = connect_or_exit(b->port);
    char name[64], lease[LEASE_ID_LEN + 1], numkeys[16];
    snprintf(name, sizeof name, b->shared ? "rawbench" : "rawbench-%d", w->id);
    struct lease_keys k;
    const char *acq_args[SEM_ACQUIRE_NARGV], *rel_args[SEM_ACQUIRE_NARGV];
    enum fg_script acquire = SCRIPT_LOCK_ACQUIRE, release = SCRIPT_LOCK_RELEASE;
    if (b->semaphore) {
        acquire = SCRIPT_SEM_ACQUIRE;
        release = SCRIPT_SEM_RELEASE;
        lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
        sem_acquire_args(acq_args, name, lease);
        sem_release_args(rel_args, name, lease);
    } else {
        lease_keys_init(&k, LEASE_KIND_LOCK, name);
        acquire_args(acq_args, name, lease);
        release_args(rel_args, name, lease);
    }
    const char *acq[MAX_CALL_ARGS], *rel[MAX_CALL_ARGS];
    int nacq = script_call(acq, acquire, &k, acq_args, numkeys, sizeof numkeys);
    int nrel = script_call(rel, release, &k, rel_args, numkeys, sizeof numkeys);
    if (b->redis_py) {
        const char *set[] = {"SET", name, lease, "NX", "PX", "10000"};
        const char *evalsha[] = {"EVALSHA", b->release, "1", name, lease};
        nacq = (int)(sizeof set / sizeof set[0]);
        nrel = (int)(sizeof evalsha / sizeof evalsha[0]);
        memcpy(acq, set, sizeof set);
        memcpy(rel, evalsha, sizeof evalsha);
    }
    double end = now_s() + b->seconds;
    for (long n = 0; now_s() < end; n++) {
        snprintf(lease, sizeof lease, "%08x%08x%016lx", w->id, (unsigned)rand(), n);
        redisReply *r = redisCommandArgv(c, nacq, acq, NULL);
        int granted =
            r && (b->redis_py ? r->type == REDIS_REPLY_STATUS
                              : r->type == REDIS_REPLY_STRING && strstr(r->str, "granted"));
        freeReplyObject(r);
        if (!granted) {
            atomic_fetch_add(&b->busy, 1);
            continue;
        }
        r = redisCommandArgv(c, nrel, rel, NULL);
        freeReplyObject(r);
        atomic_fetch_add(&b->pairs, 1);
    }
    redisFree(c);
    return NULL;
}

/* Prints the function, numkeys, KEYS and ARGV of an uncontended acquire, one a line. */
static int print_acquire(const char *name, const char *lease)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    const char *args[LOCK_ACQUIRE_NARGV];
    acquire_args(args, name, lease);
    printf("%s\n%zu\n", lua_scripts[SCRIPT_LOCK_ACQUIRE].function, k.nkeys);
    for (size_t i = 0; i < k.nkeys; i++)
        printf("%s\n", k.key[i]);
    for (size_t i = 0; i < LOCK_ACQUIRE_NARGV; i++)
        printf("%s\n", args[i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "acquire-args") == 0)
        return print_acquire(argv[2], argv[3]);
    if (argc != 5 &&
        !(argc == 6 && (strcmp(argv[5], "semaphore") == 0 || strcmp(argv[5], "redis-py") == 0))) {
        fprintf(stderr, "usage: raw_pairs PORT CONNECTIONS SECONDS distinct|shared "
                        "[semaphore|redis-py]\n"
                        "       raw_pairs acquire-args NAME LEASE\n");
        return 1;
    }
    struct bench b = {.port = atoi(argv[1]),
                      .seconds = atoi(argv[3]),
                      .shared = strcmp(argv[4], "shared") == 0,
                      .semaphore = argc == 6 && strcmp(argv[5], "semaphore") == 0,
                      .redis_py = argc == 6 && strcmp(argv[5], "redis-py") == 0};
    redisContext *c = connect_or_exit(b.port);
    load_or_exit(c, b.semaphore ? SCRIPT_SEM_ACQUIRE : SCRIPT_LOCK_ACQUIRE);
    load_or_exit(c, b.semaphore ? SCRIPT_SEM_RELEASE : SCRIPT_LOCK_RELEASE);
    if (b.redis_py) {
        redisReply *r = redisCommand(c, "SCRIPT LOAD %s", redis_py_release);
        if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40) {
            fprintf(stderr, "raw_pairs: cannot load redis-py's release script\n");
            exit(1);
        }
        memcpy(b.release, r->str, 41);
        freeReplyObject(r);
    }
    redisFree(c);
    int n = atoi(argv[2]);
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
