/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_error.c - the one table of error codes (FG_CODES): every code has a
 * unique name, an error status, a title; the statuses the API promises, and
 * a Retry-After on 429 and 503 only; codes read back from their names; and
 * fg_fail's message and return value, a long message cut between characters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/error.h"

static void every_code_is_complete(void **state)
{
    (void)state;
    for (int code = FG_ERR_INVALID_JSON; code < FG_CODE_COUNT; code++) {
        const char *name = fg_code_name((enum fg_code)code);
        const char *title = fg_code_title((enum fg_code)code);
        int status = fg_code_status((enum fg_code)code);
        assert_non_null(name);
        assert_true(strlen(name) > 0);
        assert_non_null(title);
        assert_true(strlen(title) > 0);
        if (status < 400 || status > 599)
            fail_msg("%s: status %d is not 4xx or 5xx", name, status);
        for (int other = FG_OK; other < code; other++)
            if (strcmp(name, fg_code_name((enum fg_code)other)) == 0)
                fail_msg("two codes are called %s", name);
    }
    assert_string_equal(fg_code_name(FG_OK), "ok");
    assert_int_equal(fg_code_status(FG_OK), 200);
}

static void statuses_of_the_api(void **state)
{
    (void)state;
    static const struct {
        enum fg_code code;
        const char *name;
        int status;
        int retry_after_s;
    } table[] = {
        {FG_ERR_INVALID_JSON, "invalid_json", 400, 0},
        {FG_ERR_INVALID_NAME, "invalid_name", 400, 0},
        {FG_ERR_INVALID_FIELD, "invalid_field", 400, 0},
        {FG_ERR_UNAUTHORIZED, "unauthorized", 401, 0},
        {FG_ERR_FORBIDDEN, "forbidden", 403, 0},
        {FG_ERR_INVALID_FENCE_TOKEN, "invalid_fence_token", 403, 0},
        {FG_ERR_NOT_FOUND, "not_found", 404, 0},
        {FG_ERR_METHOD_NOT_ALLOWED, "method_not_allowed", 405, 0},
        {FG_ERR_LOCK_BUSY, "lock_busy", 409, 0},
        {FG_ERR_STALE_FENCE, "stale_fence", 409, 0},
        {FG_ERR_LIMIT_MISMATCH, "limit_mismatch", 409, 0},
        {FG_ERR_MAX_HOLD_EXCEEDED, "max_hold_exceeded", 409, 0},
        {FG_ERR_CONFLICT, "conflict", 409, 0},
        {FG_ERR_LEASE_LOST, "lease_lost", 410, 0},
        {FG_ERR_BODY_TOO_LARGE, "body_too_large", 413, 0},
        {FG_ERR_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415, 0},
        {FG_ERR_MISDIRECTED_REQUEST, "misdirected_request", 421, 0},
        {FG_ERR_TOO_MANY_WAITERS, "too_many_waiters", 429, 1},
        {FG_ERR_BACKEND_UNAVAILABLE, "backend_unavailable", 503, 1},
        {FG_ERR_INTERNAL, "internal", 500, 0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        assert_string_equal(fg_code_name(table[i].code), table[i].name);
        assert_int_equal(fg_code_status(table[i].code), table[i].status);
        assert_int_equal(fg_code_retry_after(table[i].code), table[i].retry_after_s);
    }
    assert_int_equal(fg_code_retry_after(FG_OK), 0);
    assert_string_equal(fg_code_title(FG_ERR_LOCK_BUSY), "Lock busy");
    assert_string_equal(fg_code_title(FG_ERR_STALE_FENCE), "Stale fence");
}

/* A client reads a code back from its name. */
static void code_of_name(void **state)
{
    (void)state;
    for (int code = FG_ERR_INVALID_JSON; code < FG_CODE_COUNT; code++)
        assert_int_equal(fg_code_of_name(fg_code_name((enum fg_code)code)), code);
    assert_int_equal(fg_code_of_name("no_such_code"), FG_OK);
    assert_int_equal(fg_code_of_name("ok"), FG_OK);
    assert_int_equal(fg_code_of_name(NULL), FG_OK);
}

static void fail_fills_the_error(void **state)
{
    (void)state;
    struct fg_error err = {0};
    assert_int_equal(fg_fail(&err, FG_ERR_INVALID_NAME, "name '%s' is %d bytes", "x", 201), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_NAME);
    assert_string_equal(err.msg, "name 'x' is 201 bytes");
    assert_int_equal(fg_fail(NULL, FG_ERR_INTERNAL, "nowhere"), -1);
}

/* A call the backend answered without running it is marked so until the
 * error is filled again: a later failure of the same err may have run. */
static void not_run_marks_until_the_next_failure(void **state)
{
    (void)state;
    struct fg_error err = {0};
    fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "redis: CLUSTERDOWN The cluster is down");
    assert_false(err.not_run);
    assert_int_equal(fg_not_run(&err), -1);
    assert_true(err.not_run);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "redis: no reply by the call's deadline");
    assert_false(err.not_run);
    assert_int_equal(fg_not_run(NULL), -1);
}

/* A message over msg is cut before a character that would not fit whole: a
 * key of U+2713 (three bytes) named at its end leaves text, whatever byte the
 * cut falls on. */
static void fail_cuts_whole_characters(void **state)
{
    (void)state;
    char key[301] = "";
    for (int i = 0; i < 100; i++)
        strcat(key, "\xE2\x9C\x93");
    for (int pad = 0; pad < 3; pad++) {
        struct fg_error err = {0};
        fg_fail(&err, FG_ERR_STALE_FENCE, "%.*sstored for %s", pad, "xx", key);
        size_t head = strlen("stored for ") + (size_t)pad, n = strlen(err.msg);
        assert_int_equal(n, head + (sizeof err.msg - 1 - head) / 3 * 3);
        assert_memory_equal(err.msg + head, key, n - head);
    }
    struct fg_error err = {0};
    fg_fail(&err, FG_ERR_INVALID_NAME, "short \xE2\x9C\x93");
    assert_string_equal(err.msg, "short \xE2\x9C\x93");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_is_complete),
        cmocka_unit_test(statuses_of_the_api),
        cmocka_unit_test(code_of_name),
        cmocka_unit_test(fail_fills_the_error),
        cmocka_unit_test(not_run_marks_until_the_next_failure),
        cmocka_unit_test(fail_cuts_whole_characters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
