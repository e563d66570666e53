/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lease_answer.c - reading lease script replies (lua/lib_lease.lua
 * lease_reply): outcomes and their facts, grants handed to other waiters,
 * the replies that ask for a retry, watch and leave replies, and replies no
 * script gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lease/lease_answer.h"

#define LEASE_A "0123456789abcdef0123456789abcdef"
#define LEASE_B "fedcba9876543210fedcba9876543210"

/* A fact's code as the reply writes it (lua_scripts.h). */
#define STR_(x) #x
#define STR(x)  STR_(x)
#define F(fact) " " STR(LIB_LEASE_REPLY_##fact) " "

static struct lease_result res;
static enum lease_retry retry;
static struct fg_error err;

/* Reads the reply text of script into res and retry. */
static int read_text(const char *script, const char *text)
{
    return lease_answer_read(script, text, strlen(text), &res, &retry, &err);
}

static void granted_with_handoff(void **state)
{
    (void)state;
    assert_int_equal(read_text("lock_acquire.lua",
                               "granted" F(LEASE) LEASE_A F(FENCE) "4000000000000000" F(
                                   TTL) "5000" F(EXPIRES_AT) "1700000005000" F(GRANT) LEASE_B
                               " 8 10 20" F(GRANT) LEASE_A " 9 11 21"),
                     0);
    assert_int_equal(retry, LEASE_RETRY_NONE);
    assert_int_equal(res.outcome, LEASE_GRANTED);
    assert_string_equal(res.lease_id, LEASE_A);
    assert_int_equal(res.fence, 4000000000000000LL);
    assert_int_equal(res.ttl_ms, 5000);
    assert_int_equal(res.expires_at_ms, 1700000005000LL);
    assert_int_equal(res.holder_pttl_ms, -1); /* absent: no holder */
    assert_int_equal(res.held_ms, -1);
    assert_int_equal(res.nhandoff, 2);
    assert_string_equal(res.handoff[0].lease_id, LEASE_B);
    assert_int_equal(res.handoff[0].fence, 8);
    assert_int_equal(res.handoff[0].ttl_ms, 10);
    assert_int_equal(res.handoff[0].expires_at_ms, 20);
    assert_string_equal(res.handoff[1].lease_id, LEASE_A);
    assert_int_equal(res.handoff[1].expires_at_ms, 21);
}

static void other_outcomes(void **state)
{
    (void)state;
    assert_int_equal(read_text("s", "queued" F(LEASE) LEASE_A F(POSITION) "2" F(HOLDER_PTTL) "-2"),
                     0);
    assert_int_equal(res.outcome, LEASE_QUEUED);
    assert_int_equal(res.position, 2);
    assert_int_equal(res.holder_pttl_ms, -2);
    /* a waiter a grant to the next one took out of the queue: no place, read as 0 */
    assert_int_equal(read_text("s", "queued" F(LEASE) LEASE_A F(HOLDER_PTTL) "250"), 0);
    assert_int_equal(res.outcome, LEASE_QUEUED);
    assert_int_equal(res.position, 0);
    assert_int_equal(res.holder_pttl_ms, 250);
    assert_int_equal(read_text("s", "released" F(AGAIN) "1"), 0);
    assert_int_equal(res.outcome, LEASE_RELEASED);
    assert_true(res.again);
    assert_int_equal(res.held_ms, -1);
    assert_int_equal(read_text("s", "released" F(HELD_MS) "12"), 0);
    assert_false(res.again);
    assert_int_equal(res.held_ms, 12);
    /* a first try's: the time of the grant alone (lease_result.c reckons the hold) */
    assert_int_equal(read_text("s", "released" F(GRANTED_AT) "1700000005000"), 0);
    assert_int_equal(res.outcome, LEASE_RELEASED);
    assert_int_equal(res.granted_at_ms, 1700000005000LL);
    assert_int_equal(res.held_ms, -1);
    /* and of a grant: its fence and time; its lease and expiry are the gateway's to fill in */
    assert_int_equal(read_text("s", "granted" F(FENCE) "7" F(GRANTED_AT) "1700000000000"), 0);
    assert_int_equal(res.outcome, LEASE_GRANTED);
    assert_int_equal(res.fence, 7);
    assert_int_equal(res.granted_at_ms, 1700000000000LL);
    assert_int_equal(res.held_ms, -1);
    assert_int_equal(read_text("s", "mismatch" F(LIMIT) "3" F(WAITING) "1"), 0);
    assert_int_equal(res.outcome, LEASE_MISMATCH);
    assert_int_equal(res.limit, 3);
    assert_int_equal(res.waiting, 1);
    assert_int_equal(
        read_text("s", "renewed" F(FENCE) "7" F(TTL) "100" F(EXPIRES_AT) "9" F(HOLD_UNTIL) "12"),
        0);
    assert_int_equal(res.outcome, LEASE_RENEWED);
    assert_int_equal(res.fence, 7);
    assert_int_equal(res.hold_until_ms, 12);
    assert_int_equal(read_text("s", "max_hold" F(HOLD_UNTIL) "99"), 0);
    assert_int_equal(res.outcome, LEASE_MAX_HOLD);
    assert_int_equal(res.hold_until_ms, 99);
    assert_int_equal(read_text("s", "revoked" F(FENCE) "5"), 0);
    assert_int_equal(res.outcome, LEASE_REVOKED);
    assert_int_equal(res.nhandoff, 0);
    assert_int_equal(read_text("s", "lost"), 0);
    assert_int_equal(res.outcome, LEASE_LOST);
    assert_int_equal(retry, LEASE_RETRY_NONE);
}

