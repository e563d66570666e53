/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_metrics.c - the metric store: results read from replies, lease routes
 * counted by label, cumulative histogram buckets, the bound on route labels,
 * and the Prometheus text around them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/metrics.h"

static int reset(void **state)
{
    (void)state;
    metrics_reset();
    return 0;
}

/* The rendered text, with waiters and in_flight as given. */
static char *render(long waiters, long in_flight)
{
    struct metrics_gauges g = {.waiters = waiters, .in_flight = in_flight, .fence_headroom = -1};
    return metrics_render(&g);
}

/* Asserts that text holds the whole line `series value`. */
static void assert_series(const char *text, const char *series, const char *value)
{
    char line[512];
    snprintf(line, sizeof line, "\n%s %s\n", series, value);
    if (strstr(text, line) == NULL)
        fail_msg("missing line: %s %s", series, value);
}

static void results_from_replies(void **state)
{
    (void)state;
    assert_int_equal(metrics_result_of(200, FG_OK), METRIC_RESULT_OK);
    assert_int_equal(metrics_result_of(409, FG_ERR_LOCK_BUSY), METRIC_RESULT_BUSY);
    assert_int_equal(metrics_result_of(400, FG_ERR_INVALID_NAME), METRIC_RESULT_INVALID);
    assert_int_equal(metrics_result_of(409, FG_ERR_STALE_FENCE), METRIC_RESULT_INVALID);
    assert_int_equal(metrics_result_of(409, FG_ERR_CONFLICT), METRIC_RESULT_SUPERSEDED);
    assert_int_equal(metrics_result_of(503, FG_ERR_BACKEND_UNAVAILABLE), METRIC_RESULT_UNAVAILABLE);
    assert_int_equal(metrics_result_of(500, FG_ERR_INTERNAL), METRIC_RESULT_ERROR);
    assert_int_equal(metrics_result_of(404, FG_OK), METRIC_RESULT_INVALID);
    assert_int_equal(metrics_result_of(500, FG_OK), METRIC_RESULT_ERROR);
    assert_int_equal(metrics_result_of(503, FG_OK), METRIC_RESULT_ERROR);
}

/* A problem of every code counts as the result of its own status class, unless
 * the table names a result of its own (busy, superseded, ...). */
static void every_code_has_a_result(void **state)
{
    (void)state;
    for (int code = FG_ERR_INVALID_JSON; code < FG_CODE_COUNT; code++) {
        enum metric_result by_code = metrics_result_of(fg_code_status(code), (enum fg_code)code);
        enum metric_result by_status = metrics_result_of(fg_code_status(code), FG_OK);
        assert_true(by_code < METRIC_RESULT_COUNT);
        assert_true(by_code != METRIC_RESULT_OK);
        if (by_code != by_status)
            assert_true(by_code != METRIC_RESULT_INVALID && by_code != METRIC_RESULT_ERROR);
    }
}

static void lease_routes_count(void **state)
{
    (void)state;
    metrics_request("lock_acquire", 200, FG_OK, 3);
    metrics_request("lock_acquire", 200, FG_OK, 700);
    metrics_request("lock_acquire", 409, FG_ERR_LOCK_BUSY, 1);
    metrics_request("lock_renew", 410, FG_ERR_LEASE_LOST, 1);
    metrics_request("sem_release", 200, FG_OK, 1);
    metrics_request("healthz", 200, FG_OK, 0);
    metrics_request("lock_status", 499, FG_OK, 40); /* a watch its client closed */
    char *text = render(4, 2);
    assert_series(text, "fencegate_acquisitions_total{kind=\"lock\",result=\"granted\"}", "2");
    assert_series(text, "fencegate_acquisitions_total{kind=\"lock\",result=\"busy\"}", "1");
    assert_series(text, "fencegate_acquisitions_total{kind=\"semaphore\",result=\"granted\"}", "0");
    assert_series(text, "fencegate_renewals_total{kind=\"lock\",result=\"lease_lost\"}", "1");
    assert_series(text, "fencegate_releases_total{kind=\"semaphore\",result=\"ok\"}", "1");
    /* Wait time of the granted ones only: 3 ms and 700 ms. */
    assert_series(text, "fencegate_wait_seconds_bucket{kind=\"lock\",le=\"0.005\"}", "1");
    assert_series(text, "fencegate_wait_seconds_bucket{kind=\"lock\",le=\"0.5\"}", "1");
    assert_series(text, "fencegate_wait_seconds_bucket{kind=\"lock\",le=\"1\"}", "2");
    assert_series(text, "fencegate_wait_seconds_bucket{kind=\"lock\",le=\"+Inf\"}", "2");
    assert_series(text, "fencegate_wait_seconds_sum{kind=\"lock\"}", "0.703");
    assert_series(text, "fencegate_wait_seconds_count{kind=\"lock\"}", "2");
    assert_series(text, "fencegate_waiters", "4");
    assert_series(text, "fencegate_http_requests_in_flight", "2");
    assert_series(text, "fencegate_http_request_duration_seconds_count{route=\"lock_acquire\"}",
                  "3");
    assert_series(text, "fencegate_http_responses_total{route=\"lock_acquire\",code=\"409\"}", "1");
    assert_series(text, "fencegate_http_responses_total{route=\"lock_acquire\",code=\"200\"}", "2");
    assert_series(text, "fencegate_http_responses_total{route=\"healthz\",code=\"200\"}", "1");
    assert_series(text, "fencegate_http_responses_total{route=\"lock_status\",code=\"499\"}", "1");
    assert_null(strstr(text, "xx\""));
    free(text);
}

