/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c - defaults, JSON file and environment, merged into one struct config.
 * Every setting is described once in a table (name, type, default, range, place
 * in the struct), so the defaults, the JSON reader, the environment reader and
 * the error messages all agree on what exists; the numbers themselves are those
 * of fglimits.h. It never talks to Redis or Postgres: checks that need a
 * backend (does the table exist?) happen at start-up in main.c.
 */
#include "config.h"

#include "auth/keyset.h"
#include "auth/token.h"
#include "fglimits.h"
#include "lease/binding.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend/redis_keys.h"
#include "store/backend/redis_url.h"
#include "util/fgjson.h"
#include "util/integer.h"

enum setting_type { SETTING_STRING, SETTING_INT, SETTING_LISTEN };

struct setting {
    const char *json_path; /* "listen" or "defaults.ttl_ms" */
    const char *env;       /* FENCEGATE_... or NULL if file-only */
    enum setting_type type;
    size_t offset;      /* offsetof(struct config, field) */
    long long dflt;     /* default of an integer setting (0 for the derived ones) */
    long long min, max; /* range of an integer setting */
    long long step;     /* an integer setting is a multiple of this (0: of any) */
    size_t port_offset; /* of a listen setting: offsetof its port (offset: its host) */
};

#define S_STR(path, env, field)                                                                    \
    {                                                                                              \
        path, env, SETTING_STRING, offsetof(struct config, field), 0, 0, 0, 0, 0                   \
    }
/* host:port, its port from lo to 65535. */
#define S_LISTEN(path, env, host, port, lo)                                                        \
    {                                                                                              \
        path, env, SETTING_LISTEN, offsetof(struct config, host), 0, lo, 65535, 0,                 \
            offsetof(struct config, port)                                                          \
    }
#define S_INT(path, env, field, dflt, lo, hi)                                                      \
    {                                                                                              \
        path, env, SETTING_INT, offsetof(struct config, field), dflt, lo, hi, 0, 0                 \
    }
#define S_INT_STEP(path, env, field, dflt, lo, hi, step)                                           \
    {                                                                                              \
        path, env, SETTING_INT, offsetof(struct config, field), dflt, lo, hi, step, 0              \
    }

