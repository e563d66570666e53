/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_wait_state.c - the lifecycle of a wait: the lives a wait leads
 * (parked and re-checked, a wake that came before it parked or while it
 * looked, a grant handed over in-process, a lock set's next lock after one,
 * giving up on a deadline, a drain, a hang-up or a retry, taken out of its
 * queue by the janitor or not, ended unanswered), every event each state
 * meets and refuses, which states still hold a place in a queue and which are
 * suspended.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "lease/wait_state.h"

/* One event of a life and the state it must lead to. */
struct step {
    enum wait_event ev;
    enum wait_state to;
};

/* Lives steps[0..n) from state from, checking the state after each. */
static void live(enum wait_state from, const struct step *steps, size_t n)
{
    int at = (int)from;
    for (size_t i = 0; i < n; i++) {
        assert_true(fsm_next(&wait_lifecycle, at, (int)steps[i].ev, &at));
        assert_int_equal(at, steps[i].to);
    }
}

#define LIVE(from, ...)                                                                            \
    live(from, (const struct step[]){__VA_ARGS__}, FSM_COUNT(((const struct step[]){__VA_ARGS__})))

static void lives(void **state)
{
    (void)state;
    /* re-checked after a doorbell or a timer, parked again, then granted */
    LIVE(WAIT_REGISTERING, {WAIT_EV_PARK, WAIT_PARKED}, {WAIT_EV_WAKE, WAIT_AWAKE},
         {WAIT_EV_RECHECK, WAIT_CHECKING}, {WAIT_EV_PARK, WAIT_PARKED}, {WAIT_EV_WAKE, WAIT_AWAKE},
         {WAIT_EV_RECHECK, WAIT_CHECKING}, {WAIT_EV_ANSWER, WAIT_ANSWERED},
         {WAIT_EV_END, WAIT_GONE});
    /* a wake came before it parked, or while it looked: awake again at once */
    LIVE(WAIT_REGISTERING, {WAIT_EV_WAKE, WAIT_AWAKE});
    LIVE(WAIT_CHECKING, {WAIT_EV_WAKE, WAIT_AWAKE});
    /* a watch or a lock set looks first */
    LIVE(WAIT_REGISTERING, {WAIT_EV_RECHECK, WAIT_CHECKING}, {WAIT_EV_PARK, WAIT_PARKED});
    /* a grant handed over in-process; a lock set goes on to its next lock */
    LIVE(WAIT_AWAKE, {WAIT_EV_DELIVERED, WAIT_CLAIMING}, {WAIT_EV_ANSWER, WAIT_ANSWERED});
    LIVE(WAIT_AWAKE, {WAIT_EV_DELIVERED, WAIT_CLAIMING}, {WAIT_EV_RECHECK, WAIT_CHECKING});
    /* superseded, deadline, drain, hang-up or its key revoked: it gives up its place, then answers
     */
    LIVE(WAIT_AWAKE, {WAIT_EV_GIVE_UP, WAIT_GIVING_UP}, {WAIT_EV_ANSWER, WAIT_ANSWERED});
    /* an attempt answered as a reload revoked its key: what it got is given back */
    LIVE(WAIT_CHECKING, {WAIT_EV_GIVE_UP, WAIT_GIVING_UP}, {WAIT_EV_ANSWER, WAIT_ANSWERED});
    /* its client hung up while parked: the janitor took it out with others, or could not */
    LIVE(WAIT_PARKED, {WAIT_EV_LEAVE, WAIT_LEAVING}, {WAIT_EV_LEFT, WAIT_LEFT},
         {WAIT_EV_GIVE_UP, WAIT_GIVING_UP}, {WAIT_EV_ANSWER, WAIT_ANSWERED});
    LIVE(WAIT_PARKED, {WAIT_EV_LEAVE, WAIT_LEAVING}, {WAIT_EV_STAYED, WAIT_AWAKE});
    LIVE(WAIT_LEFT, {WAIT_EV_END, WAIT_GONE});
    /* refused by the registry; its client gone while it was parked, or woken before it ran */
    LIVE(WAIT_REGISTERING, {WAIT_EV_END, WAIT_GONE});
    LIVE(WAIT_PARKED, {WAIT_EV_END, WAIT_GONE});
    LIVE(WAIT_AWAKE, {WAIT_EV_END, WAIT_GONE});
}

#define BIT(ev) (1u << (ev))

static void every_event_of_every_state(void **state)
{
    (void)state;
    /* the events each state meets; every other one is a bug */
    static const unsigned meets[] = {
        [WAIT_REGISTERING] =
            BIT(WAIT_EV_PARK) | BIT(WAIT_EV_WAKE) | BIT(WAIT_EV_RECHECK) | BIT(WAIT_EV_END),
        [WAIT_PARKED] = BIT(WAIT_EV_WAKE) | BIT(WAIT_EV_LEAVE) | BIT(WAIT_EV_END),
        [WAIT_LEAVING] = BIT(WAIT_EV_LEFT) | BIT(WAIT_EV_STAYED),
        [WAIT_AWAKE] =
            BIT(WAIT_EV_GIVE_UP) | BIT(WAIT_EV_DELIVERED) | BIT(WAIT_EV_RECHECK) | BIT(WAIT_EV_END),
        [WAIT_LEFT] = BIT(WAIT_EV_GIVE_UP) | BIT(WAIT_EV_END),
        [WAIT_CHECKING] =
            BIT(WAIT_EV_PARK) | BIT(WAIT_EV_WAKE) | BIT(WAIT_EV_ANSWER) | BIT(WAIT_EV_GIVE_UP),
        [WAIT_CLAIMING] = BIT(WAIT_EV_RECHECK) | BIT(WAIT_EV_ANSWER),
        [WAIT_GIVING_UP] = BIT(WAIT_EV_ANSWER),
        [WAIT_ANSWERED] = BIT(WAIT_EV_END),
        [WAIT_GONE] = 0,
    };
    for (int s = WAIT_REGISTERING; s <= WAIT_GONE; s++)
        for (int ev = WAIT_EV_PARK; ev <= WAIT_EV_END; ev++) {
            int to = WAIT_GONE;
            bool known = fsm_next(&wait_lifecycle, s, ev, &to);
            assert_int_equal(known, (meets[s] & BIT(ev)) != 0);
            if (!known)
                assert_int_equal(to, WAIT_GONE);
        }
    /* once answered or left, a wait holds no place in a queue; parked or leaving, it is suspended
     */
    for (int s = WAIT_REGISTERING; s <= WAIT_GONE; s++) {
        assert_int_equal(wait_state_holds_place((enum wait_state)s),
                         s != WAIT_LEFT && s != WAIT_ANSWERED && s != WAIT_GONE);
        assert_int_equal(wait_state_suspended((enum wait_state)s),
                         s == WAIT_PARKED || s == WAIT_LEAVING);
    }
    assert_string_equal(fsm_name(&wait_lifecycle, WAIT_GIVING_UP), "giving up");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lives),
        cmocka_unit_test(every_event_of_every_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
