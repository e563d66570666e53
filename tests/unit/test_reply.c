/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_reply.c - replies and problem+json bodies: type, title, status and
 * detail for every code (the table itself: test_error.c), extra members,
 * Retry-After on 503 and 429, and bodies kept whatever bytes their texts hold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/reply.h"

static void problem_fields_for_every_code(void **state)
{
    (void)state;
    for (int code = FG_ERR_INVALID_JSON; code < FG_CODE_COUNT; code++) {
        struct fg_error err = {0};
        fg_fail(&err, (enum fg_code)code, "detail %d", code);
        struct http_reply reply = {0};
        reply_problem(&reply, &err);
        char type[64];
        snprintf(type, sizeof type, "/problems/%s", fg_code_name((enum fg_code)code));
        assert_int_equal(reply.problem, code);
        assert_int_equal(reply.status, fg_code_status((enum fg_code)code));
        assert_string_equal(json_string_value(json_object_get(reply.body, "type")), type);
        assert_int_equal(json_integer_value(json_object_get(reply.body, "status")), reply.status);
        assert_string_equal(json_string_value(json_object_get(reply.body, "title")),
                            fg_code_title((enum fg_code)code));
        char detail[32];
        snprintf(detail, sizeof detail, "detail %d", code);
        assert_string_equal(json_string_value(json_object_get(reply.body, "detail")), detail);
        bool retry = reply.status == 503 || reply.status == 429;
        assert_int_equal(reply.retry_after_s > 0, retry);
        reply_clear(&reply);
    }
}

static void extra_members(void **state)
{
    (void)state;
    struct fg_error err = {0};
    fg_fail(&err, FG_ERR_LOCK_BUSY, "held");
    struct http_reply reply = {0};
    reply_problem_extra(&reply, &err, json_pack("{s:i}", "waiting", 3));
    assert_int_equal(reply.status, 409);
    assert_int_equal(json_integer_value(json_object_get(reply.body, "waiting")), 3);
    assert_string_equal(json_string_value(json_object_get(reply.body, "type")),
                        "/problems/lock_busy");
    assert_int_equal(reply.retry_after_s, 0);
    reply_clear(&reply);
    assert_null(reply.body);
    assert_int_equal(reply.status, 0);
}

static void unset_error_is_internal(void **state)
{
    (void)state;
    struct fg_error err = {0};
    json_t *body = problem_new(&err);
    assert_int_equal(json_integer_value(json_object_get(body, "status")), 500);
    json_decref(body);
    struct http_reply reply = {0};
    reply_problem(&reply, &err);
    assert_int_equal(reply.problem, FG_ERR_INTERNAL);
    assert_int_equal(reply.status, 500);
    reply_clear(&reply);
}

static void replace_and_text(void **state)
{
    (void)state;
    struct http_reply reply = {0};
    reply_json(&reply, 200, json_pack("{s:b}", "ok", 1));
    struct fg_error err = {0};
    fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "redis down");
    reply_problem(&reply, &err); /* replaces, freeing the first body */
    assert_int_equal(reply.status, 503);
    assert_int_equal(reply.retry_after_s, 1);
    reply_text(&reply, 200, "text/plain", strdup("hello"));
    assert_null(reply.body);
    assert_int_equal(reply.problem, FG_OK);
    assert_int_equal(reply.retry_after_s, 0);
    assert_string_equal(reply.text, "hello");
    char small[4]; /* too small: the text moves to the heap, which reply_json_out frees */
    struct fgjson_out out;
    fgjson_out_init(&out, small, sizeof small);
    fgjson_out_open(&out);
    fgjson_out_int(&out, "fence", 42);
    reply_json_out(&reply, 201, &out);
    assert_null(out.heap);
    assert_int_equal(reply.status, 201);
    assert_string_equal(reply.content_type, "application/json");
    assert_string_equal(reply.text, "{\"fence\":42}");
    reply_clear(&reply);
}

/* A detail or a resource with bytes that are not UTF-8 (here a character cut
 * short) keeps its problem body, U+FFFD in their place: jansson refuses such a
 * string, and the body built around it was lost. */
static void texts_that_are_not_utf8_keep_the_body(void **state)
{
    (void)state;
    struct fg_error err = {.code = FG_ERR_STALE_FENCE};
    strcpy(err.msg, "stored for redis:app:\xE2\x9C");
    struct http_reply reply = {0};
    reply_problem_extra(&reply, &err, json_pack("{s:I}", "current_fence", (json_int_t)7));
    assert_non_null(reply.body);
    assert_int_equal(reply.status, 409);
    assert_string_equal(json_string_value(json_object_get(reply.body, "detail")),
                        "stored for redis:app:\xEF\xBF\xBD\xEF\xBF\xBD");
    assert_int_equal(json_integer_value(json_object_get(reply.body, "current_fence")), 7);
    reply_write_lease_lost(&reply, 5, "redis:app:\xE2", "revoked");
    assert_int_equal(reply.status, 410);
    assert_string_equal(json_string_value(json_object_get(reply.body, "resource")),
                        "redis:app:\xEF\xBF\xBD");
    assert_string_equal(json_string_value(json_object_get(reply.body, "reason")), "revoked");
    assert_int_equal(json_integer_value(json_object_get(reply.body, "presented_fence")), 5);
    reply_clear(&reply);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(problem_fields_for_every_code),
        cmocka_unit_test(extra_members),
        cmocka_unit_test(unset_error_is_internal),
        cmocka_unit_test(replace_and_text),
        cmocka_unit_test(texts_that_are_not_utf8_keep_the_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
