/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_config.c - the configuration: defaults, the JSON file, environment
 * overrides, and refusals that name the offending setting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth/keyset.h"
#include "auth/token.h"
#include "config.h"

/* The fake environment: NULL-terminated name/value pairs. */
static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; fake_env != NULL && fake_env[i] != NULL; i += 2)
        if (strcmp(fake_env[i], name) == 0)
            return fake_env[i + 1];
    return NULL;
}

static int load(const char *const *env, struct config *cfg, struct fg_error *err)
{
    fake_env = env;
    memset(err, 0, sizeof *err);
    return config_load(cfg, fake_getenv, err);
}

/* Applies JSON text on top of the defaults; returns the result of config_apply_json. */
static int apply(const char *text, struct config *cfg, struct fg_error *err)
{
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    assert_non_null(root);
    memset(err, 0, sizeof *err);
    int rc = config_apply_json(cfg, root, err);
    json_decref(root);
    return rc;
}

static void refused_naming(const char *text, const char *needle)
{
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(NULL, &cfg, &err), 0);
    int rc = apply(text, &cfg, &err);
    config_free(&cfg);
    if (rc == 0)
        fail_msg("accepted: %s", text);
    assert_int_equal(err.code, FG_ERR_CONFIG);
    if (strstr(err.msg, needle) == NULL)
        fail_msg("message '%s' does not name '%s'", err.msg, needle);
}

static void defaults(void **state)
{
    (void)state;
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_string_equal(cfg.listen_host, "127.0.0.1");
    assert_int_equal(cfg.listen_port, 8480);
    assert_string_equal(cfg.redis_url, "redis://127.0.0.1:6379/0");
    assert_null(cfg.secret);
    assert_int_equal(cfg.default_ttl_ms, 30000);
    assert_int_equal(cfg.default_wait_ms, 0);
    assert_int_equal(cfg.default_max_hold_ms, 1800000);
    assert_int_equal(cfg.max_body_bytes, 1048576);
    assert_int_equal(cfg.max_waiters_per_lock, 10000);
    assert_int_equal(cfg.max_waiters, 100000);
    assert_int_equal(cfg.max_waiters_per_key, 25000);
    assert_int_equal(cfg.kept_place_ms, 30000);
    assert_int_equal(cfg.waiter_lease_ms, 3000);
    assert_int_equal(cfg.ntables, 0);
    assert_int_equal(cfg.nredis_prefixes, 0);
    config_free(&cfg);
}

