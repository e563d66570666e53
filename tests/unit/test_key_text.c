/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_key_text.c - row keys read as Postgres reads them: every spelling of a
 * value gives its one canonical text, spellings the gateway does not read
 * exactly are refused, identities drop a numeric's scale, and keys order as
 * Postgres orders their values. The expected texts are what Postgres 15
 * prints for ('<spelling>'::<type>)::text.
 *
 * Broken variants caught: canonical text = the key as given (every spelling
 * assertion failed); key_compare as strcmp for integers ("10" before "9").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/key_text.h"

static const struct key_shape int4 = {.form = KEY_FORM_INT32};

static void canonical_is(const struct key_shape *shape, const char *key, const char *expected)
{
    struct fg_error err = {0};
    char *out = NULL;
    if (key_canonical(shape, key, "key", &out, &err) != 0)
        fail_msg("'%s' refused: %s", key, err.msg);
    if (strcmp(out, expected) != 0)
        fail_msg("'%s' read as '%s', expected '%s'", key, out, expected);
    free(out);
}

static void refused(const struct key_shape *shape, const char *key)
{
    struct fg_error err = {0};
    char *out = NULL;
    if (key_canonical(shape, key, "ops[0].key", &out, &err) == 0)
        fail_msg("'%s' read as '%s', expected a refusal", key, out);
    assert_null(out);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
    assert_non_null(strstr(err.msg, "ops[0].key"));
}

