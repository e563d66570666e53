/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lease_answer.c - reading lease and watch script answers: outcomes and
 * their facts, numbers sent as reals, grants handed to other waiters, the
 * answers that ask for a retry, and answers no script gives; the common
 * answers, read as they are scanned, read as a jansson tree reads them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "lease/lease_answer.h"

#define LEASE_A "0123456789abcdef0123456789abcdef"

static json_t *parse(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    assert_non_null(v);
    return v;
}

static struct lease_result res;
static enum lease_retry retry;
static struct fg_error err;

/* Reads the answer text of script into res and retry; returns lease_answer_read's status. */
static int read_text(const char *script, const char *text)
{
    return lease_answer_read(script, text, strlen(text), &res, &retry, &err);
}

/* Answers of one level of plain members, which lease_answer_read takes as it
 * scans them: each must read as it does with a member that only a jansson
 * tree reads (an array) added, member for member. */
static const char *const scanned[] = {
    "{\"r\":\"granted\",\"lease\":\"" LEASE_A
    "\",\"fence\":41,\"ttl\":5000,\"expires_at\":1700000005000}",
    "{\"r\": \"queued\", \"lease\": \"" LEASE_A "\", \"position\": 3, \"holder_pttl\": -1}",
    "{\"r\":\"queued\",\"position\":0,\"holder_pttl\":250}",
    "{\"r\":\"released\",\"held_ms\":17}",
    "{\"r\":\"released\",\"again\":true}",
    "{\"r\":\"busy\",\"waiting\":4,\"note\":null,\"again\":false}",
    "{\"r\":\"mismatch\",\"limit\":5}",
    "{\"r\":\"renewed\",\"fence\":7,\"ttl\":100,\"expires_at\":9,\"hold_until\":12}",
    "{\"r\":\"nofence\"}",
    "{\"lease\":\"" LEASE_A "\",\"r\":\"lost\"}",
    "{\"r\":\"granted\",\"lease\":\"short\",\"fence\":-2}",
};

static void scanned_answers_read_as_trees_do(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof scanned / sizeof scanned[0]; i++) {
        const char *text = scanned[i];
        char padded[512];
        size_t len = strlen(text);
        assert_true(len + 16 < sizeof padded);
        memcpy(padded, text, len - 1); /* without the closing brace */
        strcpy(padded + len - 1, ",\"pad\":[1]}");
        assert_int_equal(read_text("s", padded), 0);
        struct lease_result tree = res;
        enum lease_retry tree_retry = retry;
        assert_int_equal(read_text("s", text), 0);
        assert_int_equal(retry, tree_retry);
        assert_memory_equal(&res, &tree, sizeof res);
    }
    assert_int_equal(read_text("s", scanned[0]), 0);
    assert_int_equal(res.fence, 41);
    assert_int_equal(res.expires_at_ms, 1700000005000LL);
    assert_string_equal(res.lease_id, LEASE_A);
}

static void granted_with_handoff(void **state)
{
    (void)state;
    assert_int_equal(strlen(LEASE_A), LEASE_ID_LEN);
    assert_int_equal(read_text("lock_acquire.lua",
                               "{\"r\": \"granted\", \"lease\": \"" LEASE_A "\", \"fence\": 4.0e15,"
                               " \"ttl\": 5000, \"expires_at\": 1700000005000,"
                               " \"handoff\": [{\"lease\": \"" LEASE_A "\", \"fence\": 8,"
                               " \"ttl\": 10, \"expires_at\": 20}, {\"lease\": \"short\"}]}"),
                     0);
    assert_int_equal(retry, LEASE_RETRY_NONE);
    assert_int_equal(res.outcome, LEASE_GRANTED);
    assert_string_equal(res.lease_id, LEASE_A);
    assert_int_equal(res.fence, 4000000000000000LL);
    assert_int_equal(res.ttl_ms, 5000);
    assert_int_equal(res.expires_at_ms, 1700000005000LL);
    assert_int_equal(res.holder_pttl_ms, -1); /* absent: no holder */
    assert_int_equal(res.held_ms, -1);
    assert_int_equal(res.nhandoff, 1); /* the malformed grant is skipped */
    assert_string_equal(res.handoff[0].lease_id, LEASE_A);
    assert_int_equal(res.handoff[0].fence, 8);
    assert_int_equal(res.handoff[0].ttl_ms, 10);
    assert_int_equal(res.handoff[0].expires_at_ms, 20);
}

