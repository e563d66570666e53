/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rw_answer.c - reading the answers of the fenced Redis write scripts
 * into struct rw_result, as lua/rw_*.lua send them (numbers may come as reals).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/rw_answer.h"

/* Reads the answer text into *res; returns rw_answer_read's status. */
static int read_text(const char *text, struct rw_result *res, struct fg_error *err)
{
    json_t *answer = json_loads(text, 0, NULL);
    assert_non_null(answer);
    int rc = rw_answer_read("rw_put.lua", answer, res, err);
    json_decref(answer);
    return rc;
}

static void applied(void **state)
{
    (void)state;
    struct fg_error err = {0};
    struct rw_result res;
    assert_int_equal(
        read_text("{\"r\": \"applied\", \"fence\": 12.0, \"value\": \"v\"}", &res, &err), 0);
    assert_int_equal(res.outcome, FENCED_APPLIED);
    assert_int_equal(res.fence, 12);
    assert_string_equal(json_string_value(res.after), "v");
    rw_result_clear(&res);
    assert_null(res.after);
    assert_int_equal(
        read_text("{\"r\": \"applied\", \"fence\": 3, \"fields\": {\"a\": null}}", &res, &err), 0);
    assert_true(json_is_object(res.after));
    rw_result_clear(&res);
    assert_int_equal(read_text("{\"r\": \"applied\", \"fence\": 3, \"deleted\": true}", &res, &err),
                     0);
    assert_true(json_is_true(res.after));
    rw_result_clear(&res);
}

static void refused(void **state)
{
    (void)state;
    struct fg_error err = {0};
    struct rw_result res;
    assert_int_equal(read_text("{\"r\": \"stale\", \"current\": 9007199254740993, \"at_ms\": 17, "
                               "\"audit_id\": \"17-0\"}",
                               &res, &err),
                     0);
    assert_int_equal(res.outcome, FENCED_STALE);
    assert_int_equal(res.current_fence, 9007199254740993LL);
    assert_int_equal(res.at_ms, 17);
    assert_string_equal(res.audit_id, "17-0");
    assert_null(res.after);
    assert_int_equal(read_text("{\"r\": \"revoked\", \"current\": 4}", &res, &err), 0);
    assert_int_equal(res.outcome, FENCED_REVOKED);
    assert_int_equal(res.current_fence, 4);
    assert_string_equal(res.audit_id, "");
    assert_int_equal(read_text("{\"r\": \"wrongtype\", \"type\": \"list\"}", &res, &err), 0);
    assert_int_equal(res.outcome, FENCED_WRONGTYPE);
    assert_string_equal(res.type, "list");
    assert_int_equal(read_text("{\"r\": \"toomany\", \"fields\": 1001}", &res, &err), 0);
    assert_int_equal(res.outcome, FENCED_TOO_MANY);
    assert_int_equal(res.hash_fields, 1001);
    assert_int_equal(read_text("{\"r\": \"nofloor\"}", &res, &err), 0);
    assert_int_equal(res.outcome, FENCED_NOFLOOR);
    assert_int_equal(read_text("{\"r\": \"missing\"}", &res, &err), 0);
    assert_int_equal(res.outcome, FENCED_MISSING);
}

static void unknown_answers(void **state)
{
    (void)state;
    struct fg_error err = {0};
    struct rw_result res;
    assert_int_equal(read_text("{\"r\": \"granted\"}", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "rw_put.lua answered 'granted'"));
    assert_int_equal(read_text("{}", &res, &err), -1);
    json_t *norevoked = json_pack("{s:s}", "r", "norevoked");
    assert_true(rw_answer_norevoked(norevoked));
    json_decref(norevoked);
    json_t *stale = json_pack("{s:s}", "r", "stale");
    assert_false(rw_answer_norevoked(stale));
    json_decref(stale);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(applied),
        cmocka_unit_test(refused),
        cmocka_unit_test(unknown_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
