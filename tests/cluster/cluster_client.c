/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster_client.c - the gateway's own Redis client (store/backend/redis.c) driven
 * against the cluster lab with a redis-cluster:// URL: threads that run the
 * lock status script (lua/lock_status.lua, whose keys share the lock's hash
 * tag) on names the lab seeded, each with a known number of waiters, and check
 * every answer; one thread also checks readiness (PING on every primary) twice
 * a second. Prints one JSON line: answers, answers that read a wrong count,
 * 503s (and how many of them TRYAGAIN: the keys of one call split by a slot
 * migration), internal errors, readiness checks passed and failed, and the
 * wall-clock times of the first and last 503.
 *
 * Usage: cluster_client <redis-cluster:// URL> <threads> <seconds> <name>=<waiters>...
 * SIGTERM ends the run early (the summary is printed all the same).
 * cluster_client --slot-tags prints the gateway's slot tag table instead
 * (store/backend/key_slot.h), one tag a line in slot order, for the lab to check
 * against CLUSTER KEYSLOT.
 * cluster_client --follow <URL> <channel> <seconds> follows the shard
 * channels of <channel> through redis_subscribe (one per slot, each on its
 * owner) and prints the numbers of the messages "m<number>" it heard, how
 * many messages came, and the rounds of (re)subscriptions.
 * cluster_client --pairs <URL> <threads> <seconds> [<pairs a second a thread>]
 * drives uncontended lock pairs (lua/lock_acquire_fast.lua then
 * lua/lock_release_fast.lua: what the gateway runs for a pair nobody
 * contends, its keys made as lock.c makes them) on random names and prints
 * how many were granted and released; on a redis-cluster:// URL with the
 * per-slot layout of lease_keys.h, the keys shared by all leases (fence
 * sequence and limit, gateways, listing index, revoked set) those of the
 * lock's slot, "<key>:{T(s)}" (docs/cluster.md), every slot's sequence
 * raised first (its origin stamped with the run_id of the node that runs the
 * raise): what the cluster layout costs Redis per pair, measured by the lab's
 * bench (bench/cluster_cpu.py) against a single Redis with the same client.
 * With FG_CLUSTER_PG_DSN (a Postgres) the sequences are not raised first:
 * a first try that finds no fence to issue has its slot's sequence recovered
 * as the gateway does (lease/fence.c fence_recover_lease, from the one
 * Postgres reservation), then tries again; the JSON also says how many
 * recoveries ran and how many fences were granted twice. FG_CLUSTER_NAMES=N
 * has each thread use N names of its own again and again instead of random
 * ones (their slots' sequences then go on across a failover);
 * FG_CLUSTER_PAIR_NAMES=a,b,... has the threads take those names in turn
 * (names the lab chose in the slots of one node); FG_CLUSTER_PAIRS_UNTIL=N
 * ends the run once N pairs are done (the seconds still bound it).
 * cluster_client --watched <URL> <count> follows CHANNEL_ENDED
 * (redis_subscribe: on a cluster one shard channel per slot) and runs count
 * such pairs, each with lua/lock_watch.lua between acquire and release, so
 * that each release publishes its end (lib_lease.lua publish: SPUBLISH on the
 * lock's slot on a cluster); prints the pairs done and the ends heard.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "embedded.h"
#include "lease/fence.h"
#include "lease/lease_answer.h"
#include "lease/lease_keys.h"
#include "lua_scripts.h"
#include "store/backend/key_slot.h"
#include "store/backend/pg.h"
#include "store/backend/redis.h"
#include "util/clock.h"

#define MAX_NAMES 4096
#define LOG_FIRST                                                                                  \
    3 /* failures of each kind a thread prints (stderr is a pipe the lab reads at the end) */

struct name {
    const char *text;
    long long waiters;
};

struct worker {
    pthread_t thread;
    unsigned seed;
    bool pings;
    long ok, wrong, unavailable, tryagain, internal, ready, not_ready;
    long long first_fail_ms, last_fail_ms;
};

static struct name names[MAX_NAMES];
static int nnames;
static atomic_llong stop_at_ms;

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_term(int sig)
{
    (void)sig;
    atomic_store(&stop_at_ms, 0);
}

static void note_failure(struct worker *w, const struct fg_error *err)
{
    if (err->code == FG_ERR_BACKEND_UNAVAILABLE) {
        w->unavailable++;
        long long now = wall_ms();
        if (w->first_fail_ms == 0)
            w->first_fail_ms = now;
        w->last_fail_ms = now;
        if (strstr(err->msg, "TRYAGAIN") != NULL)
            w->tryagain++;
        else if (w->unavailable - w->tryagain <= LOG_FIRST)
            fprintf(stderr, "client: unavailable: %s\n", err->msg);
    } else if (++w->internal <= LOG_FIRST) {
        fprintf(stderr, "client: internal: %s\n", err->msg);
    }
}

/* One status call on a random name; checks its count of waiters. */
static void status_once(struct worker *w)
{
    const struct name *n = &names[rand_r(&w->seed) % (unsigned)nnames];
    char holder[256], queue[256], waiters[256];
    snprintf(holder, sizeof holder, "fg:lk:{%s}:h", n->text);
    snprintf(queue, sizeof queue, "fg:lk:{%s}:q", n->text);
    snprintf(waiters, sizeof waiters, "fg:lk:{%s}:w", n->text);
    const char *keys[LOCK_STATUS_NKEYS];
    keys[LOCK_STATUS_KEY_HOLDER] = holder;
    keys[LOCK_STATUS_KEY_QUEUE] = queue;
    keys[LOCK_STATUS_KEY_WAITERS] = waiters;
    const char *argv[LOCK_STATUS_NARGV] = {[LOCK_STATUS_ARGV_WAITERS] = "0"};
    struct fg_error err = {0};
    json_t *out = NULL;
    if (redis_script(SCRIPT_LOCK_STATUS, keys, argv, &out, &err) != 0) {
        note_failure(w, &err);
        return;
    }
    json_t *waiting = json_object_get(out, "waiting");
    if (json_is_integer(waiting) && json_integer_value(waiting) == n->waiters &&
        json_is_false(json_object_get(out, "held"))) {
        w->ok++;
    } else if (++w->wrong <= LOG_FIRST) {
        char *text = json_dumps(out, JSON_COMPACT);
        fprintf(stderr, "client: %s should have %lld waiters: %s\n", n->text, n->waiters,
                text ? text : "?");
        free(text);
    }
    json_decref(out);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    long long next_ping = 0;
    while (clock_mono_ms() < atomic_load(&stop_at_ms)) {
        status_once(w);
        if (w->pings && clock_mono_ms() >= next_ping) {
            struct fg_error err = {0};
            if (redis_ping(&err) == 0) {
                w->ready++;
            } else {
                if (++w->not_ready <= LOG_FIRST)
                    fprintf(stderr, "client: not ready: %s\n", err.msg);
            }
            next_ping = clock_mono_ms() + 500;
        }
    }
    redis_thread_done();
    return NULL;
}

#define FOLLOW_MAX_IDS 1000000

/* What the follower heard: a mark per message number, and the counts. */
static struct {
    unsigned char heard[FOLLOW_MAX_IDS];
    atomic_long messages, rounds;
} follow;

static void on_follow_message(const char *payload, size_t len, void *ctx)
{
    (void)ctx;
    char text[16];
    atomic_fetch_add(&follow.messages, 1);
    if (len < 2 || len >= sizeof text || payload[0] != 'm')
        return;
    memcpy(text, payload + 1, len - 1);
    text[len - 1] = '\0';
    long id = atol(text);
    if (id >= 0 && id < FOLLOW_MAX_IDS)
        follow.heard[id] = 1;
}

static void on_follow_subscribed(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&follow.rounds, 1);
}

static atomic_bool follow_stop;

static void *follow_main(void *arg)
{
    redis_subscribe(arg, &follow_stop);
    return NULL;
}

/* cluster_client --follow: see the top of the file. */
static int run_follow(char *url, const char *channel, double seconds)
{
    struct config cfg = {.redis_url = url, .request_timeout_ms = 2000};
    struct fg_error err = {0};
    if (redis_init(&cfg, &err) != 0) {
        fprintf(stderr, "client: %s\n", err.msg);
        return 1;
    }
    signal(SIGTERM, on_term);
    atomic_store(&stop_at_ms, clock_mono_ms() + (long long)(seconds * 1000));
    struct redis_subscriber sub = {channel, on_follow_message, on_follow_subscribed, NULL};
    pthread_t thread;
    pthread_create(&thread, NULL, follow_main, &sub);
    while (clock_mono_ms() < atomic_load(&stop_at_ms))
        clock_sleep_ms(20);
    redis_subscribe_stop(&follow_stop);
    pthread_join(thread, NULL);
    redis_shutdown();
    printf("{\"messages\": %ld, \"rounds\": %ld, \"heard\": [", atomic_load(&follow.messages),
           atomic_load(&follow.rounds));
    const char *sep = "";
    for (long id = 0; id < FOLLOW_MAX_IDS; id++)
        if (follow.heard[id]) {
            printf("%s%ld", sep, id);
            sep = ", ";
        }
    printf("]}\n");
    return 0;
}

#define PAIR_KEY 128 /* bytes of a key of the fence sequence */

/* Raises the fence sequence of slot (or the one sequence, slot < 0) far
 * enough for a run without Postgres, under the keys lease_keys.h names: per
 * slot, the limit named after the run_id of the process that runs the raise
 * (the Redis module writes it in). */
static int pair_fences(int slot, struct fg_error *err)
{
    const char *seq[] = {KEY_FENCE, KEY_FENCE_LIMIT, KEY_FENCE_ORIGIN, KEY_FENCE_FLOOR};
    char made[4][PAIR_KEY];
    for (size_t i = 0; i < 4 && slot >= 0; i++) {
        size_t len = slot_tag_key(made[i], sizeof made[i], seq[i], (unsigned)slot);
        if (i == 1) /* the limit, named after the run_id */
            snprintf(made[i] + len, sizeof made[i] - len, ":%s", REDIS_RUN_ID_PLACEHOLDER);
        seq[i] = made[i];
    }
    struct lease_fence_keys fk = {
        .fence = seq[0], .limit = seq[1], .origin = seq[2], .floor = seq[3]};
    const char *keys[FENCE_RAISE_NKEYS] = {
        [FENCE_RAISE_KEY_FENCE] = fk.fence,
        [FENCE_RAISE_KEY_FENCE_LIMIT] = fk.limit,
        [FENCE_RAISE_KEY_FENCE_ORIGIN] = fk.origin,
        [FENCE_RAISE_KEY_FENCE_FLOOR] = fk.floor,
        [FENCE_RAISE_KEY_OLD_LIMIT] = fk.origin, /* none to delete */
    };
    const char *argv[FENCE_RAISE_NARGV] = {
        [FENCE_RAISE_ARGV_FLOOR] = "1",
        [FENCE_RAISE_ARGV_LIMIT] = "1000000000000",
        [FENCE_RAISE_ARGV_LOST] = "0",
        [FENCE_RAISE_ARGV_FIRST] = "0",
        [FENCE_RAISE_ARGV_RUN_ID] = "",
        [FENCE_RAISE_ARGV_FROM] = "",
        [FENCE_RAISE_ARGV_ON] = "",
    };
    json_t *out = NULL;
    int rc = redis_script(SCRIPT_FENCE_RAISE, keys, argv, &out, err);
    json_decref(out);
    return rc;
}

/* A lease script's reply, as the gateway reads it (lease/lease_answer.h). */
struct lease_reply {
    struct lease_result res;
    enum lease_retry retry;
};

static int read_reply(const char *name, const char *text, size_t len, void *ctx,
                      struct fg_error *err)
{
    struct lease_reply *r = ctx;
    return lease_answer_read(name, text, len, &r->res, &r->retry, err);
}

/* Runs lease script with keys and argv, its reply into *r; true if it ran. */
static bool lease_call(enum fg_script script, const char *const *keys, const char *const *argv,
                       struct lease_reply *r, struct fg_error *err)
{
    return redis_script_text(script, lua_scripts[script].nkeys, keys, argv, read_reply, r, err) == 0;
}

/* True if r answered outcome. */
static bool answered(const struct lease_reply *r, enum lease_outcome outcome)
{
    return r->retry == LEASE_RETRY_NONE && r->res.outcome == outcome;
}

static atomic_long pairs_rate; /* pairs a second each thread keeps to; 0: as fast as it can */
static long pairs_names;       /* FG_CLUSTER_NAMES: names per thread; 0: random names */
/* FG_CLUSTER_PAIR_NAMES, split at its commas: the names the threads take in turn. */
static char *pairs_given[MAX_NAMES];
static size_t pairs_given_n;
static atomic_long pairs_done, pairs_failed;
static long pairs_until; /* FG_CLUSTER_PAIRS_UNTIL: pairs done that end the run; 0: none */

/* With Postgres (FG_CLUSTER_PG_DSN): fences recovered as the gateway does. */
static bool pairs_recover;
static atomic_long pairs_recoveries;

/* Every fence granted, to count those granted twice. */
static struct {
    pthread_mutex_t lock;
    long long *all;
    size_t n, cap;
} granted = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void fence_note(long long fence)
{
    pthread_mutex_lock(&granted.lock);
    if (granted.n == granted.cap) {
        granted.cap = granted.cap ? 2 * granted.cap : 65536;
        granted.all = realloc(granted.all, granted.cap * sizeof *granted.all);
        FG_ASSERT(granted.all != NULL);
    }
    granted.all[granted.n++] = fence;
    pthread_mutex_unlock(&granted.lock);
}

static int compare_fences(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Fences granted more than once. */
static long fences_twice(void)
{
    if (granted.n < 2)
        return 0; /* granted.all is NULL while none was granted */
    qsort(granted.all, granted.n, sizeof *granted.all, compare_fences);
    long twice = 0;
    for (size_t i = 1; i < granted.n; i++)
        twice += granted.all[i] == granted.all[i - 1];
    return twice;
}

/* One uncontended pair on lock name with lease: the first tries the gateway
 * runs, and with watch a watch of the lease between them (lua/lock_watch.lua
 * marks the lock watched, so the release publishes its end). True if granted
 * and released. */
static bool pair_once(const char *name, const char *lease, bool watch, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    const char *acquire_keys[LOCK_ACQUIRE_FAST_NKEYS], *release_keys[LOCK_RELEASE_FAST_NKEYS];
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved(&k, "", rid_moved);
    lease_keys_lock_acquire_fast(&k, rid_moved, acquire_keys);
    lease_keys_lock_release_fast(&k, release_keys);
    char tail[LEASE_HOLDER_TAIL_MAX];
    snprintf(tail, sizeof tail, "%s 10000 0 1 00000000000000000000000000000001 1 0 bench", lease);
    const char *acquire[LOCK_ACQUIRE_FAST_NARGV] = {
        [LOCK_ACQUIRE_FAST_ARGV_NAME] = name,
        [LOCK_ACQUIRE_FAST_ARGV_TTL_MS] = "10000",
        [LOCK_ACQUIRE_FAST_ARGV_TAIL] = tail,
        [LOCK_ACQUIRE_FAST_ARGV_REQUEST_ID] = "",
    };
    char moved_end[LEASE_MOVED_END_MAX] = "";
    const char *watch_keys[LOCK_WATCH_NKEYS] = {
        [LOCK_WATCH_KEY_HOLDER] = k.key[LIB_LOCK_KEY_HOLDER],
        [LOCK_WATCH_KEY_ENDED] = k.key[LIB_LOCK_KEY_ENDED],
        [LOCK_WATCH_KEY_WATCHED] = k.key[LIB_LOCK_KEY_WATCHED],
        [LOCK_WATCH_KEY_MOVED_END] = moved_end,
    };
    const char *release[LOCK_RELEASE_FAST_NARGV] = {
        [LOCK_RELEASE_FAST_ARGV_NAME] = name,
        [LOCK_RELEASE_FAST_ARGV_LEASE] = lease,
    };
    struct lease_reply got, seen, gone;
    bool ok = lease_call(SCRIPT_LOCK_ACQUIRE_FAST, acquire_keys, acquire, &got, err);
    if (ok && pairs_recover && got.retry == LEASE_RETRY_NOFENCE) {
        /* No fence may be issued in this slot (a fresh, restarted or promoted node): as the
         * gateway does after "nofence", recover the slot's sequence, then try again. */
        atomic_fetch_add(&pairs_recoveries, 1);
        ok = fence_recover_lease(&k, err) == 0 &&
             lease_call(SCRIPT_LOCK_ACQUIRE_FAST, acquire_keys, acquire, &got, err);
    }
    ok = ok && answered(&got, LEASE_GRANTED);
    if (ok)
        fence_note(got.res.fence);
    if (ok && watch) {
        char fence[24];
        snprintf(fence, sizeof fence, "%lld", (long long)got.res.fence);
        lease_keys_moved_end(k.key[LIB_LOCK_KEY_HOLDER], (long long)got.res.fence, moved_end);
        const char *watch_argv[LOCK_WATCH_NARGV] = {
            [LOCK_WATCH_ARGV_FENCE] = fence,
            [LOCK_WATCH_ARGV_MARK_MS] = "10000",
        };
        ok = lease_call(SCRIPT_LOCK_WATCH, watch_keys, watch_argv, &seen, err) &&
             answered(&seen, LEASE_HELD);
    }
    return ok && lease_call(SCRIPT_LOCK_RELEASE_FAST, release_keys, release, &gone, err) &&
           answered(&gone, LEASE_RELEASED);
}

/* A fresh lease id from seed. */
static void lease_new(char lease[LEASE_ID_LEN + 1], unsigned *seed)
{
    for (int i = 0; i < LEASE_ID_LEN; i++)
        lease[i] = "0123456789abcdef"[rand_r(seed) % 16];
    lease[LEASE_ID_LEN] = '\0';
}

/* One thread of --pairs: acquire and release locks of random names, or of the names given. */
static void *pairs_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg, thread_seed = seed;
    size_t turn = seed;
    long rate = atomic_load(&pairs_rate);
    int64_t due_us = clock_mono_us();
    while (clock_mono_ms() < atomic_load(&stop_at_ms) &&
           (pairs_until == 0 || atomic_load(&pairs_done) < pairs_until)) {
        if (rate > 0) {
            int64_t early_us = due_us - clock_mono_us();
            if (early_us > 0)
                nanosleep(&(struct timespec){.tv_sec = early_us / 1000000,
                                             .tv_nsec = (early_us % 1000000) * 1000},
                          NULL);
            due_us += 1000000 / rate;
        }
        char name[32], lease[LEASE_ID_LEN + 1];
        if (pairs_given_n > 0) /* the names given, in turn, each thread from its own */
            snprintf(name, sizeof name, "%s", pairs_given[turn++ % pairs_given_n]);
        else if (pairs_names > 0) /* a few names of this thread's own, used again and again */
            snprintf(name, sizeof name, "pair:%u:%u", thread_seed,
                     (unsigned)rand_r(&seed) % (unsigned)pairs_names);
        else
            snprintf(name, sizeof name, "pair:%u", (unsigned)rand_r(&seed));
        lease_new(lease, &seed);
        struct fg_error err = {0};
        if (pair_once(name, lease, false, &err))
            atomic_fetch_add(&pairs_done, 1);
        else if (atomic_fetch_add(&pairs_failed, 1) < LOG_FIRST)
            fprintf(stderr, "client: pair on %s: %s\n", name, err.msg[0] ? err.msg : "not granted");
    }
    redis_thread_done();
    return NULL;
}

/* cluster_client --pairs: see the top of the file. */
/* Connects to url with the key layout it calls for; with FG_CLUSTER_PG_DSN
 * to Postgres too, the fence sequences then recovered as the gateway recovers
 * them (fence_recover_lease), else raises every one at once. 0, or -1 (said
 * on stderr). */
static int pairs_setup(char *url)
{
    struct config cfg = {.redis_url = url, .request_timeout_ms = 2000};
    struct fg_error err = {0};
    if (redis_init(&cfg, &err) != 0) {
        fprintf(stderr, "client: %s\n", err.msg);
        return -1;
    }
    bool cluster = strncmp(url, "redis-cluster://", 16) == 0;
    lease_keys_set_layout(cluster ? LEASE_KEYS_PER_SLOT : LEASE_KEYS_ONE_REDIS);
    static struct config pg_cfg = {
        .pg_pool_size = 4, .request_timeout_ms = 5000, .statement_timeout_ms = 5000};
    pg_cfg.pg_dsn = getenv("FG_CLUSTER_PG_DSN");
    if (pg_cfg.pg_dsn != NULL) {
        pairs_recover = true;
        if (pg_init(&pg_cfg, &err) != 0 || pg_migrate(&err) != 0) {
            fprintf(stderr, "client: postgres: %s\n", err.msg);
            return -1;
        }
        return 0;
    }
    for (int s = cluster ? 0 : -1; s < (cluster ? CLUSTER_SLOTS : 0); s++)
        if (pair_fences(s, &err) != 0) {
            fprintf(stderr, "client: fences of slot %d: %s\n", s, err.msg);
            return -1;
        }
    return 0;
}

static int run_pairs(char *url, int threads, double seconds, long rate)
{
    atomic_store(&pairs_rate, rate);
    const char *names_env = getenv("FG_CLUSTER_NAMES");
    pairs_names = names_env != NULL ? atol(names_env) : 0;
    const char *until_env = getenv("FG_CLUSTER_PAIRS_UNTIL");
    pairs_until = until_env != NULL ? atol(until_env) : 0;
    char *given = getenv("FG_CLUSTER_PAIR_NAMES"), *save = NULL;
    for (char *n = given != NULL ? strtok_r(given, ",", &save) : NULL;
         n != NULL && pairs_given_n < MAX_NAMES; n = strtok_r(NULL, ",", &save))
        pairs_given[pairs_given_n++] = n;
    if (pairs_setup(url) != 0)
        return 1;
    signal(SIGTERM, on_term);
    atomic_store(&stop_at_ms, clock_mono_ms() + (long long)(seconds * 1000));
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    for (int i = 0; i < threads; i++)
        pthread_create(&ids[i], NULL, pairs_main, (void *)(uintptr_t)(i * 7919 + 1));
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    free(ids);
    redis_shutdown();
    printf("{\"pairs\": %ld, \"failed\": %ld, \"recoveries\": %ld, \"twice\": %ld}\n",
           atomic_load(&pairs_done), atomic_load(&pairs_failed), atomic_load(&pairs_recoveries),
           fences_twice());
    return 0;
}

/* The ends heard on CHANNEL_ENDED by --watched. */
static atomic_long ends_heard;

static void on_end(const char *payload, size_t len, void *ctx)
{
    (void)ctx;
    if (len > 2 && memcmp(payload, "l|", 2) == 0)
        atomic_fetch_add(&ends_heard, 1);
}

/* cluster_client --watched: see the top of the file. */
static int run_watched(char *url, int count)
{
    if (pairs_setup(url) != 0)
        return 1;
    struct redis_subscriber sub = {CHANNEL_ENDED, on_end, on_follow_subscribed, NULL};
    pthread_t thread;
    pthread_create(&thread, NULL, follow_main, &sub);
    for (int64_t until = clock_mono_ms() + 15000;
         atomic_load(&follow.rounds) == 0 && clock_mono_ms() < until;)
        clock_sleep_ms(20);
    unsigned seed = 1;
    long done = 0;
    for (int i = 0; i < count; i++) {
        char name[32], lease[LEASE_ID_LEN + 1];
        snprintf(name, sizeof name, "watched:%d", i);
        lease_new(lease, &seed);
        struct fg_error err = {0};
        if (pair_once(name, lease, true, &err))
            done++;
        else
            fprintf(stderr, "client: watched pair on %s: %s\n", name, err.msg);
    }
    for (int64_t until = clock_mono_ms() + 5000;
         atomic_load(&ends_heard) < done && clock_mono_ms() < until;)
        clock_sleep_ms(20);
    redis_subscribe_stop(&follow_stop);
    pthread_join(thread, NULL);
    redis_shutdown();
    printf("{\"pairs\": %ld, \"ends\": %ld}\n", done, atomic_load(&ends_heard));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--watched") == 0)
        return run_watched(argv[2], atoi(argv[3]));
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "--pairs") == 0)
        return run_pairs(argv[2], atoi(argv[3]), atof(argv[4]), argc == 6 ? atol(argv[5]) : 0);
    if (argc == 5 && strcmp(argv[1], "--follow") == 0)
        return run_follow(argv[2], argv[3], atof(argv[4]));
    if (argc == 2 && strcmp(argv[1], "--slot-tags") == 0) {
        for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
            printf("%s\n", slot_tag(s));
        return 0;
    }
    if (argc < 5) {
        fprintf(stderr, "usage: cluster_client <redis-cluster:// URL> <threads> <seconds> "
                        "<name>=<waiters>...\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    for (int i = 4; i < argc && nnames < MAX_NAMES; i++) {
        char *eq = strrchr(argv[i], '=');
        if (eq == NULL)
            return 2;
        *eq = '\0';
        names[nnames++] = (struct name){argv[i], atoll(eq + 1)};
    }
    struct config cfg = {.redis_url = argv[1], .request_timeout_ms = 2000};
    struct fg_error err = {0};
    if (redis_init(&cfg, &err) != 0) {
        fprintf(stderr, "client: %s\n", err.msg);
        return 1;
    }
    signal(SIGTERM, on_term);
    atomic_store(&stop_at_ms, clock_mono_ms() + (long long)(atof(argv[3]) * 1000));
    struct worker *workers = calloc((size_t)threads, sizeof *workers);
    for (int i = 0; i < threads; i++) {
        workers[i].seed = (unsigned)(i * 7919 + 1);
        workers[i].pings = i == 0;
        pthread_create(&workers[i].thread, NULL, work, &workers[i]);
    }
    struct worker sum = {0};
    for (int i = 0; i < threads; i++) {
        pthread_join(workers[i].thread, NULL);
        const struct worker *w = &workers[i];
        sum.ok += w->ok;
        sum.wrong += w->wrong;
        sum.unavailable += w->unavailable;
        sum.tryagain += w->tryagain;
        sum.internal += w->internal;
        sum.ready += w->ready;
        sum.not_ready += w->not_ready;
        if (w->first_fail_ms != 0 &&
            (sum.first_fail_ms == 0 || w->first_fail_ms < sum.first_fail_ms))
            sum.first_fail_ms = w->first_fail_ms;
        if (w->last_fail_ms > sum.last_fail_ms)
            sum.last_fail_ms = w->last_fail_ms;
    }
    redis_shutdown();
    free(workers);
    printf(
        "{\"ok\": %ld, \"wrong\": %ld, \"unavailable\": %ld, \"internal\": %ld, \"ready\": %ld, "
        "\"not_ready\": %ld, \"tryagain\": %ld, \"first_fail_ms\": %lld, \"last_fail_ms\": %lld}\n",
        sum.ok, sum.wrong, sum.unavailable, sum.internal, sum.ready, sum.not_ready, sum.tryagain,
        sum.first_fail_ms, sum.last_fail_ms);
    return 0;
}
