/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_clock.c - adding milliseconds to a timespec (the carry into seconds,
 * whole seconds, none), a wall-clock deadline kept normalised, and the
 * monotonic clock never going back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "util/clock.h"

static void add_ms_carries_into_seconds(void **state)
{
    (void)state;
    static const struct {
        time_t sec;
        long nsec;
        long long ms;
        time_t want_sec;
        long want_nsec;
    } cases[] = {
        {1, 999999999, 1, 2, 999999},  {5, 0, 2500, 7, 500000000},
        {0, 500000000, 500, 1, 0},     {10, 123, 0, 10, 123},
        {3, 999000000, 86400001, 86404, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct timespec t = {.tv_sec = cases[i].sec, .tv_nsec = cases[i].nsec};
        struct timespec got = clock_timespec_add_ms(t, cases[i].ms);
        assert_int_equal(got.tv_sec, cases[i].want_sec);
        assert_int_equal(got.tv_nsec, cases[i].want_nsec);
    }
}

static void wall_deadline_is_normalised(void **state)
{
    (void)state;
    for (long long ms = 0; ms < 2000; ms += 7) {
        struct timespec d = clock_wall_deadline(ms);
        assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
    }
}

static void monotonic_never_goes_back(void **state)
{
    (void)state;
    int64_t last = clock_mono_ms();
    for (int i = 0; i < 1000; i++) {
        int64_t now = clock_mono_ms();
        assert_true(now >= last);
        last = now;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(add_ms_carries_into_seconds),
        cmocka_unit_test(wall_deadline_is_normalised),
        cmocka_unit_test(monotonic_never_goes_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
