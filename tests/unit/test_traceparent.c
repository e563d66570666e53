/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_traceparent.c - the trace id of a traceparent header, and the headers
 * a receiver must ignore (W3C Trace Context, "traceparent Header").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "util/traceparent.h"

#define TRACE  "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT "00f067aa0ba902b7"

static void reads_the_trace_id(void **state)
{
    (void)state;
    char id[TRACE_ID_LEN + 1];
    assert_true(traceparent_trace_id("00-" TRACE "-" PARENT "-01", id));
    assert_string_equal(id, TRACE);
    assert_true(traceparent_trace_id("00-" TRACE "-" PARENT "-00", id));
    /* A later version may append fields after a dash. */
    assert_true(traceparent_trace_id("01-" TRACE "-" PARENT "-01-what-comes-next", id));
    assert_string_equal(id, TRACE);
    assert_true(traceparent_trace_id("cc-" TRACE "-" PARENT "-01", id));
}

static void ignores_what_it_must(void **state)
{
    (void)state;
    char id[TRACE_ID_LEN + 1];
    static const char *const bad[] = {
        "",
        "00-" TRACE "-" PARENT,                              /* no flags */
        "00-" TRACE "-" PARENT "-01-extra",                  /* version 00 is exact */
        "01-" TRACE "-" PARENT "-01x",                       /* later version: dash only */
        "ff-" TRACE "-" PARENT "-01",                        /* version ff is invalid */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-" PARENT "-01", /* uppercase */
        "00-00000000000000000000000000000000-" PARENT "-01", /* all-zero trace id */
        "00-" TRACE "-0000000000000000-01",                  /* all-zero parent id */
        "00-" TRACE "-" PARENT "-0g",                        /* flags not hex */
        "00_" TRACE "-" PARENT "-01",                        /* separator */
        "00-4bf92f3577b34da6a3ce929d0e0e473-" PARENT "-01x", /* short trace id */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        id[0] = 'x';
        assert_false(traceparent_trace_id(bad[i], id));
        assert_string_equal(id, "");
    }
    assert_false(traceparent_trace_id(NULL, id));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_the_trace_id),
        cmocka_unit_test(ignores_what_it_must),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
