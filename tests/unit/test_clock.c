/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_clock.c - a monotonic deadline as the timespec the clockwait calls
 * take, a wait ending at it, and the monotonic clock never going back.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "util/clock.h"

static void mono_at_splits_milliseconds(void **state)
{
    (void)state;
    static const struct {
        int64_t ms;
        time_t want_sec;
        long want_nsec;
    } cases[] = {
        {0, 0, 0},
        {999, 0, 999000000},
        {1000, 1, 0},
        {86400001, 86400, 1000000},
        {INT64_MAX, INT64_MAX / 1000, 807000000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct timespec got = clock_mono_at(cases[i].ms);
        assert_int_equal(got.tv_sec, cases[i].want_sec);
        assert_int_equal(got.tv_nsec, cases[i].want_nsec);
    }
}

/* A wait given clock_mono_at of a deadline ends at that deadline of clock_mono_ms, not before
 * (a deadline read on another clock would end it at once, or far later). */
static void a_clockwait_ends_at_its_monotonic_deadline(void **state)
{
    (void)state;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t never = PTHREAD_COND_INITIALIZER;
    int64_t until_ms = clock_mono_ms() + 50;
    struct timespec until = clock_mono_at(until_ms);
    pthread_mutex_lock(&lock);
    int rc;
    while ((rc = pthread_cond_clockwait(&never, &lock, CLOCK_MONOTONIC, &until)) == 0)
        ;
    pthread_mutex_unlock(&lock);
    assert_int_equal(rc, ETIMEDOUT);
    assert_true(clock_mono_ms() >= until_ms);
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
        cmocka_unit_test(mono_at_splits_milliseconds),
        cmocka_unit_test(a_clockwait_ends_at_its_monotonic_deadline),
        cmocka_unit_test(monotonic_never_goes_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
