/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ctl_args.c - fencectl's command line: subcommands, options and their
 * ranges, where COMMAND starts, defaults from the environment, and the URL.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ctl/ctl_args.h"

static const char *env_url;
static const char *env_token;

static const char *fake_env(const char *name)
{
    if (strcmp(name, "FENCEGATE_URL") == 0)
        return env_url;
    if (strcmp(name, "FENCE_TOKEN") == 0)
        return env_token;
    return NULL;
}

/* Parses a NULL-terminated list of words after "fencectl". */
static int parse(struct ctl_args *a, struct fg_error *err, ...)
{
    static char *argv[64];
    va_list ap;
    va_start(ap, err);
    int argc = 0;
    argv[argc++] = "fencectl";
    for (char *w; (w = va_arg(ap, char *)) != NULL;)
        argv[argc++] = w;
    argv[argc] = NULL;
    va_end(ap);
    memset(err, 0, sizeof *err);
    return ctl_args_parse(argc, argv, fake_env, a, err);
}

static int setup(void **state)
{
    (void)state;
    env_url = NULL;
    env_token = NULL;
    return 0;
}

static void lock_with_options_and_command(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "lock", "jobs/nightly", "--ttl", "3000", "--wait=500",
                           "--owner", "me", "--", "sh", "-c", "exit 3", NULL),
                     0);
    assert_int_equal(a.command, CTL_CMD_LOCK);
    assert_string_equal(a.name, "jobs/nightly");
    assert_int_equal(a.ttl_ms, 3000);
    assert_int_equal(a.wait_ms, 500);
    assert_string_equal(a.owner, "me");
    assert_false(a.semaphore);
    assert_string_equal(a.argv[0], "sh");
    assert_string_equal(a.argv[2], "exit 3");
    assert_null(a.argv[3]);
    assert_int_equal(a.grace_ms, CTL_GRACE_DEFAULT_MS);
    assert_string_equal(a.url, CTL_DEFAULT_URL);
    assert_string_equal(a.gateway.host, "127.0.0.1");
    assert_int_equal(a.gateway.port, 8480);
}

static void command_starts_at_first_word_after_name(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    /* Options after COMMAND belong to COMMAND. */
    assert_int_equal(
        parse(&a, &err, "--url", "http://gw:9000", "lock", "x", "make", "--ttl", "1", NULL), 0);
    assert_string_equal(a.argv[0], "make");
    assert_string_equal(a.argv[1], "--ttl");
    assert_int_equal(a.ttl_ms, -1);
    assert_string_equal(a.gateway.host, "gw");
    assert_int_equal(a.gateway.port, 9000);
}

static void sem_needs_limit(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "sem", "pool", "--", "true", NULL), -1);
    assert_non_null(strstr(err.msg, "--limit"));
    assert_int_equal(parse(&a, &err, "sem", "pool", "--limit", "3", "--", "true", NULL), 0);
    assert_true(a.semaphore);
    assert_int_equal(a.limit, 3);
}

static void acquire_limit_means_semaphore(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "acquire", "pool", "--limit", "2", NULL), 0);
    assert_true(a.semaphore);
    assert_int_equal(parse(&a, &err, "acquire", "pool", "--sem", NULL), -1);
    assert_int_equal(parse(&a, &err, "acquire", "l", "--request-id", "r1", "--json", NULL), 0);
    assert_false(a.semaphore);
    assert_true(a.json);
    assert_string_equal(a.request_id, "r1");
}

static void ranges_and_malformed_numbers(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "acquire", "l", "--ttl", "99", NULL), -1);
    assert_non_null(strstr(err.msg, "--ttl"));
    assert_int_equal(parse(&a, &err, "acquire", "l", "--ttl", "86400001", NULL), -1);
    assert_int_equal(parse(&a, &err, "acquire", "l", "--wait", "-1", NULL), -1);
    assert_int_equal(parse(&a, &err, "acquire", "l", "--wait", "5s", NULL), -1);
    assert_int_equal(parse(&a, &err, "acquire", "l", "--wait", "", NULL), -1);
    assert_int_equal(parse(&a, &err, "acquire", "l", "--ttl", "99999999999999999999", NULL), -1);
    assert_int_equal(parse(&a, &err, "acquire", "l", "--ttl", NULL), -1);
    assert_non_null(strstr(err.msg, "needs a value"));
    assert_int_equal(parse(&a, &err, "acquire", "l", "--json=1", NULL), -1);
}

