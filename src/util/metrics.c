/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - the metric store and its Prometheus text rendering. Counters and
 * histogram buckets are static arrays of relaxed atomics indexed by enums, so
 * recording never takes a lock and never allocates; only rendering allocates.
 * Route labels get a slot the first time they are seen (a compare-and-swap on an
 * array of pointers), bounded by METRICS_MAX_ROUTES. It must not know about
 * HTTP, Redis or Postgres: callers hand it enums, statuses and durations.
 */
#include "util/metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "revision.h"
#include "util/error.h"

/* Upper bounds of a histogram's buckets, in microseconds (+Inf follows). */
struct bounds {
    const int64_t *le_us; /* ascending */
    size_t n;             /* entries of le_us, at most MAX_BUCKETS */
};

#define MAX_BUCKETS 17

/* Leases and requests: from a millisecond to an hour. */
static const int64_t request_le_us[] = {
    1000,    5000,    10000,    25000,    50000,    100000,    250000,    500000,    1000000,
    2500000, 5000000, 10000000, 30000000, 60000000, 300000000, 900000000, 3600000000};
static const struct bounds request_bounds = {request_le_us,
                                             sizeof request_le_us / sizeof request_le_us[0]};

/* Backend calls: from 100 microseconds to the longest statement deadline. */
static const int64_t backend_le_us[] = {100,     250,     500,     1000,     2500,    5000,
                                        10000,   25000,   50000,   100000,   250000,  500000,
                                        1000000, 2500000, 5000000, 10000000, 30000000};
static const struct bounds backend_bounds = {backend_le_us,
                                             sizeof backend_le_us / sizeof backend_le_us[0]};

struct histogram {
    atomic_ullong
        buckets[MAX_BUCKETS + 1]; /* observations per bucket (not cumulative); last: +Inf */
    atomic_ullong sum_us;         /* sum of the observations */
};

static const char *const kind_names[METRIC_KIND_COUNT] = {"lock", "semaphore"};
static const char *const backend_names[METRIC_BACKEND_COUNT] = {"postgres", "redis"};
static const char *const write_names[METRIC_WRITE_COUNT] = {
    [METRIC_WRITE_APPLIED] = "applied", [METRIC_WRITE_STALE] = "stale",
    [METRIC_WRITE_REVOKED] = "revoked", [METRIC_WRITE_LEASE_EXPIRED] = "lease_expired",
    [METRIC_WRITE_INVALID] = "invalid",
};

/* The audit reasons of refused writes, as the records hold them, and the write
 * result each counts as; audit_records has one slot more, for any other. */
static const struct {
    const char *reason;
    enum metric_write write;
} refusals[] = {
    {"stale_fence", METRIC_WRITE_STALE},
    {"revoked", METRIC_WRITE_REVOKED},
    {"lease_expired", METRIC_WRITE_LEASE_EXPIRED},
};
#define NREFUSALS (sizeof refusals / sizeof refusals[0])
static const char *const result_names[METRIC_RESULT_COUNT] = {
    [METRIC_RESULT_OK] = "ok",
    [METRIC_RESULT_BUSY] = "busy",
    [METRIC_RESULT_TOO_MANY_WAITERS] = "too_many_waiters",
    [METRIC_RESULT_LIMIT_MISMATCH] = "limit_mismatch",
    [METRIC_RESULT_MAX_HOLD] = "max_hold_exceeded",
    [METRIC_RESULT_LEASE_LOST] = "lease_lost",
    [METRIC_RESULT_SUPERSEDED] = "superseded",
    [METRIC_RESULT_UNAVAILABLE] = "unavailable",
    [METRIC_RESULT_INVALID] = "invalid",
    [METRIC_RESULT_ERROR] = "error",
};

/* One metric family per lease operation; ok_name is how success reads there. */
static const struct {
    const char *family;
    const char *help;
    const char *ok_name;
} op_table[METRIC_OP_COUNT] = {
    [METRIC_OP_ACQUIRE] = {"fencegate_acquisitions_total",
                           "Answered acquire calls by lease kind and result.", "granted"},
    [METRIC_OP_RENEW] = {"fencegate_renewals_total",
                         "Answered renew calls by lease kind and result.", "ok"},
    [METRIC_OP_RELEASE] = {"fencegate_releases_total",
                           "Answered release calls by lease kind and result.", "ok"},
};