static const struct setting settings[] = {
    S_LISTEN("listen", "FENCEGATE_LISTEN", listen_host, listen_port, 0),
    S_LISTEN("probe_listen", "FENCEGATE_PROBE_LISTEN", probe_host, probe_port, 1),
    S_STR("redis_url", "FENCEGATE_REDIS_URL", redis_url),
    S_STR("pg_dsn", "FENCEGATE_PG_DSN", pg_dsn),
    S_STR("secret", "FENCEGATE_SECRET", secret),
    S_STR("secret_file", "FENCEGATE_SECRET_FILE", secret_file),
    S_STR("tls_cert_file", "FENCEGATE_TLS_CERT", tls_cert_file),
    S_STR("tls_key_file", "FENCEGATE_TLS_KEY", tls_key_file),
    S_STR("tls_priorities", "FENCEGATE_TLS_PRIORITIES", tls_priorities),
    S_STR("log_level", "FENCEGATE_LOG_LEVEL", log_level),
    S_INT("defaults.ttl_ms", NULL, default_ttl_ms, DEFAULT_TTL_MS, TTL_MIN_MS, TTL_MAX_MS),
    S_INT("defaults.wait_ms", NULL, default_wait_ms, DEFAULT_WAIT_MS, 0, WAIT_MAX_MS),
    S_INT("defaults.max_hold_ms", NULL, default_max_hold_ms, DEFAULT_MAX_HOLD_MS, TTL_MIN_MS,
          MAX_HOLD_MAX_MS),
    S_INT("limits.max_body_bytes", NULL, max_body_bytes, DEFAULT_MAX_BODY_BYTES, 1024, 1073741824),
    S_INT("limits.max_waiters_per_lock", NULL, max_waiters_per_lock, DEFAULT_MAX_WAITERS_PER_LOCK,
          1, 10000000),
    S_INT("limits.max_waiters", NULL, max_waiters, DEFAULT_MAX_WAITERS, 1, 10000000),
    S_INT("limits.max_waiters_per_key", NULL, max_waiters_per_key, 0, 1, 10000000),
    S_INT("limits.kept_place_ms", NULL, kept_place_ms, DEFAULT_KEPT_PLACE_MS, 0, WAIT_MAX_MS),
    S_INT("limits.max_hash_fields", NULL, max_hash_fields, DEFAULT_MAX_HASH_FIELDS, 1, 10000000),
    S_INT("limits.max_value_bytes", NULL, max_value_bytes, DEFAULT_MAX_VALUE_BYTES, 1, 536870912),
    S_INT("limits.audit_retention_days", NULL, audit_retention_days, DEFAULT_AUDIT_RETENTION_DAYS,
          1, 36500),
    S_INT("limits.max_connections", NULL, max_connections, 0, 16, 1000000),
    S_INT("limits.max_connections_per_ip", NULL, max_connections_per_ip, 0, 1, 1000000),
    S_INT("limits.header_timeout_ms", NULL, header_timeout_ms, DEFAULT_HEADER_TIMEOUT_MS, 100,
          600000),
    S_INT("limits.connection_buffer_bytes", NULL, connection_buffer_bytes,
          DEFAULT_CONNECTION_BUFFER_BYTES, CONNECTION_BUFFER_MIN_BYTES,
          CONNECTION_BUFFER_MAX_BYTES),
    S_INT("http_threads", "FENCEGATE_HTTP_THREADS", http_threads, DEFAULT_HTTP_THREADS, 1, 256),
    S_INT("pg_pool_size", "FENCEGATE_PG_POOL_SIZE", pg_pool_size, DEFAULT_PG_POOL_SIZE, 1, 256),
    S_INT("redis_pipeline_from", "FENCEGATE_REDIS_PIPELINE_FROM", redis_pipeline_from,
          DEFAULT_REDIS_PIPELINE_FROM, 0, 1024),
    S_INT("statement_timeout_ms", NULL, statement_timeout_ms, DEFAULT_STATEMENT_TIMEOUT_MS, 10,
          600000),
    S_INT_STEP("pg_connect_timeout_ms", NULL, pg_connect_timeout_ms, DEFAULT_PG_CONNECT_TIMEOUT_MS,
               PG_CONNECT_TIMEOUT_MIN_MS, PG_CONNECT_TIMEOUT_MAX_MS, PG_CONNECT_TIMEOUT_STEP_MS),
    S_INT("waiter_lease_ms", NULL, waiter_lease_ms, DEFAULT_WAITER_LEASE_MS, 500, 600000),
    S_INT("poll_ms", NULL, poll_ms, DEFAULT_POLL_MS, 50, 600000),
    S_INT("request_timeout_ms", NULL, request_timeout_ms, DEFAULT_REQUEST_TIMEOUT_MS, 50, 600000),
    S_INT("probe_timeout_ms", NULL, probe_timeout_ms, DEFAULT_PROBE_TIMEOUT_MS, 50, 600000),
};

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};

/* Stores v in the integer field of cfg that s describes (int or long long). */
static void store_int(struct config *cfg, const struct setting *s, long long v)
{
    char *field = (char *)cfg + s->offset;
    if (s->offset == offsetof(struct config, http_threads) ||
        s->offset == offsetof(struct config, pg_pool_size))
        *(int *)(void *)field = (int)v;
    else
        *(long long *)(void *)field = v;
}

static void config_defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_host = strdup("127.0.0.1");
    cfg->listen_port = DEFAULT_LISTEN_PORT;
    cfg->redis_url = strdup("redis://127.0.0.1:6379/0");
    cfg->pg_dsn = strdup("postgresql://fencegate@127.0.0.1:5432/fencegate");
    cfg->log_level = strdup("info");
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        if (settings[i].type == SETTING_INT)
            store_int(cfg, &settings[i], settings[i].dflt);
    cfg->ui = true;
}

/* Parses "host:port" (host may be [v6]) into the host and port fields of
 * cfg that the listen setting s names. */
