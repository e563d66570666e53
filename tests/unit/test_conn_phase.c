/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_conn_phase.c - the lifecycle of a request on its connection: the
 * paths a request lives (answered at once, refused before its handler,
 * parked with its suspension put off one round, woken before or after the
 * suspension, closed unanswered), and the events no phase meets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/conn_phase.h"

/* Walks events evs[0..n) from phase from and returns where they lead; each must be known. */
static enum conn_phase walk(enum conn_phase from, const enum conn_event *evs, size_t n)
{
    int at = (int)from;
    for (size_t i = 0; i < n; i++)
        assert_true(fsm_next(&conn_lifecycle, at, (int)evs[i], &at));
    return (enum conn_phase)at;
}

#define WALK(from, ...)                                                                            \
    walk(from, (const enum conn_event[]){__VA_ARGS__},                                             \
         sizeof((const enum conn_event[]){__VA_ARGS__}) / sizeof(enum conn_event))

static void answered_at_once(void **state)
{
    (void)state;
    assert_int_equal(WALK(CONN_RECEIVING, CONN_EV_CALL), CONN_DISPATCHING);
    assert_int_equal(WALK(CONN_RECEIVING, CONN_EV_CALL, CONN_EV_ANSWER), CONN_ANSWERED);
    assert_int_equal(WALK(CONN_RECEIVING, CONN_EV_ANSWER), CONN_ANSWERED);
    assert_int_equal(WALK(CONN_RECEIVING, CONN_EV_CALL, CONN_EV_DROP), CONN_CLOSED);
}

static void first_park_is_put_off_one_round(void **state)
{
    (void)state;
    assert_int_equal(WALK(CONN_RECEIVING, CONN_EV_CALL, CONN_EV_PARK), CONN_PARK_DEFERRED);
    assert_int_equal(WALK(CONN_PARK_DEFERRED, CONN_EV_CALL), CONN_SUSPENDED);
    assert_int_equal(WALK(CONN_SUSPENDED, CONN_EV_WAKE, CONN_EV_CALL), CONN_RUNNING);
    /* once the handler ran again, a park suspends at once */
    assert_int_equal(WALK(CONN_RUNNING, CONN_EV_PARK), CONN_SUSPENDED);
    assert_int_equal(WALK(CONN_RUNNING, CONN_EV_ANSWER), CONN_ANSWERED);
    assert_int_equal(WALK(CONN_RUNNING, CONN_EV_DROP), CONN_CLOSED);
}

static void wake_before_the_suspension_is_kept(void **state)
{
    (void)state;
    /* woken while the handler first ran: the park runs it again at once, and
     * its next park is still put off (a resumed connection would read first) */
    assert_int_equal(WALK(CONN_DISPATCHING, CONN_EV_WAKE), CONN_WOKEN_EARLY);
    assert_int_equal(WALK(CONN_DISPATCHING, CONN_EV_WAKE, CONN_EV_PARK), CONN_DISPATCHING);
    assert_int_equal(WALK(CONN_DISPATCHING, CONN_EV_WAKE, CONN_EV_PARK, CONN_EV_PARK),
                     CONN_PARK_DEFERRED);
    /* woken while it ran again later: runs again, and a park suspends at once */
    assert_int_equal(WALK(CONN_RUNNING, CONN_EV_WAKE, CONN_EV_PARK), CONN_RUNNING);
    /* woken in the put-off round: the next call runs it instead of suspending */
    assert_int_equal(WALK(CONN_PARK_DEFERRED, CONN_EV_WAKE, CONN_EV_CALL), CONN_RUNNING);
}

static void unknown_events_are_refused(void **state)
{
    (void)state;
    static const struct {
        enum conn_phase from;
        enum conn_event ev;
    } never[] = {
        {CONN_RECEIVING, CONN_EV_PARK},     {CONN_RECEIVING, CONN_EV_WAKE},
        {CONN_RECEIVING, CONN_EV_DROP},     {CONN_DISPATCHING, CONN_EV_CALL},
        {CONN_PARK_DEFERRED, CONN_EV_PARK}, {CONN_PARK_DEFERRED, CONN_EV_ANSWER},
        {CONN_SUSPENDED, CONN_EV_CALL},     {CONN_SUSPENDED, CONN_EV_ANSWER},
        {CONN_SUSPENDED, CONN_EV_PARK},     {CONN_WOKEN, CONN_EV_WAKE},
        {CONN_WOKEN, CONN_EV_ANSWER},       {CONN_RESUMED, CONN_EV_WAKE},
        {CONN_WOKEN_EARLY, CONN_EV_CALL},   {CONN_WOKEN_EARLY, CONN_EV_WAKE},
        {CONN_WOKEN_EARLY, CONN_EV_ANSWER}, {CONN_WOKEN_EARLY, CONN_EV_DROP},
        {CONN_RESUMED, CONN_EV_PARK},       {CONN_RUNNING, CONN_EV_CALL},
        {CONN_ANSWERED, CONN_EV_WAKE},      {CONN_ANSWERED, CONN_EV_ANSWER},
        {CONN_ANSWERED, CONN_EV_CALL},      {CONN_CLOSED, CONN_EV_WAKE},
        {CONN_CLOSED, CONN_EV_DROP},
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        int to = CONN_RECEIVING;
        assert_false(fsm_next(&conn_lifecycle, never[i].from, never[i].ev, &to));
        assert_int_equal(to, CONN_RECEIVING);
    }
}

static void names_and_steps(void **state)
{
    (void)state;
    assert_string_equal(fsm_name(&conn_lifecycle, CONN_PARK_DEFERRED), "park_deferred");
    assert_string_equal(fsm_name(&conn_lifecycle, CONN_CLOSED), "closed");
    assert_int_equal(fsm_step(&conn_lifecycle, CONN_SUSPENDED, CONN_EV_WAKE), CONN_RESUMED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(answered_at_once),
        cmocka_unit_test(first_park_is_put_off_one_round),
        cmocka_unit_test(wake_before_the_suspension_is_kept),
        cmocka_unit_test(unknown_events_are_refused),
        cmocka_unit_test(names_and_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
