/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fglimits.h - every limit and default of the public contract, once: the byte
 * limits of names and labels, the ranges of lease durations, the sizes of
 * lock sets, batches and pages, and the defaults of the configuration. The
 * gateway, fencectl, the configuration and the parsers of request bodies all
 * read them from here; README.md and docs/ state the same numbers, which
 * tests/package/test_docs.py checks against this file. The values are plain
 * decimal literals so that help texts can spell them (FG_STR).
 *
 * The Lua scripts read the numbers they share with C from here too: the build
 * puts "local NAME = <n>" before a script for each name it mentions
 * (cmake/lua_scripts.cmake). Buffer sizes and internal tunables (token text,
 * script tables, orphan grace) stay with the module that owns them: they are
 * not promises to a client.
 */
#ifndef FG_FGLIMITS_H
#define FG_FGLIMITS_H

/* A limit as a string literal, for help texts: FG_STR(TTL_MAX_MS) is "86400000". */
#define FG_STR_(x) #x
#define FG_STR(x)  FG_STR_(x)

/* --- names and labels, in bytes ------------------------------------------------------------- */
#define NAME_MAX_LEN          200  /* a lock or semaphore name */
#define SEGMENT_MAX_LEN       1024 /* a decoded path segment (table, row key, Redis key) */
#define OWNER_NAME_MAX_LEN    200  /* an acquire's owner, a Fence-Owner header */
#define REQUEST_ID_MAX_LEN    200  /* an acquire's request_id */
#define X_REQUEST_ID_MAX_LEN  128  /* an X-Request-Id header the gateway echoes */
#define REVOCATION_REASON_MAX 200  /* the reason of a revoke */
#define TOKEN_MAX_LEN         560  /* a lease token's text with its NUL: two names and 160 */

/* --- leases, in milliseconds unless named otherwise ------------------------------------------ */
#define TTL_MIN_MS              100       /* shortest ttl_ms (and max_hold_ms) */
#define TTL_MAX_MS              86400000  /* longest ttl_ms: a day */
#define WAIT_MAX_MS             3600000   /* longest wait_ms of an acquire or a watch: an hour */
#define MAX_HOLD_MAX_MS         604800000 /* longest max_hold_ms: a week */
#define REQUEST_ID_GRACE_MS     60000     /* a request_id is kept this long past wait and lease */
#define SEMAPHORE_MAX_LIMIT     100000    /* largest limit of a semaphore */
#define LOCKSET_MAX             32        /* locks in one lock set */
#define WATCH_WAIT_DEFAULT_MS   30000     /* wait_ms of a watch that names none */
#define LEASE_MAX_HANDOFF       16     /* in-process grants one script may answer (lib_sem.lua) */
#define LEASE_RELEASED_KEPT_MS  600000 /* a release is answered again this long, or the ttl */
#define SEM_KEEP_MS             600000 /* an idle semaphore's keys outlive its last lease so long */
#define RECHECK_AFTER_OUTAGE_MS 200    /* a parked waiter that met an outage looks again */
#define GIVE_BACK_RETRY_MS      1000   /* a janitor's give-back that met an outage is tried again */
#define CLIENT_GONE_CHECK_MS    10     /* an answer this late probes whether its client went */
#define WATCH_MARK_MIN_MS       10000 /* ends are published at least this long after a watch looked */

/* --- signing keys ------------------------------------------------------------------------- */
#define TOKEN_SECRET_MIN 16  /* shortest signing secret, in bytes */
#define TOKEN_SECRET_MAX 256 /* longest signing secret, in bytes */
#define TOKEN_KEY_ID_MAX 32  /* longest signing key id, in bytes */
#define TOKEN_KEYS_MAX   8   /* signing keys in one ring */

/* --- API keys and the rest of the configuration, in bytes or counts ------------------------ */
#define API_KEY_ID_MAX              64      /* longest API key id */
#define API_KEY_TEXT_MAX            1024    /* longest key text a client may present */
#define SCOPE_MAX_LEN               600     /* longest scope of an API key */
#define TLS_CHAIN_MAX               8       /* certificates of a tls_cert_file, its own included */
#define REDIS_URL_MAX_HOSTS         16      /* sentinels one redis-sentinel:// URL may list */
#define CONNECTION_BUFFER_MIN_BYTES 2048    /* smallest limits.connection_buffer_bytes */
#define CONNECTION_BUFFER_MAX_BYTES 1048576 /* largest */
#define PG_CONNECT_TIMEOUT_MIN_MS   2000    /* least pg_connect_timeout_ms: libpq reads 1 s as 2 */
#define PG_CONNECT_TIMEOUT_MAX_MS   600000  /* largest */
#define PG_CONNECT_TIMEOUT_STEP_MS  1000    /* libpq's connect_timeout counts whole seconds */

