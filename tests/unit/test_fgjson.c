/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fgjson.c - typed field readers and the body parser: wrong types and
 * out-of-range values name the field; bodies that are not one JSON object are
 * invalid_json; the flat reader reads what it reads as jansson does; reals
 * are written in the shortest text that reads back as the same double.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fgjson.h"

static json_t *obj(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &jerr);
    assert_non_null(v);
    return v;
}

/* v as fgjson_out_value writes it from a buffer of cap bytes (at most 512),
 * compared with json_dumps; takes v. */
static void value_dumps_like_jansson(json_t *v, size_t cap)
{
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(want);
    char buf[512];
    struct fgjson_out out;
    fgjson_out_init(&out, buf, cap);
    fgjson_out_value(&out, v);
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.buf, want, out.len);
    fgjson_out_free(&out);
    free(want);
    json_decref(v);
}

/* text as fgjson_out_value writes it, compared with json_dumps. */
static void dumps_like_jansson(const char *text, size_t cap)
{
    value_dumps_like_jansson(obj(text), cap);
}

static void writes_like_jansson(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "{}",
        "[]",
        "{\"fence\": 42, \"token\": \"a.b-c_d\", \"ok\": true, \"no\": false, \"z\": null}",
        "{\"n\": -9223372036854775808, \"m\": 9223372036854775807, \"zero\": 0}",
        "{\"r\": 1.5, \"half\": -0.5, \"whole\": 3.0}", /* reals jansson writes shortest too */
        "{\"esc\": \"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t \\u0001\\u001f\\u007f\"}",
        "{\"utf8\": \"\u00e9\u20ac\U0001F600\", \"k\\u00e9y\\\"\": 1}",
        "{\"nul\": \"a\\u0000b\"}",
        "[1, [2, [3, {}]], {\"a\": [], \"b\": {\"c\": [true, null]}}, \"x\"]",
        "{\"z\": 1, \"a\": 2, \"m\": {\"y\": 1, \"b\": 2}}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        dumps_like_jansson(texts[i], 512);
        dumps_like_jansson(texts[i], 4); /* moves to the heap */
    }
    char all[0x21];
    for (int c = 1; c <= 0x20; c++)
        all[c - 1] = (char)c;
    all[0x20] = '\0';
    json_t *v = json_pack("{s:s}", "ctl", all);
    char *want = json_dumps(v, JSON_COMPACT);
    char buf[256];
    struct fgjson_out out;
    fgjson_out_init(&out, buf, sizeof buf);
    fgjson_out_value(&out, v);
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.buf, want, out.len);
    free(want);
    json_decref(v);
}

static void writes_members(void **state)
{
    (void)state;
    char buf[8];
    struct fgjson_out out;
    fgjson_out_init(&out, buf, sizeof buf);
    fgjson_out_open(&out);
    fgjson_out_str(&out, "path", "/v1/x\"y");
    fgjson_out_int(&out, "status", -404);
    fgjson_out_strn(&out, "bad", "a\xff\xc3(\xed\xa0\x80z", 8);
    json_t *row = json_pack("{s:s, s:n, s:[i]}", "id", "7", "note", "n", 1);
    fgjson_out_member(&out, "row", row);
    fgjson_out_member(&out, "applied", json_true());
    json_decref(row);
    fgjson_out_close(&out);
    const char *want = "{\"path\":\"/v1/x\\\"y\",\"status\":-404,"
                       "\"bad\":\"a\\uFFFD\\uFFFD(\\uFFFD\\uFFFD\\uFFFDz\","
                       "\"row\":{\"id\":\"7\",\"note\":null,\"n\":[1]},\"applied\":true}";
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.buf, want, out.len);
    fgjson_out_free(&out);
}

