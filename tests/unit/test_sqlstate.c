/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sqlstate.c - from a Postgres SQLSTATE to the code a failure is answered
 * with, and the classes the stores act on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "store/backend/sqlstate.h"

static void codes(void **state)
{
    (void)state;
    assert_int_equal(sqlstate_code("08006", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("57P01", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("57014", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("53300", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("58030", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("55P03", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("55000", NULL, false), FG_ERR_INTERNAL);
    /* the key's unique index made DEFERRABLE: the table changed, not the gateway's fault */
    assert_int_equal(sqlstate_code("55000", "ExecCheckIndexConstraints", false),
                     FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("55000", "nextval_internal", false), FG_ERR_INTERNAL);
    assert_int_equal(sqlstate_code("0A000", "ExecCheckIndexConstraints", false),
                     FG_ERR_INVALID_FIELD);
    assert_int_equal(sqlstate_code("40P01", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("40001", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("25006", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("23505", NULL, false), FG_ERR_CONFLICT);
    assert_int_equal(sqlstate_code("23502", NULL, false), FG_ERR_INVALID_FIELD);
    assert_int_equal(sqlstate_code("22P02", NULL, false), FG_ERR_INVALID_FIELD);
    assert_int_equal(sqlstate_code("0A000", NULL, false), FG_ERR_INVALID_FIELD);
    assert_int_equal(sqlstate_code("0A000", NULL, true),
                     FG_ERR_BACKEND_UNAVAILABLE); /* stale plans */
    assert_int_equal(sqlstate_code("P0001", NULL, false), FG_ERR_INVALID_FIELD);
    assert_int_equal(sqlstate_code("P0004", NULL, false), FG_ERR_INVALID_FIELD);
    /* the table moved a write onto another key (fencegate.key_moved); the gateway's own
     * other states are no verdict on the client's values */
    assert_int_equal(sqlstate_code("FGM01", NULL, false), FG_ERR_INVALID_FIELD);
    assert_int_equal(sqlstate_code("FGK01", NULL, false), FG_ERR_INTERNAL);
    assert_int_equal(sqlstate_code("42501", NULL, false), FG_ERR_FORBIDDEN);
    /* a table altered under the gateway (a column or the table gone, its key's unique index
     * dropped, a column's or the key's type changed): unavailable, not a bug; a syntax error
     * or an indeterminate parameter type would be one */
    assert_int_equal(sqlstate_code("42703", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("42P01", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("42P10", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("42804", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("42883", NULL, false), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("42601", NULL, false), FG_ERR_INTERNAL);
    assert_int_equal(sqlstate_code("42P18", NULL, false), FG_ERR_INTERNAL);
    assert_int_equal(sqlstate_code("40000", NULL, false), FG_ERR_INTERNAL);
    assert_int_equal(sqlstate_code("25001", NULL, false), FG_ERR_INTERNAL);
    assert_int_equal(sqlstate_code("", NULL, false), FG_ERR_INTERNAL);
    /* a lost connection is unavailable whatever the state says */
    assert_int_equal(sqlstate_code("23505", NULL, true), FG_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(sqlstate_code("", NULL, true), FG_ERR_BACKEND_UNAVAILABLE);
}

static void classes(void **state)
{
    (void)state;
    assert_true(sqlstate_read_only("25006"));
    assert_false(sqlstate_read_only("25001"));
    assert_true(sqlstate_data_error("22P02"));
    assert_true(sqlstate_data_error("22003"));
    assert_false(sqlstate_data_error("23505"));
    assert_false(sqlstate_data_error(""));
    assert_true(sqlstate_too_large("54000"));
    assert_false(sqlstate_too_large("53000"));
    assert_true(sqlstate_session_ended("57P01"));
    assert_true(sqlstate_session_ended("57P02"));
    assert_true(sqlstate_session_ended("57P03"));
    assert_false(sqlstate_session_ended("57P04"));
    assert_false(sqlstate_session_ended("57014"));
    assert_false(sqlstate_session_ended(""));
    assert_true(sqlstate_plans_stale("0A000", "RevalidateCachedQuery"));
    assert_false(sqlstate_plans_stale("0A000", NULL)); /* e.g. a generated column's data */
    assert_false(sqlstate_plans_stale("0A000", "ExecEvalExpr"));
    assert_false(sqlstate_plans_stale("42804", "RevalidateCachedQuery"));
    assert_true(sqlstate_deadlock("40P01"));
    assert_false(sqlstate_deadlock("40001"));
    assert_false(sqlstate_deadlock(""));
    assert_true(sqlstate_fence_kept_above("FGK01"));
    assert_false(sqlstate_fence_kept_above("FG"));
    assert_false(sqlstate_fence_kept_above("40P01"));
    assert_true(sqlstate_claim_unused("FGC01"));
    assert_false(sqlstate_claim_unused("FGK01"));
    assert_false(sqlstate_claim_unused(""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(codes),
        cmocka_unit_test(classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
