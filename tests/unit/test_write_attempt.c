/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_write_attempt.c - the drop-and-retry rule of a write group: a commit
 * settles every write, a refused commit hands every write back, a lost
 * connection fails every write (none is run twice), and a failed statement
 * hands back its own write only while the others go again, in their order,
 * until the group is settled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "store/fenced/write_attempt.h"

enum { N = 5 };

/* Asserts that all n fates are expected. */
static void assert_all(const enum write_fate *fates, size_t n, enum write_fate expected)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(fates[i], expected);
}

static void settling_attempts(void **state)
{
    (void)state;
    enum write_fate fates[N];
    assert_int_equal(write_attempt_fates(WRITE_ATTEMPT_COMMITTED, 0, N, fates), 0);
    assert_all(fates, N, WRITE_FATE_COMMITTED);
    assert_int_equal(write_attempt_fates(WRITE_ATTEMPT_NOT_COMMITTED, 0, N, fates), 0);
    assert_all(fates, N, WRITE_FATE_ALONE);
    /* whether a lost COMMIT took effect is unknown: no write may run again */
    assert_int_equal(write_attempt_fates(WRITE_ATTEMPT_LOST, 0, N, fates), 0);
    assert_all(fates, N, WRITE_FATE_FAILED);
    /* a failed statement index means nothing unless a statement failed */
    assert_int_equal(write_attempt_fates(WRITE_ATTEMPT_COMMITTED, 3, N, fates), 0);
    assert_all(fates, N, WRITE_FATE_COMMITTED);
}

static void failed_statement(void **state)
{
    (void)state;
    for (size_t failed = 0; failed < N; failed++) {
        enum write_fate fates[N];
        assert_int_equal(write_attempt_fates(WRITE_ATTEMPT_STMT_FAILED, failed, N, fates), N - 1);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(fates[i], i == failed ? WRITE_FATE_ALONE : WRITE_FATE_AGAIN);
    }
}

static void group_of_one(void **state)
{
    (void)state;
    enum write_fate fate;
    assert_int_equal(write_attempt_fates(WRITE_ATTEMPT_STMT_FAILED, 0, 1, &fate), 0);
    assert_int_equal(fate, WRITE_FATE_ALONE);
    assert_int_equal(write_attempt_fates(WRITE_ATTEMPT_LOST, 0, 1, &fate), 0);
    assert_int_equal(fate, WRITE_FATE_FAILED);
    assert_int_equal(write_attempt_fates(WRITE_ATTEMPT_COMMITTED, 0, 1, &fate), 0);
    assert_int_equal(fate, WRITE_FATE_COMMITTED);
}

/*
 * A group of five whose writes 1 and 3 have statements that fail, run the
 * way write_group.c runs it: each attempt fails at the first bad statement
 * still in the group, and the rest commit once both are out.
 */
static void drop_and_retry(void **state)
{
    (void)state;
    const int bad[N] = {0, 1, 0, 1, 0};
    size_t group[N] = {0, 1, 2, 3, 4}; /* the writes in the next attempt */
    enum write_fate outcome[N] = {WRITE_FATE_AGAIN, WRITE_FATE_AGAIN, WRITE_FATE_AGAIN,
                                  WRITE_FATE_AGAIN, WRITE_FATE_AGAIN};
    size_t n = N, attempts = 0;
    while (n > 0) {
        size_t failed = 0;
        while (failed < n && !bad[group[failed]])
            failed++;
        enum write_fate fates[N];
        size_t again = write_attempt_fates(
            failed < n ? WRITE_ATTEMPT_STMT_FAILED : WRITE_ATTEMPT_COMMITTED, failed, n, fates);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            if (fates[i] == WRITE_FATE_AGAIN)
                group[kept++] = group[i];
            else
                outcome[group[i]] = fates[i];
        }
        assert_int_equal(kept, again);
        n = kept;
        assert_true(++attempts <= N);
    }
    assert_int_equal(attempts, 3);
    const enum write_fate expected[N] = {WRITE_FATE_COMMITTED, WRITE_FATE_ALONE,
                                         WRITE_FATE_COMMITTED, WRITE_FATE_ALONE,
                                         WRITE_FATE_COMMITTED};
    for (size_t i = 0; i < N; i++)
        assert_int_equal(outcome[i], expected[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(settling_attempts),
        cmocka_unit_test(failed_statement),
        cmocka_unit_test(group_of_one),
        cmocka_unit_test(drop_and_retry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
