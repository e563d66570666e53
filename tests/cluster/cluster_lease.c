/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster_lease.c - drives the gateway's Redis client (store/backend/redis.c)
 * on batches of calls spread over the slots (redis_batch), on a redis:// or
 * redis-cluster:// URL, for test_cluster_lease.py. It judges nothing itself
 * beyond each answer: it prints one JSON line a round, which the test reads.
 *
 * cluster_lease --batch <URL> <calls> <rounds>: each round writes <calls> keys
 * "bt:<i>" (SET, value "<round>:<i>") in one batch, reads them back in a
 * second (GET), then runs the lock status script (lua/lock_status.lua) on
 * <calls> names in a third, and prints
 * {"round", "calls", "ok", "wrong", "failed", "first_error"}: ok counts the
 * answers that read what they must. Between rounds it waits for a line on
 * stdin (the test moves slots or flushes the script libraries meanwhile).
 *
 * cluster_lease --list <URL> <locks> <ttl_ms>: with the key layout the URL
 * calls for (per slot on a cluster: lease/lease_keys.h), raises the fence
 * sequence of every slot (or the one sequence; one batch of
 * lua/fence_raise.lua), takes <locks> locks "ls:<i>" (one batch of
 * lua/lock_acquire_fast.lua) and prints {"granted"}; then, for each line on
 * stdin, pages through the locks named "ls:" (lease/lease_list.h, pages of
 * 100), a page that fails tried again every 50 ms, and prints {"names": every
 * name listed in the order listed, "pages", "retries", "ms" (the pass took),
 * "first_error"}.
 *
 * cluster_lease --headroom <URL>: prints {"headroom"}, what the gateway's
 * fence_headroom (lease/fence.h) reads with the layout the URL calls for, and
 * again for each line read from standard input (as a gateway's scrapes do).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "lease/fence.h"
#include "lease/lease_keys.h"
#include "lease/lease_list.h"
#include "lease/lease_result.h"
#include "lua_scripts.h"
#include "store/backend/key_slot.h"
#include "store/backend/redis.h"
#include "util/clock.h"

#define KEY_MAX 64

/* One round's counts. */
struct tally {
    long ok, wrong, failed;
    char first_error[256];
};

/* Counts the outcome of call c: ok when check says its reply is right. */
static void judge(struct tally *t, const struct redis_batch_call *c, bool right)
{
    if (c->reply == NULL) {
        if (t->failed++ == 0)
            snprintf(t->first_error, sizeof t->first_error, "%s", c->err.msg);
    } else if (right) {
        t->ok++;
    } else if (t->wrong++ == 0) {
        char *text = json_dumps(c->reply, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(t->first_error, sizeof t->first_error, "wrong answer %s", text ? text : "?");
        free(text);
    }
}

/* Frees the replies of the n calls. */
static void drop_replies(struct redis_batch_call *calls, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_decref(calls[i].reply);
}

/* One round of the three batches over n keys and names. */
static void batch_round(int round, size_t n)
{
    struct redis_batch_call *calls = calloc(n, sizeof *calls);
    char (*keys)[KEY_MAX] = calloc(n, KEY_MAX), (*values)[KEY_MAX] = calloc(n, KEY_MAX);
    char (*status)[3][KEY_MAX] = calloc(n, sizeof *status);
    const char **args = calloc(3 * n, sizeof *args);
    const char **skeys = calloc(LOCK_STATUS_NKEYS * n, sizeof *skeys);
    struct tally t = {0};
    struct fg_error err = {0};
    for (size_t i = 0; i < n; i++) {
        snprintf(keys[i], KEY_MAX, "bt:%zu", i);
        snprintf(values[i], KEY_MAX, "%d:%zu", round, i);
        args[3 * i] = "SET";
        args[3 * i + 1] = keys[i];
        args[3 * i + 2] = values[i];
        calls[i] = (struct redis_batch_call){.argc = 3, .args = args + 3 * i};
    }
    if (redis_batch(calls, n, &err) != 0 && err.code == FG_OK)
        snprintf(t.first_error, sizeof t.first_error, "failed without a reason");
    for (size_t i = 0; i < n; i++)
        judge(&t, &calls[i], json_is_string(calls[i].reply));
    drop_replies(calls, n);
    for (size_t i = 0; i < n; i++) {
        args[3 * i] = "GET";
        calls[i] = (struct redis_batch_call){.argc = 2, .args = args + 3 * i};
    }
    (void)!redis_batch(calls, n, &err);
    for (size_t i = 0; i < n; i++)
        judge(&t, &calls[i],
              json_is_string(calls[i].reply) &&
                  strcmp(json_string_value(calls[i].reply), values[i]) == 0);
    drop_replies(calls, n);
    static const char *const status_argv[LOCK_STATUS_NARGV] = {[LOCK_STATUS_ARGV_WAITERS] = "0"};
    for (size_t i = 0; i < n; i++) {
        const char **k = skeys + LOCK_STATUS_NKEYS * i;
        snprintf(status[i][0], KEY_MAX, "fg:lk:{bs%zu}:h", i);
        snprintf(status[i][1], KEY_MAX, "fg:lk:{bs%zu}:q", i);
        snprintf(status[i][2], KEY_MAX, "fg:lk:{bs%zu}:w", i);
        k[LOCK_STATUS_KEY_HOLDER] = status[i][0];
        k[LOCK_STATUS_KEY_QUEUE] = status[i][1];
        k[LOCK_STATUS_KEY_WAITERS] = status[i][2];
        calls[i] = (struct redis_batch_call){
            .script = SCRIPT_LOCK_STATUS, .keys = k, .argv = status_argv};
    }
    (void)!redis_batch(calls, n, &err);
    for (size_t i = 0; i < n; i++)
        judge(&t, &calls[i], json_is_false(json_object_get(calls[i].reply, "held")));
    drop_replies(calls, n);
    json_t *line = json_pack("{s:i, s:I, s:I, s:I, s:I, s:s}", "round", round, "calls",
                             (json_int_t)(3 * n), "ok", (json_int_t)t.ok, "wrong",
                             (json_int_t)t.wrong, "failed", (json_int_t)t.failed, "first_error",
                             t.first_error);
    char *text = json_dumps(line, JSON_COMPACT);
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(line);
    free(skeys);
    free(args);
    free(status);
    free(values);
    free(keys);
    free(calls);
}

static int run_batch(char *url, size_t calls, int rounds)
{
    struct config cfg = {.redis_url = url, .request_timeout_ms = 5000};
    struct fg_error err = {0};
    if (redis_init(&cfg, &err) != 0) {
        fprintf(stderr, "cluster_lease: %s\n", err.msg);
        return 1;
    }
    char line[64];
    for (int round = 0; round < rounds; round++) {
        if (round > 0 && fgets(line, sizeof line, stdin) == NULL)
            break;
        batch_round(round, calls);
    }
    redis_shutdown();
    return 0;
}

/* The keys and arguments of one call of a --list batch. */
struct list_seed {
    struct lease_keys k;
    const char *keys[LOCK_ACQUIRE_FAST_NKEYS];
    char rid_moved[LEASE_RID_MOVED_MAX];
    const char *argv[LOCK_ACQUIRE_FAST_NARGV];
    char name[KEY_MAX], lease[40], tail[LEASE_HOLDER_TAIL_MAX];
    struct lease_fence_keys fk; /* the fence keys of the lock's slot */
    const char *fence_keys[FENCE_RAISE_NKEYS];
};

/* Raises the fence sequence of every slot (or the one), as cluster_client
 * does, in one batch. */
static int raise_fences(bool cluster, struct fg_error *err)
{
    size_t n = cluster ? CLUSTER_SLOTS : 1;
    struct list_seed *seeds = calloc(n, sizeof *seeds);
    struct redis_batch_call *calls = calloc(n, sizeof *calls);
    static const char *const argv[FENCE_RAISE_NARGV] = {
        [FENCE_RAISE_ARGV_FLOOR] = "1",
        [FENCE_RAISE_ARGV_LIMIT] = "1000000000000",
        [FENCE_RAISE_ARGV_LOST] = "0",
        [FENCE_RAISE_ARGV_FIRST] = "0",
        [FENCE_RAISE_ARGV_RUN_ID] = "",
        [FENCE_RAISE_ARGV_FROM] = "",
        [FENCE_RAISE_ARGV_ON] = "",
    };
    for (size_t s = 0; s < n; s++) {
        /* a lock of slot s (its name the slot's tag): the slot's sequence is its locks' */
        struct list_seed *seed = &seeds[s];
        snprintf(seed->name, sizeof seed->name, "%s", cluster ? slot_tag((unsigned)s) : "f");
        lease_keys_init(&seed->k, LEASE_KIND_LOCK, seed->name);
        lease_keys_fence(&seed->k, &seed->fk);
        seed->fence_keys[FENCE_RAISE_KEY_FENCE] = seed->fk.fence;
        seed->fence_keys[FENCE_RAISE_KEY_FENCE_LIMIT] = seed->fk.limit;
        seed->fence_keys[FENCE_RAISE_KEY_FENCE_ORIGIN] = seed->fk.origin;
        seed->fence_keys[FENCE_RAISE_KEY_FENCE_FLOOR] = seed->fk.floor;
        seed->fence_keys[FENCE_RAISE_KEY_OLD_LIMIT] = seed->fk.origin; /* none to delete */
        calls[s] = (struct redis_batch_call){
            .script = SCRIPT_FENCE_RAISE, .keys = seed->fence_keys, .argv = argv};
    }
    int rc = redis_batch(calls, n, err);
    for (size_t s = 0; s < n; s++)
        json_decref(calls[s].reply);
    free(calls);
    free(seeds);
    return rc;
}

/* Takes the locks "ls:<i>", i < n, in one batch; how many were granted. */
static long take_locks(size_t n, const char *ttl_ms)
{
    struct list_seed *seeds = calloc(n, sizeof *seeds);
    struct redis_batch_call *calls = calloc(n, sizeof *calls);
    for (size_t i = 0; i < n; i++) {
        struct list_seed *seed = &seeds[i];
        snprintf(seed->name, sizeof seed->name, "ls:%zu", i); /* slots of two or more names */
        snprintf(seed->lease, sizeof seed->lease, "%032zx", i + 1);
        lease_keys_init(&seed->k, LEASE_KIND_LOCK, seed->name);
        lease_keys_rid_moved(&seed->k, "", seed->rid_moved);
        lease_keys_lock_acquire_fast(&seed->k, seed->rid_moved, seed->keys);
        snprintf(seed->tail, sizeof seed->tail, "%s %s 0 1 00000000000000000000000000000001 1 0 lab",
                 seed->lease, ttl_ms);
        seed->argv[LOCK_ACQUIRE_FAST_ARGV_NAME] = seed->name;
        seed->argv[LOCK_ACQUIRE_FAST_ARGV_TTL_MS] = ttl_ms;
        seed->argv[LOCK_ACQUIRE_FAST_ARGV_TAIL] = seed->tail;
        seed->argv[LOCK_ACQUIRE_FAST_ARGV_REQUEST_ID] = "";
        calls[i] = (struct redis_batch_call){
            .script = SCRIPT_LOCK_ACQUIRE_FAST, .keys = seed->keys, .argv = seed->argv, .text = true};
    }
    struct fg_error err = {0};
    if (redis_batch(calls, n, &err) != 0)
        fprintf(stderr, "cluster_lease: acquire: %s\n", err.msg);
    long granted = 0;
    for (size_t i = 0; i < n; i++) { /* lib_lease.lua lease_reply: the outcome first */
        const char *r = json_string_value(calls[i].reply);
        granted += r != NULL && strncmp(r, "granted", 7) == 0;
        json_decref(calls[i].reply);
    }
    free(calls);
    free(seeds);
    return granted;
}

/* One pass through the listing of "ls:", printed. */
static void list_pass(void)
{
    struct list_query q = {.prefix = "ls:", .limit = 100};
    json_t *names = json_array();
    long pages = 0, retries = 0;
    int64_t started_ms = clock_mono_ms();
    char first_error[256] = "";
    for (bool more = true; more && retries < 400;) {
        struct lease_page page;
        struct fg_error err = {0};
        if (lease_list(LEASE_LIST_LOCKS, &q, &page, &err) != 0) {
            if (retries++ == 0)
                snprintf(first_error, sizeof first_error, "%s", err.msg);
            clock_sleep_ms(50);
            continue;
        }
        pages++;
        size_t i;
        json_t *item;
        json_array_foreach(page.items, i, item)
            json_array_append(names, json_object_get(item, "lock"));
        json_decref(page.items);
        more = page.more;
        snprintf(q.after, sizeof q.after, "%s", page.next);
    }
    json_t *line = json_pack("{s:o, s:I, s:I, s:I, s:s}", "names", names, "pages",
                             (json_int_t)pages, "retries", (json_int_t)retries, "ms",
                             (json_int_t)(clock_mono_ms() - started_ms), "first_error", first_error);
    char *text = json_dumps(line, JSON_COMPACT);
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(line);
}

static int run_list(char *url, size_t locks, const char *ttl_ms)
{
    struct config cfg = {.redis_url = url, .request_timeout_ms = 5000};
    struct fg_error err = {0};
    if (redis_init(&cfg, &err) != 0) {
        fprintf(stderr, "cluster_lease: %s\n", err.msg);
        return 1;
    }
    bool cluster = strncmp(url, "redis-cluster://", 16) == 0;
    lease_keys_set_layout(cluster ? LEASE_KEYS_PER_SLOT : LEASE_KEYS_ONE_REDIS);
    if (raise_fences(cluster, &err) != 0) {
        fprintf(stderr, "cluster_lease: fences: %s\n", err.msg);
        return 1;
    }
    printf("{\"granted\": %ld}\n", take_locks(locks, ttl_ms));
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin) != NULL)
        list_pass();
    redis_shutdown();
    return 0;
}

