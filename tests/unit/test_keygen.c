/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_keygen.c - `fencegate keys new`: the key and entry it prints, and the
 * command lines it refuses (exit status 2, a message naming the argument).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth/keygen.h"

/* What one run of `keys ...` printed, and its exit status. */
struct keygen_run {
    int status;      /* keygen_main's exit status */
    char out[4096];  /* standard output */
    char errs[4096]; /* standard error */
};

/* Reads the whole of f (rewound) into buf of size n, NUL-terminated. */
static void slurp(FILE *f, char *buf, size_t n)
{
    rewind(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* Runs `fencegate keys` with the NULL-terminated arguments args (after "keys"). */
static void run(struct keygen_run *r, const char *const *args)
{
    char *argv[32] = {(char *)"keys"};
    int argc = 1;
    for (; args[argc - 1] != NULL; argc++)
        argv[argc] = (char *)args[argc - 1];
    FILE *out = tmpfile(), *errs = tmpfile();
    assert_non_null(out);
    assert_non_null(errs);
    r->status = keygen_main(argc, argv, out, errs);
    slurp(out, r->out, sizeof r->out);
    slurp(errs, r->errs, sizeof r->errs);
}

static void makes_a_key_and_its_entry(void **state)
{
    (void)state;
    struct keygen_run r;
    run(&r, (const char *const[]){"new", "--id", "ci", "--scope", "metrics", "--scope",
                                  "lock:billing-*", NULL});
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "key: fgk_"));
    assert_non_null(strstr(r.out, "\"id\":\"ci\""));
    assert_non_null(strstr(r.out, "\"scopes\":[\"metrics\",\"lock:billing-*\"]"));
    assert_string_equal(r.errs, "");
}

/* Each refused command line: exit status 2, nothing on stdout (no key made),
 * and a message that names what is wrong. */
static void refusals_name_the_argument(void **state)
{
    (void)state;
    static const struct {
        const char *args[8];
        const char *needle;
    } cases[] = {
        /* kept both: the entry listed "admin" twice */
        {{"new", "--id", "a", "--scope", "admin", "--scope", "admin", NULL},
         "--scope: 'admin' given twice"},
        /* the last one won silently */
        {{"new", "--id", "a", "--id", "b", "--scope", "admin", NULL}, "--id: given twice"},
        /* was "--scope: unexpected argument" */
        {{"new", "--id", "a", "--scope", NULL}, "--scope: needs a value"},
        {{"new", "--scope", "admin", "--id", NULL}, "--id: needs a value"},
        {{"new", "--id", "", "--scope", "admin", NULL}, "--id: a key id is 1 to 64 bytes"},
        {{"new", "--id", "a", "--scope", "", NULL}, "--scope: a scope is 1 to 600 bytes"},
        {{"new", "--id", "a", "--scope", "bogus", NULL}, "unknown scope 'bogus'"},
        {{"new", "--id", "a", NULL}, "--id and at least one --scope are required"},
        {{"new", "--id", "a", "--scope", "admin", "extra", NULL}, "extra: unexpected argument"},
        /* was the usage alone, saying nothing of what was wrong */
        {{"list", NULL}, "list: unknown command"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct keygen_run r;
        run(&r, cases[i].args);
        if (r.status != 2 || r.out[0] != '\0' || strstr(r.errs, cases[i].needle) == NULL)
            fail_msg("case %zu: status %d, stdout '%s', stderr '%s' (wanted '%s')", i, r.status,
                     r.out, r.errs, cases[i].needle);
    }
}

/* --help after new as before it shows the usage on stdout, exit status 0. */
static void help_is_not_an_error(void **state)
{
    (void)state;
    static const char *const helps[][4] = {
        {"--help", NULL}, {"new", "--help", NULL}, {"new", "--id", "a", "-h"}};
    for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++) {
        const char *args[5] = {helps[i][0], helps[i][1], helps[i][2], helps[i][3], NULL};
        struct keygen_run r;
        run(&r, args);
        if (r.status != 0 || strstr(r.out, "usage: fencegate keys new") == NULL || r.errs[0])
            fail_msg("case %zu: status %d, stdout '%s', stderr '%s'", i, r.status, r.out, r.errs);
    }
}

/* A key that could not be written (a full disk) is lost: no success. Exited 0
 * before, the one copy of the key gone. */
static void unwritten_key_fails(void **state)
{
    (void)state;
    FILE *full = fopen("/dev/full", "w"), *errs = tmpfile();
    assert_non_null(full);
    assert_non_null(errs);
    char *argv[] = {(char *)"keys",  (char *)"new", (char *)"--id", (char *)"a", (char *)"--scope",
                    (char *)"admin", NULL};
    assert_int_equal(keygen_main(6, argv, full, errs), 1);
    fclose(full);
    char text[512];
    slurp(errs, text, sizeof text);
    assert_non_null(strstr(text, "fencegate keys: cannot write the key to standard output"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(makes_a_key_and_its_entry),
        cmocka_unit_test(refusals_name_the_argument),
        cmocka_unit_test(help_is_not_an_error),
        cmocka_unit_test(unwritten_key_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
