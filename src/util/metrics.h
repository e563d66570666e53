/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - the gateway's counters, gauges and histograms, and their rendering
 * in the Prometheus text format (GET /metrics). Every recording function is one
 * lock-free atomic update, safe from any thread and cheap enough for the hot path.
 *
 * Lease outcomes are read from the answers of the lease routes, found by their
 * route label, so that every handler of locks and semaphores is counted the same
 * way without a call of its own.
 *
 * Label sets are bounded by construction: kinds, operations, results and backends
 * are enums, and routes are the labels of the static route table (at most
 * METRICS_MAX_ROUTES of them; any further label is counted as "other"). Never a
 * lock name, a resource or a client as a label. A lease series exists only for
 * the results its operation and kind can have (no renewal is ever "busy", no
 * lock has a "limit_mismatch").
 */
#ifndef FG_METRICS_H
#define FG_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define METRICS_MAX_ROUTES 64

enum metric_kind { METRIC_KIND_LOCK, METRIC_KIND_SEMAPHORE, METRIC_KIND_COUNT };

enum metric_op { METRIC_OP_ACQUIRE, METRIC_OP_RENEW, METRIC_OP_RELEASE, METRIC_OP_COUNT };

/* How a lease call ended, from its reply (see metrics_result_of); the result of
 * each problem code is a column of FG_CODES (util/error.h). */
enum metric_result {
    METRIC_RESULT_OK, /* rendered "granted" for acquisitions */
    METRIC_RESULT_BUSY,
    METRIC_RESULT_TOO_MANY_WAITERS,
    METRIC_RESULT_LIMIT_MISMATCH,
    METRIC_RESULT_MAX_HOLD,
    METRIC_RESULT_LEASE_LOST,
    METRIC_RESULT_SUPERSEDED,
    METRIC_RESULT_UNAVAILABLE,
    METRIC_RESULT_INVALID,
    METRIC_RESULT_ERROR,
    METRIC_RESULT_COUNT
};

enum metric_backend { METRIC_BACKEND_PG, METRIC_BACKEND_REDIS, METRIC_BACKEND_COUNT };

enum metric_write {
    METRIC_WRITE_APPLIED,       /* committed with its fence */
    METRIC_WRITE_STALE,         /* refused: fence older than the stored one (409 stale_fence) */
    METRIC_WRITE_REVOKED,       /* refused: the token's lease was revoked (410 lease_lost) */
    METRIC_WRITE_LEASE_EXPIRED, /* refused: the lease a live_lease guard needs is over (410) */
    METRIC_WRITE_INVALID,       /* refused: forged or foreign token (403 invalid_fence_token) */
    METRIC_WRITE_COUNT
};

/* The process's own figures (util/procstat.c); -1: could not be read, left out. */
struct metrics_process {
    double cpu_seconds;        /* user + system CPU time */
    long long resident_bytes;  /* resident set size */
    long long virtual_bytes;   /* virtual memory size */
    long long open_fds;        /* open file descriptors */
    long long max_fds;         /* RLIMIT_NOFILE soft limit */
    double start_time_seconds; /* wall-clock start, seconds since the epoch */
};

/* Values read at render time from the modules that own them. */
struct metrics_gauges {
    long waiters;             /* acquires parked waiting for a lease (waiter_count()) */
    long watches;             /* watches parked until a lease ends (waiter_watch_count()) */
    long in_flight;           /* requests received and not yet answered */
    long pg_pool_size;        /* connections the Postgres pool may hold */
    long pg_pool_in_use;      /* of them, taken by a caller now */
    long pg_pool_waiting;     /* callers waiting for a free connection now */
    long long fence_headroom; /* fences left in the reservation; -1: unknown, left out */
    bool backend_up[METRIC_BACKEND_COUNT]; /* the backend answered a ping for this scrape */
    struct metrics_process process;        /* CPU, memory and descriptors of the process */
};

/*
 * Maps the reply of a lease call to its result: by problem code when the reply
 * is a problem (problem: its code, FG_OK for none), else by status.
 */
enum metric_result metrics_result_of(int status, enum fg_code problem);

/* Records how long a lease was held, at its release. */
void metrics_hold_time(enum metric_kind kind, int64_t held_ms);

/* Counts one fenced write to backend with its result. */
void metrics_fenced_write(enum metric_backend backend, enum metric_write result);

/* The refusal a fenced write's audit reason ("stale_fence", "revoked",
 * "lease_expired") counts as; METRIC_WRITE_STALE for any other. */
enum metric_write metrics_write_refused(const char *reason);

/* Counts one audit record written with its reason (as the record holds it);
 * a reason of none of the kinds above counts as "other". */
void metrics_audit_written(const char *reason);

/* Counts n audit records deleted past their retention. */
void metrics_audit_pruned(int n);

/* Counts one revoked lease of kind. */
void metrics_revocation(enum metric_kind kind);

/* A grant given back because its answer could not reach its client. */
void metrics_grant_given_back(enum metric_kind kind);

/* A lease to give back (an orphaned grant, an unanswered acquire's) not kept: the list was full. */
void metrics_orphan_forgotten(void);

/* Records how long one call to backend took, answered or failed, in microseconds. */
void metrics_backend_latency(enum metric_backend backend, int64_t elapsed_us);

/* Counts one audit stream entry moved to the dead-letter stream. */
void metrics_audit_dead_letter(void);

/* Counts n connections closed because their request headers came too slowly. */
void metrics_slow_headers_closed(int n);

/* Counts one call that Redis refused for lack of memory (answered 503). */
void metrics_redis_oom(void);

/* Counts one committed group of fence-column writes and the writes it committed. */
void metrics_write_group(size_t writes);

/* Counts one batch written on a shared Redis connection and the commands in it. */
void metrics_redis_batch(size_t commands);

/* Counts one failed call to backend (transport error, timeout, refused). */
void metrics_backend_error(enum metric_backend backend);

/* Counts one new connection to backend (the first one and every reconnect). */
void metrics_backend_connect(enum metric_backend backend);

/*
 * Records one answered HTTP request: route is the route table's label (a string
 * that lives as long as the process, e.g. a literal), or NULL for no route;
 * problem is the code of a problem reply, else FG_OK; status is counted as it
 * is (499: the client closed the connection before its answer). The answers of
 * the lease routes (lock_acquire, sem_renew, ...) also count as acquisitions,
 * renewals or releases with their result; a granted acquisition's latency is
 * its wait time.
 */
void metrics_request(const char *route, int status, enum fg_code problem, int64_t latency_ms);

/* Renders every metric, with gauges, as Prometheus text. Returns a malloc'd,
 * NUL-terminated string owned by the caller. */
char *metrics_render(const struct metrics_gauges *gauges);

/* Zeroes every counter and forgets the routes (unit tests only). */
void metrics_reset(void);

#endif
