/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_redis_answer.c - reading the answers of the fenced Redis write
 * scripts into struct fenced_result, or into the error of a write the script
 * did not take, as lua/rw_*.lua send them (numbers may come as reals).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/fenced_redis_answer.h"

/* Reads the answer text into *res; returns fenced_redis_answer_read's status. */
static int read_text(const char *text, struct fenced_result *res, struct fg_error *err)
{
    json_t *answer = json_loads(text, 0, NULL);
    assert_non_null(answer);
    int rc = fenced_redis_answer_read("rw_put.lua", answer, "redis:app:x", res, err);
    json_decref(answer);
    return rc;
}

static void applied(void **state)
{
    (void)state;
    struct fg_error err = {0};
    struct fenced_result res;
    assert_int_equal(read_text("{\"r\":\"applied\",\"fence\":12}", &res, &err), 0);
    assert_int_equal(res.outcome, FENCED_APPLIED);
    assert_int_equal(res.fence, 12);
    assert_string_equal(res.resource, "redis:app:x");
    assert_null(res.after); /* what the write stored is the caller's to fill in */
    assert_false(res.audit_streamed);
    fenced_result_free(&res);
    assert_null(res.resource);
}

static void refused(void **state)
{
    (void)state;
    struct fg_error err = {0};
    struct fenced_result res;
    assert_int_equal(read_text("{\"r\": \"stale\", \"current\": 9007199254740993, \"at_ms\": 17, "
                               "\"audit_id\": \"17-0\"}",
                               &res, &err),
                     0);
    assert_int_equal(res.outcome, FENCED_STALE);
    assert_int_equal(res.fence, 9007199254740993LL);
    assert_string_equal(res.resource, "redis:app:x");
    assert_true(res.audit_streamed);
    assert_false(res.below_floor);
    assert_null(res.after);
    fenced_result_free(&res);
    /* the write floor refused it: the answer names the floor as such */
    assert_int_equal(read_text("{\"r\": \"stale\", \"current\": 30000, \"floor\": true, "
                               "\"below_floor\": true}",
                               &res, &err),
                     0);
    assert_int_equal(res.fence, 30000);
    assert_true(res.below_floor);
    fenced_result_free(&res);
    assert_int_equal(read_text("{\"r\": \"revoked\", \"current\": 4}", &res, &err), 0);
    assert_int_equal(res.outcome, FENCED_REVOKED);
    assert_int_equal(res.fence, 4);
    assert_true(res.audit_streamed);
    fenced_result_free(&res);
}

/* A write the script did not take is the error the client is answered with. */
static void not_taken(void **state)
{
    (void)state;
    struct fg_error err = {0};
    struct fenced_result res;
    assert_int_equal(
        read_text("{\"r\": \"wrongtype\", \"type\": \"list\", \"want\": \"hash\"}", &res, &err),
        -1);
    assert_int_equal(err.code, FG_ERR_CONFLICT);
    assert_string_equal(err.msg, "redis:app:x holds a list, not a hash");
    assert_null(res.resource);
    /* a PUT's (rw_put.lua) and a DELETE's (rw_delete.lua) refusal name what they write */
    assert_int_equal(
        read_text("{\"r\": \"wrongtype\", \"type\": \"hash\", \"want\": \"string\"}", &res, &err),
        -1);
    assert_int_equal(err.code, FG_ERR_CONFLICT);
    assert_string_equal(err.msg, "redis:app:x holds a hash, not a string");
    assert_int_equal(read_text("{\"r\": \"wrongtype\", \"type\": \"zset\", \"want\": \"string or "
                               "hash\"}",
                               &res, &err),
                     -1);
    assert_string_equal(err.msg, "redis:app:x holds a zset, not a string or hash");
    assert_int_equal(
        read_text("{\"r\": \"toomany\", \"fields\": 1001, \"max\": 1000.0}", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
    assert_string_equal(err.msg, "field 'fields': the hash would hold 1001 fields, over "
                                 "limits.max_hash_fields (1000)");
    assert_int_equal(read_text("{\"r\": \"missing\"}", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_NOT_FOUND);
    assert_string_equal(err.msg, "no such key");
    assert_int_equal(read_text("{\"r\": \"nofloor\"}", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    assert_string_equal(err.msg, "Redis lost its data and the fence sequence is not recovered yet");
    /* still no revoked set after the caller rebuilt it: while a Redis Cluster's slots move, the set
     * is rebuilt on the node the slot goes to, not the one the key is on yet */
    assert_int_equal(read_text("{\"r\": \"norevoked\"}", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
}

static void unknown_answers(void **state)
{
    (void)state;
    struct fg_error err = {0};
    struct fenced_result res;
    assert_int_equal(read_text("{\"r\": \"granted\"}", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "rw_put.lua answered 'granted'"));
    /* no script answers lease_expired: the gateway decides it (a script answers ended) */
    assert_int_equal(read_text("{\"r\": \"lease_expired\"}", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_INTERNAL);
    assert_int_equal(read_text("{}", &res, &err), -1);
    json_t *norevoked = json_pack("{s:s}", "r", "norevoked");
    json_t *nofloor = json_pack("{s:s}", "r", "nofloor");
    json_t *stale = json_pack("{s:s}", "r", "stale");
    assert_true(fenced_redis_answer_norevoked(norevoked));
    assert_false(fenced_redis_answer_norevoked(stale));
    assert_true(fenced_redis_answer_nofloor(nofloor));
    assert_false(fenced_redis_answer_nofloor(norevoked));
    /* a look at the lease that found it gone (require_live_lease): the caller asks how it ended */
    json_t *ended = json_pack("{s:s}", "r", "ended");
    assert_true(fenced_redis_answer_ended(ended));
    assert_false(fenced_redis_answer_ended(stale));
    /* once the caller's tries are spent: whether the lease holds could not be told */
    assert_int_equal(fenced_redis_answer_read("rw_put.lua", ended, "redis:app:x", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    json_t *nolook = json_pack("{s:s}", "r", "nolook");
    assert_true(fenced_redis_answer_nolook(nolook));
    assert_false(fenced_redis_answer_nolook(ended));
    assert_int_equal(fenced_redis_answer_read("rw_put.lua", nolook, "redis:app:x", &res, &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    json_decref(nolook);
    json_decref(ended);
    json_decref(norevoked);
    json_decref(nofloor);
    json_decref(stale);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(applied),
        cmocka_unit_test(refused),
        cmocka_unit_test(not_taken),
        cmocka_unit_test(unknown_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