/* A list of objects, written as the lock sets' answers are, reads as jansson writes it. */
static void writes_lists(void **state)
{
    (void)state;
    char buf[16]; /* small: the text moves to the heap on the way */
    struct fgjson_out out;
    fgjson_out_init(&out, buf, sizeof buf);
    fgjson_out_open_item(&out); /* first: as fgjson_out_open */
    fgjson_out_open_array(&out, "locks");
    for (int i = 1; i <= 3; i++) {
        fgjson_out_open_item(&out);
        fgjson_out_str(&out, "lock", "a");
        fgjson_out_int(&out, "fence", i);
        fgjson_out_close(&out);
    }
    fgjson_out_close_array(&out);
    fgjson_out_open_array(&out, "none");
    fgjson_out_close_array(&out);
    fgjson_out_int(&out, "n", 0);
    fgjson_out_close(&out);
    json_t *want =
        json_pack("{s:[{s:s, s:i}, {s:s, s:i}, {s:s, s:i}], s:[], s:i}", "locks", "lock", "a",
                  "fence", 1, "lock", "a", "fence", 2, "lock", "a", "fence", 3, "none", "n", 0);
    char *text = json_dumps(want, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_int_equal(out.len, strlen(text));
    assert_memory_equal(out.buf, text, out.len);
    free(text);
    json_decref(want);
    fgjson_out_free(&out);
}

/* The significant digits of a number's text ("-0.01250e+3": "125"; "0": ""). */
static void significant(const char *text, char *digits)
{
    size_t n = 0;
    for (const char *p = text; *p != '\0' && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && (n > 0 || *p != '0'))
            digits[n++] = *p;
    while (n > 0 && digits[n - 1] == '0')
        n--;
    digits[n] = '\0';
}

/* The next of a fixed sequence of pseudo-random numbers (xorshift64). */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Reals, their fgjson_real_text and their text in written JSON (jansson's
 * shape: a '.' or an exponent, which has no '+' and no leading zero).
 * "%.17g" and json_dumps wrote 19.989999999999998 for 19.99 and
 * 0.10000000000000001 for 0.1, which Postgres then stored. */
static const struct {
    double value;
    const char *text;
    const char *json;
} reals[] = {
    {19.99, "19.99", "19.99"},
    {0.1, "0.1", "0.1"},
    {99999999.99, "99999999.99", "99999999.99"},
    {-2.5e-7, "-2.5e-07", "-2.5e-7"},
    {0.1 + 0.2, "0.30000000000000004", "0.30000000000000004"},
    {1.0 / 3, "0.3333333333333333", "0.3333333333333333"},
    {1234567890123456.7891, "1234567890123456.8", "1234567890123456.8"},
    {123456789012345.6, "123456789012345.6", "123456789012345.6"},
    {0.0001, "0.0001", "0.0001"},
    {3.0, "3", "3.0"},
    {100.0, "100", "100.0"}, /* not 1e+02 */
    {1e15, "1000000000000000", "1000000000000000.0"},
    {9.5e15, "9500000000000000", "9500000000000000.0"},
    {1e16, "10000000000000000", "10000000000000000.0"},
    /* as written, though the double is 62664334514782496 */
    {6.26643345147825e16, "62664334514782500", "62664334514782500.0"},
    {-1.5e20, "-150000000000000000000", "-150000000000000000000.0"},
    {1e21, "1e+21", "1e21"},
    {1e22, "1e+22", "1e22"},
    {1e300, "1e+300", "1e300"},
    {5e-324, "5e-324", "5e-324"},
    {DBL_MAX, "1.7976931348623157e+308", "1.7976931348623157e308"},
    {0.0, "0", "0.0"},
    {-0.0, "-0", "-0.0"},
    {-1.0, "-1", "-1.0"},
};

static void real_texts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        char text[FGJSON_REAL_MAX];
        size_t n = fgjson_real_text(reals[i].value, text);
        assert_string_equal(text, reals[i].text);
        assert_int_equal(n, strlen(reals[i].text));
        json_t *real = json_real(reals[i].value);
        char *json = fgjson_dump(real);
        assert_string_equal(json, reals[i].json);
        json_t *back = json_loads(json, JSON_DECODE_ANY, NULL); /* still a real, the same */
        assert_true(json_is_real(back) && json_real_value(back) == reals[i].value);
        json_decref(back);
        json_decref(real);
        free(json);
    }
    json_t *v = obj("{\"price\": 19.99, \"list\": [0.1, 2], \"s\": \"x\"}");
    char *text = fgjson_dump(v);
    assert_string_equal(text, "{\"price\":19.99,\"list\":[0.1,2],\"s\":\"x\"}");
    free(text);
    json_decref(v);
}