static int set_listen(struct config *cfg, const struct setting *s, const char *value,
                      const char *source, struct fg_error *err)
{
    const char *colon = strrchr(value, ':');
    if (colon == NULL || colon == value || colon[1] == '\0')
        return fg_fail(err, FG_ERR_CONFIG, "%s: expected host:port, got '%s'", source, value);
    long long port = 0;
    if (integer_parse(colon + 1, s->min, s->max, &port) != INTEGER_OK)
        return fg_fail(err, FG_ERR_CONFIG, "%s: bad port in '%s' (%lld to %lld)", source, value,
                       s->min, s->max);
    const char *host = value;
    size_t host_len = (size_t)(colon - value);
    if (host[0] == '[' && host_len >= 2 && host[host_len - 1] == ']') {
        host++;
        host_len -= 2;
    }
    char **host_field = (char **)(void *)((char *)cfg + s->offset);
    free(*host_field);
    *host_field = strndup(host, host_len);
    *(int *)(void *)((char *)cfg + s->port_offset) = (int)port;
    return 0;
}

static int set_int(struct config *cfg, const struct setting *s, long long v, const char *source,
                   struct fg_error *err)
{
    if (v < s->min || v > s->max)
        return fg_fail(err, FG_ERR_CONFIG, "%s: must be between %lld and %lld", source, s->min,
                       s->max);
    if (s->step > 0 && v % s->step != 0)
        return fg_fail(err, FG_ERR_CONFIG, "%s: must be a multiple of %lld", source, s->step);
    store_int(cfg, s, v);
    return 0;
}

static int set_string(struct config *cfg, const struct setting *s, const char *value,
                      const char *source, struct fg_error *err)
{
    if (s->type == SETTING_LISTEN)
        return set_listen(cfg, s, value, source, err);
    if (s->offset == offsetof(struct config, log_level)) {
        bool known = false;
        for (size_t i = 0; log_levels[i] != NULL; i++)
            known = known || strcmp(value, log_levels[i]) == 0;
        if (!known)
            return fg_fail(err, FG_ERR_CONFIG, "%s: must be debug, info, warn or error", source);
    }
    if (value[0] == '\0')
        return fg_fail(err, FG_ERR_CONFIG, "%s: must not be empty", source);
    char **field = (char **)(void *)((char *)cfg + s->offset);
    free(*field);
    *field = strdup(value);
    return 0;
}

static int apply_json_setting(struct config *cfg, const struct setting *s, const json_t *v,
                              struct fg_error *err)
{
    if (s->type == SETTING_INT) {
        if (!json_is_integer(v))
            return fg_fail(err, FG_ERR_CONFIG, "config key '%s' must be an integer", s->json_path);
        return set_int(cfg, s, json_integer_value(v), s->json_path, err);
    }
    if (!json_is_string(v))
        return fg_fail(err, FG_ERR_CONFIG, "config key '%s' must be a string", s->json_path);
    return set_string(cfg, s, json_string_value(v), s->json_path, err);
}

static const struct setting *find_setting(const char *path)
{
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        if (strcmp(settings[i].json_path, path) == 0)
            return &settings[i];
    return NULL;
}

static int string_array(const json_t *arr, const char *what, char ***out, size_t *count,
                        struct fg_error *err)
{
    if (!json_is_array(arr))
        return fg_fail(err, FG_ERR_CONFIG, "config key '%s' must be an array of strings", what);
    size_t n = json_array_size(arr);
    *out = calloc(n ? n : 1, sizeof **out);
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(arr, i);
        if (!json_is_string(s) || json_string_length(s) == 0)
            return fg_fail(err, FG_ERR_CONFIG, "config key '%s'[%zu] must be a non-empty string",
                           what, i);
        (*out)[(*count)++] = strdup(json_string_value(s));
    }
    return 0;
}

/* Reads member k ("lock" or "semaphore") of the object named where into guard. */
static int apply_guard(struct resource_guard *guard, const char *where, const char *k,
                       const json_t *v, struct fg_error *err)
{
    struct fg_error why = {0};
    if (guard->template != NULL)
        return fg_fail(err, FG_ERR_CONFIG, "config key '%s': name one lock or one semaphore",
                       where);
    if (!json_is_string(v) || binding_template_check(json_string_value(v), &why) != 0)
        return fg_fail(err, FG_ERR_CONFIG, "config key '%s.%s': %s", where, k,
                       why.msg[0] ? why.msg : "must be a string");
    guard->template = strdup(json_string_value(v));
    guard->semaphore = strcmp(k, "semaphore") == 0;
    return 0;
}

static bool is_guard_key(const char *k)
{
    return strcmp(k, "lock") == 0 || strcmp(k, "semaphore") == 0;
}

