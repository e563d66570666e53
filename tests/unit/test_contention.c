/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_contention.c - the contention hint on a settable clock: a name seen
 * contended is hinted for CONTENTION_HINT_MS and no longer, as it was last
 * seen (in use, or with a queue), a new sign extends it, and other names and
 * the other kind stay unhinted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lease/contention.h"

static int64_t fake_now;

static int64_t fake_clock(void)
{
    return fake_now;
}

static int use_fake_clock(void **state)
{
    (void)state;
    contention_set_clock(fake_clock);
    fake_now += 10 * CONTENTION_HINT_MS; /* every earlier hint has run out */
    return 0;
}

static void unseen_names_are_not_hinted(void **state)
{
    (void)state;
    assert_int_equal(contention_hint(LEASE_KIND_LOCK, "never-seen"), CONTENTION_NONE);
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "never-seen"), CONTENTION_NONE);
}

static void a_sign_holds_for_the_hint_time_only(void **state)
{
    (void)state;
    contention_seen(LEASE_KIND_SEMAPHORE, "jobs", CONTENTION_IN_USE);
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "jobs"), CONTENTION_IN_USE);
    fake_now += CONTENTION_HINT_MS - 1;
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "jobs"), CONTENTION_IN_USE);
    fake_now += 1;
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "jobs"), CONTENTION_NONE);
}

static void a_new_sign_extends_the_hint(void **state)
{
    (void)state;
    contention_seen(LEASE_KIND_LOCK, "orders", CONTENTION_IN_USE);
    fake_now += CONTENTION_HINT_MS - 1;
    contention_seen(LEASE_KIND_LOCK, "orders", CONTENTION_IN_USE);
    fake_now += CONTENTION_HINT_MS - 1;
    assert_int_equal(contention_hint(LEASE_KIND_LOCK, "orders"), CONTENTION_IN_USE);
    fake_now += 1;
    assert_int_equal(contention_hint(LEASE_KIND_LOCK, "orders"), CONTENTION_NONE);
}

static void the_hint_is_per_kind_and_name(void **state)
{
    (void)state;
    contention_seen(LEASE_KIND_LOCK, "shared-name", CONTENTION_IN_USE);
    assert_int_equal(contention_hint(LEASE_KIND_LOCK, "shared-name"), CONTENTION_IN_USE);
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "shared-name"), CONTENTION_NONE);
    assert_int_equal(contention_hint(LEASE_KIND_LOCK, "shared-name2"), CONTENTION_NONE);
    assert_int_equal(contention_hint(LEASE_KIND_LOCK, ""), CONTENTION_NONE);
}

static void the_hint_runs_out_across_the_clock_wrap(void **state)
{
    (void)state;
    fake_now = (INT64_C(1) << 48) - 10; /* the table keeps 48 bits of the time */
    contention_seen(LEASE_KIND_LOCK, "wrap", CONTENTION_IN_USE);
    fake_now += 20;
    assert_int_equal(contention_hint(LEASE_KIND_LOCK, "wrap"), CONTENTION_IN_USE);
    fake_now += CONTENTION_HINT_MS;
    assert_int_equal(contention_hint(LEASE_KIND_LOCK, "wrap"), CONTENTION_NONE);
}

static void the_hint_says_how_the_name_was_last_seen(void **state)
{
    (void)state;
    contention_seen(LEASE_KIND_SEMAPHORE, "slots", CONTENTION_IN_USE);
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "slots"), CONTENTION_IN_USE);
    contention_seen(LEASE_KIND_SEMAPHORE, "slots", CONTENTION_QUEUE);
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "slots"), CONTENTION_QUEUE);
    fake_now += CONTENTION_HINT_MS - 1;
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "slots"), CONTENTION_QUEUE);
    contention_seen(LEASE_KIND_SEMAPHORE, "slots", CONTENTION_IN_USE);
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "slots"), CONTENTION_IN_USE);
    fake_now += CONTENTION_HINT_MS;
    assert_int_equal(contention_hint(LEASE_KIND_SEMAPHORE, "slots"), CONTENTION_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(unseen_names_are_not_hinted, use_fake_clock),
        cmocka_unit_test_setup(a_sign_holds_for_the_hint_time_only, use_fake_clock),
        cmocka_unit_test_setup(a_new_sign_extends_the_hint, use_fake_clock),
        cmocka_unit_test_setup(the_hint_is_per_kind_and_name, use_fake_clock),
        cmocka_unit_test_setup(the_hint_runs_out_across_the_clock_wrap, use_fake_clock),
        cmocka_unit_test_setup(the_hint_says_how_the_name_was_last_seen, use_fake_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
