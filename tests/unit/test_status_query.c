/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_status_query.c - the query of a lease's status route: every parameter
 * checked whether or not it asks for a watch, watch read as true or false only,
 * the first fault in description order named. (An empty or bare parameter
 * never comes here: the server reads it as absent, NULL.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "fglimits.h"
#include "http/status_query.h"

/* The bounds of the status route as scripts/gen_routes.py writes them. */
static const struct member_bound bounds[] = {
    {"wait_ms", CHECK_QUERY_INTEGER, 0, WAIT_MAX_MS, false, "w", true, NULL, NULL},
    {"waiters", CHECK_QUERY_INTEGER, 0, STATUS_WAITERS_MAX, false, "n", true, NULL, NULL},
    {NULL, CHECK_INTEGER, 0, 0, false, NULL, false, NULL, NULL},
};

static void defaults(void **state)
{
    (void)state;
    struct status_query_text text = {0};
    struct status_query q;
    struct fg_error err = {0};
    assert_int_equal(status_query_parse(&text, bounds, &q, &err), 0);
    assert_false(q.watch);
    assert_int_equal(q.fence, 0);
    assert_int_equal(q.wait_ms, WATCH_WAIT_DEFAULT_MS);
    assert_int_equal(q.waiters, 0);
}

static void values_are_read(void **state)
{
    (void)state;
    struct status_query q;
    struct fg_error err = {0};
    struct status_query_text watch = {"true", "9223372036854775807", "3600000", "100"};
    assert_int_equal(status_query_parse(&watch, bounds, &q, &err), 0);
    assert_true(q.watch);
    assert_int_equal(q.fence, 9223372036854775807LL);
    assert_int_equal(q.wait_ms, WAIT_MAX_MS);
    assert_int_equal(q.waiters, STATUS_WAITERS_MAX);
    struct status_query_text plain = {"false", "1", "0", "0"};
    assert_int_equal(status_query_parse(&plain, bounds, &q, &err), 0);
    assert_false(q.watch);
    assert_int_equal(q.fence, 1);
    assert_int_equal(q.wait_ms, 0);
}

static void bad_values_name_their_parameter(void **state)
{
    (void)state;
    static const struct {
        struct status_query_text text;
        const char *named;
    } cases[] = {
        {{"", NULL, NULL, NULL}, "query parameter 'watch' "},
        {{"yes", NULL, NULL, NULL}, "query parameter 'watch' "},
        {{"TRUE", NULL, NULL, NULL}, "query parameter 'watch' "},
        {{"1", NULL, NULL, NULL}, "query parameter 'watch' "},
        {{NULL, "abc", NULL, NULL}, "query parameter 'fence' "},
        {{NULL, "0", NULL, NULL}, "query parameter 'fence' "},
        {{NULL, "", NULL, NULL}, "query parameter 'fence' "},
        {{NULL, "9223372036854775808", NULL, NULL}, "query parameter 'fence' "},
        {{"true", "01", NULL, NULL}, "query parameter 'fence' "},
        {{"true", "007", NULL, NULL}, "query parameter 'fence' "},
        {{NULL, "-0", NULL, NULL}, "query parameter 'fence' "},
        {{"true", "+1", NULL, NULL}, "query parameter 'fence' "},
        {{"true", " 1", NULL, NULL}, "query parameter 'fence' "},
        {{"true", "1 ", NULL, NULL}, "query parameter 'fence' "},
        {{"true", NULL, NULL, NULL}, "query parameter 'fence' "},
        {{NULL, NULL, "-5", NULL}, "query parameter 'wait_ms' "},
        {{"false", NULL, "3600001", NULL}, "query parameter 'wait_ms' "},
        {{"true", "1", "x", NULL}, "query parameter 'wait_ms' "},
        {{NULL, NULL, NULL, "101"}, "query parameter 'waiters' "},
        {{"true", "1", NULL, "-1"}, "query parameter 'waiters' "},
        {{"maybe", "0", "-1", "-1"}, "query parameter 'watch' "}, /* the first in the order */
        {{NULL, "0", "-1", "-1"}, "query parameter 'fence' "},
        {{NULL, NULL, "-1", "-1"}, "query parameter 'wait_ms' "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct status_query q;
        struct fg_error err = {0};
        assert_int_equal(status_query_parse(&cases[i].text, bounds, &q, &err), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_memory_equal(err.msg, cases[i].named, strlen(cases[i].named));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(values_are_read),
        cmocka_unit_test(bad_values_name_their_parameter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