static void integers(void **state)
{
    (void)state;
    const struct key_shape int2 = {.form = KEY_FORM_INT16}, int8 = {.form = KEY_FORM_INT64};
    canonical_is(&int4, "42", "42");
    canonical_is(&int4, "042", "42");
    canonical_is(&int4, "+42", "42");
    canonical_is(&int4, "  0042 ", "42");
    canonical_is(&int4, "-0", "0");
    canonical_is(&int4, "000", "0");
    canonical_is(&int4, "-007", "-7");
    canonical_is(&int4, "2147483647", "2147483647");
    canonical_is(&int4, "-2147483648", "-2147483648");
    canonical_is(&int2, "-32768", "-32768");
    canonical_is(&int8, "-9223372036854775808", "-9223372036854775808");
    canonical_is(&int8, "00009223372036854775807", "9223372036854775807");
    const char *bad[] = {"", " ", "+", "-", "4 2", "0x2A", "1_000", "4.0", "1e3", "--4", "+-4",
                         "2147483648", "-2147483649", "99999999999999999999", "٤٢"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(&int4, bad[i]);
    refused(&int2, "32768");
    refused(&int8, "9223372036854775808");
}

static void numerics(void **state)
{
    (void)state;
    const struct key_shape num = {.form = KEY_FORM_NUMERIC};
    canonical_is(&num, "1796028067", "1796028067");
    canonical_is(&num, "1796028067.0", "1796028067.0");
    canonical_is(&num, "01796028067", "1796028067");
    canonical_is(&num, "1.796028067e9", "1796028067");
    canonical_is(&num, " 1.50e1 ", "15.0");
    canonical_is(&num, "1.5E+2", "150");
    canonical_is(&num, "12.50", "12.50");
    canonical_is(&num, "-0.00", "0.00");
    canonical_is(&num, "-0", "0");
    canonical_is(&num, ".5", "0.5");
    canonical_is(&num, "5.", "5");
    canonical_is(&num, "1e-3", "0.001");
    canonical_is(&num, "-12.5e-3", "-0.0125");
    canonical_is(&num, "0012e0", "12");
    canonical_is(&num, "1e0", "1");
    canonical_is(&num, "nan", "NaN");
    canonical_is(&num, "INF", "Infinity");
    canonical_is(&num, "-infinity", "-Infinity");
    const char *bad[] = {"", ".", "e5", "1e", "1e+", "1.2.3", "0x10", "1_000", "1e1001", "- 1",
                         "nanx", "1 e3", "++1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(&num, bad[i]);
    refused(&num, "0.123456789012345678901234567890e-1000"); /* longer than a key */
    canonical_is(&num, "1e-5", "0.00001");
    const struct key_shape scale2 = {.form = KEY_FORM_NUMERIC, .scaled = true, .scale = 2};
    canonical_is(&scale2, "1.5", "1.5");
    canonical_is(&scale2, "1.2300", "1.2300");
    refused(&scale2, "1.234"); /* numeric(p,2) would store 1.23: another row */
    const struct key_shape tens = {.form = KEY_FORM_NUMERIC, .scaled = true, .scale = -1};
    canonical_is(&tens, "120", "120");
    canonical_is(&tens, "0", "0");
    refused(&tens, "125");
    refused(&tens, "12.5");
}

static void texts_uuids_dates(void **state)
{
    (void)state;
    const struct key_shape text = {.form = KEY_FORM_TEXT}, bpchar = {.form = KEY_FORM_BPCHAR};
    const struct key_shape uuid = {.form = KEY_FORM_UUID}, date = {.form = KEY_FORM_DATE};
    const struct key_shape other = {.form = KEY_FORM_OTHER};
    canonical_is(&text, " 042 ", " 042 ");
    canonical_is(&other, "2024-01-05 10:00", "2024-01-05 10:00");
    canonical_is(&bpchar, "ab  ", "ab");
    canonical_is(&bpchar, " ab", " ab");
    refused(&bpchar, "   ");
    /* varchar(5), char(3): no more characters than the column holds, spaces
     * included (Postgres would keep "ABCDE" of "ABCDE "), counted in UTF-8 */
    const struct key_shape five = key_shape_of("character varying", "varchar", 5 + 4);
    canonical_is(&five, "ABCDE", "ABCDE");
    canonical_is(&five, "\xc3\xa9t\xc3\xa9s!", "\xc3\xa9t\xc3\xa9s!");
    refused(&five, "ABCDE ");
    refused(&five, "ABCDEF");
    refused(&five, "\xc3\xa9t\xc3\xa9s!!");
    const struct key_shape three = key_shape_of("character", "bpchar", 3 + 4);
    canonical_is(&three, "abc   ", "abc");
    refused(&three, "abcd");
    const char *expected = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
    canonical_is(&uuid, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", expected);
    canonical_is(&uuid, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", expected);
    canonical_is(&uuid, "{a0eebc999c0b4ef8bb6d6bb9bd380a11}", expected);
    canonical_is(&uuid, "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11", expected);
    const char *bad_uuids[] = {"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
                               "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
                               " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                               "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
                               "a0e-ebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                               "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                               "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"};
    for (size_t i = 0; i < sizeof bad_uuids / sizeof bad_uuids[0]; i++)
        refused(&uuid, bad_uuids[i]);
    canonical_is(&date, "2024-01-05", "2024-01-05");
    canonical_is(&date, " 2024-1-5 ", "2024-01-05");
    canonical_is(&date, "2024-02-29", "2024-02-29");
    canonical_is(&date, "Infinity", "infinity");
    canonical_is(&date, "-INFINITY", "-infinity");
    const char *bad_dates[] = {"today",      "epoch",      "01/05/2024", "20240105",   "2023-02-29",
                               "2024-13-01", "2024-00-10", "0000-01-01", "24-01-05",   "2024-01-05 BC",
                               "2024-1-005", "12024-01-01", "+infinity", "2024-01-32", "2024/01/05"};
    for (size_t i = 0; i < sizeof bad_dates / sizeof bad_dates[0]; i++)
        refused(&date, bad_dates[i]);
}

static void identities(void **state)
{
    (void)state;
    const struct key_shape num = {.form = KEY_FORM_NUMERIC}, text = {.form = KEY_FORM_TEXT};
    char out[32];
    key_row_identity(&num, "12.50", out, sizeof out);
    assert_string_equal(out, "12.5");
    key_row_identity(&num, "15.0", out, sizeof out);
    assert_string_equal(out, "15");
    key_row_identity(&num, "100", out, sizeof out);
    assert_string_equal(out, "100");
    key_row_identity(&num, "0.00", out, sizeof out);
    assert_string_equal(out, "0");
    key_row_identity(&text, "1.50", out, sizeof out);
    assert_string_equal(out, "1.50");
    /* the keys an answered write need not read back: numerics keep a scale, char(n) pads,
     * varchar(n) may cut trailing spaces, other types print their own way */
    const enum key_form known[] = {KEY_FORM_INT16, KEY_FORM_INT32, KEY_FORM_INT64, KEY_FORM_UUID,
                                   KEY_FORM_DATE};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        assert_true(key_prints_canonical(&(struct key_shape){.form = known[i]}));
    const enum key_form asked[] = {KEY_FORM_NUMERIC, KEY_FORM_TEXT, KEY_FORM_BPCHAR,
                                   KEY_FORM_OTHER};
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++)
        assert_false(key_prints_canonical(&(struct key_shape){.form = asked[i]}));
    /* the gateway names the row of every form it reads; a key it does not read only Postgres */
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        assert_true(key_identity_known(&(struct key_shape){.form = known[i]}));
    for (size_t i = 0; i + 1 < sizeof asked / sizeof asked[0]; i++)
        assert_true(key_identity_known(&(struct key_shape){.form = asked[i]}));
    assert_false(key_identity_known(&(struct key_shape){.form = KEY_FORM_OTHER}));
}

static void shapes(void **state)
{
    (void)state;
    assert_int_equal(key_shape_of("integer", "int4", -1).form, KEY_FORM_INT32);
    assert_int_equal(key_shape_of("my_int_domain", "int8", -1).form, KEY_FORM_INT64);
    assert_int_equal(key_shape_of("character varying", "varchar", 24).form, KEY_FORM_TEXT);
    assert_int_equal(key_shape_of("character", "bpchar", 9).form, KEY_FORM_BPCHAR);
    assert_int_equal(key_shape_of("my_code", "varchar", -1).form, KEY_FORM_OTHER);
    assert_int_equal(key_shape_of("my_money", "numeric", -1).form, KEY_FORM_OTHER);
    assert_int_equal(key_shape_of("timestamp with time zone", "timestamptz", -1).form,
                     KEY_FORM_OTHER);
    struct key_shape n = key_shape_of("numeric", "numeric", -1);
    assert_true(n.form == KEY_FORM_NUMERIC && !n.scaled);
    n = key_shape_of("numeric", "numeric", (20 << 16 | 4) + 4); /* numeric(20,4) */
    assert_true(n.scaled && n.scale == 4);
    n = key_shape_of("numeric", "numeric", (2 << 16 | (-3 & 0x7ff)) + 4); /* numeric(2,-3) */
    assert_true(n.scaled && n.scale == -3);
    assert_int_equal(key_shape_of("character varying", "varchar", 24).max_chars, 20);
    assert_int_equal(key_shape_of("character varying", "varchar", -1).max_chars, 0);
    assert_int_equal(key_shape_of("text", "text", -1).max_chars, 0);
    assert_int_equal(key_shape_of("character", "bpchar", 9).max_chars, 5);
}

static void order(void **state)
{
    (void)state;
    const struct key_shape num = {.form = KEY_FORM_NUMERIC}, date = {.form = KEY_FORM_DATE};
    assert_true(key_compare(&int4, "9", "10") < 0);
    assert_true(key_compare(&int4, "-10", "-9") < 0);
    assert_true(key_compare(&int4, "-1", "0") < 0);
    assert_int_equal(key_compare(&int4, "42", "42"), 0);
    assert_true(key_compare(&num, "9.5", "10") < 0);
    assert_true(key_compare(&num, "1.25", "1.3") < 0);
    assert_true(key_compare(&num, "-1.3", "-1.25") < 0);
    assert_int_equal(key_compare(&num, "1.50", "1.5"), 0);
    assert_int_equal(key_compare(&num, "0.00", "0"), 0);
    assert_true(key_compare(&num, "-Infinity", "-1000000000") < 0);
    assert_true(key_compare(&num, "99999", "Infinity") < 0);
    assert_true(key_compare(&num, "Infinity", "NaN") < 0);
    assert_true(key_compare(&date, "-infinity", "0001-01-01") < 0);
    assert_true(key_compare(&date, "2024-01-05", "2024-10-01") < 0);
    assert_true(key_compare(&date, "9999-12-31", "infinity") < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(integers),   cmocka_unit_test(numerics), cmocka_unit_test(texts_uuids_dates),
        cmocka_unit_test(identities), cmocka_unit_test(shapes),   cmocka_unit_test(order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
