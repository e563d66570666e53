/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_audit_filter.c - the audit query's arguments: filters, pages and time windows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/audit/audit_filter.h"

static void audit_arguments(void **state)
{
    (void)state;
    struct audit_filter f;
    struct fg_error err = {0};
    assert_int_equal(audit_filter_parse("pg:invoices/1", NULL, NULL, NULL, NULL, NULL, &f, &err),
                     0);
    assert_string_equal(f.resource, "pg:invoices/1");
    assert_null(f.lock_name);
    assert_null(f.lease_kind);
    assert_int_equal(f.limit, 100);
    assert_int_equal(audit_filter_parse(NULL, NULL, NULL, "5", "1000", "12", &f, &err), 0);
    assert_null(f.lock_name);
    assert_int_equal(f.since_ms, 5);
    assert_int_equal(f.after_id, 12);
    assert_int_equal(f.limit, 1000);
    assert_int_equal(audit_filter_parse(NULL, NULL, NULL, NULL, NULL, "1x", &f, &err), -1);
    assert_string_equal(
        err.msg, "query parameter 'after_id' must be an integer from 0 to 9223372036854775807");

    assert_int_equal(audit_filter_parse(NULL, "invoice:u", "semaphore", NULL, NULL, NULL, &f, &err),
                     0);
    assert_string_equal(f.lock_name, "invoice:u");
    assert_string_equal(f.lease_kind, "semaphore");
    assert_int_equal(audit_filter_parse(NULL, NULL, "lock", NULL, NULL, NULL, &f, &err), 0);
    assert_string_equal(f.lease_kind, "lock");
    assert_int_equal(audit_filter_parse(NULL, NULL, "Lock", NULL, NULL, NULL, &f, &err), -1);
    assert_string_equal(err.msg, "query parameter 'lease_kind' must be lock or semaphore");
    assert_int_equal(audit_filter_parse(NULL, NULL, "", NULL, NULL, NULL, &f, &err), -1);

    assert_int_equal(audit_filter_parse(NULL, NULL, NULL, "100", NULL, NULL, &f, &err), 0);
    assert_int_equal(audit_filter_narrow("worker-1", "200", &f, &err), 0);
    assert_string_equal(f.owner, "worker-1");
    assert_int_equal(f.until_ms, 200);
    assert_int_equal(audit_filter_narrow(NULL, NULL, &f, &err), 0);
    assert_null(f.owner);
    assert_int_equal(f.until_ms, 0);
    assert_int_equal(audit_filter_narrow(NULL, "100", &f, &err), -1);
    assert_string_equal(err.msg, "query parameter 'until_ms' must be later than since_ms");
    assert_int_equal(audit_filter_narrow(NULL, "0", &f, &err), -1);
    assert_string_equal(err.msg,
                        "query parameter 'until_ms' must be an integer from 1 to 253402300799999");
}

static void audit_windows(void **state)
{
    (void)state;
    struct audit_window w;
    struct fg_error err = {0};
    assert_int_equal(audit_window_parse(NULL, NULL, 10000000, &w, &err), 0);
    assert_int_equal(w.until_ms, 10000000);
    assert_int_equal(w.since_ms, 10000000 - AUDIT_WINDOW_DEFAULT_MS);
    assert_int_equal(audit_window_parse(NULL, "1", 10000000, &w, &err), 0);
    assert_int_equal(w.since_ms, 0); /* never before the epoch */
    assert_int_equal(w.until_ms, 1);
    assert_int_equal(audit_window_parse(NULL, NULL, AUDIT_WINDOW_DEFAULT_MS, &w, &err), 0);
    assert_int_equal(w.since_ms, 0);
    assert_int_equal(audit_window_parse("5", "10", 10000000, &w, &err), 0);
    assert_int_equal(w.since_ms, 5);
    assert_int_equal(w.until_ms, 10);
    assert_int_equal(audit_window_parse("10", "10", 0, &w, &err), -1);
    assert_int_equal(audit_window_parse("0", "86400001", 0, &w, &err), -1);
    assert_string_equal(
        err.msg,
        "query parameters 'since_ms' and 'until_ms' must make a range of 1 ms to 86400000 ms");
    assert_int_equal(audit_window_parse("1", "86400001", 0, &w, &err), 0);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(audit_arguments),
        cmocka_unit_test(audit_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
