/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_owner.c - the Fence-Owner rule of fenced writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/fenced_owner.h"
#include "util/names.h"

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
        cmocka_unit_test(owner_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