/* The fence column is the gateway's alone: neither the key nor a writable column. */
static int check_fence_column(const struct table_config *t, struct fg_error *err)
{
    if (t->fence_column == NULL)
        return 0;
    bool clash = strcmp(t->fence_column, t->key) == 0;
    for (size_t i = 0; i < t->ncolumns && !clash; i++)
        clash = strcmp(t->fence_column, t->columns[i]) == 0;
    if (clash)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.fence_column': column \"%s\" is the key or listed "
                       "in columns; clients must not write it",
                       t->name, t->fence_column);
    return 0;
}

static int apply_table(struct table_config *t, const char *name, const json_t *spec,
                       struct fg_error *err)
{
    t->name = strdup(name);
    if (!json_is_object(spec))
        return fg_fail(err, FG_ERR_CONFIG, "config key 'tables.%s' must be an object", name);
    /* A resource is "pg:<table>/<key>": a '/' in the table would make row "x" of
     * table "a/b" and row "b/x" of table "a" one resource. */
    if (strchr(name, '/') != NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s': a table name may not contain '/' (it ends the "
                       "table's part of a resource name)",
                       name);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)spec, k, v)
    {
        if (strcmp(k, "key") == 0) {
            if (!json_is_string(v) || json_string_length(v) == 0)
                return fg_fail(err, FG_ERR_CONFIG, "config key 'tables.%s.key' must be a string",
                               name);
            t->key = strdup(json_string_value(v));
        } else if (strcmp(k, "columns") == 0) {
            char what[300];
            snprintf(what, sizeof what, "tables.%s.columns", name);
            if (string_array(v, what, &t->columns, &t->ncolumns, err) != 0)
                return -1;
        } else if (strcmp(k, "fence_column") == 0) {
            if (!json_is_string(v) || json_string_length(v) == 0)
                return fg_fail(err, FG_ERR_CONFIG,
                               "config key 'tables.%s.fence_column' must be a string", name);
            t->fence_column = strdup(json_string_value(v));
        } else if (is_guard_key(k)) {
            char where[300];
            snprintf(where, sizeof where, "tables.%s", name);
            if (apply_guard(&t->guard, where, k, v, err) != 0)
                return -1;
        } else if (strcmp(k, "require_live_lease") == 0) {
            if (!json_is_boolean(v))
                return fg_fail(err, FG_ERR_CONFIG,
                               "config key 'tables.%s.require_live_lease' must be true or false",
                               name);
            t->guard.live_lease = json_is_true(v);
        } else {
            return fg_fail(err, FG_ERR_CONFIG, "unknown config key 'tables.%s.%s'", name, k);
        }
    }
    if (t->key == NULL)
        return fg_fail(err, FG_ERR_CONFIG, "config key 'tables.%s.key' is required", name);
    return check_fence_column(t, err);
}

/* Refuses prefix p of entry where when it lies under the gateway's own keys,
 * which no write reaches (403): a prefix that could serve nothing. */
static int prefix_check(const struct redis_prefix_config *p, const char *where,
                        struct fg_error *err)
{
    if (strncmp(p->prefix, KEY_PREFIX, strlen(KEY_PREFIX)) != 0)
        return 0;
    return fg_fail(err, FG_ERR_CONFIG,
                   "config key '%s' is under the gateway's own keys (" KEY_PREFIX
                   "...), which no write reaches: name the application's prefix",
                   where);
}

/* One entry of redis_prefixes: "app:" or {"prefix": "acct:", "lock": "acct-lock:{key}",
 * "require_live_lease": true}. */
static int apply_prefix(struct redis_prefix_config *p, size_t i, const json_t *entry,
                        struct fg_error *err)
{
    char where[64];
    snprintf(where, sizeof where, "redis_prefixes[%zu]", i);
    if (json_is_string(entry) && json_string_length(entry) > 0) {
        p->prefix = strdup(json_string_value(entry));
        return prefix_check(p, where, err);
    }
    if (!json_is_object(entry))
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key '%s' must be a non-empty string or an object {prefix, lock}",
                       where);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)entry, k, v)
    {
        if (strcmp(k, "prefix") == 0 && json_is_string(v) && json_string_length(v) > 0)
            p->prefix = strdup(json_string_value(v));
        else if (is_guard_key(k)) {
            if (apply_guard(&p->guard, where, k, v, err) != 0)
                return -1;
        } else if (strcmp(k, "require_live_lease") == 0 && json_is_boolean(v))
            p->guard.live_lease = json_is_true(v);
        else
            return fg_fail(err, FG_ERR_CONFIG, "unknown or mistyped config key '%s.%s'", where, k);
    }
    if (p->prefix == NULL)
        return fg_fail(err, FG_ERR_CONFIG, "config key '%s.prefix' is required", where);
    return prefix_check(p, where, err);
}