static void other_outcomes(void **state)
{
    (void)state;
    assert_int_equal(read_text("s", "{\"r\": \"queued\", \"position\": 2, \"holder_pttl\": 300}"),
                     0);
    assert_int_equal(res.outcome, LEASE_QUEUED);
    assert_int_equal(res.position, 2);
    assert_int_equal(res.holder_pttl_ms, 300);
    assert_int_equal(read_text("s", "{\"r\": \"released\", \"again\": true, \"held_ms\": 12}"), 0);
    assert_int_equal(res.outcome, LEASE_RELEASED);
    assert_true(res.again);
    assert_int_equal(res.held_ms, 12);
    assert_int_equal(read_text("s", "{\"r\": \"mismatch\", \"limit\": 3, \"waiting\": 1}"), 0);
    assert_int_equal(res.outcome, LEASE_MISMATCH);
    assert_int_equal(res.limit, 3);
    assert_int_equal(res.waiting, 1);
    assert_int_equal(read_text("s", "{\"r\": \"max_hold\", \"hold_until\": 99}"), 0);
    assert_int_equal(res.outcome, LEASE_MAX_HOLD);
    assert_int_equal(res.hold_until_ms, 99);
    assert_int_equal(read_text("s", "{\"r\": \"revoked\"}"), 0);
    assert_int_equal(res.outcome, LEASE_REVOKED);
    assert_int_equal(retry, LEASE_RETRY_NONE);
}

static void retries_and_unknown(void **state)
{
    (void)state;
    assert_int_equal(read_text("s", "{\"r\": \"nofence\"}"), 0);
    assert_int_equal(retry, LEASE_RETRY_NOFENCE);
    assert_int_equal(read_text("s", "{\"r\": \"norevoked\"}"), 0);
    assert_int_equal(retry, LEASE_RETRY_NOREVOKED);
    assert_int_equal(read_text("lock_renew.lua", "{\"r\": \"applied\"}"), -1);
    assert_int_equal(err.code, FG_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "lock_renew.lua answered 'applied'"));
    assert_int_equal(read_text("lock_renew.lua", "{}"), -1);
    assert_non_null(strstr(err.msg, "(nothing)"));
    assert_int_equal(read_text("lock_renew.lua", "{\"r\": \"granted\""), -1);
    assert_int_equal(err.code, FG_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "lock_renew.lua answered no JSON object"));
    assert_int_equal(read_text("lock_renew.lua", "\"granted\""), -1);
    assert_int_equal(err.code, FG_ERR_INTERNAL);
}

/* Reads a watch answer text into *w. */
static void watch_text(const char *text, struct lease_watch *w)
{
    json_t *answer = parse(text);
    lease_answer_watch(answer, w);
    json_decref(answer);
}

static void watches(void **state)
{
    (void)state;
    struct lease_watch w;
    watch_text("{\"held\": true, \"pttl\": 1500.0}", &w);
    assert_true(w.held);
    assert_int_equal(w.pttl_ms, 1500);
    watch_text("{\"held\": false, \"reason\": \"revoked\"}", &w);
    assert_false(w.held);
    assert_string_equal(w.reason, "revoked");
    watch_text("{\"held\": false}", &w);
    assert_string_equal(w.reason, "expired");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(granted_with_handoff),
        cmocka_unit_test(other_outcomes),
        cmocka_unit_test(retries_and_unknown),
        cmocka_unit_test(scanned_answers_read_as_trees_do),
        cmocka_unit_test(watches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