/* --fence is read as a fence is written: one spelling per number, so "01",
 * "-0", "+1" and spaces are refused, as the gateway refuses them. */
static void fences_have_one_spelling(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "watch", "l", "--fence", "17", NULL), 0);
    assert_int_equal(a.fence, 17);
    static char *const refused[] = {"017", "01", "00", "-0", "+1", " 1", "1 ", "0"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_equal(parse(&a, &err, "watch", "l", "--fence", refused[i], NULL), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_non_null(strstr(err.msg, "--fence: expected an integer >= 1"));
        assert_int_equal(parse(&a, &err, "revoke", "s", "--sem", "--fence", refused[i], NULL), -1);
    }
}

static void options_apply_to_their_commands(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "status", "l", "--ttl", "1000", NULL), -1);
    assert_non_null(strstr(err.msg, "does not apply"));
    assert_int_equal(parse(&a, &err, "lock", "l", "--json", "--", "true", NULL), -1);
    assert_int_equal(parse(&a, &err, "status", "l", "--bogus", NULL), -1);
    assert_non_null(strstr(err.msg, "unknown option"));
    assert_int_equal(parse(&a, &err, "frobnicate", NULL), -1);
    assert_non_null(strstr(err.msg, "unknown command"));
    assert_int_equal(parse(&a, &err, "status", "l", "extra", NULL), -1);
    assert_int_equal(parse(&a, &err, "status", "--", "l", NULL), -1);
}

static void names_are_checked(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "status", NULL), -1);
    assert_non_null(strstr(err.msg, "NAME"));
    assert_int_equal(parse(&a, &err, "status", "bad name", NULL), -1);
    assert_non_null(strstr(err.msg, "invalid name"));
    assert_int_equal(parse(&a, &err, "lock", "x", NULL), -1);
    assert_non_null(strstr(err.msg, "COMMAND"));
    assert_int_equal(parse(&a, &err, "lock", "x", "--", NULL), -1);
}

static void list_takes_an_optional_prefix(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "list", NULL), 0);
    assert_int_equal(a.command, CTL_CMD_LIST);
    assert_null(a.name);
    assert_int_equal(a.limit, -1);
    assert_int_equal(parse(&a, &err, "list", "invoice:", "--sem", "--limit", "5", "--json", NULL),
                     0);
    assert_string_equal(a.name, "invoice:");
    assert_true(a.semaphore);
    assert_true(a.json);
    assert_int_equal(a.limit, 5);
    assert_int_equal(parse(&a, &err, "list", "bad prefix", NULL), -1);
    assert_non_null(strstr(err.msg, "invalid prefix"));
    assert_int_equal(parse(&a, &err, "list", "--ttl", "1000", NULL), -1);
    assert_int_equal(parse(&a, &err, "list", "a", "b", NULL), -1);
    assert_int_equal(parse(&a, &err, "list", "--limit", "0", NULL), -1);
}

static void token_from_option_or_environment(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "renew", "l", NULL), -1);
    assert_non_null(strstr(err.msg, "FENCE_TOKEN"));
    env_token = "tok-env";
    assert_int_equal(parse(&a, &err, "release", "l", NULL), 0);
    assert_string_equal(a.token, "tok-env");
    assert_int_equal(parse(&a, &err, "renew", "l", "--token", "tok-arg", NULL), 0);
    assert_string_equal(a.token, "tok-arg");
}

static void url_from_environment(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    env_url = "http://[::1]:8500/gw/";
    assert_int_equal(parse(&a, &err, "audit", "--since", "5", "--limit", "10", NULL), 0);
    assert_string_equal(a.gateway.host, "::1");
    assert_int_equal(a.gateway.port, 8500);
    assert_string_equal(a.gateway.base, "/gw");
    assert_int_equal(a.since_ms, 5);
    assert_int_equal(parse(&a, &err, "audit", "--limit", "1001", NULL), -1);
    assert_int_equal(parse(&a, &err, "audit", "--url", "http://h", NULL), 0);
    assert_int_equal(a.gateway.port, 80);
}