/* Refuses entry i when an earlier entry names the same prefix: a key under it
 * would follow one of them and silently drop the other's lock, semaphore and
 * require_live_lease. */
static int prefix_unique(const struct config *cfg, size_t i, struct fg_error *err)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(cfg->redis_prefixes[j].prefix, cfg->redis_prefixes[i].prefix) == 0)
            return fg_fail(err, FG_ERR_CONFIG,
                           "config key 'redis_prefixes[%zu]': prefix '%s' is listed twice (also "
                           "redis_prefixes[%zu]): list it once, with its lock or semaphore",
                           i, cfg->redis_prefixes[i].prefix, j);
    return 0;
}

static int apply_prefixes(struct config *cfg, const json_t *arr, struct fg_error *err)
{
    if (!json_is_array(arr))
        return fg_fail(err, FG_ERR_CONFIG, "config key 'redis_prefixes' must be an array");
    cfg->redis_prefixes = calloc(json_array_size(arr) + 1, sizeof *cfg->redis_prefixes);
    FG_ASSERT(cfg->redis_prefixes != NULL);
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (apply_prefix(&cfg->redis_prefixes[cfg->nredis_prefixes++], i, json_array_get(arr, i),
                         err) != 0 ||
            prefix_unique(cfg, i, err) != 0)
            return -1;
    return 0;
}

static int apply_tables(struct config *cfg, const json_t *tables, struct fg_error *err)
{
    if (!json_is_object(tables))
        return fg_fail(err, FG_ERR_CONFIG, "config key 'tables' must be an object");
    cfg->tables = calloc(json_object_size(tables) + 1, sizeof *cfg->tables);
    const char *name;
    const json_t *spec;
    json_object_foreach((json_t *)tables, name, spec)
    {
        if (apply_table(&cfg->tables[cfg->ntables++], name, spec, err) != 0)
            return -1;
    }
    return 0;
}

static void free_strings(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* Applies the members of object obj, whose keys are prefixed by prefix ("" at the top). */
static int apply_object(struct config *cfg, const json_t *obj, const char *prefix,
                        struct fg_error *err)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        char path[256];
        snprintf(path, sizeof path, "%s%s", prefix, k);
        const struct setting *s = find_setting(path);
        int rc = 0;
        if (s != NULL)
            rc = apply_json_setting(cfg, s, v, err);
        else if (prefix[0] == '\0' && strcmp(k, "tables") == 0 && cfg->tables == NULL)
            rc = apply_tables(cfg, v, err);
        else if (prefix[0] == '\0' && strcmp(k, "allowed_hosts") == 0) {
            free_strings(cfg->allowed_hosts, cfg->nallowed_hosts); /* replaces the defaults */
            cfg->allowed_hosts = NULL;
            cfg->nallowed_hosts = 0;
            rc = string_array(v, "allowed_hosts", &cfg->allowed_hosts, &cfg->nallowed_hosts, err);
            if (rc == 0 && cfg->nallowed_hosts == 0) /* every request would answer 421 */
                rc = fg_fail(err, FG_ERR_CONFIG,
                             "config key 'allowed_hosts' must name a host (\"*\": any)");
        } else if (prefix[0] == '\0' && strcmp(k, "redis_prefixes") == 0 && !cfg->redis_prefixes)
            rc = apply_prefixes(cfg, v, err);
        else if (prefix[0] == '\0' && strcmp(k, "secrets") == 0 && cfg->secrets == NULL)
            cfg->secrets = json_deep_copy(v);
        else if (prefix[0] == '\0' && strcmp(k, "auth") == 0 && cfg->auth == NULL)
            cfg->auth = json_deep_copy(v);
        else if (prefix[0] == '\0' && strcmp(k, "ui") == 0) {
            if (!json_is_boolean(v))
                return fg_fail(err, FG_ERR_CONFIG, "config key 'ui' must be true or false");
            cfg->ui = json_is_true(v);
        } else if (prefix[0] == '\0' && (strcmp(k, "defaults") == 0 || strcmp(k, "limits") == 0)) {
            if (!json_is_object(v))
                return fg_fail(err, FG_ERR_CONFIG, "config key '%s' must be an object", k);
            char sub[64];
            snprintf(sub, sizeof sub, "%s.", k);
            rc = apply_object(cfg, v, sub, err);
        } else
            return fg_fail(err, FG_ERR_CONFIG, "unknown config key '%s'", path);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int config_apply_json(struct config *cfg, const json_t *root, struct fg_error *err)
{
    if (!json_is_object(root))
        return fg_fail(err, FG_ERR_CONFIG, "configuration must be a JSON object");
    return apply_object(cfg, root, "", err);
}

static int apply_env(struct config *cfg, config_getenv_fn getenv_fn, struct fg_error *err)
{
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        const struct setting *s = &settings[i];
        const char *value = s->env ? getenv_fn(s->env) : NULL;
        if (value == NULL)
            continue;
        if (s->type != SETTING_INT) {
            if (set_string(cfg, s, value, s->env, err) != 0)
                return -1;
            continue;
        }
        long long v = 0;
        if (integer_parse(value, LLONG_MIN, LLONG_MAX, &v) != INTEGER_OK)
            return fg_fail(err, FG_ERR_CONFIG, "%s: '%s' is not an integer", s->env, value);
        if (set_int(cfg, s, v, s->env, err) != 0)
            return -1;
    }
    return 0;
}

