/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_redis_clock.c - the reckoning of Redis's clock that a release's hold
 * time is measured by: a Redis clock ahead of or behind this host's is
 * followed from its last reading, a time not yet past reads as 0, and a later
 * reading replaces an earlier one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "lease/redis_clock.h"
#include "util/clock.h"

/* Redis's clock `skew` ms off this host's: a grant read 1,500 ms ago on it
 * reads as held 1,500 ms, whichever way the clocks differ. */
static void assert_held_across(int64_t skew)
{
    int64_t redis_now = clock_wall_ms() + skew;
    redis_clock_saw(redis_now);
    int64_t held = redis_clock_since(redis_now - 1500);
    assert_in_range(held, 1500, 1500 + 50);
}

static void follows_a_clock_ahead_or_behind(void **state)
{
    (void)state;
    assert_held_across(0);
    assert_held_across(3600 * 1000);  /* Redis an hour ahead */
    assert_held_across(-3600 * 1000); /* and an hour behind */
}

static void a_time_not_yet_past_reads_as_zero(void **state)
{
    (void)state;
    int64_t redis_now = clock_wall_ms() - 20000;
    redis_clock_saw(redis_now);
    assert_int_equal(redis_clock_since(redis_now + 60000), 0);
}

static void the_last_reading_counts(void **state)
{
    (void)state;
    int64_t now = clock_wall_ms();
    redis_clock_saw(now + 90000);
    redis_clock_saw(now - 90000);
    assert_in_range(redis_clock_since(now - 90000 - 200), 200, 250);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(follows_a_clock_ahead_or_behind),
        cmocka_unit_test(a_time_not_yet_past_reads_as_zero),
        cmocka_unit_test(the_last_reading_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