static void retries(void **state)
{
    (void)state;
    assert_int_equal(read_text("s", "nofence"), 0);
    assert_int_equal(retry, LEASE_RETRY_NOFENCE);
    assert_int_equal(read_text("s", "norevoked"), 0);
    assert_int_equal(retry, LEASE_RETRY_NOREVOKED);
    assert_int_equal(read_text("s", "contended"), 0);
    assert_int_equal(retry, LEASE_RETRY_CONTENDED);
    assert_int_equal(read_text("s", "repeat"), 0);
    assert_int_equal(retry, LEASE_RETRY_REPEAT);
    assert_int_equal(res.outcome, 0);
}

/* Fails with FG_ERR_INTERNAL, saying what. */
static void refused(int rc, const char *what)
{
    assert_int_equal(rc, -1);
    assert_int_equal(err.code, FG_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, what));
}

static void replies_no_script_gives(void **state)
{
    (void)state;
    refused(read_text("lock_renew.lua", "applied"), "lock_renew.lua answered 'applied'");
    refused(read_text("lock_renew.lua", "{\"r\":\"granted\"}"), "answered '{\"r\":");
    refused(read_text("lock_renew.lua", ""), "answered ''");
    refused(lease_answer_read("lock_renew.lua", "lost\0", 5, &res, &retry, &err),
            "lock_renew.lua answered no lease reply");
    /* a code no REPLY line gives, a fact by name, a fact without its value */
    refused(read_text("s", "busy " STR(LIB_LEASE_NREPLY) " 1"), "no fact at word 2");
    refused(read_text("s", "busy -1 1"), "no fact at word 2");
    refused(read_text("s", "busy waiting 1"), "no fact at word 2");
    refused(read_text("s", "busy" F(WAITING) "1" F(LIMIT)), "no fact at word 4");
    refused(read_text("s", "busy" F(WAITING) "1 "), "no fact at word 4");
    refused(read_text("s", "busy " F(WAITING) "1"), "no fact at word 2");
    /* values of the wrong kind */
    refused(read_text("s", "busy" F(WAITING) "4x"), "no fact at word 2");
    refused(read_text("s", "busy" F(WAITING) "1e3"), "no fact at word 2");
    refused(read_text("s", "ended" F(LEASE) "short"), "no fact at word 2");
    refused(read_text("s", "left" F(LEFT) "012"), "no fact at word 2");
    /* a grant short of its four values, or with a lease that is none */
    refused(read_text("s", "released" F(GRANT) LEASE_A " 1 2"), "no fact at word 2");
    refused(read_text("s", "released" F(GRANT) "x 1 2 3"), "no fact at word 2");
}

static void grants_beyond_the_limit(void **state)
{
    (void)state;
    char text[LEASE_ANSWER_MAX];
    size_t len = (size_t)snprintf(text, sizeof text, "released");
    size_t before = 0;
    for (int g = 0; g <= LEASE_MAX_HANDOFF; g++) {
        before = len;
        len +=
            (size_t)snprintf(text + len, sizeof text - len, F(GRANT) LEASE_A " %d %d %d", g, g, g);
    }
    assert_int_equal(lease_answer_read("s", text, before, &res, &retry, &err), 0);
    assert_int_equal(res.nhandoff, LEASE_MAX_HANDOFF);
    assert_int_equal(res.handoff[LEASE_MAX_HANDOFF - 1].fence, LEASE_MAX_HANDOFF - 1);
    refused(read_text("s", text), "no fact at word");
}

static void watches_and_leaves(void **state)
{
    (void)state;
    struct lease_watch w;
    assert_int_equal(read_text("w", "held" F(PTTL) "1500"), 0);
    assert_int_equal(lease_answer_watch("w", &res, &w, &err), 0);
    assert_true(w.held);
    assert_int_equal(w.pttl_ms, 1500);
    static const char *const ends[] = {"released", "expired", "revoked"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(read_text("w", ends[i]), 0);
        assert_int_equal(lease_answer_watch("w", &res, &w, &err), 0);
        assert_false(w.held);
        assert_string_equal(w.reason, ends[i]);
    }
    assert_int_equal(read_text("w", "granted"), 0);
    refused(lease_answer_watch("lock_watch.lua", &res, &w, &err),
            "lock_watch.lua answered no watch outcome");
    assert_int_equal(read_text("l", "left" F(LEFT) "1101"), 0);
    assert_int_equal(res.outcome, LEASE_LEFT);
    assert_string_equal(res.left, "1101");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(granted_with_handoff),
        cmocka_unit_test(other_outcomes),
        cmocka_unit_test(retries),
        cmocka_unit_test(replies_no_script_gives),
        cmocka_unit_test(grants_beyond_the_limit),
        cmocka_unit_test(watches_and_leaves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