/* Any double's text reads back as that double, and one digit fewer would not. */
static void real_texts_are_shortest(void **state)
{
    (void)state;
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < 20000; i++) {
        uint64_t bits = next_random(&seed);
        double value;
        memcpy(&value, &bits, sizeof value);
        if (!isfinite(value))
            continue;
        char text[FGJSON_REAL_MAX], digits[32], fewer[320]; /* room for "%.*g" of any precision */
        fgjson_real_text(value, text);
        assert_true(strtod(text, NULL) == value);
        significant(text, digits);
        int n = (int)strlen(digits);
        snprintf(fewer, sizeof fewer, "%.*g", n - 1, value);
        if (n > 1)
            assert_false(strtod(fewer, NULL) == value);
    }
}

/* A decimal of up to 15 significant digits comes back as written. */
static void real_texts_keep_what_was_written(void **state)
{
    (void)state;
    uint64_t seed = 42;
    for (int i = 0; i < 20000; i++) {
        int ndigits = 1 + (int)(next_random(&seed) % 15);
        char written[48], want[32], got[32], text[FGJSON_REAL_MAX];
        size_t n = 0;
        for (int d = 0; d < ndigits; d++)
            written[n++] = (char)('0' + next_random(&seed) % 10);
        int exponent = (int)(next_random(&seed) % 41) - 20;
        snprintf(written + n, sizeof written - n, "e%d", exponent);
        double value = strtod(written, NULL);
        fgjson_real_text(value, text);
        significant(written, want);
        significant(text, got);
        assert_string_equal(got, want);
        assert_true(strtod(text, NULL) == value);
    }
}

/* A JSON text goes in as it is, its numbers untouched; NULL is null. */
static void writes_json_texts(void **state)
{
    (void)state;
    char buf[8]; /* small: the text moves to the heap */
    struct fgjson_out out;
    fgjson_out_init(&out, buf, sizeof buf);
    fgjson_out_open(&out);
    fgjson_out_int(&out, "fence", 3);
    fgjson_out_json(&out, "row", "{\"n\":99999999.99,\"k\":1234567890123456.7891}");
    fgjson_out_json(&out, "none", NULL);
    fgjson_out_open_array(&out, "results");
    fgjson_out_json(&out, NULL, "1e400");
    fgjson_out_json(&out, NULL, "[0.1]");
    fgjson_out_close_array(&out);
    fgjson_out_close(&out);
    char *text = fgjson_out_take(&out);
    assert_string_equal(text,
                        "{\"fence\":3,\"row\":{\"n\":99999999.99,\"k\":1234567890123456.7891},"
                        "\"none\":null,\"results\":[1e400,[0.1]]}");
    assert_null(out.heap);
    free(text);
}