/* True if host is the wildcard address of its family: every address of the host. */
static bool host_is_wildcard(const char *host)
{
    return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
}

/* The probe listener needs a socket of its own: on the port of listen, on the
 * same address or where either takes every address, one of the two could not
 * bind. */
static int check_probe_listen(const struct config *cfg, struct fg_error *err)
{
    if (cfg->probe_host == NULL || cfg->probe_port != cfg->listen_port)
        return 0;
    if (strcmp(cfg->probe_host, cfg->listen_host) != 0 && !host_is_wildcard(cfg->probe_host) &&
        !host_is_wildcard(cfg->listen_host))
        return 0;
    return fg_fail(err, FG_ERR_CONFIG,
                   "probe_listen (FENCEGATE_PROBE_LISTEN) must not take the port of listen (%d) "
                   "on the same address: the probe listener needs a port of its own",
                   cfg->listen_port);
}

static int validate(const struct config *cfg, struct fg_error *err)
{
    if (check_probe_listen(cfg, err) != 0)
        return -1;
    if (cfg->default_ttl_ms > cfg->default_max_hold_ms)
        return fg_fail(err, FG_ERR_CONFIG, "defaults.ttl_ms must not exceed defaults.max_hold_ms");
    /* 0 leaves either limit to the gateway (from the descriptor limit, half
     * of all); two set ones must fit. */
    if (cfg->max_connections > 0 && cfg->max_connections_per_ip > cfg->max_connections)
        return fg_fail(err, FG_ERR_CONFIG,
                       "limits.max_connections_per_ip (%lld) must not exceed "
                       "limits.max_connections (%lld): no client address could open that many",
                       cfg->max_connections_per_ip, cfg->max_connections);
    /* A request waits request_timeout_ms for a pooled Postgres connection,
     * and one that opens a new connection waits for it up to
     * pg_connect_timeout_ms a host: no longer, but libpq's least, 2 s, is
     * allowed whatever request_timeout_ms. */
    if (cfg->pg_connect_timeout_ms > PG_CONNECT_TIMEOUT_MIN_MS &&
        cfg->pg_connect_timeout_ms > cfg->request_timeout_ms)
        return fg_fail(err, FG_ERR_CONFIG,
                       "pg_connect_timeout_ms (%lld) must not exceed request_timeout_ms (%lld): "
                       "a request that opens a Postgres connection would wait for it longer "
                       "than for a pooled one",
                       cfg->pg_connect_timeout_ms, cfg->request_timeout_ms);
    struct redis_url url;
    if (redis_url_parse(cfg->redis_url, &url, err) != 0)
        return -1;
    if (cfg->secret != NULL &&
        (strlen(cfg->secret) < TOKEN_SECRET_MIN || strlen(cfg->secret) > TOKEN_SECRET_MAX))
        return fg_fail(err, FG_ERR_CONFIG, "secret must be %d to %d bytes long", TOKEN_SECRET_MIN,
                       TOKEN_SECRET_MAX);
    if ((cfg->tls_cert_file == NULL) != (cfg->tls_key_file == NULL))
        return fg_fail(err, FG_ERR_CONFIG,
                       "tls_cert_file (FENCEGATE_TLS_CERT) and tls_key_file (FENCEGATE_TLS_KEY) "
                       "go together");
    if ((cfg->secret != NULL) + (cfg->secrets != NULL) + (cfg->secret_file != NULL) > 1)
        return fg_fail(err, FG_ERR_CONFIG,
                       "secret (FENCEGATE_SECRET), secrets and secret_file (FENCEGATE_SECRET_FILE) "
                       "exclude each other: name the signing keys in one place");
    return 0;
}