static void backends_and_writes(void **state)
{
    (void)state;
    metrics_fenced_write(METRIC_BACKEND_PG, METRIC_WRITE_APPLIED);
    metrics_fenced_write(METRIC_BACKEND_PG, metrics_write_refused("stale_fence"));
    metrics_fenced_write(METRIC_BACKEND_PG, metrics_write_refused("revoked"));
    metrics_fenced_write(METRIC_BACKEND_REDIS, metrics_write_refused("lease_expired"));
    metrics_fenced_write(METRIC_BACKEND_REDIS, METRIC_WRITE_INVALID);
    metrics_audit_written("revoked");
    metrics_audit_written("revoked");
    metrics_audit_written("lease_expired");
    metrics_audit_pruned(7);
    metrics_revocation(METRIC_KIND_LOCK);
    metrics_backend_latency(METRIC_BACKEND_REDIS, 180);
    metrics_backend_latency(METRIC_BACKEND_REDIS, 1200);
    metrics_backend_error(METRIC_BACKEND_REDIS);
    metrics_backend_connect(METRIC_BACKEND_PG);
    metrics_backend_connect(METRIC_BACKEND_PG);
    metrics_hold_time(METRIC_KIND_SEMAPHORE, 90000);
    char *text = render(0, 0);
    assert_series(text, "fencegate_fenced_writes_total{backend=\"postgres\",result=\"applied\"}",
                  "1");
    assert_series(text, "fencegate_fenced_writes_total{backend=\"postgres\",result=\"stale\"}",
                  "1");
    assert_series(text, "fencegate_fenced_writes_total{backend=\"postgres\",result=\"revoked\"}",
                  "1");
    assert_series(text, "fencegate_fenced_writes_total{backend=\"redis\",result=\"lease_expired\"}",
                  "1");
    assert_series(text, "fencegate_fenced_writes_total{backend=\"redis\",result=\"invalid\"}", "1");
    assert_series(text, "fencegate_audit_records_total{reason=\"revoked\"}", "2");
    assert_series(text, "fencegate_audit_records_total{reason=\"lease_expired\"}", "1");
    assert_series(text, "fencegate_audit_records_total{reason=\"stale_fence\"}", "0");
    assert_null(strstr(text, "reason=\"other\""));
    assert_series(text, "fencegate_audit_records_pruned_total", "7");
    assert_series(text, "fencegate_revocations_total{kind=\"lock\"}", "1");
    assert_series(text, "fencegate_revocations_total{kind=\"semaphore\"}", "0");
    /* Backend calls in microseconds: 180 us and 1.2 ms. */
    assert_series(
        text, "fencegate_backend_request_duration_seconds_bucket{backend=\"redis\",le=\"0.0001\"}",
        "0");
    assert_series(
        text, "fencegate_backend_request_duration_seconds_bucket{backend=\"redis\",le=\"0.00025\"}",
        "1");
    assert_series(
        text, "fencegate_backend_request_duration_seconds_bucket{backend=\"redis\",le=\"0.0025\"}",
        "2");
    assert_series(text, "fencegate_backend_request_duration_seconds_sum{backend=\"redis\"}",
                  "0.00138");
    assert_series(text, "fencegate_backend_errors_total{backend=\"redis\"}", "1");
    assert_series(text, "fencegate_backend_connects_total{backend=\"postgres\"}", "2");
    assert_series(text, "fencegate_hold_seconds_bucket{kind=\"semaphore\",le=\"60\"}", "0");
    assert_series(text, "fencegate_hold_seconds_bucket{kind=\"semaphore\",le=\"300\"}", "1");
    free(text);
}

/* Only the results an operation and kind can have are series; a reply that maps to
 * another one counts as error. Caught: rendering every kind x result pair (the
 * lock's limit_mismatch and the renewal's busy showed up). */
