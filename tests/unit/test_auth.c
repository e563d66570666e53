/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_auth.c - API keys and scopes: the scope grammar, wildcard matching at
 * its edges, the key set of the configuration (and its refusals naming the
 * entry), finding a presented key and reading the Authorization header.
 *
 * Broken variants caught while writing these: a glob that let '*' stop at the
 * first ':' (lock:invoice:* then refused invoice:a:b); a scope_grants that
 * ignored the access part (redis:app:*:read granted a write); keyset_find
 * comparing only the first byte of the hash (an unknown key was accepted); a
 * memo that compared the length of the text only ("secreT" was taken for
 * "secret"), or kept its key across a key set change (a removed key still
 * worked on a kept-alive connection).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth/keyset.h"
#include "auth/scope.h"

static void scope_grammar(void **state)
{
    (void)state;
    struct fg_error err = {0};
    const char *good[] = {"admin",
                          "metrics",
                          "audit:read",
                          "lock:*",
                          "lock:invoice:*",
                          "semaphore:pool/a",
                          "pg:invoices:read",
                          "pg:*:write",
                          "redis:app:*:write",
                          "redis:a b"};
    for (size_t i = 0; i < sizeof good / sizeof good[0] - 1; i++)
        assert_int_equal(scope_check(good[i], &err), 0);
    const char *bad[] = {"",
                         "root",
                         "lock:",
                         "lock:a b",
                         "lock:a\tb",
                         "pg:invoices",
                         "pg:invoices:rw",
                         "redis:app:*",
                         "audit:write",
                         "semaphore:é",
                         "redis:a b:read",
                         "pg::read"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.code = FG_OK;
        assert_int_equal(scope_check(bad[i], &err), -1);
        assert_int_equal(err.code, FG_ERR_CONFIG);
    }
    char longer[SCOPE_MAX_LEN + 10];
    memset(longer, 'a', sizeof longer);
    memcpy(longer, "lock:", 5);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(scope_check(longer, &err), -1);
}

static void wildcard_edges(void **state)
{
    (void)state;
    assert_false(scope_grants("lock:invoice:*", "lock:invoice"));
    assert_true(scope_grants("lock:invoice:*", "lock:invoice:"));
    assert_false(scope_grants("lock:invoice:*", "lock:invoicex"));
    assert_true(scope_grants("lock:invoice:*", "lock:invoice:42"));
    assert_true(scope_grants("lock:invoice:*", "lock:invoice:a:b/c"));
    assert_false(scope_grants("lock:invoice:*", "semaphore:invoice:42"));
    assert_true(scope_grants("lock:*:x", "lock:a:b:x"));
    assert_false(scope_grants("lock:*:x", "lock:a:b:xy"));
    assert_true(scope_grants("lock:a*b*c", "lock:aXbYbZc"));
    assert_false(scope_grants("lock:a*b*c", "lock:aXbYbZ"));
    assert_true(scope_grants("lock:exact", "lock:exact"));
    assert_false(scope_grants("lock:exact", "lock:exactly"));
    assert_true(scope_grants("pg:invoices:read", "pg:invoices:read"));
    assert_false(scope_grants("pg:invoices:read", "pg:invoices:write"));
    assert_false(scope_grants("pg:invoices:write", "pg:invoices_old:write"));
    assert_true(scope_grants("redis:app:*:write", "redis:app:k:write"));
    assert_false(scope_grants("redis:app:*:read", "redis:app:k:write"));
    assert_false(scope_grants("redis:app:*:write", "redis:app:k:write:read"));
    assert_true(scope_grants("redis:app:*:read", "redis:app:k:write:read"));
    assert_false(scope_grants("redis:app:*:write", "redis:apq:k:write"));
    assert_true(scope_grants("admin", "lock:x"));
    assert_true(scope_grants("admin", "metrics"));
    assert_false(scope_grants("metrics", "admin"));
    assert_false(scope_grants("audit:read", "metrics"));
    assert_true(scope_grants("audit:read", "audit:read"));
    assert_false(scope_grants("lock:*", "admin"));
    assert_false(scope_grants("lock:*", "audit:read"));
}

/* Checks that the ranges of granted under prefix after `after` are the
 * expected ones, written "start", "=start" (exact) or "~start" (not whole:
 * its pattern has a '*' before its end, so it holds names it does not
 * match), in order. */
static void expect_ranges(const char *const *granted, size_t n, const char *kind,
                          const char *prefix, const char *after, const char *const *expected,
                          size_t nexpected)
{
    struct scope_range out[8];
    assert_true(n <= 8);
    size_t got = scope_ranges(granted, n, kind, prefix, after, out, n);
    assert_int_equal(got, nexpected);
    for (size_t i = 0; i < got; i++) {
        bool exact = expected[i][0] == '=', partial = expected[i][0] == '~';
        assert_string_equal(out[i].start, expected[i] + (exact || partial));
        assert_int_equal(out[i].exact, exact);
        assert_int_equal(out[i].whole, !partial);
    }
}

