/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_contention.c - the contention hint on a settable clock: a name seen
 * contended is hinted for CONTENTION_HINT_MS and no longer, a new sign
 * extends it, and other names and the other kind stay unhinted.
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
    assert_false(contention_hinted(LEASE_KIND_LOCK, "never-seen"));
    assert_false(contention_hinted(LEASE_KIND_SEMAPHORE, "never-seen"));
}

static void a_sign_holds_for_the_hint_time_only(void **state)
{
    (void)state;
    contention_seen(LEASE_KIND_SEMAPHORE, "jobs");
    assert_true(contention_hinted(LEASE_KIND_SEMAPHORE, "jobs"));
    fake_now += CONTENTION_HINT_MS - 1;
    assert_true(contention_hinted(LEASE_KIND_SEMAPHORE, "jobs"));
    fake_now += 1;
    assert_false(contention_hinted(LEASE_KIND_SEMAPHORE, "jobs"));
}

static void a_new_sign_extends_the_hint(void **state)
{
    (void)state;
    contention_seen(LEASE_KIND_LOCK, "orders");
    fake_now += CONTENTION_HINT_MS - 1;
    contention_seen(LEASE_KIND_LOCK, "orders");
    fake_now += CONTENTION_HINT_MS - 1;
    assert_true(contention_hinted(LEASE_KIND_LOCK, "orders"));
    fake_now += 1;
    assert_false(contention_hinted(LEASE_KIND_LOCK, "orders"));
}

static void the_hint_is_per_kind_and_name(void **state)
{
    (void)state;
    contention_seen(LEASE_KIND_LOCK, "shared-name");
    assert_true(contention_hinted(LEASE_KIND_LOCK, "shared-name"));
    assert_false(contention_hinted(LEASE_KIND_SEMAPHORE, "shared-name"));
    assert_false(contention_hinted(LEASE_KIND_LOCK, "shared-name2"));
    assert_false(contention_hinted(LEASE_KIND_LOCK, ""));
}

static void the_hint_runs_out_across_the_clock_wrap(void **state)
{
    (void)state;
    fake_now = (INT64_C(1) << 48) - 10; /* the table keeps 48 bits of the time */
    contention_seen(LEASE_KIND_LOCK, "wrap");
    fake_now += 20;
    assert_true(contention_hinted(LEASE_KIND_LOCK, "wrap"));
    fake_now += CONTENTION_HINT_MS;
    assert_false(contention_hinted(LEASE_KIND_LOCK, "wrap"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(unseen_names_are_not_hinted, use_fake_clock),
        cmocka_unit_test_setup(a_sign_holds_for_the_hint_time_only, use_fake_clock),
        cmocka_unit_test_setup(a_new_sign_extends_the_hint, use_fake_clock),
        cmocka_unit_test_setup(the_hint_is_per_kind_and_name, use_fake_clock),
        cmocka_unit_test_setup(the_hint_runs_out_across_the_clock_wrap, use_fake_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
