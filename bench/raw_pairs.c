/* SPDX-License-Identifier: Apache-2.0 */
/*
 * raw_pairs.c - the Redis-only baseline of the lock benchmark: N connections,
 * each running acquire-then-release pairs with the gateway's own scripts, as
 * the gateway calls them: the first try (FCALL of lua/lock_acquire_fast.lua,
 * lua/lock_release_fast.lua), then the full script (lua/lock_acquire.lua,
 * lua/lock_release.lua) where the first try answers "contended"; loaded first,
 * for a fixed time. Prints pairs per second. The functions come from the
 * build's script table (lua_scripts.c), the keys from the gateway's own
 * lease/lease_keys.c, and the arguments are placed by the generated index
 * constants (lua_scripts.h), so the calls are the gateway's; an argument a
 * script gains that this client does not fill, and any answer it does not
 * expect (an error, "nofence", a release that did not release), stop it with
 * the answer rather than count as busy. Built by bench/common.sh against the
 * build's generated/.
 *
 * usage: raw_pairs PORT|SOCKET CONNECTIONS SECONDS distinct|shared [semaphore|redis-py]
 *        raw_pairs acquire-args NAME LEASE
 * With "shared" every connection uses one lock name and tries once (a busy
 * answer counts as an attempt, not a pair), which is what a raw client without
 * a queue can do. With "semaphore" the pairs are those of lua/sem_acquire*.lua
 * and lua/sem_release*.lua on semaphores of limit 2 (http_pairs's
 * BENCH_SEMAPHORE_LIMIT=2) instead. With "redis-py" they are what redis-py
 * 4.3's Redis.lock(name, timeout=10) sends instead, the direct path the
 * gateway is compared with (bench/redis_cpu.py): SET name token NX PX 10000,
 * then EVALSHA of its release script (GET, compare, DEL) with the same token
 * (32 hex digits, as its uuid1().hex). "acquire-args" prints the function,
 * numkeys, KEYS and ARGV of lua/lock_acquire.lua's uncontended acquire of NAME
 * by LEASE, one a line (for redis-benchmark).
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
#define RAW_INSTANCE    "5241575041495253494e5354414e4345" /* hex, LEASE_ID_LEN, as the gateway's */
#define RAW_ATTACH      "52415750414952534154544143484944"
#define RAW_MAX_WAITERS FG_STR(DEFAULT_MAX_WAITERS_PER_LOCK)
#define RAW_RID_TTL_MS  "1860000"
#define RAW_SEM_LIMIT   "2"
#define RAW_MARK_MS     ""  /* one Redis: the gateway's beat alone marks it alive */
#define RAW_FENCE       "0" /* a release's: read by a retried release alone, which none here is */
/* The life of the lock's queue that an acquire with wait_ms 0 names (src/lease/lock.c queue_life):
 * a waiter lease, and two. */
#define RAW_QUEUE_MS      RAW_CLAIM_MS
#define RAW_QUEUE_KEEP_MS "6000"
_Static_assert(DEFAULT_WAITER_LEASE_MS == 3000, "RAW_QUEUE_KEEP_MS is two default waiter leases");
/* The holder record's tail that the first try of an acquire writes, of the lease (%s), as
 * lease_holder_tail (src/lease/lease_result.c) makes it: lease, ttl, max_hold, claimed, instance,
 * attach, the request_id's length (none) and the owner (none). */
#define RAW_TAIL_FORMAT                                                                            \
    "%s " RAW_TTL_MS " " FG_STR(DEFAULT_MAX_HOLD_MS) " 1 " RAW_INSTANCE " " RAW_ATTACH " 0 "
/* The most arguments a script called here takes: a lock's acquire (the life of its queue too). */
#define MAX_NARGV     LOCK_ACQUIRE_NARGV
#define MAX_CALL_ARGS (3 + LIB_SEM_NKEYS + MAX_NARGV)
_Static_assert(MAX_NARGV >= SEM_ACQUIRE_NARGV && MAX_NARGV >= LOCK_RELEASE_NARGV &&
                   MAX_NARGV >= SEM_RELEASE_NARGV,
               "the argument arrays are sized for a lock's acquire");

