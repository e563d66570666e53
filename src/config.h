/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - the one immutable configuration of a gateway process: built once at
 * start-up from the optional JSON file (FENCEGATE_CONFIG) and then the
 * environment, which overrides it. After config_load returns, nothing changes it.
 */
#ifndef FG_CONFIG_H
#define FG_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

struct keyset;
struct token_keyring;

/* The lease that guards each resource of a table or prefix (lease/binding.h
 * checks writes against it). */
struct resource_guard {
    char *template;  /* "invoice:{key}" ({key}: the row's key, or the whole Redis key);
                        NULL when the resources are not bound (owned) */
    bool semaphore;  /* the template names a semaphore, not a lock */
    bool live_lease; /* require_live_lease: a write is applied only while its token's
                        lease holds (whether or not a template binds the resources) */
};

struct table_config {
    char *name;                  /* table name, as in Postgres (owned) */
    char *key;                   /* single-column primary key (owned) */
    char **columns;              /* writable columns besides the key (owned) */
    size_t ncolumns;             /* entries in columns */
    struct resource_guard guard; /* "lock" / "semaphore" guarding each row, if any */
    char *fence_column;          /* bigint column of the row keeping its fence, or NULL:
                                    fences live in fencegate.resource_fences (owned) */
};

struct redis_prefix_config {
    char *prefix;                /* writable key prefix (owned) */
    struct resource_guard guard; /* "lock" / "semaphore" guarding each key, if any */
};

struct config {
    char *listen_host;             /* address to bind, e.g. "127.0.0.1" */
    int listen_port;               /* TCP port */
    char *probe_host;              /* address of the probe listener (/healthz, /readyz,
                                      /metrics on a thread of their own), or NULL: none */
    int probe_port;                /* its TCP port (1 to 65535) */
    char *redis_url;               /* redis://[:password@]host:port/db */
    char *pg_dsn;                  /* libpq conninfo or URI */
    char *secret;                  /* token-signing key; NULL: keep one in Postgres */
    char *secret_file;             /* JSON file of signing keys [{id, secret}], or NULL */
    json_t *secrets;               /* the "secrets" array of the file (owned), or NULL */
    struct token_keyring *keyring; /* signing keys from secret, secrets or secret_file
                                      (owned); NULL: keep one in Postgres */
    struct table_config *tables;   /* writable tables */
    size_t ntables;                /* entries in tables */
    struct redis_prefix_config *redis_prefixes; /* writable Redis key prefixes */
    size_t nredis_prefixes;                     /* entries in redis_prefixes */
    long long default_ttl_ms;                   /* lease length when a request names none */
    long long default_wait_ms;                  /* queue wait when a request names none */
    long long default_max_hold_ms;              /* renewal cap when a request names none */
    long long max_body_bytes;                   /* request bodies above this answer 413 */
    long long max_waiters_per_lock;             /* waiters queued here on one name */
    long long max_waiters;                      /* waiters suspended in this process */
    long long max_waiters_per_key;   /* acquires and watches one API key keeps parked (0 in the
                                        configuration: a quarter of max_waiters) */
    long long kept_place_ms;         /* how long a waiter with a request_id whose client hung up
                                        keeps its place for a retry (0: it leaves at once) */
    int http_threads;                /* HTTP worker threads */
    int pg_pool_size;                /* Postgres connections */
    long long redis_pipeline_from;   /* script calls in flight from which they share one
                                        pipelined connection (store/backend/redis.c) */
    long long statement_timeout_ms;  /* Postgres statement_timeout */
    long long pg_connect_timeout_ms; /* libpq's connect_timeout of a Postgres connection (whole
                                        seconds; at most request_timeout_ms unless 2000) */
    long long waiter_lease_ms;       /* how long a dead process's waiters stay queued */
    long long poll_ms;               /* backstop re-check of a suspended waiter */
    long long request_timeout_ms;    /* deadline for one backend call */
    long long probe_timeout_ms;      /* how long /readyz and /metrics wait for a backend */
    char *log_level;                 /* "debug", "info", "warn" or "error" */
    char *tls_cert_file;   /* PEM certificate (chain) of the HTTPS server, or NULL: plain HTTP */
    char *tls_key_file;    /* PEM private key of that certificate, or NULL */
    char *tls_priorities;  /* GnuTLS priorities that tighten HTTPS, or NULL (http/tls.h) */
    char **allowed_hosts;  /* Host header values served ("*": any) */
    size_t nallowed_hosts; /* entries in allowed_hosts */
    char **probe_allowed_hosts;        /* those the probe listener serves: allowed_hosts when the
                                          configuration names them, else its own address's */
    size_t nprobe_allowed_hosts;       /* entries in probe_allowed_hosts */
    long long max_hash_fields;         /* fields a Redis hash may reach through PATCH */
    long long max_value_bytes;         /* bytes of one Redis value or hash field value */
    long long audit_retention_days;    /* audit records older than this are pruned */
    long long max_connections;         /* open HTTP connections; 0: derived from RLIMIT_NOFILE */
    long long max_connections_per_ip;  /* from one client address; 0: half of max_connections */
    long long header_timeout_ms;       /* deadline for a request's headers to arrive in full */
    long long connection_buffer_bytes; /* per connection: request line, headers, reply headers */
    bool ui;                           /* serve the operator console at /ui/ */
    json_t *auth;                      /* the "auth" object of the file (owned), or NULL */
    struct keyset *keyset;             /* API keys and mode, built from auth and the environment
                                          (owned until main publishes it) */
};

/* Looks up one environment variable; getenv in production, a table in tests. */
typedef const char *(*config_getenv_fn)(const char *name);

/*
 * Fills cfg with the defaults, then the JSON file named by FENCEGATE_CONFIG (if
 * set), then the FENCEGATE_* environment variables, looked up through getenv_fn.
 * An unknown key, a wrong type, an out-of-range value or two settings that do
 * not agree (validate in config.c) fail with FG_ERR_CONFIG and a message
 * naming them. cfg owns everything it points to; release it
 * with config_free (also after a failure).
 */
int config_load(struct config *cfg, config_getenv_fn getenv_fn, struct fg_error *err) FG_WUR;

/* Applies a parsed JSON configuration object on top of cfg (borrowed root). */
int config_apply_json(struct config *cfg, const json_t *root, struct fg_error *err) FG_WUR;

/* True iff host (an address or "localhost") is a loopback address. */
bool config_host_is_loopback(const char *host);

/* Finds the writable table called name, or NULL. */
const struct table_config *config_table(const struct config *cfg, const char *name);

/* Frees everything cfg owns and zeroes it. */
void config_free(struct config *cfg);

#endif