/* The limits of issue 11 and the default Host allowlist, by listen address. */
static void hostile_limits_and_hosts(void **state)
{
    (void)state;
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_int_equal(cfg.max_hash_fields, 1000);
    assert_int_equal(cfg.max_value_bytes, 65536);
    assert_int_equal(cfg.audit_retention_days, 90);
    assert_int_equal(cfg.max_connections, 0);
    assert_int_equal(cfg.max_connections_per_ip, 0);
    assert_int_equal(cfg.header_timeout_ms, 10000);
    const char *const loopback[] = {"127.0.0.1",      "127.0.0.1:8480", "localhost",
                                    "localhost:8480", "[::1]",          "[::1]:8480"};
    assert_int_equal(cfg.nallowed_hosts, 6);
    for (size_t i = 0; i < 6; i++)
        assert_string_equal(cfg.allowed_hosts[i], loopback[i]);
    config_free(&cfg);
    const char *const v6[] = {"FENCEGATE_LISTEN", "[::1]:9000", NULL};
    assert_int_equal(load(v6, &cfg, &err), 0);
    assert_int_equal(cfg.nallowed_hosts, 6);
    assert_string_equal(cfg.allowed_hosts[0], "[::1]");
    assert_string_equal(cfg.allowed_hosts[1], "[::1]:9000");
    config_free(&cfg);
    const char *const wildcard[] = {"FENCEGATE_LISTEN", "0.0.0.0:8480", "FENCEGATE_AUTH_MODE",
                                    "off", NULL};
    assert_int_equal(load(wildcard, &cfg, &err), 0);
    assert_int_equal(cfg.nallowed_hosts, 1);
    assert_string_equal(cfg.allowed_hosts[0], "*");
    config_free(&cfg);
    const char *const lan[] = {"FENCEGATE_LISTEN", "10.1.2.3:80", "FENCEGATE_AUTH_MODE", "off",
                               NULL};
    assert_int_equal(load(lan, &cfg, &err), 0);
    assert_int_equal(cfg.nallowed_hosts, 2);
    assert_string_equal(cfg.allowed_hosts[1], "10.1.2.3:80");
    config_free(&cfg);
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_int_equal(apply("{\"allowed_hosts\": [\"gw.example\"], \"limits\": {\"max_hash_fields\":"
                           " 5, \"header_timeout_ms\": 500}}",
                           &cfg, &err),
                     0);
    assert_int_equal(cfg.max_hash_fields, 5);
    assert_int_equal(cfg.header_timeout_ms, 500);
    assert_int_equal(cfg.nallowed_hosts, 1);
    assert_string_equal(cfg.allowed_hosts[0], "gw.example");
    config_free(&cfg);
    refused_naming("{\"limits\": {\"max_value_bytes\": 0}}", "limits.max_value_bytes");
    refused_naming("{\"allowed_hosts\": \"x\"}", "must be an array");
    refused_naming("{\"allowed_hosts\": [\"\"]}", "allowed_hosts");
    /* prefixes under the gateway's own keys, where no write goes */
    refused_naming("{\"redis_prefixes\": [\"fg:\"]}", "redis_prefixes[0]");
    refused_naming("{\"redis_prefixes\": [\"app:\", {\"prefix\": \"fg:lk:\", \"lock\": \"x\"}]}",
                   "redis_prefixes[1]' is under the gateway's own keys");
    /* a prefix listed twice: one entry would silently drop the other's lock */
    refused_naming("{\"redis_prefixes\": [\"acct:\", {\"prefix\": \"acct:\", \"lock\": \"a\"}]}",
                   "redis_prefixes[1]': prefix 'acct:' is listed twice (also redis_prefixes[0])");
}

/* The Postgres connect timeout: 2 s unless set; whole seconds (libpq's unit)
 * from its least, 2 s (libpq reads 1 as 2), to ten minutes. */
static void pg_connect_timeout(void **state)
{
    (void)state;
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_int_equal(cfg.pg_connect_timeout_ms, 2000);
    assert_int_equal(apply("{\"pg_connect_timeout_ms\": 7000}", &cfg, &err), 0);
    assert_int_equal(cfg.pg_connect_timeout_ms, 7000);
    assert_int_equal(apply("{\"pg_connect_timeout_ms\": 600000}", &cfg, &err), 0);
    assert_int_equal(cfg.pg_connect_timeout_ms, 600000);
    config_free(&cfg);
    refused_naming("{\"pg_connect_timeout_ms\": 1000}", "pg_connect_timeout_ms");
    refused_naming("{\"pg_connect_timeout_ms\": 0}", "must be between 2000 and 600000");
    refused_naming("{\"pg_connect_timeout_ms\": 601000}", "pg_connect_timeout_ms");
    refused_naming("{\"pg_connect_timeout_ms\": 2500}", "pg_connect_timeout_ms");
    refused_naming("{\"pg_connect_timeout_ms\": 2500}", "a multiple of 1000");
    refused_naming("{\"pg_connect_timeout_ms\": \"3000\"}", "must be an integer");
}