/* The result each problem code counts as: the metric column of FG_CODES. */
#define FG_CODE_RESULT(code, name, status, retry_after_s, title, metric)                           \
    [code] = METRIC_RESULT_##metric,
static const enum metric_result code_results[FG_CODE_COUNT] = {FG_CODES(FG_CODE_RESULT)};

/* The routes (labels of the route table, openapi/routes/) whose answers are lease operations. */
static const struct {
    const char *route;
    enum metric_kind kind;
    enum metric_op op;
} lease_routes[] = {
    {"lock_acquire", METRIC_KIND_LOCK, METRIC_OP_ACQUIRE},
    {"lock_renew", METRIC_KIND_LOCK, METRIC_OP_RENEW},
    {"lock_release", METRIC_KIND_LOCK, METRIC_OP_RELEASE},
    {"sem_acquire", METRIC_KIND_SEMAPHORE, METRIC_OP_ACQUIRE},
    {"sem_renew", METRIC_KIND_SEMAPHORE, METRIC_OP_RENEW},
    {"sem_release", METRIC_KIND_SEMAPHORE, METRIC_OP_RELEASE},
};

#define R(result) (1u << (result))

/* The results each operation can have; any other is counted (and shown) as error. */
static const unsigned op_results[METRIC_OP_COUNT] = {
    [METRIC_OP_ACQUIRE] = R(METRIC_RESULT_OK) | R(METRIC_RESULT_BUSY) |
                          R(METRIC_RESULT_TOO_MANY_WAITERS) | R(METRIC_RESULT_LIMIT_MISMATCH) |
                          R(METRIC_RESULT_LEASE_LOST) | R(METRIC_RESULT_SUPERSEDED) |
                          R(METRIC_RESULT_UNAVAILABLE) | R(METRIC_RESULT_INVALID) |
                          R(METRIC_RESULT_ERROR),
    [METRIC_OP_RENEW] = R(METRIC_RESULT_OK) | R(METRIC_RESULT_MAX_HOLD) |
                        R(METRIC_RESULT_LEASE_LOST) | R(METRIC_RESULT_UNAVAILABLE) |
                        R(METRIC_RESULT_INVALID) | R(METRIC_RESULT_ERROR),
    [METRIC_OP_RELEASE] = R(METRIC_RESULT_OK) | R(METRIC_RESULT_LEASE_LOST) |
                          R(METRIC_RESULT_UNAVAILABLE) | R(METRIC_RESULT_INVALID) |
                          R(METRIC_RESULT_ERROR),
};

/* The results each kind can have: only a semaphore has a limit to mismatch. */
static const unsigned kind_results[METRIC_KIND_COUNT] = {
    [METRIC_KIND_LOCK] = ~R(METRIC_RESULT_LIMIT_MISMATCH),
    [METRIC_KIND_SEMAPHORE] = ~0u,
};

static bool result_possible(enum metric_op op, enum metric_kind kind, enum metric_result result)
{
    return (op_results[op] & kind_results[kind] & R(result)) != 0;
}

#define STATUS_MIN   100 /* statuses counted: 100 .. 599 */
#define STATUS_SLOTS 500

static struct {
    atomic_ullong lease[METRIC_KIND_COUNT][METRIC_OP_COUNT][METRIC_RESULT_COUNT];
    struct histogram wait[METRIC_KIND_COUNT];
    struct histogram hold[METRIC_KIND_COUNT];
    atomic_ullong writes[METRIC_BACKEND_COUNT][METRIC_WRITE_COUNT];
    atomic_ullong audit_records[NREFUSALS + 1]; /* by refusals[] reason; last: any other */
    atomic_ullong audit_pruned;
    atomic_ullong revocations[METRIC_KIND_COUNT];
    atomic_ullong grants_given_back[METRIC_KIND_COUNT];
    atomic_ullong orphans_forgotten;
    struct histogram backend_latency[METRIC_BACKEND_COUNT];
    atomic_ullong audit_dead_letters;
    atomic_ullong slow_headers_closed;
    atomic_ullong redis_oom;
    atomic_ullong write_groups;
    atomic_ullong grouped_writes;
    atomic_ullong redis_batches;
    atomic_ullong redis_batched_commands;
    atomic_ullong backend_errors[METRIC_BACKEND_COUNT];
    atomic_ullong backend_connects[METRIC_BACKEND_COUNT];
    _Atomic(const char *) route_labels[METRICS_MAX_ROUTES + 1]; /* last slot: "other" */
    struct histogram latency[METRICS_MAX_ROUTES + 1];
    atomic_ullong responses[METRICS_MAX_ROUTES + 1][STATUS_SLOTS]; /* by status - STATUS_MIN */
} m;

