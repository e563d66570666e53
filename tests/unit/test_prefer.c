/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_prefer.c - the return preference of a Prefer header line: the first
 * one named decides (RFC 7240 2), whatever follows it; names and values
 * case-insensitive, values maybe quoted, parameters and other preferences
 * skipped, quoted commas included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "http/prefer.h"

static void none_named(void **state)
{
    (void)state;
    assert_int_equal(prefer_return_of(NULL), PREFER_RETURN_NONE);
    assert_int_equal(prefer_return_of(""), PREFER_RETURN_NONE);
    assert_int_equal(prefer_return_of("handling=strict"), PREFER_RETURN_NONE);
    assert_int_equal(prefer_return_of("respond-async, wait=10"), PREFER_RETURN_NONE);
    /* a name that only starts like it, or a parameter of that name */
    assert_int_equal(prefer_return_of("returns=minimal"), PREFER_RETURN_NONE);
    assert_int_equal(prefer_return_of("handling=lenient; return=minimal"), PREFER_RETURN_NONE);
    assert_int_equal(prefer_return_of("x=\"a, return=minimal\""), PREFER_RETURN_NONE);
}

static void minimal(void **state)
{
    (void)state;
    assert_int_equal(prefer_return_of("return=minimal"), PREFER_RETURN_MINIMAL);
    assert_int_equal(prefer_return_of("Return=\"MINIMAL\""), PREFER_RETURN_MINIMAL);
    assert_int_equal(prefer_return_of(" return = minimal ; x=1"), PREFER_RETURN_MINIMAL);
    assert_int_equal(prefer_return_of("handling=lenient, Return=\"minimal\"; x=1"),
                     PREFER_RETURN_MINIMAL);
    assert_int_equal(prefer_return_of("respond-async,return=minimal"), PREFER_RETURN_MINIMAL);
    assert_int_equal(prefer_return_of("x=\"a, b\", return=minimal"), PREFER_RETURN_MINIMAL);
}

/* The first instance counts: another return preference after it changes nothing. */
static void first_decides(void **state)
{
    (void)state;
    assert_int_equal(prefer_return_of("return=representation"), PREFER_RETURN_OTHER);
    assert_int_equal(prefer_return_of("return=representation, return=minimal"),
                     PREFER_RETURN_OTHER);
    assert_int_equal(prefer_return_of("return=minimal, return=representation"),
                     PREFER_RETURN_MINIMAL);
    assert_int_equal(prefer_return_of("wait=5, return=headers-only, return=minimal"),
                     PREFER_RETURN_OTHER);
    assert_int_equal(prefer_return_of("return, return=minimal"), PREFER_RETURN_OTHER);
    assert_int_equal(prefer_return_of("return=minimalist, return=minimal"), PREFER_RETURN_OTHER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(none_named),
        cmocka_unit_test(minimal),
        cmocka_unit_test(first_decides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