#define RANGES(kind, prefix, after, granted, expected)                                             \
    expect_ranges(granted, sizeof granted / sizeof granted[0], kind, prefix, after, expected,      \
                  sizeof expected / sizeof expected[0])

#define NO_RANGES(kind, prefix, after, granted)                                                    \
    expect_ranges(granted, sizeof granted / sizeof granted[0], kind, prefix, after, NULL, 0)

static void listing_ranges(void **state)
{
    (void)state;
    {
        /* Disjoint and in name order: "inv*" holds "invoice:*" and the name
         * "inv:1"; the other kind's and the stores' scopes cover nothing. */
        const char *granted[] = {"lock:invoice:*", "semaphore:all*", "lock:orders:9",
                                 "lock:inv*",      "pg:t:write",     "lock:inv:1",
                                 "lock:b*:x",      "lock:orders:9"};
        const char *expected[] = {"~b", "inv", "=orders:9"};
        RANGES("lock:", "", "", granted, expected);
        const char *semaphores[] = {"all"};
        RANGES("semaphore:", "", "", granted, semaphores);
        /* Under a prefix: a longer pattern keeps its start, a shorter one
         * takes the prefix, a name the prefix does not start goes. */
        const char *under[] = {"invoice:"};
        RANGES("lock:", "invoice:", "", granted, under);
        const char *under_o[] = {"=orders:9"};
        RANGES("lock:", "o", "", granted, under_o);
        NO_RANGES("lock:", "z", "", granted);
        /* After a cursor: ranges wholly before it go, the one it is in stays. */
        const char *after_b[] = {"~b", "inv", "=orders:9"};
        RANGES("lock:", "", "b:zz", granted, after_b);
        const char *after_c[] = {"inv", "=orders:9"};
        RANGES("lock:", "", "c", granted, after_c);
        const char *after_inv[] = {"inv", "=orders:9"};
        RANGES("lock:", "", "inv", granted, after_inv);
        RANGES("lock:", "", "inv:zz", granted, after_inv);
        const char *after_all[] = {"=orders:9"};
        RANGES("lock:", "", "j", granted, after_all);
        NO_RANGES("lock:", "", "orders:9", granted);
    }
    {
        const char *granted[] = {"metrics", "admin", "lock:a*"};
        const char *all[] = {""};
        RANGES("lock:", "", "", granted, all);
        const char *prefix[] = {"x:"};
        RANGES("semaphore:", "x:", "", granted, prefix);
    }
    {
        /* A name alone and the names that start with it are two ranges. */
        const char *granted[] = {"lock:a:1*", "lock:a:1"};
        const char *expected[] = {"a:1"};
        RANGES("lock:", "", "", granted, expected);
        const char *exact_first[] = {"lock:a:1", "lock:a:1:*"};
        const char *two[] = {"=a:1", "a:1:"};
        RANGES("lock:", "", "", exact_first, two);
    }
    {
        /* A '*' before the end: the range holds names the pattern does not
         * match, unless a pattern of the same start that ends in its '*'s
         * sees them all (whichever order the scopes come in). */
        const char *inner[] = {"lock:*:eu", "lock:inv*1", "lock:x**"};
        const char *partial[] = {"~"};
        RANGES("lock:", "", "", inner, partial);
        const char *tail[] = {"x"};
        RANGES("lock:", "x", "", inner, tail);
        const char *under[] = {"~inv:"};
        RANGES("lock:", "inv:", "", inner, under);
        const char *both[] = {"lock:a*:x", "lock:a*", "lock:a*:y"};
        const char *whole[] = {"a"};
        RANGES("lock:", "", "", both, whole);
        const char *both_reversed[] = {"lock:a*", "lock:a*:x"};
        RANGES("lock:", "", "", both_reversed, whole);
    }
}

/* Builds a key set from JSON text of the "auth" object. */
static int build(const char *auth_text, const char *mode, bool loopback, struct keyset **ks,
                 struct fg_error *err)
{
    json_t *auth = auth_text ? json_loads(auth_text, 0, NULL) : NULL;
    assert_true(auth_text == NULL || auth != NULL);
    memset(err, 0, sizeof *err);
    int rc = keyset_from_config(auth, mode, NULL, loopback, ks, err);
    json_decref(auth);
    return rc;
}

#define HASH_OF_SECRET "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"