/* audit --lease-kind takes lock or semaphore, and no other command takes it. */
static void audit_lease_kind(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "audit", NULL), 0);
    assert_null(a.lease_kind);
    assert_int_equal(parse(&a, &err, "audit", "--lock", "l", "--lease-kind", "semaphore", NULL), 0);
    assert_string_equal(a.lease_kind, "semaphore");
    assert_int_equal(parse(&a, &err, "audit", "--lease-kind=lock", NULL), 0);
    assert_string_equal(a.lease_kind, "lock");
    assert_int_equal(parse(&a, &err, "audit", "--lease-kind", "sem", NULL), -1);
    assert_string_equal(err.msg, "--lease-kind: expected lock or semaphore, got 'sem'");
    assert_int_equal(parse(&a, &err, "audit", "--lease-kind", "", NULL), -1);
    assert_int_equal(parse(&a, &err, "status", "l", "--lease-kind", "lock", NULL), -1);
    assert_non_null(strstr(err.msg, "does not apply"));
}

static void help_and_version_need_nothing_else(void **state)
{
    (void)state;
    struct ctl_args a;
    struct fg_error err;
    assert_int_equal(parse(&a, &err, "--help", NULL), 0);
    assert_true(a.help);
    assert_int_equal(a.command, CTL_CMD_NONE);
    assert_int_equal(parse(&a, &err, "lock", "--help", NULL), 0);
    assert_int_equal(a.command, CTL_CMD_LOCK);
    assert_non_null(strstr(ctl_usage(a.command), "fencectl lock NAME"));
    assert_int_equal(parse(&a, &err, "--version", NULL), 0);
    assert_true(a.version);
    assert_int_equal(parse(&a, &err, NULL), -1);
    for (int c = CTL_CMD_NONE; c < CTL_CMD_COUNT; c++)
        assert_non_null(strstr(ctl_usage((enum ctl_command)c), "usage: fencectl"));
}

/* Asserts that the help text of command holds the text fmt makes of the numbers. */
static void assert_help_says(enum ctl_command command, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (strstr(ctl_usage(command), text) == NULL)
        fail_msg("the help of command %d lacks: %s", (int)command, text);
}

/* The numbers the help texts spell are those of fglimits.h. */
static void help_states_the_limits(void **state)
{
    (void)state;
    assert_help_says(CTL_CMD_LOCK, "up to %d distinct locks", LOCKSET_MAX);
    assert_help_says(CTL_CMD_LOCK, "lease length, %d..%d (default: the gateway's, %d)", TTL_MIN_MS,
                     TTL_MAX_MS, DEFAULT_TTL_MS);
    assert_help_says(CTL_CMD_LOCK, "0..%d (default: the gateway's, %d)", WAIT_MAX_MS,
                     DEFAULT_WAIT_MS);
    assert_help_says(CTL_CMD_SEM, "--limit (1..%d)", SEMAPHORE_MAX_LIMIT);
    assert_help_says(CTL_CMD_WATCH, "--wait MS (0..%d, default %d)", WAIT_MAX_MS,
                     WATCH_WAIT_DEFAULT_MS);
    assert_help_says(CTL_CMD_LOCK, "after a lost lease (default %d)", CTL_GRACE_DEFAULT_MS);
    assert_help_says(CTL_CMD_AUDIT, "default page is %d", AUDIT_LIMIT_DEFAULT);
}

/* The length of the option name (--word) that starts at p in text, or 0. */
static size_t option_at(const char *text, const char *p)
{
    if (strncmp(p, "--", 2) != 0 || !islower((unsigned char)p[2]) ||
        (p > text && (p[-1] == '-' || isalnum((unsigned char)p[-1]))))
        return 0;
    size_t n = 2;
    while (islower((unsigned char)p[n]) || p[n] == '-')
        n++;
    return n;
}

/* True if text names option (n bytes) as a whole word. */
static bool names_option(const char *text, size_t len, const char *option, size_t n)
{
    for (const char *p = text; p + n <= text + len; p++)
        if (option_at(text, p) == n && memcmp(p, option, n) == 0)
            return true;
    return false;
}

/* Appends to entry the overview's lines for word: each line "  word ..."
 * and the lines that continue it (indented deeper). */
static void overview_entry(const char *overview, const char *word, char *entry, size_t size)
{
    size_t used = 0, wlen = strlen(word);
    bool in_entry = false;
    for (const char *line = overview; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "  ", 2) == 0 && strncmp(line + 2, word, wlen) == 0 &&
            line[2 + wlen] == ' ')
            in_entry = true;
        else if (strncmp(line, "    ", 4) != 0)
            in_entry = false;
        if (in_entry) {
            assert_true(used + len < size);
            memcpy(entry + used, line, len);
            used += len;
        }
        line += len;
    }
    entry[used] = '\0';
}