static void json_keys(void **state)
{
    (void)state;
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_int_equal(
        apply("{\"listen\": \"[::1]:9000\", \"redis_url\": \"redis://r:1/2\","
              " \"pg_dsn\": \"host=x\", \"secret\": \"0123456789abcdef\","
              " \"tables\": {\"invoices\": {\"key\": \"id\", \"columns\": [\"a\", \"b\"],"
              " \"lock\": \"invoice:{key}\", \"fence_column\": \"lock_fence\"}},"
              " \"redis_prefixes\": [\"app:\", {\"prefix\": \"acct:\", \"semaphore\": "
              "\"acct/{key}\"}],"
              " \"defaults\": {\"ttl_ms\": 1000, \"wait_ms\": 5, \"max_hold_ms\": 2000},"
              " \"limits\": {\"max_body_bytes\": 2048, \"max_waiters_per_lock\": 3,"
              " \"max_waiters\": 7}, \"http_threads\": 2, \"log_level\": \"debug\"}",
              &cfg, &err),
        0);
    assert_string_equal(cfg.listen_host, "::1");
    assert_int_equal(cfg.listen_port, 9000);
    assert_string_equal(cfg.redis_url, "redis://r:1/2");
    assert_string_equal(cfg.pg_dsn, "host=x");
    assert_string_equal(cfg.secret, "0123456789abcdef");
    assert_int_equal(cfg.ntables, 1);
    const struct table_config *t = config_table(&cfg, "invoices");
    assert_non_null(t);
    assert_string_equal(t->key, "id");
    assert_int_equal(t->ncolumns, 2);
    assert_string_equal(t->columns[1], "b");
    assert_null(config_table(&cfg, "other"));
    assert_string_equal(t->guard.template, "invoice:{key}");
    assert_false(t->guard.semaphore);
    assert_string_equal(t->fence_column, "lock_fence");
    assert_int_equal(cfg.nredis_prefixes, 2);
    assert_string_equal(cfg.redis_prefixes[0].prefix, "app:");
    assert_null(cfg.redis_prefixes[0].guard.template);
    assert_string_equal(cfg.redis_prefixes[1].prefix, "acct:");
    assert_string_equal(cfg.redis_prefixes[1].guard.template, "acct/{key}");
    assert_true(cfg.redis_prefixes[1].guard.semaphore);
    assert_int_equal(cfg.default_ttl_ms, 1000);
    assert_int_equal(cfg.default_wait_ms, 5);
    assert_int_equal(cfg.default_max_hold_ms, 2000);
    assert_int_equal(cfg.max_body_bytes, 2048);
    assert_int_equal(cfg.max_waiters_per_lock, 3);
    assert_int_equal(cfg.max_waiters, 7);
    assert_int_equal(cfg.http_threads, 2);
    assert_string_equal(cfg.log_level, "debug");
    config_free(&cfg);
}