/* redis-py 4.3.4's Lock.LUA_RELEASE_SCRIPT, byte for byte. */
static const char redis_py_release[] = "\n        local token = redis.call('get', KEYS[1])\n"
                                       "        if not token or token ~= ARGV[1] then\n"
                                       "            return 0\n"
                                       "        end\n"
                                       "        redis.call('del', KEYS[1])\n"
                                       "        return 1\n    ";

struct bench {
    const char *server; /* a port on 127.0.0.1, or the path of a unix socket */
    double seconds;
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

static redisContext *connect_or_exit(const char *server)
{
    redisContext *c =
        server[0] == '/' ? redisConnectUnix(server) : redisConnect("127.0.0.1", atoi(server));
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
        (args)[script##_ARGV_MARK_MS] = RAW_MARK_MS;                                               \
    } while (0)

/* Fills args with the ARGV of an uncontended acquire of the lock by lease. */
static void acquire_args(const char **args, const char *name, const char *lease)
{
    SHARED_ACQUIRE_ARGS(LOCK_ACQUIRE, args, name, lease);
    args[LOCK_ACQUIRE_ARGV_QUEUE_MS] = RAW_QUEUE_MS;
    args[LOCK_ACQUIRE_ARGV_QUEUE_KEEP_MS] = RAW_QUEUE_KEEP_MS;
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
        (args)[script##_ARGV_FENCE] = RAW_FENCE;                                                   \
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

/* Exits when an argument script takes was left unset in args: one added to the script that this
 * client does not fill yet. */
static void filled_or_exit(enum fg_script script, const char *const *args)
{
    for (size_t i = 0; i < lua_scripts[script].nargv; i++)
        if (args[i] == NULL) {
            fprintf(stderr, "raw_pairs: %s's argument %zu is not filled\n",
                    lua_scripts[script].name, i + 1);
            exit(1);
        }
}

/* One script call, ready to send: FCALL, the function, numkeys, the keys and the arguments. */
struct call {
    const char *argv[MAX_CALL_ARGS];
    int argc;
    char numkeys[16];
};

/* Prepares call as FCALL of script with its nkeys keys and its arguments args. */
static void prepare(struct call *call, enum fg_script script, const char *const *keys, size_t nkeys,
                    const char *const *args)
{
    filled_or_exit(script, args);
    snprintf(call->numkeys, sizeof call->numkeys, "%zu", nkeys);
    int n = 0;
    call->argv[n++] = "FCALL";
    call->argv[n++] = lua_scripts[script].function;
    call->argv[n++] = call->numkeys;
    for (size_t i = 0; i < nkeys; i++)
        call->argv[n++] = keys[i];
    for (size_t i = 0; i < lua_scripts[script].nargv; i++)
        call->argv[n++] = args[i];
    call->argc = n;
}

/* The calls of one connection's pairs on its name: the first tries the gateway makes of an
 * uncontended acquire and release (lua/lock_acquire_fast.lua and the like), the full scripts it
 * runs when a first try answers "contended" (without waiting here), or redis-py's commands. The
 * arguments point into lease and tail, which change with each pair. */
struct pair_calls {
    struct call acquire_fast, acquire, release_fast, release;
    struct lease_keys k;
    const char *fast_keys[2][LIB_SEM_NKEYS];
    const char *release_keys[LIB_SEM_NKEYS + 1]; /* the full release's: k's and the moved end's */
    char moved_end[LEASE_MOVED_END_MAX];
    char rid_moved[LEASE_RID_MOVED_MAX]; /* of no request id: named by the acquires, read by none */
    const char *acquire_keys[LIB_SEM_NKEYS + 1]; /* the full acquire's: k's and rid_moved */
    const char *args[4][MAX_NARGV];
};

/* Fills p->acquire_keys as src/lease/lock.c and semaphore.c do for a full
 * acquire without a request id: the keys of k, then p->rid_moved. Returns how
 * many. */
static size_t acquire_keys(struct pair_calls *p)
{
    memcpy(p->acquire_keys, p->k.key, p->k.nkeys * sizeof p->acquire_keys[0]);
    p->acquire_keys[p->k.nkeys] = p->rid_moved;
    return p->k.nkeys + 1;
}

/* Fills p->release_keys as src/lease/lock.c and semaphore.c do for a full
 * release: the keys of k, then the key of the end's record moved from
 * record_key (lease_keys_moved_end) for the fence RAW_FENCE. Returns how many. */
static size_t release_keys(struct pair_calls *p, const char *record_key)
{
    memcpy(p->release_keys, p->k.key, p->k.nkeys * sizeof p->release_keys[0]);
    lease_keys_moved_end(record_key, atoll(RAW_FENCE), p->moved_end);
    p->release_keys[p->k.nkeys] = p->moved_end;
    return p->k.nkeys + 1;
}

static void lock_calls(struct pair_calls *p, const char *name, const char *lease, const char *tail)
{
    lease_keys_init(&p->k, LEASE_KIND_LOCK, name);
    lease_keys_rid_moved(&p->k, "", p->rid_moved);
    lease_keys_lock_acquire_fast(&p->k, p->rid_moved, p->fast_keys[0]);
    lease_keys_lock_release_fast(&p->k, p->fast_keys[1]);
    p->args[0][LOCK_ACQUIRE_FAST_ARGV_NAME] = name;
    p->args[0][LOCK_ACQUIRE_FAST_ARGV_TTL_MS] = RAW_TTL_MS;
    p->args[0][LOCK_ACQUIRE_FAST_ARGV_TAIL] = tail;
    p->args[0][LOCK_ACQUIRE_FAST_ARGV_REQUEST_ID] = "";
    p->args[2][LOCK_RELEASE_FAST_ARGV_NAME] = name;
    p->args[2][LOCK_RELEASE_FAST_ARGV_LEASE] = lease;
    acquire_args(p->args[1], name, lease);
    release_args(p->args[3], name, lease);
    prepare(&p->acquire_fast, SCRIPT_LOCK_ACQUIRE_FAST, p->fast_keys[0],
            lease_keys_of_request(LOCK_ACQUIRE_FAST_NKEYS, LOCK_ACQUIRE_FAST_KEY_RID_UNTIL, ""),
            p->args[0]);
    prepare(&p->acquire, SCRIPT_LOCK_ACQUIRE, p->acquire_keys, acquire_keys(p), p->args[1]);
    prepare(&p->release_fast, SCRIPT_LOCK_RELEASE_FAST, p->fast_keys[1], LOCK_RELEASE_FAST_NKEYS,
            p->args[2]);
    prepare(&p->release, SCRIPT_LOCK_RELEASE, p->release_keys,
            release_keys(p, p->k.key[LIB_LOCK_KEY_HOLDER]), p->args[3]);
}

/* The semaphore's, with the keys of its first tries picked as src/lease/semaphore.c picks them. */
static void sem_calls(struct pair_calls *p, const char *name, const char *lease, const char *tail)
{
    lease_keys_init(&p->k, LEASE_KIND_SEMAPHORE, name);
    const char **ak = p->fast_keys[0], **rk = p->fast_keys[1], *const *key = p->k.key;
    lease_keys_rid_moved(&p->k, "", p->rid_moved);
    lease_keys_sem_acquire_fast(&p->k, p->rid_moved, ak);
    rk[SEM_RELEASE_FAST_KEY_LIMIT] = key[LIB_SEM_KEY_LIMIT];
    rk[SEM_RELEASE_FAST_KEY_WATCHED] = key[LIB_SEM_KEY_WATCHED];
    rk[SEM_RELEASE_FAST_KEY_INDEX] = key[LIB_SEM_KEY_INDEX];
    p->args[0][SEM_ACQUIRE_FAST_ARGV_NAME] = name;
    p->args[0][SEM_ACQUIRE_FAST_ARGV_TTL_MS] = RAW_TTL_MS;
    p->args[0][SEM_ACQUIRE_FAST_ARGV_LIMIT] = RAW_SEM_LIMIT;
    p->args[0][SEM_ACQUIRE_FAST_ARGV_TAIL] = tail;
    p->args[0][SEM_ACQUIRE_FAST_ARGV_REQUEST_ID] = "";
    p->args[2][SEM_RELEASE_FAST_ARGV_NAME] = name;
    p->args[2][SEM_RELEASE_FAST_ARGV_LEASE] = lease;
    sem_acquire_args(p->args[1], name, lease);
    sem_release_args(p->args[3], name, lease);
    prepare(&p->acquire_fast, SCRIPT_SEM_ACQUIRE_FAST, ak,
            lease_keys_of_request(SEM_ACQUIRE_FAST_NKEYS, SEM_ACQUIRE_FAST_KEY_RID_UNTIL, ""),
            p->args[0]);
    prepare(&p->acquire, SCRIPT_SEM_ACQUIRE, p->acquire_keys, acquire_keys(p), p->args[1]);
    prepare(&p->release_fast, SCRIPT_SEM_RELEASE_FAST, rk, SEM_RELEASE_FAST_NKEYS, p->args[2]);
    prepare(&p->release, SCRIPT_SEM_RELEASE, p->release_keys,
            release_keys(p, key[LIB_SEM_KEY_LIMIT]), p->args[3]);
}

/* Sends call on c and returns its reply (NULL when the connection failed). */
static redisReply *send_call(redisContext *c, struct call *call)
{
    return redisCommandArgv(c, call->argc, call->argv, NULL);
}

/* True if reply r is a script's answer whose first word is word. */
static int answers(const redisReply *r, const char *word)
{
    size_t n = strlen(word);
    return r && r->type == REDIS_REPLY_STRING && strncmp(r->str, word, n) == 0 &&
           (r->str[n] == '\0' || r->str[n] == ' ');
}

/* Exits with the reply r to what (an acquire or a release) that this client does not expect: an
 * error, or an answer of a script called with arguments it does not take, which counted as a busy
 * attempt would go unseen. */
static void unexpected(const char *what, redisContext *c, redisReply *r)
{
    fprintf(stderr, "raw_pairs: %s answered %s\n", what,
            r == NULL                       ? c->errstr
            : r->type == REDIS_REPLY_STRING ? r->str
            : r->type == REDIS_REPLY_ERROR  ? r->str
                                            : "a reply of another type");
    exit(1);
}

/* One acquire as the gateway makes it: the first try, the full script if that answers "contended".
 * Returns 1 when granted, 0 when busy (the shared name held). */
static int acquire(redisContext *c, struct pair_calls *p)
{
    redisReply *r = send_call(c, &p->acquire_fast);
    if (answers(r, "contended")) {
        freeReplyObject(r);
        r = send_call(c, &p->acquire);
    }
    int granted = answers(r, "granted");
    if (!granted && !answers(r, "busy"))
        unexpected("an acquire", c, r);
    freeReplyObject(r);
    return granted;
}

/* The release of the lease acquire granted, as the gateway makes it. */
static void release(redisContext *c, struct pair_calls *p)
{
    redisReply *r = send_call(c, &p->release_fast);
    if (answers(r, "contended")) {
        freeReplyObject(r);
        r = send_call(c, &p->release);
    }
    if (!answers(r, "released"))
        unexpected("a release", c, r);
    freeReplyObject(r);
}

/* redis-py's acquire (SET NX PX): 1 when set, 0 when the name is held. */
static int redis_py_acquire(redisContext *c, const char **set)
{
    redisReply *r = redisCommandArgv(c, 6, set, NULL);
    int granted = r && r->type == REDIS_REPLY_STATUS;
    if (!granted && !(r && r->type == REDIS_REPLY_NIL))
        unexpected("SET NX PX", c, r);
    freeReplyObject(r);
    return granted;
}

/* redis-py's release (EVALSHA of its script), which answers 1 when it deleted the lease's key. */
static void redis_py_release_call(redisContext *c, const char **evalsha)
{
    redisReply *r = redisCommandArgv(c, 5, evalsha, NULL);
    if (!(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1))
        unexpected("redis-py's release", c, r);
    freeReplyObject(r);
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    redisContext *c = connect_or_exit(b->server);
    char name[64], lease[LEASE_ID_LEN + 1] = "", tail[LEASE_HOLDER_TAIL_MAX];
    snprintf(name, sizeof name, b->shared ? "rawbench" : "rawbench-%d", w->id);
    struct pair_calls *p = calloc(1, sizeof *p);
    if (b->semaphore)
        sem_calls(p, name, lease, tail);
    else
        lock_calls(p, name, lease, tail);
    const char *set[] = {"SET", name, lease, "NX", "PX", "10000"};
    const char *evalsha[] = {"EVALSHA", b->release, "1", name, lease};
    double end = now_s() + b->seconds;
    for (long n = 0; now_s() < end; n++) {
        snprintf(lease, sizeof lease, "%08x%08x%016lx", w->id, (unsigned)rand(), n);
        snprintf(tail, sizeof tail, RAW_TAIL_FORMAT, lease);
        if (!(b->redis_py ? redis_py_acquire(c, set) : acquire(c, p))) {
            atomic_fetch_add(&b->busy, 1);
            continue;
        }
        if (b->redis_py)
            redis_py_release_call(c, evalsha);
        else
            release(c, p);
        atomic_fetch_add(&b->pairs, 1);
    }
    free(p);
    redisFree(c);
    return NULL;
}

/* Prints the function, numkeys, KEYS and ARGV of an uncontended acquire, one a line. */
static int print_acquire(const char *name, const char *lease)
{
    struct pair_calls p = {0};
    lease_keys_init(&p.k, LEASE_KIND_LOCK, name);
    lease_keys_rid_moved(&p.k, "", p.rid_moved);
    const char *args[LOCK_ACQUIRE_NARGV] = {0};
    acquire_args(args, name, lease);
    struct call call;
    prepare(&call, SCRIPT_LOCK_ACQUIRE, p.acquire_keys, acquire_keys(&p), args);
    for (int i = 1; i < call.argc; i++)
        printf("%s\n", call.argv[i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "acquire-args") == 0)
        return print_acquire(argv[2], argv[3]);
    if (argc != 5 &&
        !(argc == 6 && (strcmp(argv[5], "semaphore") == 0 || strcmp(argv[5], "redis-py") == 0))) {
        fprintf(stderr, "usage: raw_pairs PORT|SOCKET CONNECTIONS SECONDS distinct|shared "
                        "[semaphore|redis-py]\n"
                        "       raw_pairs acquire-args NAME LEASE\n");
        return 1;
    }
    struct bench b = {.server = argv[1],
                      .seconds = atof(argv[3]),
                      .shared = strcmp(argv[4], "shared") == 0,
                      .semaphore = argc == 6 && strcmp(argv[5], "semaphore") == 0,
                      .redis_py = argc == 6 && strcmp(argv[5], "redis-py") == 0};
    redisContext *c = connect_or_exit(b.server);
    static const enum fg_script lock_scripts[] = {SCRIPT_LOCK_ACQUIRE_FAST, SCRIPT_LOCK_ACQUIRE,
                                                  SCRIPT_LOCK_RELEASE_FAST, SCRIPT_LOCK_RELEASE};
    static const enum fg_script sem_scripts[] = {SCRIPT_SEM_ACQUIRE_FAST, SCRIPT_SEM_ACQUIRE,
                                                 SCRIPT_SEM_RELEASE_FAST, SCRIPT_SEM_RELEASE};
    for (size_t i = 0; i < 4; i++)
        load_or_exit(c, b.semaphore ? sem_scripts[i] : lock_scripts[i]);
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
