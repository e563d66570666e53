/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cursor.c - sealed listing cursors: a cursor opens to the name it was
 * sealed with, under the signing key or an older key of the ring; it does not
 * show the name or its length; a changed character, another ring's cursor,
 * a cursor made for another listing or key, or a name written in clear are
 * refused.
 *
 * Broken variant caught: a cursor holding the name in clear base64url
 * (the hidden-name and forged-cursor assertions failed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "auth/cursor.h"

static void ring_of(struct token_keyring *ring, const char *id, const char *secret)
{
    struct fg_error err = {0};
    memset(ring, 0, sizeof *ring);
    assert_int_equal(token_keyring_add(ring, id, secret, &err), 0);
}

static void round_trip(void **state)
{
    (void)state;
    struct token_keyring ring;
    struct fg_error err = {0};
    ring_of(&ring, "k1", "0123456789abcdef0123456789abcdef");
    char a[CURSOR_TEXT_MAX], b[CURSOR_TEXT_MAX], name[NAME_MAX_LEN + 1];
    assert_int_equal(cursor_seal("tenant-b:payments", "lock:k", &ring, a, &err), 0);
    assert_int_equal(cursor_seal("x", "lock:k", &ring, b, &err), 0);
    assert_int_equal(strlen(a), strlen(b)); /* one length whatever the name */
    assert_int_equal(strlen(a), CURSOR_TEXT_MAX - 1);
    assert_null(strstr(a, "payments"));
    assert_int_equal(cursor_open(a, "lock:k", &ring, name, &err), 0);
    assert_string_equal(name, "tenant-b:payments");
    char again[CURSOR_TEXT_MAX];
    assert_int_equal(cursor_seal("tenant-b:payments", "lock:k", &ring, again, &err), 0);
    assert_string_not_equal(a, again); /* a fresh nonce each time */
}

static void refusals(void **state)
{
    (void)state;
    struct token_keyring ring, other;
    struct fg_error err = {0};
    ring_of(&ring, "k1", "0123456789abcdef0123456789abcdef");
    ring_of(&other, "k1", "fedcba9876543210fedcba9876543210");
    char c[CURSOR_TEXT_MAX], name[NAME_MAX_LEN + 1];
    assert_int_equal(cursor_seal("a:1", "lock:k", &ring, c, &err), 0);
    assert_int_equal(cursor_open(c, "lock:k", &other, name, &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
    assert_string_equal(err.msg,
                        "query parameter 'cursor' must be the next_cursor of a previous page");
    /* made for another key, or for the other listing */
    assert_int_equal(cursor_open(c, "lock:k2", &ring, name, &err), -1);
    assert_int_equal(cursor_open(c, "semaphore:k", &ring, name, &err), -1);
    assert_int_equal(cursor_open(c, "lock:", &ring, name, &err), -1);
    assert_int_equal(cursor_open(c, "lock:k", &ring, name, &err), 0);
    c[20] = c[20] == 'A' ? 'B' : 'A';
    assert_int_equal(cursor_open(c, "lock:k", &ring, name, &err), -1);
    assert_int_equal(cursor_open("a:1", "lock:k", &ring, name, &err), -1);
    assert_int_equal(cursor_open("", "lock:k", &ring, name, &err), -1);
    /* rotation: a cursor of the old key opens while the ring still holds it */
    char old[CURSOR_TEXT_MAX];
    assert_int_equal(cursor_seal("b:2", "lock:k", &other, old, &err), 0);
    assert_int_equal(token_keyring_add(&ring, "k0", "fedcba9876543210fedcba9876543210", &err), 0);
    assert_int_equal(cursor_open(old, "lock:k", &ring, name, &err), 0);
    assert_string_equal(name, "b:2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(round_trip), cmocka_unit_test(refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