/* Reads an array of signing keys [{"id", "secret"}, ...] into ring; where names it. */
static int keyring_from_json(const json_t *arr, const char *where, struct token_keyring *ring,
                             struct fg_error *err)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return fg_fail(err, FG_ERR_CONFIG, "%s must be a non-empty array of {id, secret}", where);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *e = json_array_get(arr, i);
        const char *id = json_string_value(json_object_get(e, "id"));
        const char *secret = json_string_value(json_object_get(e, "secret"));
        struct fg_error why = {0};
        if (!json_is_object(e) || json_object_size(e) != 2 || id == NULL || secret == NULL)
            return fg_fail(err, FG_ERR_CONFIG, "%s[%zu] must be {\"id\": ..., \"secret\": ...}",
                           where, i);
        if (token_keyring_add(ring, id, secret, &why) != 0)
            return fg_fail(err, FG_ERR_CONFIG, "%s[%zu]: %s", where, i, why.msg);
    }
    return 0;
}

/* Builds cfg->keyring from whichever of secret, secrets and secret_file is set. */
static int build_keyring(struct config *cfg, struct fg_error *err)
{
    if (cfg->secret == NULL && cfg->secrets == NULL && cfg->secret_file == NULL)
        return 0;
    cfg->keyring = calloc(1, sizeof *cfg->keyring);
    FG_ASSERT(cfg->keyring != NULL);
    if (cfg->secret != NULL)
        return token_keyring_add(cfg->keyring, TOKEN_LEGACY_KEY, cfg->secret, err);
    if (cfg->secrets != NULL)
        return keyring_from_json(cfg->secrets, "secrets", cfg->keyring, err);
    json_t *root = fgjson_load_file(cfg->secret_file, "secret_file", err);
    if (root == NULL)
        return -1;
    int rc = keyring_from_json(root, "secret_file", cfg->keyring, err);
    json_decref(root);
    return rc;
}

static void add_host(char **list, size_t *n, const char *fmt, const char *host, int port)
{
    char text[300];
    snprintf(text, sizeof text, fmt, host, port);
    list[(*n)++] = strdup(text);
}

/*
 * The default Host values served on host:port into *list (owned) and *n: the
 * address with and without its port and, on loopback, localhost, 127.0.0.1
 * and [::1] likewise. A wildcard address (0.0.0.0, ::) serves whatever name
 * reaches it: "*".
 */
static void default_allowed_hosts(const char *host, int port, char ***list, size_t *n)
{
    *list = calloc(8, sizeof **list);
    FG_ASSERT(*list != NULL);
    *n = 0;
    if (host_is_wildcard(host)) {
        add_host(*list, n, "*", "", 0);
        return;
    }
    bool v6 = strchr(host, ':') != NULL;
    add_host(*list, n, v6 ? "[%s]" : "%s", host, port);
    add_host(*list, n, v6 ? "[%s]:%d" : "%s:%d", host, port);
    if (!config_host_is_loopback(host))
        return;
    const char *const loopback[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(loopback[i], host) == 0 || (v6 && strcmp(loopback[i], "[::1]") == 0))
            continue;
        add_host(*list, n, "%s", loopback[i], port);
        add_host(*list, n, "%s:%d", loopback[i], port);
    }
}

