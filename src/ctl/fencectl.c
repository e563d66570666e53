/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fencectl.c - entry point of fencectl, the command-line client of fencegate:
 * reads the command line, dispatches to one function per subcommand through a
 * table, and prints answers for people (shell assignments, one-line statuses,
 * tables) or, with --json, the gateway's JSON as it came. Everything that
 * touches the network is in ctl_api/ctl_http, the supervision of a command in
 * ctl_run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/ctl_api.h"
#include "ctl/ctl_args.h"
#include "ctl/ctl_exit.h"
#include "ctl/ctl_run.h"
#include "ctl/ctl_table.h"
#include "fglimits.h"

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

/* Prints `export NAME=value`, single-quoted for the shell when value needs it, so
 * that eval "$(fencectl acquire ...)" hands the lease to the commands it runs. */
static void print_assignment(const char *name, const char *value)
{
    if (value[0] != '\0' && strspn(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789._-:/+=") == strlen(value)) {
        printf("export %s=%s\n", name, value);
        return;
    }
    printf("export %s='", name);
    for (const char *p = value; *p != '\0'; p++)
        if (*p == '\'')
            fputs("'\\''", stdout);
        else
            putchar(*p);
    fputs("'\n", stdout);
}

static void print_integer(const char *name, const json_t *obj, const char *field)
{
    json_t *v = json_object_get(obj, field);
    if (json_is_integer(v))
        printf("export %s=%lld\n", name, (long long)json_integer_value(v));
}

/* Prints the gateway's JSON with everything outside ASCII escaped, so that no
 * control character (C1, bidi overrides) it may carry reaches the terminal. */
static void print_json(const json_t *json)
{
    char *text = json_dumps(json, JSON_COMPACT | JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    if (text != NULL)
        puts(text);
    free(text);
}

/* Reports a failed call (and, with --json, prints the problem body); returns its exit status. */
static int failed(const struct ctl_args *a, struct ctl_answer *ans)
{
    enum ctl_exit code = ans->exit;
    if (a->json && ans->json != NULL)
        print_json(ans->json);
    ctl_answer_report(ans);
    ctl_answer_free(ans);
    return code;
}

/* Prints a successful answer as JSON (with --json) or through show; returns 0. */
static int succeeded(const struct ctl_args *a, struct ctl_answer *ans,
                     void (*show)(const struct ctl_args *a, const json_t *json))
{
    if (a->json)
        print_json(ans->json);
    else if (show != NULL)
        show(a, ans->json);
    ctl_answer_free(ans);
    return CTL_EXIT_OK;
}

static void show_grant(const struct ctl_args *a, const json_t *json)
{
    (void)a;
    const char *token = json_string_value(json_object_get(json, "token"));
    print_assignment("FENCE_TOKEN", token ? token : "");
    print_integer("FENCE", json, "fence");
    print_integer("FENCE_EXPIRES_AT_MS", json, "expires_at_ms");
}

static void show_renewal(const struct ctl_args *a, const json_t *json)
{
    (void)a;
    print_integer("FENCE", json, "fence");
    print_integer("FENCE_EXPIRES_AT_MS", json, "expires_at_ms");
}

static long long field_int(const json_t *json, const char *field)
{
    return (long long)json_integer_value(json_object_get(json, field));
}

static void show_status(const struct ctl_args *a, const json_t *json)
{
    if (a->semaphore) {
        printf("semaphore %s: %lld", a->name, field_int(json, "holders"));
        if (json_is_integer(json_object_get(json, "limit")))
            printf(" of %lld", field_int(json, "limit"));
        printf(" held, %lld waiting\n", field_int(json, "waiting"));
        return;
    }
    if (!json_is_true(json_object_get(json, "held"))) {
        printf("lock %s: free, %lld waiting\n", a->name, field_int(json, "waiting"));
        return;
    }
    char *owner = ctl_escape(json_string_value(json_object_get(json, "owner")));
    printf("lock %s: held, fence %lld", a->name, field_int(json, "fence"));
    if (owner != NULL && owner[0] != '\0')
        printf(", owner %s", owner);
    free(owner);
    if (json_is_integer(json_object_get(json, "expires_in_ms")))
        printf(", expires in %lld ms", field_int(json, "expires_in_ms"));
    printf(", %lld waiting\n", field_int(json, "waiting"));
}

static void show_audit(const struct ctl_args *a, const json_t *json)
{
    (void)a;
    const json_t *items = json_object_get(json, "items");
    json_t *next = json_object_get(json, "next_after_id");
    if (json_array_size(items) == 0) {
        puts("no rejected writes");
        return;
    }
    char *table = ctl_audit_table(items);
    fputs(table, stdout);
    free(table);
    /* The gateway names the page's last id when the page is full, whatever its
     * size: the default page (no --limit) too, where the newest records are. */
    if (json_is_integer(next))
        fprintf(stderr, "fencectl: more records may follow: add --after-id %lld\n",
                (long long)json_integer_value(next));
}

/* The owner label of a lease: --owner, else fencectl:HOST:PID, written into buf. */
static const char *owner_of(const struct ctl_args *a, char *buf, size_t cap)
{
    if (a->owner != NULL)
        return a->owner;
    char host[64] = "unknown";
    gethostname(host, sizeof host - 1);
    snprintf(buf, cap, "fencectl:%s:%ld", host, (long)getpid());
    return buf;
}

static int run_command(const struct ctl_args *a)
{
    char owner[128];
    return ctl_run(a, owner_of(a, owner, sizeof owner));
}

static int run_acquire(const struct ctl_args *a)
{
    char owner[128];
    struct ctl_answer ans;
    if (ctl_api_acquire(a, owner_of(a, owner, sizeof owner), &ans) != 0)
        return failed(a, &ans);
    return succeeded(a, &ans, show_grant);
}

static int run_renew(const struct ctl_args *a)
{
    struct ctl_answer ans;
    if (ctl_api_renew(a, a->token, a->ttl_ms, CTL_CALL_TIMEOUT_MS, &ans) != 0)
        return failed(a, &ans);
    return succeeded(a, &ans, show_renewal);
}

static int run_release(const struct ctl_args *a)
{
    struct ctl_answer ans;
    if (ctl_api_release(a, a->token, CTL_CALL_TIMEOUT_MS, &ans) != 0)
        return failed(a, &ans);
    return succeeded(a, &ans, NULL);
}

static int run_status(const struct ctl_args *a)
{
    struct ctl_answer ans;
    if (ctl_api_status(a, &ans) != 0)
        return failed(a, &ans);
    return succeeded(a, &ans, show_status);
}

static int run_audit(const struct ctl_args *a)
{
    struct ctl_answer ans;
    if (ctl_api_audit(a, &ans) != 0)
        return failed(a, &ans);
    return succeeded(a, &ans, show_audit);
}

static void show_revoked(const struct ctl_args *a, const json_t *json)
{
    (void)a;
    const json_t *fence = json_object_get(json, "revoked_fence");
    if (json_is_integer(fence))
        printf("revoked fence %lld\n", (long long)json_integer_value(fence));
    else
        puts("nothing to revoke");
}

static int run_revoke(const struct ctl_args *a)
{
    struct ctl_answer ans;
    if (ctl_api_revoke(a, &ans) != 0)
        return failed(a, &ans);
    return succeeded(a, &ans, show_revoked);
}

/* Prints how the watched lease ended; exits 2 (busy) when it still holds. */
static int run_watch(const struct ctl_args *a)
{
    struct ctl_answer ans;
    long long wait_ms = a->wait_ms >= 0 ? a->wait_ms : WATCH_WAIT_DEFAULT_MS;
    if (ctl_api_watch(a, a->name, a->semaphore, a->fence, wait_ms, &ans) != 0)
        return failed(a, &ans);
    bool held = json_is_true(json_object_get(ans.json, "held"));
    if (a->json)
        print_json(ans.json);
    else if (held)
        printf("held, expires in %lld ms\n", field_int(ans.json, "expires_in_ms"));
    else {
        const char *reason = json_string_value(json_object_get(ans.json, "reason"));
        puts(reason != NULL ? reason : "ended");
    }
    ctl_answer_free(&ans);
    return held ? CTL_EXIT_BUSY : CTL_EXIT_OK;
}

/* Collects the listed locks (semaphores) of a, a page at a time, into *items:
 * every one, or a->limit of them. Returns 0, or -1 with *ans filled (the
 * failed call) for the caller to report. */
static int list_kind(const struct ctl_args *a, bool semaphores, json_t **items,
                     struct ctl_answer *ans)
{
    *items = json_array();
    char *cursor = NULL;
    for (;;) {
        long long want = LIST_LIMIT_MAX;
        if (a->limit > 0 && a->limit - (long long)json_array_size(*items) < want)
            want = a->limit - (long long)json_array_size(*items);
        int rc = ctl_api_list(a, semaphores, cursor, want, ans);
        free(cursor);
        cursor = NULL;
        if (rc != 0)
            return -1;
        json_array_extend(*items, json_object_get(ans->json, "items"));
        const char *next = json_string_value(json_object_get(ans->json, "next_cursor"));
        if (next != NULL)
            cursor = strdup(next);
        ctl_answer_free(ans);
        if (cursor == NULL || (a->limit > 0 && (long long)json_array_size(*items) >= a->limit))
            break;
    }
    free(cursor);
    return 0;
}

/* Lists locks and semaphores (only semaphores with --sem) under a prefix. */
static int run_list(const struct ctl_args *a)
{
    json_t *locks = NULL, *semaphores = NULL;
    struct ctl_answer ans;
    if ((!a->semaphore && list_kind(a, false, &locks, &ans) != 0) ||
        list_kind(a, true, &semaphores, &ans) != 0) {
        json_decref(locks);
        json_decref(semaphores);
        return failed(a, &ans);
    }
    if (a->json) {
        json_t *all = json_pack("{s:o}", "semaphores", semaphores);
        if (locks != NULL)
            json_object_set_new(all, "locks", locks);
        print_json(all);
        json_decref(all);
        return CTL_EXIT_OK;
    }
    if (json_array_size(locks) + json_array_size(semaphores) == 0) {
        char *prefix = ctl_escape(a->name != NULL ? a->name : "");
        printf("nothing held or waited for%s%s%s\n", prefix[0] ? " under '" : "", prefix,
               prefix[0] ? "'" : "");
        free(prefix);
    } else {
        char *table = ctl_lease_table(locks, semaphores);
        fputs(table, stdout);
        free(table);
    }
    json_decref(locks);
    json_decref(semaphores);
    return CTL_EXIT_OK;
}

static const struct {
    enum ctl_command command;
    int (*run)(const struct ctl_args *a);
} runners[] = {
    {CTL_CMD_LOCK, run_command}, {CTL_CMD_SEM, run_command},     {CTL_CMD_ACQUIRE, run_acquire},
    {CTL_CMD_RENEW, run_renew},  {CTL_CMD_RELEASE, run_release}, {CTL_CMD_STATUS, run_status},
    {CTL_CMD_AUDIT, run_audit},  {CTL_CMD_REVOKE, run_revoke},   {CTL_CMD_WATCH, run_watch},
    {CTL_CMD_LIST, run_list},
};

int main(int argc, char **argv)
{
    struct ctl_args args;
    struct fg_error err = {0};
    if (ctl_args_parse(argc, argv, env_lookup, &args, &err) != 0) {
        fprintf(stderr, "fencectl: %s\n", err.msg);
        return CTL_EXIT_USAGE;
    }
    if (args.version) {
        printf("fencectl %s\n", FG_VERSION);
        return CTL_EXIT_OK;
    }
    if (args.help) {
        fputs(ctl_usage(args.command), stdout);
        return CTL_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof runners / sizeof runners[0]; i++)
        if (runners[i].command == args.command)
            return runners[i].run(&args);
    FG_ASSERT(!"every command has a runner");
    return CTL_EXIT_ERROR;
}
