/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_integer.c - the one reading of a decimal integer (util/integer.c):
 * which texts are integers, the bounds, and the edges of long long; and the
 * one spelling of each integer that a fence's reading takes.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "util/integer.h"

static void reads_decimal_integers(void **state)
{
    (void)state;
    long long v = -1;
    assert_int_equal(integer_parse("0", 0, 10, &v), INTEGER_OK);
    assert_int_equal(v, 0);
    assert_int_equal(integer_parse("10", 0, 10, &v), INTEGER_OK);
    assert_int_equal(v, 10);
    assert_int_equal(integer_parse("007", 0, 10, &v), INTEGER_OK);
    assert_int_equal(v, 7);
    assert_int_equal(integer_parse("-3", -5, 5, &v), INTEGER_OK);
    assert_int_equal(v, -3);
    assert_int_equal(integer_parse("9223372036854775807", 0, LLONG_MAX, &v), INTEGER_OK);
    assert_true(v == LLONG_MAX);
    assert_int_equal(integer_parse("-9223372036854775808", LLONG_MIN, 0, &v), INTEGER_OK);
    assert_true(v == LLONG_MIN);
}

static void refuses_what_is_no_decimal_integer(void **state)
{
    (void)state;
    static const char *const texts[] = {"",    "-",   "+5",  " 5",  "5 ",   "5x", "0x10",
                                        "1e3", "1.0", "--1", "- 1", "five", "\t1"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        long long v = 42;
        assert_int_equal(integer_parse(texts[i], LLONG_MIN, LLONG_MAX, &v), INTEGER_NOT_DECIMAL);
        assert_int_equal(v, 42);
    }
}

static void refuses_what_is_out_of_bounds(void **state)
{
    (void)state;
    long long v = 42;
    assert_int_equal(integer_parse("11", 0, 10, &v), INTEGER_OUT_OF_RANGE);
    assert_int_equal(integer_parse("0", 1, 10, &v), INTEGER_OUT_OF_RANGE);
    assert_int_equal(integer_parse("-1", 0, 10, &v), INTEGER_OUT_OF_RANGE);
    assert_int_equal(integer_parse("9223372036854775808", 0, LLONG_MAX, &v), INTEGER_OUT_OF_RANGE);
    assert_int_equal(integer_parse("-9223372036854775809", LLONG_MIN, 0, &v), INTEGER_OUT_OF_RANGE);
    assert_int_equal(integer_parse("99999999999999999999999", LLONG_MIN, LLONG_MAX, &v),
                     INTEGER_OUT_OF_RANGE);
    assert_int_equal(v, 42);
}

static void reads_checked_values_or_the_default(void **state)
{
    (void)state;
    assert_int_equal(integer_read("42", 7), 42);
    assert_int_equal(integer_read("-3", 7), -3);
    assert_int_equal(integer_read(NULL, 7), 7);
    assert_int_equal(integer_read("", 7), 7);
    assert_int_equal(integer_read("4x", 7), 7);
}

/* The reading of a fence: one spelling per integer, so no leading zero and
 * no "-0"; what integer_parse refuses, it refuses too. */
static void exact_spellings_only(void **state)
{
    (void)state;
    long long v = 42;
    static const char *const refused[] = {"01", "00", "007", "-0", "-01", "+1", " 1", "1 ", ""};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        assert_int_equal(integer_parse_exact(refused[i], LLONG_MIN, LLONG_MAX, &v),
                         INTEGER_NOT_DECIMAL);
    assert_int_equal(v, 42);
    assert_int_equal(integer_parse_exact("0", 1, 10, &v), INTEGER_OUT_OF_RANGE);
    assert_int_equal(integer_parse_exact("10", 1, 9, &v), INTEGER_OUT_OF_RANGE);
    assert_int_equal(integer_parse_exact("0", 0, 10, &v), INTEGER_OK);
    assert_int_equal(v, 0);
    assert_int_equal(integer_parse_exact("-10", LLONG_MIN, 0, &v), INTEGER_OK);
    assert_int_equal(v, -10);
    assert_int_equal(integer_parse_exact("9223372036854775807", 1, LLONG_MAX, &v), INTEGER_OK);
    assert_true(v == LLONG_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_decimal_integers),
        cmocka_unit_test(refuses_what_is_no_decimal_integer),
        cmocka_unit_test(refuses_what_is_out_of_bounds),
        cmocka_unit_test(reads_checked_values_or_the_default),
        cmocka_unit_test(exact_spellings_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