/* A copy of the n strings of list (owned by the caller). */
static char **copy_strings(char *const *list, size_t n)
{
    char **copy = calloc(n ? n : 1, sizeof *copy);
    FG_ASSERT(copy != NULL);
    for (size_t i = 0; i < n; i++) {
        copy[i] = strdup(list[i]);
        FG_ASSERT(copy[i] != NULL);
    }
    return copy;
}

/* The Host values each listener serves: allowed_hosts as the configuration
 * names them, for both; else each its own address's defaults. */
static void allowed_hosts_settle(struct config *cfg)
{
    bool named = cfg->allowed_hosts != NULL;
    if (!named)
        default_allowed_hosts(cfg->listen_host, cfg->listen_port, &cfg->allowed_hosts,
                              &cfg->nallowed_hosts);
    if (cfg->probe_host == NULL)
        return;
    if (named) {
        cfg->probe_allowed_hosts = copy_strings(cfg->allowed_hosts, cfg->nallowed_hosts);
        cfg->nprobe_allowed_hosts = cfg->nallowed_hosts;
    } else {
        default_allowed_hosts(cfg->probe_host, cfg->probe_port, &cfg->probe_allowed_hosts,
                              &cfg->nprobe_allowed_hosts);
    }
}

int config_load(struct config *cfg, config_getenv_fn getenv_fn, struct fg_error *err)
{
    config_defaults(cfg);
    const char *path = getenv_fn("FENCEGATE_CONFIG");
    if (path != NULL && path[0] == '\0') /* like every FENCEGATE_*: unset means none, not "" */
        return fg_fail(err, FG_ERR_CONFIG, "FENCEGATE_CONFIG: must not be empty");
    if (path != NULL) {
        json_t *root = fgjson_load_file(path, "FENCEGATE_CONFIG", err);
        if (root == NULL)
            return -1;
        int rc = config_apply_json(cfg, root, err);
        json_decref(root);
        if (rc != 0)
            return -1;
    }
    if (apply_env(cfg, getenv_fn, err) != 0 || validate(cfg, err) != 0 ||
        build_keyring(cfg, err) != 0)
        return -1;
    allowed_hosts_settle(cfg);
    if (cfg->max_waiters_per_key == 0)
        cfg->max_waiters_per_key = cfg->max_waiters > 4 ? cfg->max_waiters / 4 : 1;
    return keyset_from_config(cfg->auth, getenv_fn("FENCEGATE_AUTH_MODE"),
                              getenv_fn("FENCEGATE_AUTH_KEYS_FILE"),
                              config_host_is_loopback(cfg->listen_host), &cfg->keyset, err);
}

bool config_host_is_loopback(const char *host)
{
    struct in_addr v4;
    if (inet_pton(AF_INET, host, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    return strcmp(host, "::1") == 0 || strcmp(host, "localhost") == 0;
}

const struct table_config *config_table(const struct config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->ntables; i++)
        if (strcmp(cfg->tables[i].name, name) == 0)
            return &cfg->tables[i];
    return NULL;
}

void config_free(struct config *cfg)
{
    free(cfg->listen_host);
    free(cfg->probe_host);
    free(cfg->redis_url);
    free(cfg->pg_dsn);
    free(cfg->secret);
    free(cfg->secret_file);
    free(cfg->tls_cert_file);
    free(cfg->tls_key_file);
    free(cfg->tls_priorities);
    json_decref(cfg->secrets);
    free(cfg->keyring);
    free(cfg->log_level);
    json_decref(cfg->auth);
    keyset_free(cfg->keyset);
    for (size_t i = 0; i < cfg->ntables; i++) {
        free(cfg->tables[i].name);
        free(cfg->tables[i].key);
        free_strings(cfg->tables[i].columns, cfg->tables[i].ncolumns);
        free(cfg->tables[i].guard.template);
        free(cfg->tables[i].fence_column);
    }
    free(cfg->tables);
    for (size_t i = 0; i < cfg->nredis_prefixes; i++) {
        free(cfg->redis_prefixes[i].prefix);
        free(cfg->redis_prefixes[i].guard.template);
    }
    free(cfg->redis_prefixes);
    free_strings(cfg->allowed_hosts, cfg->nallowed_hosts);
    free_strings(cfg->probe_allowed_hosts, cfg->nprobe_allowed_hosts);
    memset(cfg, 0, sizeof *cfg);
}