static void refusals_name_the_setting(void **state)
{
    (void)state;
    refused_naming("{\"colour\": 1}", "colour");
    refused_naming("{\"defaults\": {\"ttl\": 1}}", "defaults.ttl");
    refused_naming("{\"limits\": {\"max_body\": 1}}", "limits.max_body");
    refused_naming("{\"defaults\": 5}", "defaults");
    refused_naming("{\"defaults\": {\"ttl_ms\": \"30000\"}}", "defaults.ttl_ms");
    refused_naming("{\"defaults\": {\"ttl_ms\": 1.5}}", "defaults.ttl_ms");
    refused_naming("{\"defaults\": {\"ttl_ms\": 99}}", "defaults.ttl_ms");
    refused_naming("{\"defaults\": {\"ttl_ms\": 86400001}}", "defaults.ttl_ms");
    refused_naming("{\"defaults\": {\"wait_ms\": -1}}", "defaults.wait_ms");
    refused_naming("{\"limits\": {\"max_waiters_per_lock\": 0}}", "limits.max_waiters_per_lock");
    refused_naming("{\"http_threads\": 1000}", "http_threads");
    refused_naming("{\"redis_pipeline_from\": -1}", "redis_pipeline_from");
    refused_naming("{\"redis_pipeline_from\": 1025}", "redis_pipeline_from");
    refused_naming("{\"redis_url\": 5}", "redis_url");
    refused_naming("{\"redis_url\": \"\"}", "redis_url");
    refused_naming("{\"listen\": \"nohost\"}", "listen");
    refused_naming("{\"listen\": \"h:99999\"}", "listen");
    refused_naming("{\"log_level\": \"loud\"}", "log_level");
    refused_naming("{\"tables\": []}", "tables");
    refused_naming("{\"allowed_hosts\": []}", "allowed_hosts");
    refused_naming("{\"tables\": {\"t\": {\"columns\": [\"a\"]}}}", "tables.t.key");
    refused_naming("{\"tables\": {\"a/b\": {\"key\": \"id\"}}}", "may not contain '/'");
    refused_naming("{\"tables\": {\"t\": {\"key\": \"id\", \"extra\": 1}}}", "tables.t.extra");
    refused_naming("{\"tables\": {\"t\": {\"key\": \"id\", \"columns\": [1]}}}",
                   "tables.t.columns");
    refused_naming("{\"redis_prefixes\": \"app:\"}", "redis_prefixes");
    refused_naming("{\"redis_prefixes\": [\"a:\", {\"lock\": \"x\"}]}", "redis_prefixes[1].prefix");
    refused_naming("{\"redis_prefixes\": [{\"prefix\": \"a\", \"lock\": \"x y\"}]}",
                   "redis_prefixes[0].lock");
    refused_naming("{\"redis_prefixes\": [{\"prefix\": \"a\", \"colour\": 1}]}",
                   "redis_prefixes[0].colour");
    refused_naming(
        "{\"tables\": {\"t\": {\"key\": \"id\", \"lock\": \"a\", \"semaphore\": \"b\"}}}",
        "tables.t");
    refused_naming("{\"tables\": {\"t\": {\"key\": \"id\", \"lock\": \"inv:{id}\"}}}",
                   "tables.t.lock");
    refused_naming("{\"tables\": {\"t\": {\"key\": \"id\", \"fence_column\": 5}}}",
                   "tables.t.fence_column");
    refused_naming("{\"tables\": {\"t\": {\"key\": \"id\", \"fence_column\": \"id\"}}}",
                   "tables.t.fence_column");
    refused_naming("{\"tables\": {\"t\": {\"key\": \"id\", \"columns\": [\"f\"],"
                   " \"fence_column\": \"f\"}}}",
                   "tables.t.fence_column");

    refused_naming("[]", "JSON object");
}

static void environment_overrides(void **state)
{
    (void)state;
    static const char *const env[] = {"FENCEGATE_LISTEN",
                                      "0.0.0.0:1234",
                                      "FENCEGATE_REDIS_URL",
                                      "redis://env:6380/1",
                                      "FENCEGATE_SECRET",
                                      "env-secret-0123456789",
                                      "FENCEGATE_HTTP_THREADS",
                                      "3",
                                      "FENCEGATE_AUTH_MODE",
                                      "off",
                                      "FENCEGATE_REDIS_PIPELINE_FROM",
                                      "4",
                                      NULL};
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_int_equal(cfg.redis_pipeline_from, 0); /* every call on the shared connection */
    assert_int_equal(cfg.http_threads, 32);       /* requests in a backend at once, at most */
    config_free(&cfg);
    assert_int_equal(load(env, &cfg, &err), 0);
    assert_int_equal(cfg.redis_pipeline_from, 4);
    assert_false(cfg.keyset->required);
    assert_string_equal(cfg.listen_host, "0.0.0.0");
    assert_int_equal(cfg.listen_port, 1234);
    assert_string_equal(cfg.redis_url, "redis://env:6380/1");
    assert_string_equal(cfg.secret, "env-secret-0123456789");
    assert_int_equal(cfg.http_threads, 3);
    config_free(&cfg);
    static const char *const cluster[] = {"FENCEGATE_REDIS_URL", "redis-cluster://h:7000,g:7001",
                                          NULL};
    assert_int_equal(load(cluster, &cfg, &err), 0);
    assert_string_equal(cfg.redis_url, "redis-cluster://h:7000,g:7001");
    config_free(&cfg);
    static const char *const cluster_db[] = {"FENCEGATE_REDIS_URL", "redis-cluster://h:7000/1",
                                             NULL};
    assert_int_equal(load(cluster_db, &cfg, &err), -1);
    assert_int_equal(err.code, FG_ERR_CONFIG);
    config_free(&cfg);
}

