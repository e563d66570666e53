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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "lua_scripts.h"
#include "store/backend/redis.h"

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

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--batch") == 0)
        return run_batch(argv[2], (size_t)atol(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: cluster_lease --batch <URL> <calls> <rounds>\n");
    return 2;
}
