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
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "lua_scripts.h"
#include "store/backend/key_slot.h"
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

int main(int argc, char **argv)
{
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
