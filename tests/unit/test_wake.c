/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_wake.c - sleepers woken on demand: a wake given while the sleeper is
 * awake ends its next sleep, once; a readable socket ends a sleep; every
 * joined slot is woken, a slot that left is not; a slot that got no event
 * descriptor (none to spare) still sleeps, for WAKE_FALLBACK_MS at most.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/clock.h"
#include "util/wake.h"

static void a_wake_is_kept_until_the_next_sleep_and_taken_once(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    struct wake_slot slot;
    wake_join(&slot);
    assert_true(slot.fd >= 0);
    wake_all();
    wake_all(); /* two wakes before the sleep end one sleep */
    assert_false(wake_wait(&slot, p[0]));
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_true(wake_wait(&slot, p[0])); /* the wake was taken: the socket ends this one */
    wake_leave(&slot);
    close(p[0]);
    close(p[1]);
}

static void every_joined_slot_is_woken_and_a_slot_that_left_is_not(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], "x", 1), 1);
    struct wake_slot a, b, gone;
    wake_join(&a);
    wake_join(&gone);
    wake_join(&b);
    wake_leave(&gone);
    assert_int_equal(gone.fd, -1);
    wake_all();
    assert_false(wake_wait(&a, p[0]));
    assert_false(wake_wait(&b, p[0]));
    assert_true(wake_wait(&a, p[0])); /* no wake left: the readable socket */
    wake_leave(&a);
    wake_leave(&b);
    close(p[0]);
    close(p[1]);
}

static void a_closed_socket_ends_a_sleep(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[1]);
    struct wake_slot slot;
    wake_join(&slot);
    assert_true(wake_wait(&slot, p[0]));
    wake_leave(&slot);
    close(p[0]);
}

static void without_a_descriptor_to_spare_a_sleep_ends_after_the_fallback_period(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    struct rlimit was;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
    struct rlimit low = {.rlim_cur = (rlim_t)p[1] + 1, .rlim_max = was.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0); /* no descriptor above the pipe's */
    struct wake_slot slot;
    wake_join(&slot);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
    assert_int_equal(slot.fd, -1);
    int64_t started = clock_mono_ms();
    assert_false(wake_wait(&slot, p[0]));
    assert_in_range(clock_mono_ms() - started, WAKE_FALLBACK_MS - 20, WAKE_FALLBACK_MS * 5);
    wake_all(); /* nothing to write to: no harm */
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_true(wake_wait(&slot, p[0]));
    wake_leave(&slot);
    close(p[0]);
    close(p[1]);
}

static void a_nap_lasts_its_time_without_a_wake(void **state)
{
    (void)state;
    struct wake_slot slot;
    wake_join(&slot);
    int64_t started = clock_mono_ms();
    assert_false(wake_nap(&slot, 50));
    assert_in_range(clock_mono_ms() - started, 45, 5000);
    wake_leave(&slot);
}

static void *wake_later(void *arg)
{
    (void)arg;
    clock_sleep_ms(50);
    wake_all();
    return NULL;
}

static void a_wake_before_or_during_a_nap_ends_it(void **state)
{
    (void)state;
    struct wake_slot slot;
    wake_join(&slot);
    wake_all();
    int64_t started = clock_mono_ms();
    assert_true(wake_nap(&slot, 60000)); /* kept from before */
    pthread_t waker;
    assert_int_equal(pthread_create(&waker, NULL, wake_later, NULL), 0);
    assert_true(wake_nap(&slot, 60000)); /* given during it */
    assert_int_equal(pthread_join(waker, NULL), 0);
    assert_in_range(clock_mono_ms() - started, 45, 30000);
    assert_false(wake_nap(&slot, 1)); /* each wake taken once */
    wake_leave(&slot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_wake_is_kept_until_the_next_sleep_and_taken_once),
        cmocka_unit_test(every_joined_slot_is_woken_and_a_slot_that_left_is_not),
        cmocka_unit_test(a_closed_socket_ends_a_sleep),
        cmocka_unit_test(without_a_descriptor_to_spare_a_sleep_ends_after_the_fallback_period),
        cmocka_unit_test(a_nap_lasts_its_time_without_a_wake),
        cmocka_unit_test(a_wake_before_or_during_a_nap_ends_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
