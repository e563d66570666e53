/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_budget.c - a request's time for Redis: each call is given what is
 * left, the calls' times are charged to it until it is spent, a thread that
 * serves no request gives each call its own deadline and charges nothing, so
 * does a clean-up that sets the budget aside, and each thread has a budget of
 * its own.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "util/budget.h"

static void calls_share_what_the_request_has_left(void **state)
{
    (void)state;
    budget_start(5000);
    assert_int_equal(budget_until_ms(100, 5000), 5100);
    budget_spend(4000); /* a call that waited 4 s: the next is given the rest */
    assert_int_equal(budget_until_ms(9000, 5000), 10000);
    budget_spend(1500); /* spent, and more: the next call is given nothing */
    assert_int_equal(budget_until_ms(20000, 5000), 20000);
    budget_end();
}

static void a_thread_without_a_request_gives_each_call_its_own_deadline(void **state)
{
    (void)state;
    budget_end();
    budget_spend(9999);
    assert_int_equal(budget_until_ms(100, 5000), 5100);
    assert_int_equal(budget_until_ms(7000, 300), 7300);
    budget_start(200); /* a new request starts afresh */
    assert_int_equal(budget_until_ms(0, 5000), 200);
    budget_end();
    assert_int_equal(budget_until_ms(0, 5000), 5000);
}

static void a_clean_up_set_aside_has_its_own_deadline(void **state)
{
    (void)state;
    budget_start(1000);
    budget_spend(400); /* 600 left */
    bool was = budget_set_aside();
    assert_true(was);
    assert_int_equal(budget_until_ms(50, 5000), 5050);
    budget_spend(500); /* the clean-up's time: not the request's */
    budget_restore(was);
    assert_int_equal(budget_until_ms(60, 5000), 660);
    budget_end();
    was = budget_set_aside(); /* no request: nothing to set aside */
    assert_false(was);
    budget_restore(was);
    assert_int_equal(budget_until_ms(0, 5000), 5000);
}

static void a_cap_bounds_the_calls_under_it_and_charges_the_request(void **state)
{
    (void)state;
    struct budget_capped capped = budget_cap(1000); /* no request: the cap is all there is */
    assert_int_equal(budget_until_ms(0, 5000), 1000);
    budget_spend(700);
    assert_int_equal(budget_until_ms(0, 5000), 300);
    budget_uncap(capped);
    assert_int_equal(budget_until_ms(0, 5000), 5000); /* no request again */

    budget_start(5000);
    budget_spend(1000); /* 4000 left */
    capped = budget_cap(1000);
    assert_int_equal(budget_until_ms(0, 5000), 1000);
    budget_spend(600);
    budget_uncap(capped);
    assert_int_equal(budget_until_ms(0, 5000), 3400); /* charged what the capped calls spent */

    budget_spend(3000); /* 400 left: less than the cap */
    capped = budget_cap(1000);
    assert_int_equal(budget_until_ms(0, 5000), 400);
    budget_spend(400);
    budget_uncap(capped);
    assert_int_equal(budget_until_ms(0, 5000), 0);
    budget_end();
}

static void *other_thread(void *arg)
{
    int64_t *until = arg;
    *until = budget_until_ms(0, 5000);
    return NULL;
}

static void each_thread_has_its_own(void **state)
{
    (void)state;
    budget_start(10);
    pthread_t t;
    int64_t until = 0;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &until), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(until, 5000);
    assert_int_equal(budget_until_ms(0, 5000), 10);
    budget_end();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(calls_share_what_the_request_has_left),
        cmocka_unit_test(a_thread_without_a_request_gives_each_call_its_own_deadline),
        cmocka_unit_test(a_clean_up_set_aside_has_its_own_deadline),
        cmocka_unit_test(a_cap_bounds_the_calls_under_it_and_charges_the_request),
        cmocka_unit_test(each_thread_has_its_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