static void no_impossible_label_pairs(void **state)
{
    (void)state;
    metrics_request("lock_release", 409, FG_ERR_LOCK_BUSY, 1);
    char *text = render(0, 0);
    assert_null(strstr(text, "kind=\"lock\",result=\"limit_mismatch\""));
    assert_series(
        text, "fencegate_acquisitions_total{kind=\"semaphore\",result=\"limit_mismatch\"}", "0");
    assert_null(strstr(text, "fencegate_renewals_total{kind=\"lock\",result=\"busy\"}"));
    assert_null(strstr(text, "fencegate_releases_total{kind=\"lock\",result=\"busy\"}"));
    assert_null(
        strstr(text, "fencegate_releases_total{kind=\"lock\",result=\"max_hold_exceeded\"}"));
    assert_null(
        strstr(text, "fencegate_acquisitions_total{kind=\"lock\",result=\"max_hold_exceeded\"}"));
    assert_series(text, "fencegate_renewals_total{kind=\"lock\",result=\"max_hold_exceeded\"}",
                  "0");
    assert_series(text, "fencegate_releases_total{kind=\"lock\",result=\"error\"}", "1");
    free(text);
}

/* Backend liveness and the process figures come from the gauges of the scrape;
 * a figure that could not be read (-1) is left out. */
static void backend_up_and_process(void **state)
{
    (void)state;
    struct metrics_gauges g = {.backend_up = {[METRIC_BACKEND_PG] = true},
                               .watches = 3,
                               .pg_pool_size = 8,
                               .pg_pool_in_use = 2,
                               .pg_pool_waiting = 1,
                               .fence_headroom = 9999,
                               .process = {.cpu_seconds = 1.5,
                                           .resident_bytes = 4096,
                                           .virtual_bytes = 8192,
                                           .open_fds = 12,
                                           .max_fds = -1,
                                           .start_time_seconds = 1700000000.25}};
    char *text = metrics_render(&g);
    assert_series(text, "fencegate_backend_up{backend=\"postgres\"}", "1");
    assert_series(text, "fencegate_backend_up{backend=\"redis\"}", "0");
    assert_series(text, "fencegate_watches", "3");
    assert_series(text, "fencegate_waiters", "0");
    assert_series(text, "fencegate_pg_pool_connections", "8");
    assert_series(text, "fencegate_pg_pool_in_use", "2");
    assert_series(text, "fencegate_pg_pool_waiting", "1");
    assert_series(text, "fencegate_fence_headroom", "9999");
    assert_series(text, "process_cpu_seconds_total", "1.500");
    assert_series(text, "process_resident_memory_bytes", "4096");
    assert_series(text, "process_virtual_memory_bytes", "8192");
    assert_series(text, "process_open_fds", "12");
    assert_series(text, "process_start_time_seconds", "1700000000.250");
    assert_null(strstr(text, "process_max_fds"));
    assert_non_null(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
    free(text);
}

static void route_labels_are_bounded(void **state)
{
    (void)state;
    static char labels[METRICS_MAX_ROUTES + 10][16];
    for (int i = 0; i < METRICS_MAX_ROUTES + 10; i++) {
        snprintf(labels[i], sizeof labels[i], "route%d", i);
        metrics_request(labels[i], 200, FG_OK, 1);
    }
    metrics_request(NULL, 404, FG_OK, 1);
    char *text = render(0, 0);
    assert_series(text, "fencegate_http_request_duration_seconds_count{route=\"route0\"}", "1");
    assert_null(strstr(text, "route=\"route70\""));
    assert_series(text, "fencegate_http_request_duration_seconds_count{route=\"other\"}", "11");
    free(text);
}

static void text_format(void **state)
{
    (void)state;
    char *text = render(0, 0);
    /* Every family has HELP and TYPE, and the text ends with a newline. */
    assert_non_null(strstr(text, "# TYPE fencegate_acquisitions_total counter\n"));
    assert_non_null(strstr(text, "# TYPE fencegate_wait_seconds histogram\n"));
    assert_non_null(strstr(text, "# HELP fencegate_waiters "));
    assert_int_equal(text[strlen(text) - 1], '\n');
    /* No route seen yet: no route series. */
    assert_null(strstr(text, "route=\""));
    /* The build's version and revision; an unknown headroom is left out. */
    assert_non_null(strstr(text, "\nfencegate_build_info{version=\"" FG_VERSION "\",revision=\""));
    assert_null(strstr(text, "fencegate_fence_headroom"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(results_from_replies, reset),
        cmocka_unit_test_setup(every_code_has_a_result, reset),
        cmocka_unit_test_setup(lease_routes_count, reset),
        cmocka_unit_test_setup(backends_and_writes, reset),
        cmocka_unit_test_setup(no_impossible_label_pairs, reset),
        cmocka_unit_test_setup(backend_up_and_process, reset),
        cmocka_unit_test_setup(route_labels_are_bounded, reset),
        cmocka_unit_test_setup(text_format, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
