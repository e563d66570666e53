/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_row_json.c - the JSON text of a written row from its columns' texts:
 * each kind written as Postgres's row_to_json writes it (the expected texts
 * are row_to_json's for the same values, Postgres 15, DateStyle ISO), names
 * and strings escaped as it escapes them, and the kind names of the catalog
 * query; a row cut down to some of its members, each kept byte for byte.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/row_json.h"

/* The text row_json_write writes for the n columns (owned). */
static char *written_text(const char *const *names, const char *const *texts,
                          const enum row_json_kind *kinds, size_t n)
{
    char first[16]; /* small: most rows move to the heap on the way */
    struct fgjson_out out;
    fgjson_out_init(&out, first, sizeof first);
    row_json_write(&out, names, texts, kinds, n);
    char *text = strdup(out.buf);
    assert_non_null(text);
    assert_int_equal(strlen(text) + 1, out.len);
    fgjson_out_free(&out);
    return text;
}

/* The text of a one-column row {"v": ...} whose value prints as text, of kind. */
static void one(const char *text, enum row_json_kind kind, const char *expect)
{
    const char *names[] = {"v"};
    const char *texts[] = {text};
    char *got = written_text(names, texts, &kind, 1);
    char *want = NULL;
    assert_true(asprintf(&want, "{\"v\":%s}", expect) > 0);
    assert_string_equal(got, want);
    free(got);
    free(want);
}

static void numbers(void **state)
{
    (void)state;
    one("42", ROW_JSON_NUMBER, "42");
    one("-0.50", ROW_JSON_NUMBER, "-0.50");
    one("1e+30", ROW_JSON_NUMBER, "1e+30");
    one("1.5e-07", ROW_JSON_NUMBER, "1.5e-07");
    one("0", ROW_JSON_NUMBER, "0");
    /* what JSON has no number for is a string */
    one("NaN", ROW_JSON_NUMBER, "\"NaN\"");
    one("Infinity", ROW_JSON_NUMBER, "\"Infinity\"");
    one("-Infinity", ROW_JSON_NUMBER, "\"-Infinity\"");
    one("01", ROW_JSON_NUMBER, "\"01\"");
    one("1.", ROW_JSON_NUMBER, "\"1.\"");
    one("1e", ROW_JSON_NUMBER, "\"1e\"");
    one("-", ROW_JSON_NUMBER, "\"-\"");
}

static void other_kinds(void **state)
{
    (void)state;
    one("t", ROW_JSON_BOOL, "true");
    one("f", ROW_JSON_BOOL, "false");
    one("{\"a\": [1, 2.50]}", ROW_JSON_JSON, "{\"a\": [1, 2.50]}");
    one("[{\"f1\":1}]", ROW_JSON_OTHER, "[{\"f1\":1}]"); /* to_json's text */
    one(NULL, ROW_JSON_STRING, "null");
    one(NULL, ROW_JSON_JSON, "null");
    one("\\x00ff", ROW_JSON_STRING, "\"\\\\x00ff\"");
    one("2026-12-02", ROW_JSON_STRING, "\"2026-12-02\"");
    one("a\"b\\c\b\f\n\r\t\x01\x1f\x7f \xc3\xbc", ROW_JSON_STRING,
        "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f\x7f \xc3\xbc\"");
}

static void timestamps(void **state)
{
    (void)state;
    one("2026-12-02 04:55:00", ROW_JSON_TIMESTAMP, "\"2026-12-02T04:55:00\"");
    one("2026-12-02 04:55:00.123456", ROW_JSON_TIMESTAMP, "\"2026-12-02T04:55:00.123456\"");
    one("0044-03-15 12:00:00 BC", ROW_JSON_TIMESTAMP, "\"0044-03-15T12:00:00 BC\"");
    one("infinity", ROW_JSON_TIMESTAMP, "\"infinity\"");
    one("2026-12-02 04:55:00+00", ROW_JSON_TIMESTAMPTZ, "\"2026-12-02T04:55:00+00:00\"");
    one("2026-12-02 04:55:00.5-08", ROW_JSON_TIMESTAMPTZ, "\"2026-12-02T04:55:00.5-08:00\"");
    one("2026-12-02 10:25:00+05:30", ROW_JSON_TIMESTAMPTZ, "\"2026-12-02T10:25:00+05:30\"");
    one("1850-01-01 00:00:00+00:09:21", ROW_JSON_TIMESTAMPTZ, "\"1850-01-01T00:00:00+00:09:21\"");
    one("0044-03-15 12:00:00+00 BC", ROW_JSON_TIMESTAMPTZ, "\"0044-03-15T12:00:00+00:00 BC\"");
    one("12026-12-02 04:55:00+01", ROW_JSON_TIMESTAMPTZ, "\"12026-12-02T04:55:00+01:00\"");
    one("-infinity", ROW_JSON_TIMESTAMPTZ, "\"-infinity\"");
}

