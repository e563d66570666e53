/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_binding.c - resources bound to locks: templates of the configuration,
 * their expansion, and the verdict on a token's claims (kind and whole name).
 *
 * Broken variant caught: comparing names by prefix (strncmp over the expected
 * length) let a token of "invoice:4" pass for "invoice:42"
 * (its assertion failed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lease/binding.h"

static struct token_claims claims_of(enum lease_kind kind, const char *name)
{
    struct token_claims c = {.kind = kind, .fence = 7};
    snprintf(c.name, sizeof c.name, "%s", name);
    return c;
}

static void templates(void **state)
{
    (void)state;
    struct fg_error err = {0};
    assert_int_equal(binding_template_check("invoice:{key}", &err), 0);
    assert_int_equal(binding_template_check("all-invoices", &err), 0);
    assert_int_equal(binding_template_check("{key}/{key}", &err), 0);
    assert_int_equal(binding_template_check("", &err), -1);
    assert_int_equal(binding_template_check("inv {key}", &err), -1);
    assert_int_equal(binding_template_check("inv:{id}", &err), -1);
    assert_int_equal(binding_template_check("inv:{key", &err), -1);
    char out[32];
    assert_int_equal(binding_expand("invoice:{key}", "42", out, sizeof out), 0);
    assert_string_equal(out, "invoice:42");
    assert_int_equal(binding_expand("{key}-{key}", "ab", out, sizeof out), 0);
    assert_string_equal(out, "ab-ab");
    assert_int_equal(binding_expand("x:{key}", "0123456789012345678901234567890", out, sizeof out),
                     -1);
}

static void verdicts(void **state)
{
    (void)state;
    struct fg_error err = {0};
    struct resource_guard lock = {.template = "invoice:{key}", .semaphore = false};
    struct resource_guard sem = {.template = "slots:{key}", .semaphore = true};
    struct resource_guard none = {0};
    struct token_claims c = claims_of(LEASE_KIND_LOCK, "invoice:42");
    assert_int_equal(binding_check(&lock, "42", &c, "pg:invoices/42", &err), 0);
    assert_int_equal(binding_check(&none, "42", &c, "pg:invoices/42", &err), 0);
    const struct token_claims wrong[] = {
        claims_of(LEASE_KIND_LOCK, "evil"),
        claims_of(LEASE_KIND_LOCK, "invoice:4"),
        claims_of(LEASE_KIND_LOCK, "invoice:42x"),
        claims_of(LEASE_KIND_SEMAPHORE, "invoice:42"),
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        err.code = FG_OK;
        assert_int_equal(binding_check(&lock, "42", &wrong[i], "pg:invoices/42", &err), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FENCE_TOKEN);
        assert_non_null(strstr(err.msg, "issued for another lock"));
        assert_non_null(strstr(err.msg, "invoice:42"));
    }
    struct token_claims s = claims_of(LEASE_KIND_SEMAPHORE, "slots:x");
    assert_int_equal(binding_check(&sem, "x", &s, "redis:x", &err), 0);
    struct token_claims l = claims_of(LEASE_KIND_LOCK, "slots:x");
    assert_int_equal(binding_check(&sem, "x", &l, "redis:x", &err), -1);
    /* a key that cannot make a name: no token passes */
    assert_int_equal(binding_check(&lock, "a b", &c, "pg:invoices/a b", &err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(templates),
        cmocka_unit_test(verdicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
