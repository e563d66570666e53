/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_names.c - strict percent-decoding, hex digits, and the character rules
 * of names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/names.h"

static int decode(const char *raw, char *out, size_t cap)
{
    size_t len = 0;
    struct fg_error err = {0};
    return name_decode(raw, strlen(raw), out, cap, &len, &err);
}

/* Every byte: the sixteen digits in either case have their value, nothing else does. */
static void hex_digits(void **state)
{
    (void)state;
    static const char lower[] = "0123456789abcdef", upper[] = "0123456789ABCDEF";
    for (int c = -128; c < 128; c++) {
        const char *l = c != 0 ? strchr(lower, c) : NULL, *u = c != 0 ? strchr(upper, c) : NULL;
        int want = l != NULL ? (int)(l - lower) : u != NULL ? (int)(u - upper) : -1;
        assert_int_equal(name_hex_value((char)c), want);
    }
}

static void decodes_escapes(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(decode("invoice%3A42", out, sizeof out), 0);
    assert_string_equal(out, "invoice:42");
    assert_int_equal(decode("a%2fb", out, sizeof out), 0);
    assert_string_equal(out, "a/b");
}

static void refuses_nul_and_bad_escapes(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(decode("a%00b", out, sizeof out), -1);
    assert_int_equal(decode("a%zzb", out, sizeof out), -1);
    assert_int_equal(decode("a%4", out, sizeof out), -1);
    assert_int_equal(decode("%", out, sizeof out), -1);
    assert_int_equal(decode("abcdef", out, 4), -1);
}

static void lock_name_rules(void **state)
{
    (void)state;
    assert_true(name_is_valid_lock("invoice:42/a_b-c.d", 18));
    assert_false(name_is_valid_lock("", 0));
    assert_false(name_is_valid_lock("a b", 3));
    assert_false(name_is_valid_lock("a\"b", 3));
    assert_false(name_is_valid_lock("caf\xc3\xa9", 5));
    char long_name[202];
    memset(long_name, 'x', sizeof long_name);
    assert_true(name_is_valid_lock(long_name, 200));
    assert_false(name_is_valid_lock(long_name, 201));
}

static void key_rules(void **state)
{
    (void)state;
    assert_true(name_is_valid_key("42", 2));
    assert_true(name_is_valid_key("caf\xc3\xa9", 5));
    assert_false(name_is_valid_key("a\nb", 3));
    assert_false(name_is_valid_key("\xc3", 1));
    assert_false(name_is_valid_key("\xed\xa0\x80", 3)); /* surrogate */
    assert_false(name_is_valid_key("\xc0\xaf", 2));     /* overlong */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hex_digits),
        cmocka_unit_test(decodes_escapes),
        cmocka_unit_test(refuses_nul_and_bad_escapes),
        cmocka_unit_test(lock_name_rules),
        cmocka_unit_test(key_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