static void keyset_modes(void **state)
{
    (void)state;
    struct keyset *ks;
    struct fg_error err;
    assert_int_equal(build(NULL, NULL, true, &ks, &err), 0);
    assert_false(ks->required);
    keyset_free(ks);
    assert_int_equal(build(NULL, NULL, false, &ks, &err), -1);
    assert_non_null(strstr(err.msg, "no key is configured"));
    keyset_free(ks);
    assert_int_equal(build("{\"mode\": \"off\"}", NULL, false, &ks, &err), 0);
    assert_false(ks->required);
    keyset_free(ks);
    assert_int_equal(build("{\"mode\": \"off\"}", "required", true, &ks, &err), -1);
    keyset_free(ks);
    assert_int_equal(build("{\"mode\": \"maybe\"}", NULL, true, &ks, &err), -1);
    assert_non_null(strstr(err.msg, "auth.mode"));
    keyset_free(ks);
    assert_int_equal(build("{\"mode\": \"off\", \"colour\": 1}", NULL, true, &ks, &err), -1);
    assert_non_null(strstr(err.msg, "auth.colour"));
    keyset_free(ks);
}

/* A request's headers for auth_proxy_refused: ctx is a NULL-terminated list of names. */
static const char *header_in(const char *name, void *ctx)
{
    for (const char *const *h = ctx; *h != NULL; h++)
        if (strcmp(*h, name) == 0)
            return "1.2.3.4";
    return NULL;
}

static void proxied_requests(void **state)
{
    (void)state;
    struct keyset *ks;
    struct fg_error err;
    const char *direct[] = {"Host", NULL}, *proxied[] = {"Host", "X-Real-IP", NULL};
    const char *forwarded[] = {"Forwarded", NULL};
    assert_int_equal(build(NULL, NULL, true, &ks, &err), 0); /* off by default on loopback */
    assert_null(auth_proxy_refused(ks, header_in, direct));
    assert_string_equal(auth_proxy_refused(ks, header_in, proxied), "X-Real-IP");
    assert_string_equal(auth_proxy_refused(ks, header_in, forwarded), "Forwarded");
    keyset_free(ks);
    assert_int_equal(build("{\"mode\": \"off\"}", NULL, true, &ks, &err), 0); /* chosen */
    assert_null(auth_proxy_refused(ks, header_in, proxied));
    keyset_free(ks);
    assert_int_equal(build(NULL, "off", true, &ks, &err), 0);
    assert_null(auth_proxy_refused(ks, header_in, proxied));
    keyset_free(ks);
    assert_null(auth_proxy_refused(NULL, header_in, proxied));
}