/* Every option a command's usage names appears on its line of the overview
 * (fencectl --help), unless that line defers to [OPTIONS] or the overview
 * lists the option for all commands: the two texts cannot drift apart. */
static void overview_names_every_option(void **state)
{
    (void)state;
    const char *overview = ctl_usage(CTL_CMD_NONE);
    const char *global = strstr(overview, "Every command takes");
    assert_non_null(global);
    const char *global_end = strstr(global, "\n\n");
    assert_non_null(global_end);
    int missing = 0;
    for (int c = CTL_CMD_NONE + 1; c < CTL_CMD_COUNT; c++) {
        const char *usage = ctl_usage((enum ctl_command)c);
        const char *word = usage + strlen("usage: fencectl ");
        char name[16];
        size_t wlen = strcspn(word, " \n");
        assert_true(wlen < sizeof name);
        memcpy(name, word, wlen);
        name[wlen] = '\0';
        char entry[1024];
        overview_entry(overview, name, entry, sizeof entry);
        if (entry[0] == '\0')
            fail_msg("fencectl --help has no line for %s", name);
        if (strstr(entry, "[OPTIONS]") != NULL)
            continue;
        for (const char *p = usage; *p != '\0'; p++) {
            size_t n = option_at(usage, p);
            if (n == 0 || names_option(usage, (size_t)(p - usage), p, n) ||
                names_option(entry, strlen(entry), p, n) ||
                names_option(global, (size_t)(global_end - global), p, n))
                continue;
            print_error("fencectl %s --help names %.*s; its line of fencectl --help does not:\n%s",
                        name, (int)n, p, entry);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

static void urls(void **state)
{
    (void)state;
    struct ctl_url u;
    struct fg_error err = {0};
    assert_int_equal(ctl_url_parse("http://example.org:81", &u, &err), 0);
    assert_string_equal(u.host, "example.org");
    assert_int_equal(u.port, 81);
    assert_string_equal(u.base, "");
    assert_int_equal(ctl_url_parse("https://example.org", &u, &err), 0);
    assert_true(u.tls);
    assert_int_equal(u.port, 443);
    assert_int_equal(ctl_url_parse("https://example.org:8443/gw/", &u, &err), 0);
    assert_int_equal(u.port, 8443);
    assert_string_equal(u.base, "/gw");
    assert_int_equal(ctl_url_parse("ftp://example.org", &u, &err), -1);
    assert_int_equal(ctl_url_parse("HTTPS://example.org", &u, &err), -1);
    assert_int_equal(ctl_url_parse("http://", &u, &err), -1);
    assert_int_equal(ctl_url_parse("http://h:0", &u, &err), -1);
    assert_int_equal(ctl_url_parse("http://h:65536", &u, &err), -1);
    assert_int_equal(ctl_url_parse("http://h:8x", &u, &err), -1);
    assert_int_equal(ctl_url_parse("http://h:", &u, &err), -1);
    assert_int_equal(ctl_url_parse("http://[::1", &u, &err), -1);
    assert_int_equal(ctl_url_parse("http://user@h", &u, &err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(lock_with_options_and_command, setup),
        cmocka_unit_test_setup(command_starts_at_first_word_after_name, setup),
        cmocka_unit_test_setup(sem_needs_limit, setup),
        cmocka_unit_test_setup(acquire_limit_means_semaphore, setup),
        cmocka_unit_test_setup(ranges_and_malformed_numbers, setup),
        cmocka_unit_test_setup(fences_have_one_spelling, setup),
        cmocka_unit_test_setup(options_apply_to_their_commands, setup),
        cmocka_unit_test_setup(names_are_checked, setup),
        cmocka_unit_test_setup(token_from_option_or_environment, setup),
        cmocka_unit_test_setup(url_from_environment, setup),
        cmocka_unit_test_setup(audit_lease_kind, setup),
        cmocka_unit_test_setup(help_and_version_need_nothing_else, setup),
        cmocka_unit_test(help_states_the_limits),
        cmocka_unit_test(overview_names_every_option),
        cmocka_unit_test(urls),
        cmocka_unit_test_setup(list_takes_an_optional_prefix, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
