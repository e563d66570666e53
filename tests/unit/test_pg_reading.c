/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_pg_reading.c - reading a pipeline's answers: each result to its
 * statement, the first failure named, the statements skipped after it, the
 * end at the sync, and answers out of step with what was sent refused; the
 * count of a command's tag.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "store/backend/pg_reading.h"

enum {
    OK = PG_RESULT_OK,
    FAILED = PG_RESULT_FAILED,
    ABORTED = PG_RESULT_ABORTED,
    SYNC = PG_RESULT_SYNC
};

/* Feeds kinds[0..n) to a reading of nstmts statements with head and tail, and
 * checks each step and the statement it names. */
static void expect(size_t nstmts, bool head, bool tail, size_t n, const int *kinds,
                   const enum pg_reading_step *steps, const size_t *stmts, struct pg_reading *r)
{
    pg_reading_start(r, nstmts, head, tail);
    for (size_t i = 0; i < n; i++) {
        size_t stmt = 999;
        assert_int_equal(pg_reading_next(r, (enum pg_result_kind)kinds[i], &stmt), steps[i]);
        assert_int_equal(stmt, stmts[i]);
    }
}

/* A pipeline of three statements that all ran: each answer to its statement. */
static void pipeline_all_ran(void **state)
{
    (void)state;
    struct pg_reading r;
    const int kinds[] = {OK, OK, OK, SYNC};
    const enum pg_reading_step steps[] = {PG_READ_KEEP, PG_READ_KEEP, PG_READ_KEEP, PG_READ_END};
    const size_t stmts[] = {0, 1, 2, 3};
    expect(3, false, false, 4, kinds, steps, stmts, &r);
    assert_false(r.failed);
}

/* A group (BEGIN, two statements, COMMIT): head and tail are not the caller's. */
static void group_committed(void **state)
{
    (void)state;
    struct pg_reading r;
    const int kinds[] = {OK, OK, OK, OK, SYNC};
    const enum pg_reading_step steps[] = {PG_READ_SKIP, PG_READ_KEEP, PG_READ_KEEP, PG_READ_SKIP,
                                          PG_READ_END};
    const size_t stmts[] = {2, 0, 1, 2, 2};
    expect(2, true, true, 5, kinds, steps, stmts, &r);
    assert_false(r.failed);
}

/* The second statement fails: the first is kept (the caller drops it), the
 * failure is named once, what follows is skipped. */
static void statement_failed(void **state)
{
    (void)state;
    struct pg_reading r;
    const int kinds[] = {OK, OK, FAILED, ABORTED, ABORTED, SYNC};
    const enum pg_reading_step steps[] = {PG_READ_SKIP, PG_READ_KEEP, PG_READ_FAILURE,
                                          PG_READ_SKIP, PG_READ_SKIP, PG_READ_END};
    const size_t stmts[] = {3, 0, 1, 2, 3, 3};
    expect(3, true, true, 6, kinds, steps, stmts, &r);
    assert_true(r.failed);
    assert_int_equal(r.failed_at, 1);
}

/* A refused COMMIT, or BEGIN, fails none of the caller's statements: n. */
static void head_or_tail_failed(void **state)
{
    (void)state;
    struct pg_reading r;
    const int commit_refused[] = {OK, OK, FAILED, SYNC};
    const enum pg_reading_step steps[] = {PG_READ_SKIP, PG_READ_KEEP, PG_READ_FAILURE, PG_READ_END};
    const size_t stmts[] = {1, 0, 1, 1};
    expect(1, true, true, 4, commit_refused, steps, stmts, &r);
    assert_true(r.failed);
    assert_int_equal(r.failed_at, 1);

    const int begin_refused[] = {FAILED, ABORTED, ABORTED, SYNC};
    const enum pg_reading_step begin_steps[] = {PG_READ_FAILURE, PG_READ_SKIP, PG_READ_SKIP,
                                                PG_READ_END};
    const size_t begin_stmts[] = {1, 0, 1, 1};
    expect(1, true, true, 4, begin_refused, begin_steps, begin_stmts, &r);
    assert_int_equal(r.failed_at, 1);
}

/* A later failure does not replace the first. */
static void first_failure_kept(void **state)
{
    (void)state;
    struct pg_reading r;
    const int kinds[] = {FAILED, FAILED, SYNC};
    const enum pg_reading_step steps[] = {PG_READ_FAILURE, PG_READ_SKIP, PG_READ_END};
    const size_t stmts[] = {0, 1, 2};
    expect(2, false, false, 3, kinds, steps, stmts, &r);
    assert_int_equal(r.failed_at, 0);
}

/* Answers that are not what was sent: a sync too early, a result where the
 * sync belongs, a skip with no failure before it, anything after the end. */
static void out_of_step(void **state)
{
    (void)state;
    struct pg_reading r;
    size_t stmt;
    pg_reading_start(&r, 2, false, false);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_OK, &stmt), PG_READ_KEEP);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_SYNC, &stmt), PG_READ_OUT_OF_STEP);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_OK, &stmt), PG_READ_OUT_OF_STEP);

    pg_reading_start(&r, 1, false, false);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_OK, &stmt), PG_READ_KEEP);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_OK, &stmt), PG_READ_OUT_OF_STEP);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_SYNC, &stmt), PG_READ_OUT_OF_STEP);

    pg_reading_start(&r, 2, false, false);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_ABORTED, &stmt), PG_READ_OUT_OF_STEP);

    pg_reading_start(&r, 1, false, false);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_OK, &stmt), PG_READ_KEEP);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_SYNC, &stmt), PG_READ_END);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_SYNC, &stmt), PG_READ_OUT_OF_STEP);
    assert_int_equal(pg_reading_next(&r, PG_RESULT_OK, &stmt), PG_READ_OUT_OF_STEP);

    pg_reading_start(&r, 0, false, false); /* nothing but the sync */
    assert_int_equal(pg_reading_next(&r, PG_RESULT_SYNC, &stmt), PG_READ_END);
}

static void counts(void **state)
{
    (void)state;
    assert_int_equal(pg_reading_count("1"), 1);
    assert_int_equal(pg_reading_count("0"), 0);
    assert_int_equal(pg_reading_count("1234567"), 1234567);
    assert_int_equal(pg_reading_count(""), -1);
    assert_int_equal(pg_reading_count(NULL), -1);
    assert_int_equal(pg_reading_count("1x"), -1);
    assert_int_equal(pg_reading_count("99999999999999999999999"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pipeline_all_ran),
        cmocka_unit_test(group_committed),
        cmocka_unit_test(statement_failed),
        cmocka_unit_test(head_or_tail_failed),
        cmocka_unit_test(first_failure_kept),
        cmocka_unit_test(out_of_step),
        cmocka_unit_test(counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