static void integers(void **state)
{
    (void)state;
    json_t *o = obj("{\"n\": 7, \"s\": \"7\", \"r\": 7.0, \"b\": true, \"z\": null}");
    struct fg_error err = {0};
    long long v = -1;
    bool present = true;
    assert_int_equal(fgjson_int(o, "n", 0, 10, &v, &present, &err), 0);
    assert_int_equal(v, 7);
    assert_true(present);
    v = -1;
    assert_int_equal(fgjson_int(o, "missing", 0, 10, &v, &present, &err), 0);
    assert_int_equal(v, -1);
    assert_false(present);
    assert_int_equal(fgjson_int(o, "z", 0, 10, &v, &present, &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
    assert_string_equal(err.msg, "field 'z' must not be null: leave it out for its default");
    assert_false(present);
    memset(&err, 0, sizeof err);
    assert_int_equal(fgjson_int(o, "n", 0, 10, &v, NULL, &err), 0);
    static const char *const wrong[] = {"s", "r", "b"};
    for (size_t i = 0; i < 3; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(fgjson_int(o, wrong[i], 0, 10, &v, NULL, &err), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_non_null(strstr(err.msg, wrong[i]));
    }
    memset(&err, 0, sizeof err);
    assert_int_equal(fgjson_int(o, "n", 8, 10, &v, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "'n'"));
    assert_int_equal(fgjson_int(o, "n", 0, 6, &v, NULL, &err), -1);
    assert_int_equal(fgjson_int(o, "n", 7, 7, &v, NULL, &err), 0);
    json_decref(o);
}

static void answer_integers(void **state)
{
    (void)state;
    json_t *o = obj("{\"n\": 7, \"r\": 1.7e12, \"s\": \"7\", \"z\": null}");
    assert_int_equal(fgjson_answer_int(o, "n", -1), 7);
    assert_int_equal(fgjson_answer_int(o, "r", -1), 1700000000000LL);
    assert_int_equal(fgjson_answer_int(o, "s", -1), -1);
    assert_int_equal(fgjson_answer_int(o, "z", -1), -1);
    assert_int_equal(fgjson_answer_int(o, "missing", 0), 0);
    json_decref(o);
}

static void parse_object(void **state)
{
    (void)state;
    struct fg_error err = {0};
    char too_big[FGJSON_MEMBER_MAX];
    json_t *o = fgjson_parse_object("", 0, too_big, &err);
    assert_non_null(o);
    assert_true(json_is_object(o) && json_object_size(o) == 0);
    json_decref(o);
    o = fgjson_parse_object("{\"a\": 1}", 8, too_big, &err);
    assert_non_null(o);
    json_decref(o);
    static const char *const bad[] = {"[]",
                                      "1",
                                      "\"s\"",
                                      "null",
                                      "{",
                                      "{\"a\": 1, \"a\": 2}",
                                      "{\"a\": 1} x",
                                      "{'a': 1}",
                                      "\xff",
                                      "{\"a\": \"\\u0000\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_null(fgjson_parse_object(bad[i], strlen(bad[i]), too_big, &err));
        assert_int_equal(err.code, FG_ERR_INVALID_JSON);
        assert_string_equal(too_big, "");
    }
    /* \u0000 is told in the gateway's words, not by jansson's flag */
    const char *nul = "{\"a\": \"\\u0000\"}";
    assert_null(fgjson_parse_object(nul, strlen(nul), too_big, &err));
    assert_non_null(strstr(err.msg, "no string of a body may hold \\u0000 (line 1, column"));
    assert_null(strstr(err.msg, "JSON_ALLOW_NUL"));
    /* a body with a NUL byte in the middle: the length, not the NUL, ends it */
    assert_null(fgjson_parse_object("{}\0{}", 5, too_big, &err));
    assert_null(fgjson_parse_object("{\"a\": 1}\0", 9, too_big, &err));
}

/* Flat bodies take a path of their own: every text reads as jansson reads it
 * (the same members in the same order, or an error for both). */
static const char *const like_jansson[] = {
    "{}",
    " { } ",
    "{\"ttl_ms\":10000}",
    "{\"token\": \"abc.def-_~!\", \"wait_ms\": 0, \"x\": -12}",
    "\t{\r\n\"a\" :\ttrue ,\"b\":false, \"c\" : null }\n",
    "{\"\": \"\", \"k\": \"\"}",
    "{\"z\": 1, \"a\": 2, \"m\": 3}",
    "{\"n\": -0}",
    "{\"n\": 999999999999999999}",
    "{\"n\": 9999999999999999999}",
    "{\"n\": 99999999999999999999}",
    "{\"n\": -9223372036854775808}",
    "{\"n\": 9223372036854775808}",
    "{\"n\": 01}",
    "{\"n\": -}",
    "{\"n\": 1.5}",
    "{\"n\": 1e3}",
    "{\"n\": 1E3}",
    "{\"n\": 12x}",
    "{\"b\": truex}",
    "{\"b\": nul}",
    "{\"s\": \"a\\\"b\"}",
    "{\"s\": \"\u00e9\"}",
    "{\"s\": \"a\tb\"}",
    "{\"s\": \"open}",
    "{\"a\": {\"b\": 1}}",
    "{\"set\": {\"n\": 12, \"note\": \"w\"}, \"if\": {}}",
    "{\"a\": {\"b\": {\"c\": {\"d\": {\"e\": 1}}}}}",
    "{\"a\": {\"b\": 1, \"b\": 2}}",
    "{\"a\": {\"b\": 1}, \"a\": 2}",
    "{\"a\": {\"b\": 1,}}",
    "{\"a\": {\"b\": 1}",
    "{\"a\": {\"b\" 1}}",
    "{\"a\": [1, 2]}",
    "{\"a\": 1,}",
    "{\"a\": 1 \"b\": 2}",
    "{\"a\" 1}",
    "{\"a\": 1, \"a\": 1}",
    "{a: 1}",
    "{\"a\": 1}}",
    "{\"a\": 1",
    "{",
};

static void parse_object_like_jansson(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof like_jansson / sizeof like_jansson[0]; i++) {
        const char *text = like_jansson[i];
        size_t len = strlen(text);
        json_error_t jerr;
        json_t *want = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        struct fg_error err = {0};
        char too_big[FGJSON_MEMBER_MAX];
        json_t *got = fgjson_parse_object(text, len, too_big, &err);
        if (want == NULL) {
            /* but an integer beyond 64 bits, which is a member's fault */
            bool member = json_error_code(&jerr) == json_error_numeric_overflow;
            assert_null(got);
            assert_int_equal(err.code, member ? FG_ERR_INVALID_FIELD : FG_ERR_INVALID_JSON);
            assert_string_equal(too_big, member ? "n" : "");
            continue;
        }
        assert_non_null(got);
        assert_true(json_equal(want, got));
        char *want_text = json_dumps(want, JSON_COMPACT);
        char *got_text = json_dumps(got, JSON_COMPACT);
        assert_string_equal(want_text, got_text);
        free(want_text);
        free(got_text);
        json_decref(want);
        json_decref(got);
    }
}

/* An integer beyond 64 bits, which jansson refuses, is its member's fault,
 * as any value past the member's bound is: invalid_field naming the member's
 * path whatever comes before it (strings holding brackets, commas and quotes,
 * reals, other members), one nested over 16 deep by its ancestor 16 deep. A
 * real that no double holds, or a body that is no object, stays invalid_json. */
static void integers_beyond_64_bits_name_their_member(void **state)
{
    (void)state;
    static const struct {
        const char *body, *member;
    } cases[] = {
        {"{\"ttl_ms\": 9223372036854775808}", "ttl_ms"},
        {"{\"ttl_ms\":18446744073709551616 , \"x\": 1}", "ttl_ms"},
        {"{\"wait_ms\": -9223372036854775809}", "wait_ms"},
        {"{\"a\": 1.5, \"limit\": 99999999999999999999999999999999999999999999999999}", "limit"},
        {"{\"s\": \"a,[{\\\"b\\\": [\", \"k\\\"ey\": 0, \"fence\": 9223372036854775808}", "fence"},
        {"{\"caf\u00e9\": 1e3, \"set\": {\"n\": 1, \"m\": -99999999999999999999}}", "set.m"},
        {"{\"ops\": [{\"op\": \"patch\", \"set\": {\"n\": [1, 2]}}, {\"row\": {\"id\": "
         "9223372036854775808}}]}",
         "ops[1].row.id"},
        {"{\"a\": [[], [0, {}, \n 9223372036854775808]]}", "a[1][2]"},
        {"{\"\\u00e9\": 9223372036854775808}", "\\u00e9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fg_error err = {0};
        char too_big[FGJSON_MEMBER_MAX], detail[256];
        assert_null(fgjson_parse_object(cases[i].body, strlen(cases[i].body), too_big, &err));
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_string_equal(too_big, cases[i].member);
        snprintf(detail, sizeof detail,
                 "field '%s' is an integer beyond 64 bits (-9223372036854775808 to "
                 "9223372036854775807)",
                 cases[i].member);
        assert_string_equal(err.msg, detail);
    }
    char deep[256] = "", path[FGJSON_MEMBER_MAX] = "";
    for (int level = 0; level < 20; level++)
        strcat(deep, "{\"a\":");
    strcat(deep, "9223372036854775808");
    for (int level = 0; level < 20; level++)
        strcat(deep, "}");
    for (int level = 0; level < 16; level++)
        strcat(path, level > 0 ? ".a" : "a");
    struct fg_error err = {0};
    char too_big[FGJSON_MEMBER_MAX];
    assert_null(fgjson_parse_object(deep, strlen(deep), too_big, &err));
    assert_string_equal(too_big, path);
    static const char *const still_malformed[] = {"{\"r\": 1e99999}", "{\"r\": -1.5e+99999}",
                                                  "[9223372036854775808]",
                                                  "{\"a\": 9223372036854775808"};
    for (size_t i = 0; i < sizeof still_malformed / sizeof still_malformed[0]; i++) {
        const char *body = still_malformed[i];
        memset(&err, 0, sizeof err);
        assert_null(fgjson_parse_object(body, strlen(body), too_big, &err));
        assert_int_equal(err.code, i < 3 ? FG_ERR_INVALID_JSON : FG_ERR_INVALID_FIELD);
        assert_string_equal(too_big, i < 3 ? "" : "a");
    }
    const char *edges = "{\"n\": 9223372036854775807, \"m\": -9223372036854775808}";
    json_t *o = fgjson_parse_object(edges, strlen(edges), too_big, &err);
    assert_non_null(o);
    assert_int_equal(json_integer_value(json_object_get(o, "n")), INT64_MAX);
    assert_int_equal(json_integer_value(json_object_get(o, "m")), INT64_MIN);
    json_decref(o);
}

/* -0 is a JSON number equal to 0: both readers (the flat one, and jansson's
 * for a body with a real) take it as the integer 0, which a member then
 * accepts or refuses as it does 0. */
static void minus_zero_is_zero(void **state)
{
    (void)state;
    static const char *const bodies[] = {"{\"n\": -0}", "{\"n\": -0, \"r\": 0.5}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct fg_error err = {0};
        char too_big[FGJSON_MEMBER_MAX];
        json_t *o = fgjson_parse_object(bodies[i], strlen(bodies[i]), too_big, &err);
        assert_non_null(o);
        assert_true(json_is_integer(json_object_get(o, "n")));
        long long n = 5;
        bool present = false;
        assert_int_equal(fgjson_int(o, "n", 0, 10, &n, &present, &err), 0);
        assert_true(present);
        assert_int_equal(n, 0);
        assert_int_equal(fgjson_int(o, "n", 1, 10, &n, NULL, &err), -1);
        assert_string_equal(err.msg, "field 'n' must be between 1 and 10");
        json_decref(o);
    }
}

/* fgjson_string takes what json_string refuses: bytes that are not UTF-8
 * (a character cut short, a stray byte) become U+FFFD, as the writer writes
 * them; text that is UTF-8 stays as it is. */
static void strings_of_any_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"\xE2\x9C\x93 ok", "\xE2\x9C\x93 ok"},
        {"cut \xE2\x9C", "cut \xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xff in the middle", "\xEF\xBF\xBD in the middle"},
        {"\xC0\xAF overlong", "\xEF\xBF\xBD\xEF\xBF\xBD overlong"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *s = fgjson_string(cases[i].in);
        assert_non_null(s);
        assert_string_equal(json_string_value(s), cases[i].out);
        value_dumps_like_jansson(s, 64); /* jansson writes it: it is UTF-8 */
    }
}

/* An unknown member's name is quoted by at most 40 bytes, never half a
 * character of it. */
static void unknown_members_cut_whole(void **state)
{
    (void)state;
    json_t *body = json_object();
    char name[100 * 3 + 1] = "";
    for (int i = 0; i < 100; i++)
        strcat(name, "\xE2\x9C\x93");
    json_object_set_new(body, name, json_true());
    struct fg_error err = {0};
    assert_int_equal(fgjson_only(body, NULL, "", &err), -1);
    char want[256];
    snprintf(want, sizeof want, "unknown field '%.39s'", name);
    assert_string_equal(err.msg, want);
    json_decref(body);
}

/* A configuration file that does not parse is named with its line and
 * column, never with the text jansson quotes: it may be a secret's. */
static void files_that_do_not_parse_keep_their_text(void **state)
{
    (void)state;
    char path[] = "/tmp/fgjson-file-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("[{\"id\": \"k1\",\n \"secret\": SecretWithoutQuotes0123456789}]\n", f);
    fclose(f);
    struct fg_error err = {0};
    assert_null(fgjson_load_file(path, "secret_file", &err));
    assert_int_equal(err.code, FG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "secret_file /tmp/fgjson-file-"));
    assert_non_null(strstr(err.msg, "(line 2, column"));
    assert_null(strstr(err.msg, "Secret"));
    assert_null(strstr(err.msg, "near"));
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"id\": 1}", f);
    fclose(f);
    json_t *root = fgjson_load_file(path, "secret_file", &err);
    assert_non_null(root);
    json_decref(root);
    unlink(path);
    memset(&err, 0, sizeof err);
    assert_null(fgjson_load_file(path, "auth.keys_file", &err));
    assert_non_null(strstr(err.msg, "auth.keys_file /tmp/fgjson-file-"));
    /* a file that cannot be opened has no line to name ("(line -1, column -1)" was appended) */
    assert_non_null(strstr(err.msg, "No such file or directory"));
    assert_null(strstr(err.msg, "line"));
    /* a directory (a mounted secret's) was "'[' or '{' expected near end of file" */
    memset(&err, 0, sizeof err);
    assert_null(fgjson_load_file("/tmp", "secret_file", &err));
    assert_int_equal(err.code, FG_ERR_CONFIG);
    assert_string_equal(err.msg, "secret_file /tmp: is a directory, not a JSON file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(integers),
        cmocka_unit_test(answer_integers),
        cmocka_unit_test(writes_like_jansson),
        cmocka_unit_test(writes_members),
        cmocka_unit_test(writes_lists),
        cmocka_unit_test(real_texts),
        cmocka_unit_test(real_texts_are_shortest),
        cmocka_unit_test(real_texts_keep_what_was_written),
        cmocka_unit_test(writes_json_texts),
        cmocka_unit_test(parse_object),
        cmocka_unit_test(parse_object_like_jansson),
        cmocka_unit_test(integers_beyond_64_bits_name_their_member),
        cmocka_unit_test(minus_zero_is_zero),
        cmocka_unit_test(strings_of_any_bytes),
        cmocka_unit_test(unknown_members_cut_whole),
        cmocka_unit_test(files_that_do_not_parse_keep_their_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