/* Beyond loopback auth is required by default, and required with no key
 * refuses to start; on loopback it is off by default. */
static void auth_default_follows_listen(void **state)
{
    (void)state;
    static const char *const wide[] = {"FENCEGATE_LISTEN", "10.1.2.3:1234", NULL};
    static const char *const local[] = {"FENCEGATE_LISTEN", "127.0.0.2:1234", NULL};
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(wide, &cfg, &err), -1);
    assert_non_null(strstr(err.msg, "no key is configured"));
    config_free(&cfg);
    assert_int_equal(load(local, &cfg, &err), 0);
    assert_false(cfg.keyset->required);
    config_free(&cfg);
    assert_true(config_host_is_loopback("::1"));
    assert_false(config_host_is_loopback("0.0.0.0"));
    assert_false(config_host_is_loopback("::"));
}

static void bad_environment_is_named(void **state)
{
    (void)state;
    static const char *const threads[] = {"FENCEGATE_HTTP_THREADS", "four", NULL};
    static const char *const range[] = {"FENCEGATE_HTTP_THREADS", "0", NULL};
    static const char *const url[] = {"FENCEGATE_REDIS_URL", "http://x", NULL};
    static const char *const secret[] = {"FENCEGATE_SECRET", "short", NULL};
    static const char *const missing[] = {"FENCEGATE_CONFIG", "/nonexistent/fencegate.json", NULL};
    /* was read as "no keys file", leaving out the keys of the one auth.keys_file names */
    static const char *const no_keys_file[] = {"FENCEGATE_AUTH_KEYS_FILE", "", NULL};
    /* was read as "no config file", starting on defaults alone */
    static const char *const no_config[] = {"FENCEGATE_CONFIG", "", NULL};
    static const struct {
        const char *const *env;
        const char *needle;
    } cases[] = {{threads, "FENCEGATE_HTTP_THREADS"},
                 {range, "FENCEGATE_HTTP_THREADS"},
                 {url, "redis_url"},
                 {secret, "secret"},
                 {missing, "/nonexistent/fencegate.json"},
                 {no_keys_file, "FENCEGATE_AUTH_KEYS_FILE: must not be empty"},
                 {no_config, "FENCEGATE_CONFIG: must not be empty"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        struct fg_error err;
        assert_int_equal(load(cases[i].env, &cfg, &err), -1);
        config_free(&cfg);
        assert_int_equal(err.code, FG_ERR_CONFIG);
        if (strstr(err.msg, cases[i].needle) == NULL)
            fail_msg("message '%s' does not name '%s'", err.msg, cases[i].needle);
    }
}

/* Writes text to a new temporary file; path receives its name. */
static void temp_file(const char *text, char path[64])
{
    snprintf(path, 64, "/tmp/fg-test-config-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

/* Loads the configuration file text (FENCEGATE_CONFIG) into cfg; returns config_load's result. */
static int load_file(const char *text, struct config *cfg, struct fg_error *err)
{
    char path[64];
    temp_file(text, path);
    const char *const env[] = {"FENCEGATE_CONFIG", path, NULL};
    int rc = load(env, cfg, err);
    unlink(path);
    return rc;
}

static void file_then_environment(void **state)
{
    (void)state;
    char path[64];
    temp_file("{\"listen\": \"127.0.0.1:7000\", \"defaults\": {\"ttl_ms\": 5000},"
              " \"redis_url\": \"redis://file:1/0\"}",
              path);
    const char *const env[] = {"FENCEGATE_CONFIG", path, "FENCEGATE_REDIS_URL", "redis://env:2/0",
                               NULL};
    struct config cfg;
    struct fg_error err;
    int rc = load(env, &cfg, &err);
    unlink(path);
    assert_int_equal(rc, 0);
    assert_int_equal(cfg.listen_port, 7000);
    assert_int_equal(cfg.default_ttl_ms, 5000);
    assert_string_equal(cfg.redis_url, "redis://env:2/0"); /* environment wins */
    config_free(&cfg);
}

/* limits.max_waiters_per_key: a quarter of max_waiters (at least 1) unless configured. */
static void waiters_per_key(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        long long per_key;
    } cases[] = {
        {"{\"limits\": {\"max_waiters\": 10}}", 2},
        {"{\"limits\": {\"max_waiters\": 3}}", 1},
        {"{\"limits\": {\"max_waiters\": 10, \"max_waiters_per_key\": 7}}", 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        struct fg_error err;
        assert_int_equal(load_file(cases[i].text, &cfg, &err), 0);
        assert_int_equal(cfg.max_waiters_per_key, cases[i].per_key);
        config_free(&cfg);
    }
    refused_naming("{\"limits\": {\"max_waiters_per_key\": 0}}", "limits.max_waiters_per_key");
}

/* Fails unless load_file takes each of the n configuration texts. */
static void accepted_all(const char *const texts[], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct config cfg;
        struct fg_error err;
        if (load_file(texts[i], &cfg, &err) != 0)
            fail_msg("refused %s: %s", texts[i], err.msg);
        config_free(&cfg);
    }
}

/* pg_connect_timeout_ms no longer than request_timeout_ms, so that a request
 * that opens a Postgres connection waits for it no longer than its backend
 * deadline; libpq's least, 2 s, whatever request_timeout_ms. */
static void pg_connect_timeout_within_request_timeout(void **state)
{
    (void)state;
    static const char *const accepted[] = {
        "{\"pg_connect_timeout_ms\": 5000}",
        "{\"pg_connect_timeout_ms\": 7000, \"request_timeout_ms\": 7000}",
        "{\"pg_connect_timeout_ms\": 2000, \"request_timeout_ms\": 300}",
        "{\"request_timeout_ms\": 50}",
    };
    accepted_all(accepted, sizeof accepted / sizeof accepted[0]);
    static const char *const refused[] = {
        "{\"pg_connect_timeout_ms\": 6000}",
        "{\"pg_connect_timeout_ms\": 3000, \"request_timeout_ms\": 2999}",
        "{\"pg_connect_timeout_ms\": 600000, \"request_timeout_ms\": 300}",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        struct config cfg;
        struct fg_error err;
        int rc = load_file(refused[i], &cfg, &err);
        config_free(&cfg);
        if (rc == 0)
            fail_msg("accepted: %s", refused[i]);
        assert_int_equal(err.code, FG_ERR_CONFIG);
        if (strstr(err.msg, "pg_connect_timeout_ms") == NULL ||
            strstr(err.msg, "request_timeout_ms") == NULL)
            fail_msg("message '%s' does not name both settings", err.msg);
    }
}

/* limits.max_connections_per_ip no more than limits.max_connections when both
 * are set: a larger one could never apply. Either left unset (derived) fits. */
static void connections_per_ip_within_connections(void **state)
{
    (void)state;
    static const char *const accepted[] = {
        "{\"limits\": {\"max_connections\": 100, \"max_connections_per_ip\": 100}}",
        "{\"limits\": {\"max_connections\": 100, \"max_connections_per_ip\": 1}}",
        "{\"limits\": {\"max_connections_per_ip\": 1000000}}",
        "{\"limits\": {\"max_connections\": 16}}",
    };
    accepted_all(accepted, sizeof accepted / sizeof accepted[0]);
    struct config cfg;
    struct fg_error err;
    int rc = load_file("{\"limits\": {\"max_connections\": 100, \"max_connections_per_ip\": 101}}",
                       &cfg, &err);
    config_free(&cfg);
    assert_int_equal(rc, -1);
    assert_int_equal(err.code, FG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "limits.max_connections_per_ip (101)"));
    assert_non_null(strstr(err.msg, "limits.max_connections (100)"));
}

/* secrets: the first signs, all verify; ids and secrets kept in order. */
static void secrets_make_a_keyring(void **state)
{
    (void)state;
    char path[64];
    temp_file("{\"secrets\": [{\"id\": \"k2\", \"secret\": \"second-secret-0123456789\"},"
              " {\"id\": \"k1\", \"secret\": \"first-secret-0123456789\"}]}",
              path);
    const char *const env[] = {"FENCEGATE_CONFIG", path, NULL};
    struct config cfg;
    struct fg_error err;
    int rc = load(env, &cfg, &err);
    unlink(path);
    assert_int_equal(rc, 0);
    assert_non_null(cfg.keyring);
    assert_int_equal(cfg.keyring->nkeys, 2);
    assert_string_equal(cfg.keyring->keys[0].id, "k2");
    assert_string_equal(cfg.keyring->keys[1].id, "k1");
    config_free(&cfg);
    const char *const single[] = {"FENCEGATE_SECRET", "0123456789abcdef", NULL};
    assert_int_equal(load(single, &cfg, &err), 0);
    assert_string_equal(cfg.keyring->keys[0].id, TOKEN_LEGACY_KEY);
    config_free(&cfg);
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_null(cfg.keyring);
    config_free(&cfg);
}

static void file_errors_are_named(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"{\"limits\": {\"max_waiters\": true}}", "limits.max_waiters"},
        {"{\"nope\": 1}", "nope"},
        {"{\"secret\": \"x\", \"secret\": \"y\"}", "FENCEGATE_CONFIG"},
        {"{not json", "FENCEGATE_CONFIG"},
        {"{\"defaults\": {\"ttl_ms\": 5000, \"max_hold_ms\": 1000}}", "ttl_ms"},
        {"{\"secrets\": [{\"id\": \"k 1\", \"secret\": \"0123456789abcdef\"}]}", "secrets[0]"},
        {"{\"secrets\": [{\"id\": \"k1\", \"secret\": \"short\"}]}", "secrets[0]"},
        {"{\"secrets\": [{\"id\": \"k1\", \"secret\": \"0123456789abcdef\", \"x\": 1}]}",
         "secrets[0]"},
        {"{\"secrets\": []}", "secrets"},
        {"{\"secret_file\": \"/nonexistent/keys.json\"}", "secret_file"},
        {"{\"auth\": {\"keys_file\": \"\"}}", "auth.keys_file: must not be empty"},
        {"{\"secret\": \"0123456789abcdef\", \"secrets\": [{\"id\": \"a\", "
         "\"secret\": \"0123456789abcdef\"}]}",
         "exclude each other"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        struct fg_error err;
        int rc = load_file(cases[i].text, &cfg, &err);
        config_free(&cfg);
        assert_int_equal(rc, -1);
        if (strstr(err.msg, cases[i].needle) == NULL)
            fail_msg("message '%s' does not name '%s'", err.msg, cases[i].needle);
    }
}