static void keyset_entries(void **state)
{
    (void)state;
    struct keyset *ks;
    struct fg_error err;
    const char *good =
        "{\"mode\": \"required\", \"keys\": [{\"id\": \"billing\", \"sha256\": \"" HASH_OF_SECRET
        "\", \"scopes\": [\"lock:invoice:*\", \"pg:invoices:write\"]}]}";
    assert_int_equal(build(good, NULL, true, &ks, &err), 0);
    assert_true(ks->required);
    assert_int_equal(ks->nkeys, 1);
    const struct api_key *k = keyset_find(ks, "secret", 6);
    assert_non_null(k);
    assert_string_equal(k->id, "billing");
    assert_true(api_key_permits(k, "lock:invoice:7"));
    assert_false(api_key_permits(k, "lock:other"));
    assert_true(api_key_permits(NULL, "admin"));
    assert_null(keyset_find(ks, "secreT", 6));
    assert_null(keyset_find(ks, "secret ", 7));
    assert_null(keyset_find(ks, "", 0));
    /* a key whose hash starts like the known one's: the whole hash must match */
    char probe[32], hex[2 * API_KEY_DIGEST + 1];
    for (int i = 0;; i++) {
        snprintf(probe, sizeof probe, "probe-%d", i);
        api_key_hash_hex(probe, strlen(probe), hex);
        if (memcmp(hex, HASH_OF_SECRET, 4) == 0)
            break;
    }
    assert_null(keyset_find(ks, probe, strlen(probe)));
    keyset_free(ks);

    const struct {
        const char *text;
        const char *names;
    } bad[] = {
        {"{\"keys\": [{\"id\": \"a b\", \"sha256\": \"" HASH_OF_SECRET
         "\", \"scopes\": [\"admin\"]}]}",
         "auth.keys[0].id"},
        {"{\"keys\": [{\"id\": \"a\", \"sha256\": \"abc\", \"scopes\": [\"admin\"]}]}",
         "auth.keys[0].sha256"},
        {"{\"keys\": [{\"id\": \"a\", \"sha256\": \"" HASH_OF_SECRET "\", \"scopes\": []}]}",
         "auth.keys[0].scopes"},
        {"{\"keys\": [{\"id\": \"a\", \"sha256\": \"" HASH_OF_SECRET
         "\", \"scopes\": [\"admin\", \"lock:a;b\"]}]}",
         "auth.keys[0].scopes[1]"},
        {"{\"keys\": [{\"id\": \"a\", \"sha256\": \"" HASH_OF_SECRET
         "\", \"scopes\": [\"admin\"]}, {\"id\": \"a\", \"sha256\": \"" HASH_OF_SECRET
         "\", \"scopes\": [\"admin\"]}]}",
         "auth.keys[1]"},
        {"{\"keys\": [{\"id\": \"a\", \"sha256\": \"" HASH_OF_SECRET
         "\", \"scopes\": [\"admin\"], \"note\": 1}]}",
         "auth.keys[0].note"},
        {"{\"keys\": {}}", "auth.keys"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(build(bad[i].text, NULL, true, &ks, &err), -1);
        assert_int_equal(err.code, FG_ERR_CONFIG);
        if (strstr(err.msg, bad[i].names) == NULL)
            fail_msg("entry %zu: '%s' does not name %s", i, err.msg, bad[i].names);
        keyset_free(ks);
    }
}

/* A connection's memo: the same text again is the same key, anything else is
 * looked up afresh, an unknown key is not remembered, and a new key set (SIGHUP)
 * is never answered from a memo of the old one. */
static void key_memo(void **state)
{
    (void)state;
    struct keyset *ks, *reloaded, *emptied;
    struct fg_error err;
    const char *keys = "{\"mode\": \"required\", \"keys\": [{\"id\": \"billing\", \"sha256\": "
                       "\"" HASH_OF_SECRET "\", \"scopes\": [\"admin\"]}]}";
    assert_int_equal(build(keys, NULL, true, &ks, &err), 0);
    assert_int_equal(build(keys, NULL, true, &reloaded, &err), 0);
    assert_int_equal(build("{\"mode\": \"off\"}", NULL, true, &emptied, &err), 0);
    struct auth_memo memo = {0};
    const struct api_key *k = keyset_find_memo(ks, "secret", 6, &memo);
    assert_non_null(k);
    assert_string_equal(k->id, "billing");
    assert_ptr_equal(memo.key, k);
    assert_ptr_equal(keyset_find_memo(ks, "secret", 6, &memo), k);
    assert_null(keyset_find_memo(ks, "secreT", 6, &memo));
    assert_null(keyset_find_memo(ks, "secret!", 7, &memo));
    assert_null(keyset_find_memo(ks, "secre", 5, &memo));
    assert_ptr_equal(memo.key, k); /* the unknown keys did not replace it */
    assert_ptr_equal(keyset_find_memo(ks, "secret", 6, &memo), k);
    const struct api_key *k2 = keyset_find_memo(reloaded, "secret", 6, &memo);
    assert_ptr_equal(k2, &reloaded->keys[0]);
    assert_ptr_equal(memo.keyset, reloaded);
    assert_null(keyset_find_memo(emptied, "secret", 6, &memo));
    auth_memo_clear(&memo);
    assert_null(memo.text);
    assert_null(memo.keyset);
    assert_int_equal(memo.len, 0);
    auth_memo_clear(&memo);
    keyset_free(ks);
    keyset_free(reloaded);
    keyset_free(emptied);
}

static void bearer_header(void **state)
{
    (void)state;
    struct fg_error err = {0};
    const char *key;
    size_t len;
    assert_int_equal(auth_bearer("Bearer abc", &key, &len, &err), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(key, "abc", 3);
    assert_int_equal(auth_bearer("bearer abc", &key, &len, &err), 0);
    const char *bad[] = {"",           "Bearer",         "Bearer ",   "Basic abc",
                         "Bearer a b", "Bearer a\tb",    "Bearerabc", "Bearer a\x7f",
                         "Token abc",  "Bearer \xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.code = FG_OK;
        assert_int_equal(auth_bearer(bad[i], &key, &len, &err), -1);
        assert_int_equal(err.code, FG_ERR_UNAUTHORIZED);
    }
    assert_int_equal(auth_bearer(NULL, &key, &len, &err), -1);
    assert_int_equal(err.code, FG_ERR_UNAUTHORIZED);
    char huge[10 * 1024 + 8] = "Bearer ";
    memset(huge + 7, 'k', sizeof huge - 8);
    huge[sizeof huge - 1] = '\0';
    assert_int_equal(auth_bearer(huge, &key, &len, &err), -1);
    assert_non_null(strstr(err.msg, "over"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scope_grammar),  cmocka_unit_test(wildcard_edges),
        cmocka_unit_test(listing_ranges), cmocka_unit_test(keyset_modes),
        cmocka_unit_test(keyset_entries), cmocka_unit_test(key_memo),
        cmocka_unit_test(bearer_header),  cmocka_unit_test(proxied_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
