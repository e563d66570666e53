/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_wait_state.c - the lifecycle of a lease wait: the paths a wait lives
 * (parked and re-checked, a park a wake came before, a grant handed over
 * in-process, giving up on a deadline, a drain or a hang-up, taken out of
 * its queue by the janitor, ended unanswered), which states still hold a
 * place in a queue, and the events no state meets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "lease/wait_state.h"

/* Walks events evs[0..n) from state from and returns where they lead; each must be known. */
static enum wait_state walk(enum wait_state from, const enum wait_event *evs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_true(wait_state_next(from, evs[i], &from));
    return from;
}

#define WALK(from, ...)                                                                            \
    walk(from, (const enum wait_event[]){__VA_ARGS__},                                             \
         sizeof((const enum wait_event[]){__VA_ARGS__}) / sizeof(enum wait_event))

static void parks_and_rechecks(void **state)
{
    (void)state;
    assert_int_equal(WALK(WAIT_REGISTERING, WAIT_EV_PARK), WAIT_PARKED);
    assert_int_equal(WALK(WAIT_PARKED, WAIT_EV_WAKE, WAIT_EV_RECHECK), WAIT_CHECKING);
    assert_int_equal(WALK(WAIT_CHECKING, WAIT_EV_PARK), WAIT_PARKED);
    assert_int_equal(WALK(WAIT_CHECKING, WAIT_EV_ANSWER, WAIT_EV_END), WAIT_GONE);
    /* a park a wake came before: awake again at once */
    assert_int_equal(WALK(WAIT_REGISTERING, WAIT_EV_PARK, WAIT_EV_WAKE), WAIT_AWAKE);
    assert_int_equal(WALK(WAIT_CHECKING, WAIT_EV_PARK, WAIT_EV_WAKE), WAIT_AWAKE);
}

static void claims_a_grant_handed_over(void **state)
{
    (void)state;
    assert_int_equal(WALK(WAIT_PARKED, WAIT_EV_WAKE, WAIT_EV_DELIVERED), WAIT_CLAIMING);
    assert_int_equal(WALK(WAIT_CLAIMING, WAIT_EV_ANSWER), WAIT_ANSWERED);
}

static void gives_up(void **state)
{
    (void)state;
    /* deadline, drain, hang-up: all leave the queue, then answer */
    assert_int_equal(WALK(WAIT_PARKED, WAIT_EV_WAKE, WAIT_EV_GIVE_UP), WAIT_LEAVING);
    assert_int_equal(WALK(WAIT_LEAVING, WAIT_EV_ANSWER), WAIT_ANSWERED);
    /* superseded by a retry: answered at once */
    assert_int_equal(WALK(WAIT_PARKED, WAIT_EV_WAKE, WAIT_EV_ANSWER), WAIT_ANSWERED);
}

static void left_with_others(void **state)
{
    (void)state;
    assert_int_equal(WALK(WAIT_PARKED, WAIT_EV_LEFT), WAIT_LEFT);
    assert_int_equal(WALK(WAIT_LEFT, WAIT_EV_ANSWER), WAIT_ANSWERED);
    assert_int_equal(WALK(WAIT_LEFT, WAIT_EV_GIVE_UP), WAIT_LEAVING); /* a drain too */
    assert_int_equal(WALK(WAIT_LEFT, WAIT_EV_END), WAIT_GONE);
}

static void ends(void **state)
{
    (void)state;
    assert_int_equal(WALK(WAIT_REGISTERING, WAIT_EV_END), WAIT_GONE);
    assert_int_equal(WALK(WAIT_PARKED, WAIT_EV_END), WAIT_GONE);
    assert_int_equal(WALK(WAIT_ANSWERED, WAIT_EV_END), WAIT_GONE);
}

static void places_held(void **state)
{
    (void)state;
    static const enum wait_state holding[] = {WAIT_REGISTERING, WAIT_PARKED,   WAIT_AWAKE,
                                              WAIT_CHECKING,    WAIT_CLAIMING, WAIT_LEAVING};
    for (size_t i = 0; i < sizeof holding / sizeof holding[0]; i++)
        assert_true(wait_state_holds_place(holding[i]));
    assert_false(wait_state_holds_place(WAIT_LEFT));
    assert_false(wait_state_holds_place(WAIT_ANSWERED));
    assert_false(wait_state_holds_place(WAIT_GONE));
}

static void unknown_events_are_refused(void **state)
{
    (void)state;
    static const struct {
        enum wait_state from;
        enum wait_event ev;
    } never[] = {
        {WAIT_REGISTERING, WAIT_EV_WAKE}, {WAIT_REGISTERING, WAIT_EV_ANSWER},
        {WAIT_REGISTERING, WAIT_EV_LEFT}, {WAIT_PARKED, WAIT_EV_PARK},
        {WAIT_PARKED, WAIT_EV_ANSWER},    {WAIT_PARKED, WAIT_EV_RECHECK},
        {WAIT_AWAKE, WAIT_EV_PARK},       {WAIT_AWAKE, WAIT_EV_LEFT},
        {WAIT_AWAKE, WAIT_EV_END},        {WAIT_CHECKING, WAIT_EV_RECHECK},
        {WAIT_CHECKING, WAIT_EV_LEFT},    {WAIT_CLAIMING, WAIT_EV_PARK},
        {WAIT_LEAVING, WAIT_EV_PARK},     {WAIT_LEAVING, WAIT_EV_END},
        {WAIT_LEFT, WAIT_EV_RECHECK},     {WAIT_LEFT, WAIT_EV_DELIVERED},
        {WAIT_ANSWERED, WAIT_EV_ANSWER},  {WAIT_ANSWERED, WAIT_EV_PARK},
        {WAIT_GONE, WAIT_EV_END},         {WAIT_GONE, WAIT_EV_WAKE},
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        enum wait_state to = WAIT_GONE;
        assert_false(wait_state_next(never[i].from, never[i].ev, &to));
        assert_int_equal(to, WAIT_GONE);
    }
}

static void names(void **state)
{
    (void)state;
    assert_string_equal(wait_state_name(WAIT_PARKED), "parked");
    assert_string_equal(wait_state_name(WAIT_LEFT), "left");
    assert_string_equal(wait_state_name((enum wait_state)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parks_and_rechecks),
        cmocka_unit_test(claims_a_grant_handed_over),
        cmocka_unit_test(gives_up),
        cmocka_unit_test(left_with_others),
        cmocka_unit_test(ends),
        cmocka_unit_test(places_held),
        cmocka_unit_test(unknown_events_are_refused),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
