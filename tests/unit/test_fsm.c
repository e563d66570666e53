/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fsm.c - looking up a lifecycle's arrows and state names: the first
 * arrow that matches, an event no arrow takes, a step, names out of range or
 * missing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/fsm.h"

#define LAMP_STATES(X)                                                                             \
    X(LAMP_OFF, "off")                                                                             \
    X(LAMP_ON, "on")                                                                               \
    X(LAMP_BROKEN, NULL)

enum lamp { LAMP_STATES(FSM_ENUM) };
enum { SWITCH, DROP };

static const struct fsm_arrow arrows[] = {
    {LAMP_OFF, SWITCH, LAMP_ON},
    {LAMP_ON, SWITCH, LAMP_OFF},
    {LAMP_ON, DROP, LAMP_BROKEN},
    {LAMP_ON, DROP, LAMP_OFF}, /* never taken: the first arrow wins */
};

static const char *const names[] = {LAMP_STATES(FSM_NAME)};

static const struct fsm lamp = {"lamp", arrows, FSM_COUNT(arrows), names, FSM_COUNT(names)};

static void arrows_taken(void **state)
{
    (void)state;
    int to = -7;
    assert_true(fsm_next(&lamp, LAMP_OFF, SWITCH, &to));
    assert_int_equal(to, LAMP_ON);
    assert_true(fsm_next(&lamp, LAMP_ON, DROP, &to));
    assert_int_equal(to, LAMP_BROKEN);
    assert_int_equal(fsm_step(&lamp, LAMP_ON, SWITCH), LAMP_OFF);
    to = -7;
    assert_false(fsm_next(&lamp, LAMP_OFF, DROP, &to));
    assert_false(fsm_next(&lamp, LAMP_BROKEN, SWITCH, &to));
    assert_int_equal(to, -7);
}

static void state_names(void **state)
{
    (void)state;
    assert_int_equal(FSM_COUNT(names), 3);
    assert_string_equal(fsm_name(&lamp, LAMP_ON), "on");
    assert_string_equal(fsm_name(&lamp, LAMP_BROKEN), "unknown");
    assert_string_equal(fsm_name(&lamp, 3), "unknown");
    assert_string_equal(fsm_name(&lamp, -1), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(arrows_taken),
        cmocka_unit_test(state_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