static void rows(void **state)
{
    (void)state;
    const char *names[] = {"id", "co\"l\n", "j"};
    const char *texts[] = {"7", "x", NULL};
    enum row_json_kind kinds[] = {ROW_JSON_NUMBER, ROW_JSON_STRING, ROW_JSON_JSON};
    char *got = written_text(names, texts, kinds, 3);
    assert_string_equal(got, "{\"id\":7,\"co\\\"l\\n\":\"x\",\"j\":null}");
    free(got);
    got = written_text(names, texts, kinds, 1);
    assert_string_equal(got, "{\"id\":7}");
    free(got);
}

/* A row far longer than any first buffer: every byte kept, in order, with the
 * escapes of a string that spans the move to a larger buffer. */
static void long_rows(void **state)
{
    (void)state;
    enum { LEN = 100000 };
    char *text = malloc(LEN + 1), *expect = malloc(2 * LEN + 32);
    assert_non_null(text);
    assert_non_null(expect);
    size_t at = (size_t)sprintf(expect, "{\"v\":\"");
    for (size_t i = 0; i < LEN; i++) {
        text[i] = i % 7 == 6 ? '\n' : (char)('a' + i % 26);
        at += (size_t)sprintf(expect + at, "%s", text[i] == '\n' ? "\\n" : (char[]){text[i], '\0'});
    }
    text[LEN] = '\0';
    sprintf(expect + at, "\"}");
    const char *names[] = {"v"};
    const char *texts[] = {text};
    enum row_json_kind kind = ROW_JSON_STRING;
    char *got = written_text(names, texts, &kind, 1);
    assert_string_equal(got, expect);
    free(got);
    free(text);
    free(expect);
}

/* The text row_json_pick writes of row for shown (n members). */
static void picked(const char *row, const bool *shown, size_t n, const char *expect)
{
    char first[8];
    struct fgjson_out out;
    fgjson_out_init(&out, first, sizeof first);
    row_json_pick(&out, row, shown, n);
    assert_string_equal(out.buf, expect);
    assert_int_equal(strlen(out.buf) + 1, out.len);
    fgjson_out_free(&out);
}

/* Members kept as they stand: numbers with every digit, strings with quotes,
 * commas and braces inside, json values with nested objects, arrays and white
 * space; the members not shown leave nothing, the rest keep their order. */
static void picks(void **state)
{
    (void)state;
    const char *row = "{\"id\":\"k,}\",\"amount\":12345678901234567890.10,"
                      "\"co\\\"l\":\"a\\\"},{\\\\\",\"j\":{\"x\" : [1, {\"y\": \"]\"}], \"z\":null},"
                      "\"n\":null}";
    picked(row, (bool[]){true, false, false, false, false}, 5, "{\"id\":\"k,}\"}");
    picked(row, (bool[]){true, true, false, true, false}, 5,
           "{\"id\":\"k,}\",\"amount\":12345678901234567890.10,"
           "\"j\":{\"x\" : [1, {\"y\": \"]\"}], \"z\":null}}");
    picked(row, (bool[]){false, false, true, false, true}, 5,
           "{\"co\\\"l\":\"a\\\"},{\\\\\",\"n\":null}");
    picked(row, (bool[]){true, true, true, true, true}, 5, row);
    picked(row, (bool[]){false, false, false, false, false}, 5, "{}");
    /* fewer members than asked for, white space around them, an empty row */
    picked(" { \"id\" : 7 , \"v\" : true } ", (bool[]){false, true, true}, 3, "{\"v\" : true }");
    picked("{}", (bool[]){true}, 1, "{}");
}

static void kind_names(void **state)
{
    (void)state;
    assert_int_equal(row_json_kind_of("number"), ROW_JSON_NUMBER);
    assert_int_equal(row_json_kind_of("bool"), ROW_JSON_BOOL);
    assert_int_equal(row_json_kind_of("json"), ROW_JSON_JSON);
    assert_int_equal(row_json_kind_of("string"), ROW_JSON_STRING);
    assert_int_equal(row_json_kind_of("timestamp"), ROW_JSON_TIMESTAMP);
    assert_int_equal(row_json_kind_of("timestamptz"), ROW_JSON_TIMESTAMPTZ);
    assert_int_equal(row_json_kind_of("other"), ROW_JSON_OTHER);
    assert_int_equal(row_json_kind_of("numeric"), ROW_JSON_OTHER);
    assert_int_equal(row_json_kind_of(NULL), ROW_JSON_OTHER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(numbers), cmocka_unit_test(other_kinds), cmocka_unit_test(timestamps),
        cmocka_unit_test(rows),    cmocka_unit_test(long_rows),   cmocka_unit_test(picks),
        cmocka_unit_test(kind_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
