/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_alarm.c - the janitor's alarm clock: a due time before the planned
 * wake rings it once, a later one or one set while the janitor is awake does
 * not, and the sleep it plans is the earliest due time, capped.
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "util/alarm.h"

static bool rang(void)
{
    struct pollfd p = {.fd = alarm_fd(), .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static int setup(void **state)
{
    (void)state;
    struct fg_error err = {0};
    return alarm_init(&err);
}

static void rings_only_to_bring_the_wake_forward(void **state)
{
    (void)state;
    alarm_plan();
    assert_int_equal(alarm_sleep_ms(1500, 1000, 1000), 500);
    alarm_set(1600); /* after the planned wake: nothing to do */
    assert_false(rang());
    alarm_set(1200);
    assert_true(rang());
    alarm_set(1300); /* the wake is at 1200 now */
    alarm_woken(true);
    assert_false(rang());
}

static void rings_while_planning(void **state)
{
    (void)state;
    alarm_plan(); /* what is set now may come after the janitor's look */
    alarm_set(5000);
    assert_true(rang());
    assert_int_equal(alarm_sleep_ms(9000, 4000, 1000), 1000); /* rang: returns at once anyway */
    alarm_woken(true);
}

static void silent_while_awake(void **state)
{
    (void)state;
    alarm_plan();
    assert_int_equal(alarm_sleep_ms(2000, 1000, 1000), 1000);
    alarm_woken(false);
    alarm_set(0); /* the next plan looks at it */
    assert_false(rang());
}

static void sleeps_until_the_earliest_due_time(void **state)
{
    (void)state;
    alarm_plan();
    assert_int_equal(alarm_sleep_ms(INT64_MAX, 1000, 1000), 1000); /* nothing due: the cap */
    alarm_woken(false);
    alarm_plan();
    assert_int_equal(alarm_sleep_ms(900, 1000, 1000), 0); /* overdue */
    alarm_woken(false);
    alarm_plan();
    assert_int_equal(alarm_sleep_ms(1250, 1000, 1000), 250);
    alarm_woken(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rings_only_to_bring_the_wake_forward),
        cmocka_unit_test(rings_while_planning),
        cmocka_unit_test(silent_while_awake),
        cmocka_unit_test(sleeps_until_the_earliest_due_time),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