static int run_headroom(char *url)
{
    struct config cfg = {.redis_url = url, .request_timeout_ms = 5000};
    struct fg_error err = {0};
    int64_t headroom = 0;
    if (redis_init(&cfg, &err) != 0) {
        fprintf(stderr, "cluster_lease: %s\n", err.msg);
        return 1;
    }
    bool cluster = strncmp(url, "redis-cluster://", 16) == 0;
    lease_keys_set_layout(cluster ? LEASE_KEYS_PER_SLOT : LEASE_KEYS_ONE_REDIS);
    char line[64];
    do {
        if (fence_headroom(&headroom, &err) != 0) {
            fprintf(stderr, "cluster_lease: headroom: %s\n", err.msg);
            return 1;
        }
        printf("{\"headroom\": %lld}\n", (long long)headroom);
        fflush(stdout);
    } while (fgets(line, sizeof line, stdin) != NULL);
    redis_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--headroom") == 0)
        return run_headroom(argv[2]);
    if (argc == 5 && strcmp(argv[1], "--list") == 0)
        return run_list(argv[2], (size_t)atol(argv[3]), argv[4]);
    if (argc == 5 && strcmp(argv[1], "--batch") == 0)
        return run_batch(argv[2], (size_t)atol(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: cluster_lease --batch <URL> <calls> <rounds>\n"
                    "       cluster_lease --list <URL> <locks> <ttl_ms>\n"
                    "       cluster_lease --headroom <URL>\n");
    return 2;
}