/* --- writes and pages ----------------------------------------------------------------------- */
#define FENCED_BATCH_MAX_OPS    100      /* operations in one batch */
#define LIST_LIMIT_DEFAULT      100      /* items of a lock or semaphore listing page */
#define LIST_LIMIT_MAX          1000     /* largest such page */
#define LEASE_LIST_SEM_HOLDERS  16       /* live holders listed per semaphore */
#define STATUS_WAITERS_MAX      100      /* first waiters a status read lists at most */
#define AUDIT_LIMIT_DEFAULT     100      /* records of an audit page */
#define AUDIT_LIMIT_MAX         1000     /* largest audit page */
#define AUDIT_WINDOW_DEFAULT_MS 3600000  /* an audit summary covers the last hour by default */
#define AUDIT_WINDOW_MAX_MS     86400000 /* and at most a day (1,440 one-minute buckets) */
#define AUDIT_DEAD_LETTERS_MAX  100000   /* entries the dead-letter stream keeps (about) */
#define AUDIT_TIME_MAX_MS       253402300799999 /* latest since_ms, until_ms: year 9999 */

/* --- defaults of the configuration (README, "Configuration") -------------------------------- */
#define DEFAULT_TTL_MS                  30000   /* defaults.ttl_ms */
#define DEFAULT_WAIT_MS                 0       /* defaults.wait_ms: try once */
#define DEFAULT_MAX_HOLD_MS             1800000 /* defaults.max_hold_ms: half an hour */
#define DEFAULT_MAX_BODY_BYTES          1048576 /* limits.max_body_bytes */
#define DEFAULT_MAX_WAITERS_PER_LOCK    10000   /* limits.max_waiters_per_lock */
#define DEFAULT_MAX_WAITERS             100000  /* limits.max_waiters */
#define DEFAULT_KEPT_PLACE_MS           30000   /* limits.kept_place_ms */
#define DEFAULT_MAX_HASH_FIELDS         1000    /* limits.max_hash_fields */
#define DEFAULT_MAX_VALUE_BYTES         65536   /* limits.max_value_bytes */
#define DEFAULT_AUDIT_RETENTION_DAYS    90      /* limits.audit_retention_days */
#define DEFAULT_HEADER_TIMEOUT_MS       10000   /* limits.header_timeout_ms */
#define DEFAULT_CONNECTION_BUFFER_BYTES 8192    /* limits.connection_buffer_bytes */
#define DEFAULT_HTTP_THREADS            32      /* http_threads */
#define DEFAULT_PG_POOL_SIZE            8       /* pg_pool_size */
#define DEFAULT_REDIS_PIPELINE_FROM     0       /* redis_pipeline_from */
#define LARGE_READ_BYTES                8192    /* most bytes a read answers on the shared link */
#define DEFAULT_STATEMENT_TIMEOUT_MS    5000    /* statement_timeout_ms */
#define DEFAULT_PG_CONNECT_TIMEOUT_MS   2000    /* pg_connect_timeout_ms */
#define DEFAULT_REQUEST_TIMEOUT_MS      5000    /* request_timeout_ms */
#define DEFAULT_PROBE_TIMEOUT_MS        1000    /* probe_timeout_ms */
#define DEFAULT_WAITER_LEASE_MS         3000    /* waiter_lease_ms */
#define DEFAULT_POLL_MS                 2000    /* poll_ms */
#define DEFAULT_LISTEN_PORT             8480    /* the port of listen */
#define PROBE_MAX_CONNECTIONS           64      /* open connections of the probe listener */

/* --- defaults of fencectl ------------------------------------------------------------------- */
#define CTL_GRACE_DEFAULT_MS 5000    /* --grace: from SIGTERM to SIGKILL after a lost lease */
#define CTL_GRACE_MAX_MS     3600000 /* longest --grace */
#define CTL_GIVE_BACK_MS     2000    /* the one release of a lease already counted as lost */

#endif
