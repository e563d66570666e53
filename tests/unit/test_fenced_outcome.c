/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_outcome.c - the reasons refused fenced writes are audited and
 * answered with, in both stores.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "store/fenced/fenced_outcome.h"

static void refusal_reasons(void **state)
{
    (void)state;
    assert_string_equal(fenced_outcome_reason(FENCED_STALE), "stale_fence");
    assert_string_equal(fenced_outcome_reason(FENCED_REVOKED), "revoked");
    assert_string_equal(fenced_outcome_reason(FENCED_EXPIRED), "lease_expired");
    assert_null(fenced_outcome_reason(FENCED_APPLIED));
    assert_null(fenced_outcome_reason((enum fenced_outcome)(FENCED_EXPIRED + 1)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refusal_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
