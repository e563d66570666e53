/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fgjson.c - typed field readers and the body parser: wrong types and
 * out-of-range values name the field; bodies that are not one JSON object are
 * invalid_json.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/fgjson.h"

static json_t *obj(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &jerr);
    assert_non_null(v);
    return v;
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
    assert_int_equal(fgjson_int(o, "z", 0, 10, &v, &present, &err), 0);
    assert_false(present);
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

static void strings(void **state)
{
    (void)state;
    json_t *o = obj("{\"s\": \"abc\", \"e\": \"\", \"n\": 5, \"nul\": \"a\\u0000b\", \"z\": null}");
    struct fg_error err = {0};
    const char *s = "unchanged";
    assert_int_equal(fgjson_string(o, "s", 3, &s, &err), 0);
    assert_string_equal(s, "abc");
    s = "unchanged";
    assert_int_equal(fgjson_string(o, "missing", 3, &s, &err), 0);
    assert_string_equal(s, "unchanged");
    assert_int_equal(fgjson_string(o, "z", 3, &s, &err), 0);
    assert_string_equal(s, "unchanged");
    static const struct {
        const char *field;
        size_t max;
    } bad[] = {{"s", 2}, {"e", 3}, {"n", 3}, {"nul", 5}};
    for (size_t i = 0; i < 4; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(fgjson_string(o, bad[i].field, bad[i].max, &s, &err), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_non_null(strstr(err.msg, bad[i].field));
    }
    json_decref(o);
}

static void parse_object(void **state)
{
    (void)state;
    struct fg_error err = {0};
    json_t *o = fgjson_parse_object("", 0, &err);
    assert_non_null(o);
    assert_true(json_is_object(o) && json_object_size(o) == 0);
    json_decref(o);
    o = fgjson_parse_object("{\"a\": 1}", 8, &err);
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
        assert_null(fgjson_parse_object(bad[i], strlen(bad[i]), &err));
        assert_int_equal(err.code, FG_ERR_INVALID_JSON);
    }
    /* a body with a NUL byte in the middle: the length, not the NUL, ends it */
    assert_null(fgjson_parse_object("{}\0{}", 5, &err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(integers),
        cmocka_unit_test(answer_integers),
        cmocka_unit_test(strings),
        cmocka_unit_test(parse_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