/* How long /readyz and /metrics wait for a backend: 1 s unless set, 50 ms to ten minutes. */
static void probe_timeout(void **state)
{
    (void)state;
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_int_equal(cfg.probe_timeout_ms, 1000);
    assert_int_equal(apply("{\"probe_timeout_ms\": 250}", &cfg, &err), 0);
    assert_int_equal(cfg.probe_timeout_ms, 250);
    config_free(&cfg);
    refused_naming("{\"probe_timeout_ms\": 49}", "probe_timeout_ms: must be between 50 and 600000");
    refused_naming("{\"probe_timeout_ms\": \"1000\"}", "must be an integer");
}

/* The probe listener: none unless set; host:port with a port of its own; the
 * Host values of its address unless allowed_hosts names them for both. */
static void probe_listen(void **state)
{
    (void)state;
    struct config cfg;
    struct fg_error err;
    assert_int_equal(load(NULL, &cfg, &err), 0);
    assert_null(cfg.probe_host);
    assert_null(cfg.probe_allowed_hosts);
    config_free(&cfg);
    const char *const loopback[] = {"FENCEGATE_PROBE_LISTEN", "127.0.0.1:8481", NULL};
    assert_int_equal(load(loopback, &cfg, &err), 0);
    assert_string_equal(cfg.probe_host, "127.0.0.1");
    assert_int_equal(cfg.probe_port, 8481);
    assert_int_equal(cfg.nprobe_allowed_hosts, 6);
    assert_string_equal(cfg.probe_allowed_hosts[1], "127.0.0.1:8481");
    assert_string_equal(cfg.probe_allowed_hosts[5], "[::1]:8481");
    assert_string_equal(cfg.allowed_hosts[1], "127.0.0.1:8480"); /* the API's: its own */
    config_free(&cfg);
    const char *const wildcard[] = {"FENCEGATE_PROBE_LISTEN", "[::]:9090", NULL};
    assert_int_equal(load(wildcard, &cfg, &err), 0);
    assert_string_equal(cfg.probe_host, "::");
    assert_int_equal(cfg.nprobe_allowed_hosts, 1);
    assert_string_equal(cfg.probe_allowed_hosts[0], "*");
    assert_int_equal(cfg.nallowed_hosts, 6);
    config_free(&cfg);
    assert_int_equal(load_file("{\"probe_listen\": \"10.0.0.5:8480\", \"allowed_hosts\": "
                               "[\"gw.example\"]}",
                               &cfg, &err),
                     0);
    assert_int_equal(cfg.probe_port, 8480); /* listen is 127.0.0.1:8480: another address */
    assert_int_equal(cfg.nprobe_allowed_hosts, 1);
    assert_string_equal(cfg.probe_allowed_hosts[0], "gw.example");
    config_free(&cfg);
    refused_naming("{\"probe_listen\": 8481}", "config key 'probe_listen' must be a string");
    refused_naming("{\"probe_listen\": \"8481\"}", "probe_listen: expected host:port");
    refused_naming("{\"probe_listen\": \"127.0.0.1:0\"}", "bad port in '127.0.0.1:0' (1 to 65535)");
    static const char *const clashes[][4] = {
        {"FENCEGATE_PROBE_LISTEN", "127.0.0.1:8480", NULL, NULL},
        {"FENCEGATE_PROBE_LISTEN", "0.0.0.0:8480", NULL, NULL},
        {"FENCEGATE_PROBE_LISTEN", "127.0.0.1:9000", "FENCEGATE_LISTEN", "[::]:9000"},
    };
    for (size_t i = 0; i < sizeof clashes / sizeof clashes[0]; i++) {
        const char *env[] = {clashes[i][0], clashes[i][1], clashes[i][2], clashes[i][3], NULL};
        assert_int_equal(load(env, &cfg, &err), -1);
        config_free(&cfg);
        if (strstr(err.msg, "must not take the port of listen") == NULL)
            fail_msg("case %zu: %s", i, err.msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(hostile_limits_and_hosts),
        cmocka_unit_test(pg_connect_timeout),
        cmocka_unit_test(pg_connect_timeout_within_request_timeout),
        cmocka_unit_test(connections_per_ip_within_connections),
        cmocka_unit_test(probe_timeout),
        cmocka_unit_test(probe_listen),
        cmocka_unit_test(json_keys),
        cmocka_unit_test(refusals_name_the_setting),
        cmocka_unit_test(environment_overrides),
        cmocka_unit_test(auth_default_follows_listen),
        cmocka_unit_test(bad_environment_is_named),
        cmocka_unit_test(file_then_environment),
        cmocka_unit_test(waiters_per_key),
        cmocka_unit_test(secrets_make_a_keyring),
        cmocka_unit_test(file_errors_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
