/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced.c - the vocabulary shared by both fenced stores: refusal
 * reasons and the Fence-Owner rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/fenced.h"
#include "util/names.h"

static void refusal_reasons(void **state)
{
    (void)state;
    assert_string_equal(fenced_outcome_reason(FENCED_STALE), "stale_fence");
    assert_string_equal(fenced_outcome_reason(FENCED_REVOKED), "revoked");
    assert_string_equal(fenced_outcome_reason(FENCED_EXPIRED), "lease_expired");
    assert_null(fenced_outcome_reason(FENCED_APPLIED));
    assert_null(fenced_outcome_reason((enum fenced_outcome)(FENCED_EXPIRED + 1)));
}

static void owner_header(void **state)
{
    (void)state;
    struct fg_error err = {0};
    char longest[OWNER_NAME_MAX_LEN + 2];
    memset(longest, 'o', sizeof longest);
    longest[OWNER_NAME_MAX_LEN] = '\0';
    assert_int_equal(fenced_owner_check(NULL, &err), 0);
    assert_int_equal(fenced_owner_check("billing-7", &err), 0);
    assert_int_equal(fenced_owner_check(longest, &err), 0);
    longest[OWNER_NAME_MAX_LEN] = 'o';
    longest[OWNER_NAME_MAX_LEN + 1] = '\0';
    assert_int_equal(fenced_owner_check(longest, &err), -1);
    assert_int_equal(fenced_owner_check("", &err), -1);
    assert_int_equal(fenced_owner_check("a\tb", &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
    assert_non_null(strstr(err.msg, "Fence-Owner"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refusal_reasons),
        cmocka_unit_test(owner_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