static void add(atomic_ullong *counter)
{
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

static unsigned long long get(atomic_ullong *counter)
{
    return atomic_load_explicit(counter, memory_order_relaxed);
}

/* Counts one observation of us microseconds in h, whose buckets are b. */
static void observe(struct histogram *h, const struct bounds *b, int64_t us)
{
    if (us < 0)
        us = 0;
    size_t i = 0;
    while (i < b->n && us > b->le_us[i])
        i++;
    add(&h->buckets[i]);
    atomic_fetch_add_explicit(&h->sum_us, (unsigned long long)us, memory_order_relaxed);
}

enum metric_result metrics_result_of(int status, enum fg_code problem)
{
    FG_ASSERT(problem >= 0 && problem < FG_CODE_COUNT);
    if (problem != FG_OK)
        return code_results[problem];
    if (status >= 200 && status < 300)
        return METRIC_RESULT_OK;
    if (status >= 400 && status < 500)
        return METRIC_RESULT_INVALID;
    return METRIC_RESULT_ERROR;
}

/* Counts the answer of a lease route, if route is one (see lease_routes). */
static void count_lease(const char *route, int status, enum fg_code problem, int64_t elapsed_ms)
{
    for (size_t i = 0; i < sizeof lease_routes / sizeof lease_routes[0]; i++) {
        if (strcmp(route, lease_routes[i].route) != 0)
            continue;
        enum metric_kind kind = lease_routes[i].kind;
        enum metric_result result = metrics_result_of(status, problem);
        if (!result_possible(lease_routes[i].op, kind, result))
            result = METRIC_RESULT_ERROR;
        add(&m.lease[kind][lease_routes[i].op][result]);
        if (lease_routes[i].op == METRIC_OP_ACQUIRE && result == METRIC_RESULT_OK)
            observe(&m.wait[kind], &request_bounds, elapsed_ms * 1000);
        return;
    }
}

void metrics_hold_time(enum metric_kind kind, int64_t held_ms)
{
    FG_ASSERT(kind < METRIC_KIND_COUNT);
    observe(&m.hold[kind], &request_bounds, held_ms * 1000);
}

void metrics_fenced_write(enum metric_backend backend, enum metric_write result)
{
    FG_ASSERT(backend < METRIC_BACKEND_COUNT && result < METRIC_WRITE_COUNT);
    add(&m.writes[backend][result]);
}

/* The index in refusals of reason, or NREFUSALS for none of them. */
static size_t refusal_of(const char *reason)
{
    size_t i = 0;
    while (i < NREFUSALS && (reason == NULL || strcmp(reason, refusals[i].reason) != 0))
        i++;
    return i;
}

enum metric_write metrics_write_refused(const char *reason)
{
    size_t i = refusal_of(reason);
    return i < NREFUSALS ? refusals[i].write : METRIC_WRITE_STALE;
}

void metrics_audit_written(const char *reason)
{
    add(&m.audit_records[refusal_of(reason)]);
}

void metrics_audit_pruned(int n)
{
    atomic_fetch_add_explicit(&m.audit_pruned, (unsigned long long)n, memory_order_relaxed);
}

void metrics_revocation(enum metric_kind kind)
{
    FG_ASSERT(kind < METRIC_KIND_COUNT);
    add(&m.revocations[kind]);
}

void metrics_grant_given_back(enum metric_kind kind)
{
    FG_ASSERT(kind < METRIC_KIND_COUNT);
    add(&m.grants_given_back[kind]);
}

void metrics_orphan_forgotten(void)
{
    add(&m.orphans_forgotten);
}

void metrics_backend_latency(enum metric_backend backend, int64_t elapsed_us)
{
    FG_ASSERT(backend < METRIC_BACKEND_COUNT);
    observe(&m.backend_latency[backend], &backend_bounds, elapsed_us);
}

void metrics_audit_dead_letter(void)
{
    add(&m.audit_dead_letters);
}

void metrics_slow_headers_closed(int n)
{
    atomic_fetch_add_explicit(&m.slow_headers_closed, (unsigned long long)n, memory_order_relaxed);
}

void metrics_redis_oom(void)
{
    add(&m.redis_oom);
}

void metrics_write_group(size_t writes)
{
    add(&m.write_groups);
    atomic_fetch_add_explicit(&m.grouped_writes, (unsigned long long)writes, memory_order_relaxed);
}

void metrics_redis_batch(size_t commands)
{
    add(&m.redis_batches);
    atomic_fetch_add_explicit(&m.redis_batched_commands, (unsigned long long)commands,
                              memory_order_relaxed);
}

void metrics_backend_error(enum metric_backend backend)
{
    FG_ASSERT(backend < METRIC_BACKEND_COUNT);
    add(&m.backend_errors[backend]);
}

void metrics_backend_connect(enum metric_backend backend)
{
    FG_ASSERT(backend < METRIC_BACKEND_COUNT);
    add(&m.backend_connects[backend]);
}

/* The slot of route label, claiming a free one the first time; the last slot
 * ("other") takes every label once the table is full. */
static size_t route_slot(const char *label)
{
    for (size_t i = 0; i < METRICS_MAX_ROUTES; i++) {
        const char *seen = atomic_load(&m.route_labels[i]);
        if (seen == NULL && atomic_compare_exchange_strong(&m.route_labels[i], &seen, label))
            return i;
        if (seen == label || strcmp(seen, label) == 0)
            return i;
    }
    return METRICS_MAX_ROUTES;
}

void metrics_request(const char *route, int status, enum fg_code problem, int64_t latency_ms)
{
    if (route == NULL)
        route = "none";
    count_lease(route, status, problem, latency_ms);
    size_t slot = route_slot(route);
    observe(&m.latency[slot], &request_bounds, latency_ms * 1000);
    if (status >= STATUS_MIN && status < STATUS_MIN + STATUS_SLOTS)
        add(&m.responses[slot][status - STATUS_MIN]);
}

void metrics_reset(void)
{
    memset(&m, 0, sizeof m);
}

/* --- rendering ------------------------------------------------------------------------------- */

struct text {
    char *s;    /* the text so far (owned) */
    size_t len; /* bytes used */
    size_t cap; /* bytes allocated */
};

static void emit(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(struct text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        FG_ASSERT(n >= 0);
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n;
        t->s = realloc(t->s, t->cap);
        FG_ASSERT(t->s != NULL);
    }
}

static void header(struct text *t, const char *family, const char *type, const char *help)
{
    emit(t, "# HELP %s %s\n# TYPE %s %s\n", family, help, family, type);
}

/* A counter without labels: its HELP and TYPE lines and its one sample. */
static void counter(struct text *t, const char *family, const char *help, atomic_ullong *value)
{
    header(t, family, "counter", help);
    emit(t, "%s %llu\n", family, get(value));
}

static unsigned long long histogram_count(struct histogram *h)
{
    unsigned long long n = 0;
    for (size_t i = 0; i <= MAX_BUCKETS; i++)
        n += get(&h->buckets[i]);
    return n;
}

/* Writes us microseconds as seconds, exactly and without trailing zeros
 * ("0.703", "2", "0.00025") into buf. */
static const char *seconds_text(unsigned long long us, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%llu.%06llu", us / 1000000, us % 1000000);
    FG_ASSERT(n > 0 && (size_t)n < size);
    while (buf[n - 1] == '0')
        buf[--n] = '\0';
    if (buf[n - 1] == '.')
        buf[n - 1] = '\0';
    return buf;
}

/* Writes the series of histogram h with buckets b; labels is "" or `name="value"`. */
static void emit_histogram(struct text *t, const char *family, const char *labels,
                           struct histogram *h, const struct bounds *b)
{
    const char *sep = labels[0] != '\0' ? "," : "";
    char secs[32];
    unsigned long long cumulative = 0;
    for (size_t i = 0; i < b->n; i++) {
        cumulative += get(&h->buckets[i]);
        emit(t, "%s_bucket{%s%sle=\"%s\"} %llu\n", family, labels, sep,
             seconds_text((unsigned long long)b->le_us[i], secs, sizeof secs), cumulative);
    }
    cumulative += get(&h->buckets[b->n]);
    emit(t, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", family, labels, sep, cumulative);
    const char *open = labels[0] != '\0' ? "{" : "", *close = labels[0] != '\0' ? "}" : "";
    emit(t, "%s_sum%s%s%s %s\n", family, open, labels, close,
         seconds_text(get(&h->sum_us), secs, sizeof secs));
    emit(t, "%s_count%s%s%s %llu\n", family, open, labels, close, cumulative);
}

static void render_leases(struct text *t)
{
    for (int op = 0; op < METRIC_OP_COUNT; op++) {
        header(t, op_table[op].family, "counter", op_table[op].help);
        for (int k = 0; k < METRIC_KIND_COUNT; k++)
            for (int r = 0; r < METRIC_RESULT_COUNT; r++)
                if (result_possible(op, k, r))
                    emit(t, "%s{kind=\"%s\",result=\"%s\"} %llu\n", op_table[op].family,
                         kind_names[k],
                         r == METRIC_RESULT_OK ? op_table[op].ok_name : result_names[r],
                         get(&m.lease[k][op][r]));
    }
    static const struct {
        const char *family;
        const char *help;
        struct histogram *by_kind; /* METRIC_KIND_COUNT histograms */
    } durations[] = {
        {"fencegate_wait_seconds", "Time from an acquire's arrival to its grant.", m.wait},
        {"fencegate_hold_seconds", "Time from a grant to its release.", m.hold},
    };
    for (size_t d = 0; d < sizeof durations / sizeof durations[0]; d++) {
        header(t, durations[d].family, "histogram", durations[d].help);
        for (int k = 0; k < METRIC_KIND_COUNT; k++) {
            char labels[64];
            snprintf(labels, sizeof labels, "kind=\"%s\"", kind_names[k]);
            emit_histogram(t, durations[d].family, labels, &durations[d].by_kind[k],
                           &request_bounds);
        }
    }
}

static void render_backends(struct text *t, const bool *up)
{
    header(t, "fencegate_backend_up", "gauge",
           "1 if the backend answered a ping for this scrape within probe_timeout_ms, else 0.");
    for (int b = 0; b < METRIC_BACKEND_COUNT; b++)
        emit(t, "fencegate_backend_up{backend=\"%s\"} %d\n", backend_names[b], up[b] ? 1 : 0);
    header(
        t, "fencegate_fenced_writes_total", "counter",
        "Fenced writes by backend and result (applied, stale, revoked, lease_expired, invalid).");
    for (int b = 0; b < METRIC_BACKEND_COUNT; b++)
        for (int w = 0; w < METRIC_WRITE_COUNT; w++)
            emit(t, "fencegate_fenced_writes_total{backend=\"%s\",result=\"%s\"} %llu\n",
                 backend_names[b], write_names[w], get(&m.writes[b][w]));
    header(t, "fencegate_audit_records_total", "counter",
           "Audit records of refused writes, by reason.");
    for (size_t r = 0; r <= NREFUSALS; r++)
        if (r < NREFUSALS || get(&m.audit_records[r]) > 0)
            emit(t, "fencegate_audit_records_total{reason=\"%s\"} %llu\n",
                 r < NREFUSALS ? refusals[r].reason : "other", get(&m.audit_records[r]));
    counter(t, "fencegate_audit_records_pruned_total",
            "Audit records deleted past limits.audit_retention_days.", &m.audit_pruned);
    counter(t, "fencegate_audit_dead_letters_total",
            "Audit stream entries that could not be stored, moved to fg:audit:dead.",
            &m.audit_dead_letters);
    counter(
        t, "fencegate_slow_headers_closed_total",
        "Connections closed because a request's headers or body missed limits.header_timeout_ms.",
        &m.slow_headers_closed);
    counter(t, "fencegate_redis_oom_total",
            "Calls Redis refused for lack of memory (answered 503).", &m.redis_oom);
    counter(t, "fencegate_pg_write_groups_total",
            "Groups of fence-column writes committed, one transaction each (grouped writes over "
            "groups: the mean group size).",
            &m.write_groups);
    counter(t, "fencegate_pg_grouped_writes_total",
            "Fence-column writes committed in those groups.", &m.grouped_writes);
    counter(t, "fencegate_redis_batches_total",
            "Batches written on the shared Redis connections, one write each (batched commands "
            "over batches: the mean batch size).",
            &m.redis_batches);
    counter(t, "fencegate_redis_batched_commands_total", "Commands written in those batches.",
            &m.redis_batched_commands);
    header(t, "fencegate_backend_errors_total", "counter",
           "Failed backend calls (transport errors, timeouts).");
    for (int b = 0; b < METRIC_BACKEND_COUNT; b++)
        emit(t, "fencegate_backend_errors_total{backend=\"%s\"} %llu\n", backend_names[b],
             get(&m.backend_errors[b]));
    header(t, "fencegate_backend_connects_total", "counter",
           "Connections opened to a backend (first connections and reconnects).");
    for (int b = 0; b < METRIC_BACKEND_COUNT; b++)
        emit(t, "fencegate_backend_connects_total{backend=\"%s\"} %llu\n", backend_names[b],
             get(&m.backend_connects[b]));
    header(t, "fencegate_backend_request_duration_seconds", "histogram",
           "Time of one backend call (a script, a statement, a group), answered or failed.");
    for (int b = 0; b < METRIC_BACKEND_COUNT; b++) {
        char labels[64];
        snprintf(labels, sizeof labels, "backend=\"%s\"", backend_names[b]);
        emit_histogram(t, "fencegate_backend_request_duration_seconds", labels,
                       &m.backend_latency[b], &backend_bounds);
    }
}

/* The Postgres pool and the fence reservation, as read for this scrape. */
static void render_capacity(struct text *t, const struct metrics_gauges *g)
{
    static const struct {
        const char *family;
        const char *help;
        size_t offset; /* of the figure (a long) in struct metrics_gauges */
    } pool[] = {
        {"fencegate_pg_pool_connections", "Connections the Postgres pool may hold (pg_pool_size).",
         offsetof(struct metrics_gauges, pg_pool_size)},
        {"fencegate_pg_pool_in_use", "Postgres connections taken by a caller now.",
         offsetof(struct metrics_gauges, pg_pool_in_use)},
        {"fencegate_pg_pool_waiting", "Callers waiting for a free Postgres connection now.",
         offsetof(struct metrics_gauges, pg_pool_waiting)},
    };
    for (size_t i = 0; i < sizeof pool / sizeof pool[0]; i++) {
        header(t, pool[i].family, "gauge", pool[i].help);
        emit(t, "%s %ld\n", pool[i].family,
             *(const long *)(const void *)((const char *)g + pool[i].offset));
    }
    header(t, "fencegate_revocations_total", "counter", "Leases revoked, by kind.");
    for (int k = 0; k < METRIC_KIND_COUNT; k++)
        emit(t, "fencegate_revocations_total{kind=\"%s\"} %llu\n", kind_names[k],
             get(&m.revocations[k]));
    header(t, "fencegate_grants_given_back_total", "counter",
           "Grants given back at once because their answer could not reach the client, by kind.");
    for (int k = 0; k < METRIC_KIND_COUNT; k++)
        emit(t, "fencegate_grants_given_back_total{kind=\"%s\"} %llu\n", kind_names[k],
             get(&m.grants_given_back[k]));
    counter(t, "fencegate_orphans_forgotten_total",
            "Leases to give back (grants whose waiter had gone, leases of acquires answered 503 "
            "without a reply) not kept because the list of them was full: each held until its ttl.",
            &m.orphans_forgotten);
    if (g->fence_headroom < 0)
        return;
    header(t, "fencegate_fence_headroom", "gauge",
           "Fences Redis may still issue before the next reservation in Postgres; 0 when none "
           "may be issued until a recovery (Redis lost its data).");
    emit(t, "fencegate_fence_headroom %lld\n", g->fence_headroom);
}

static void render_http(struct text *t)
{
    static const char *const family = "fencegate_http_request_duration_seconds";
    header(t, family, "histogram", "Time from a request's arrival to its reply, by route.");
    for (size_t i = 0; i <= METRICS_MAX_ROUTES; i++) {
        const char *label = i < METRICS_MAX_ROUTES ? atomic_load(&m.route_labels[i]) : "other";
        if (label == NULL || (i == METRICS_MAX_ROUTES && histogram_count(&m.latency[i]) == 0))
            continue;
        char labels[128];
        snprintf(labels, sizeof labels, "route=\"%s\"", label);
        emit_histogram(t, family, labels, &m.latency[i], &request_bounds);
    }
    header(t, "fencegate_http_responses_total", "counter",
           "Replies by route and status code (499: the client closed the connection first).");
    for (size_t i = 0; i <= METRICS_MAX_ROUTES; i++) {
        const char *label = i < METRICS_MAX_ROUTES ? atomic_load(&m.route_labels[i]) : "other";
        for (int c = 0; c < STATUS_SLOTS; c++)
            if (label != NULL && get(&m.responses[i][c]) > 0)
                emit(t, "fencegate_http_responses_total{route=\"%s\",code=\"%d\"} %llu\n", label,
                     c + STATUS_MIN, get(&m.responses[i][c]));
    }
}

/* The standard process_* families (as Prometheus client libraries name them);
 * a figure that could not be read (-1) is left out. */
static void render_process(struct text *t, const struct metrics_process *p)
{
    static const struct {
        const char *family;
        const char *type;
        const char *help;
        size_t offset;  /* of the figure in struct metrics_process */
        bool is_double; /* double, else long long */
    } figures[] = {
        {"process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.",
         offsetof(struct metrics_process, cpu_seconds), true},
        {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         offsetof(struct metrics_process, resident_bytes), false},
        {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
         offsetof(struct metrics_process, virtual_bytes), false},
        {"process_open_fds", "gauge", "Open file descriptors.",
         offsetof(struct metrics_process, open_fds), false},
        {"process_max_fds", "gauge", "Maximum number of open file descriptors.",
         offsetof(struct metrics_process, max_fds), false},
        {"process_start_time_seconds", "gauge", "Start time of the process since the epoch.",
         offsetof(struct metrics_process, start_time_seconds), true},
    };
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
        const char *field = (const char *)p + figures[i].offset;
        double d = figures[i].is_double ? *(const double *)(const void *)field : 0;
        long long n = figures[i].is_double ? 0 : *(const long long *)(const void *)field;
        if ((figures[i].is_double && d < 0) || (!figures[i].is_double && n < 0))
            continue;
        header(t, figures[i].family, figures[i].type, figures[i].help);
        if (figures[i].is_double)
            emit(t, "%s %.3f\n", figures[i].family, d);
        else
            emit(t, "%s %lld\n", figures[i].family, n);
    }
}

char *metrics_render(const struct metrics_gauges *gauges)
{
    struct text t = {.s = malloc(16384), .len = 0, .cap = 16384};
    FG_ASSERT(t.s != NULL);
    header(&t, "fencegate_build_info", "gauge",
           "Version and source revision of the running gateway; always 1.");
    emit(&t, "fencegate_build_info{version=\"%s\",revision=\"%s\"} 1\n", FG_VERSION, FG_REVISION);
    header(&t, "fencegate_waiters", "gauge",
           "Acquire requests (of locks, semaphores and lock sets) parked waiting for a lease now.");
    emit(&t, "fencegate_waiters %ld\n", gauges->waiters);
    header(&t, "fencegate_watches", "gauge", "Watch requests parked until a lease ends now.");
    emit(&t, "fencegate_watches %ld\n", gauges->watches);
    header(&t, "fencegate_http_requests_in_flight", "gauge",
           "Requests received and not yet answered.");
    emit(&t, "fencegate_http_requests_in_flight %ld\n", gauges->in_flight);
    render_leases(&t);
    render_backends(&t, gauges->backend_up);
    render_capacity(&t, gauges);
    render_http(&t);
    render_process(&t, &gauges->process);
    return t.s;
}
