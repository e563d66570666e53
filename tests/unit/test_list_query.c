/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_list_query.c - the arguments of the lease listings: defaults, the
 * limit's range, the prefix and cursor alphabets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "lease/list_query.h"

static void defaults(void **state)
{
    (void)state;
    struct list_query q;
    struct fg_error err = {0};
    assert_int_equal(list_query_parse(NULL, NULL, NULL, &q, &err), 0);
    assert_string_equal(q.prefix, "");
    assert_string_equal(q.after, "");
    assert_int_equal(q.limit, LIST_LIMIT_DEFAULT);
    assert_int_equal(list_query_parse("", "", "", &q, &err), 0);
    assert_int_equal(q.limit, LIST_LIMIT_DEFAULT);
}

static void values_are_read(void **state)
{
    (void)state;
    struct list_query q;
    struct fg_error err = {0};
    assert_int_equal(list_query_parse("invoice:", "1000", "invoice:41/a_b-c.d", &q, &err), 0);
    assert_string_equal(q.prefix, "invoice:");
    assert_string_equal(q.after, "invoice:41/a_b-c.d");
    assert_int_equal(q.limit, 1000);
}

static void bad_values_name_their_argument(void **state)
{
    (void)state;
    static const struct {
        const char *prefix, *limit, *cursor, *named;
    } cases[] = {
        {"a b", NULL, NULL, "query parameter 'prefix' must be empty or 1 to 200 bytes of "},
        {"inv*", NULL, NULL, "query parameter 'prefix' must be empty or 1 to 200 bytes of "},
        {NULL, NULL, "a b", "query parameter 'cursor' must be the next_cursor of a previous page"},
        {NULL, NULL, "{x}", "query parameter 'cursor' must be the next_cursor of a previous page"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct list_query q;
        struct fg_error err = {0};
        assert_int_equal(
            list_query_parse(cases[i].prefix, cases[i].limit, cases[i].cursor, &q, &err), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_memory_equal(err.msg, cases[i].named, strlen(cases[i].named));
    }
    char long_prefix[NAME_MAX_LEN + 2];
    memset(long_prefix, 'a', sizeof long_prefix - 1);
    long_prefix[sizeof long_prefix - 1] = '\0';
    struct list_query q;
    struct fg_error err = {0};
    assert_int_equal(list_query_parse(long_prefix, NULL, NULL, &q, &err), -1);
    long_prefix[NAME_MAX_LEN] = '\0';
    assert_int_equal(list_query_parse(long_prefix, NULL, NULL, &q, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(values_are_read),
        cmocka_unit_test(bad_values_name_their_argument),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
