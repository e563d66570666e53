/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_token.c - fencing tokens: a signed token verifies to the claims it was
 * made from, and every alteration, truncation, re-spelling or foreign secret is
 * refused with invalid_fence_token.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "auth/token.h"
#include "lease/lease_kind.h"
#include "util/b64url.h"

static const char secret[] = "unit-test-secret-0123456789abcdef";
static const char other_secret[] = "unit-test-secret-0123456789abcdeF";

/* A ring of one key, id "k1" (or "default"), holding text. */
static struct token_keyring ring_of(const char *id, const char *text)
{
    struct token_keyring ring = {0};
    struct fg_error err = {0};
    assert_int_equal(token_keyring_add(&ring, id, text, &err), 0);
    return ring;
}

static void make_claims(struct token_claims *c, enum lease_kind kind, const char *name,
                        int64_t fence)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->fence = fence;
    snprintf(c->lease_id, sizeof c->lease_id, "%s", "0123456789abcdef0123456789abcdef");
}

static void sign(const struct token_claims *c, char *out)
{
    struct fg_error err = {0};
    struct token_keyring ring = ring_of("k1", secret);
    assert_int_equal(token_sign(c, &ring, out, TOKEN_MAX_LEN, &err), 0);
}

/* Verifies token under the test secret; returns the result and checks the code on failure. */
static int verify(const char *token, struct token_claims *out)
{
    struct fg_error err = {0};
    struct token_keyring ring = ring_of("k1", secret);
    int rc = token_verify(token, &ring, out, &err);
    if (rc != 0)
        assert_int_equal(err.code, FG_ERR_INVALID_FENCE_TOKEN);
    return rc;
}

static void refused(const char *token)
{
    struct token_claims out;
    if (verify(token, &out) == 0)
        fail_msg("token accepted: %s", token);
}

/* Byte offset of the start of dot-separated part `index` of token. */
static size_t part_offset(const char *token, int index)
{
    const char *p = token;
    for (int i = 0; i < index; i++)
        p = strchr(p, '.') + 1;
    return (size_t)(p - token);
}

static void round_trip(void **state)
{
    (void)state;
    static const struct {
        enum lease_kind kind;
        const char *name;
        int64_t fence;
    } cases[] = {
        {LEASE_KIND_LOCK, "invoice:42", 1},
        {LEASE_KIND_SEMAPHORE, "a", 999999999999999999LL},
        {LEASE_KIND_LOCK, "big", INT64_MAX},
        {LEASE_KIND_LOCK, "big", 1000000000000000000LL},
        {LEASE_KIND_LOCK, "a/b.c_d-e:f", 1734},
        {LEASE_KIND_LOCK, "ab", 7},
        {LEASE_KIND_LOCK, "abc", 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct token_claims in, out;
        char token[TOKEN_MAX_LEN];
        make_claims(&in, cases[i].kind, cases[i].name, cases[i].fence);
        sign(&in, token);
        assert_int_equal(verify(token, &out), 0);
        assert_int_equal(out.kind, in.kind);
        assert_string_equal(out.name, in.name);
        assert_true(out.fence == in.fence);
        assert_string_equal(out.lease_id, in.lease_id);
    }
}

static void longest_name_round_trips(void **state)
{
    (void)state;
    char name[NAME_MAX_LEN + 1];
    memset(name, 'n', NAME_MAX_LEN);
    name[NAME_MAX_LEN] = '\0';
    struct token_claims in, out;
    char token[TOKEN_MAX_LEN];
    make_claims(&in, LEASE_KIND_LOCK, name, 42);
    sign(&in, token);
    assert_int_equal(verify(token, &out), 0);
    assert_string_equal(out.name, name);
}

static void signing_is_deterministic(void **state)
{
    (void)state;
    struct token_claims c;
    char a[TOKEN_MAX_LEN], b[TOKEN_MAX_LEN];
    make_claims(&c, LEASE_KIND_LOCK, "x", 5);
    sign(&c, a);
    sign(&c, b);
    assert_string_equal(a, b);
}

/* Re-signs nothing: swaps one claim of a valid token for another value. */
static void replace_part(const char *token, int index, const char *value, char *out)
{
    size_t start = part_offset(token, index);
    const char *end = strchr(token + start, '.');
    snprintf(out, TOKEN_MAX_LEN, "%.*s%s%s", (int)start, token, value, end ? end : "");
}

static void altered_claims_are_refused(void **state)
{
    (void)state;
    struct token_claims c;
    char token[TOKEN_MAX_LEN], bad[TOKEN_MAX_LEN];
    make_claims(&c, LEASE_KIND_LOCK, "invoice:42", 1734);
    sign(&c, token);
    replace_part(token, 3, "1735", bad); /* fence */
    refused(bad);
    replace_part(token, 3, "999999999999999999", bad);
    refused(bad);
    replace_part(token, 3, "01734", bad); /* same number, other spelling */
    refused(bad);
    replace_part(token, 2, "s", bad); /* kind */
    refused(bad);
    replace_part(token, 2, "x", bad);
    refused(bad);
    replace_part(token, 4, "0123456789abcdef0123456789abcdee", bad); /* lease id */
    refused(bad);
    replace_part(token, 4, "0123456789ABCDEF0123456789ABCDEF", bad);
    refused(bad);
    replace_part(token, 5, "aW52b2ljZTo0Mw", bad); /* name "invoice:43" */
    refused(bad);
    replace_part(token, 0, "fgt1", bad); /* version */
    refused(bad);
    replace_part(token, 1, "k2", bad); /* key id */
    refused(bad);
}

static void altered_signature_is_refused(void **state)
{
    (void)state;
    struct token_claims c;
    char token[TOKEN_MAX_LEN], bad[TOKEN_MAX_LEN];
    make_claims(&c, LEASE_KIND_LOCK, "invoice:42", 1734);
    sign(&c, token);
    size_t sig = part_offset(token, 6);
    for (size_t i = sig; token[i] != '\0'; i++) {
        snprintf(bad, sizeof bad, "%s", token);
        bad[i] = bad[i] == 'A' ? 'B' : 'A';
        refused(bad);
    }
    replace_part(token, 6, "", bad); /* no signature */
    refused(bad);
}

static void every_truncation_is_refused(void **state)
{
    (void)state;
    struct token_claims c;
    char token[TOKEN_MAX_LEN], bad[TOKEN_MAX_LEN];
    make_claims(&c, LEASE_KIND_LOCK, "invoice:42", 1734);
    sign(&c, token);
    for (size_t len = 0; len < strlen(token); len++) {
        snprintf(bad, sizeof bad, "%.*s", (int)len, token);
        refused(bad);
    }
}

static void extra_parts_are_refused(void **state)
{
    (void)state;
    struct token_claims c;
    char token[TOKEN_MAX_LEN], bad[TOKEN_MAX_LEN + 8];
    make_claims(&c, LEASE_KIND_LOCK, "invoice:42", 1734);
    sign(&c, token);
    snprintf(bad, sizeof bad, "%s.", token);
    refused(bad);
    snprintf(bad, sizeof bad, "%s.x", token);
    refused(bad);
    snprintf(bad, sizeof bad, ".%s", token);
    refused(bad);
    size_t at = part_offset(token, 3);
    snprintf(bad, sizeof bad, "%.*s.%s", (int)at, token, token + at); /* an empty part */
    refused(bad);
    snprintf(bad, sizeof bad, "%s=", token); /* padding */
    refused(bad);
    refused("");
    refused(".....");
    refused("not a token at all");
}

/* The last character of a 43-character signature carries 2 unused bits: a
 * different character with the same 6-bit prefix decodes to the same bytes. */
static void non_canonical_base64_is_refused(void **state)
{
    (void)state;
    struct token_claims c;
    char token[TOKEN_MAX_LEN], bad[TOKEN_MAX_LEN];
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    make_claims(&c, LEASE_KIND_LOCK, "ab", 1734); /* "ab": 3 base64 chars, 2 spare bits */
    sign(&c, token);
    size_t last = strlen(token) - 1;
    int v = (int)(strchr(alphabet, token[last]) - alphabet);
    for (int spare = 1; spare < 4; spare++) {
        snprintf(bad, sizeof bad, "%s", token);
        bad[last] = alphabet[v | spare];
        if (bad[last] != token[last])
            refused(bad);
    }
    size_t name_end = part_offset(token, 6) - 2; /* last character of the name part */
    v = (int)(strchr(alphabet, token[name_end]) - alphabet);
    for (int spare = 1; spare < 16; spare++) {
        snprintf(bad, sizeof bad, "%s", token);
        bad[name_end] = alphabet[v | spare];
        if (bad[name_end] != token[name_end])
            refused(bad);
    }
    replace_part(token, 5, "YWI=", bad); /* padded spelling of the same name */
    refused(bad);
    replace_part(token, 5, "YW+", bad); /* standard, not url-safe, alphabet */
    refused(bad);
}

/* Each of the 256 byte values reads as its place in the url-safe alphabet, and
 * every other byte (NUL, '+', '/', '=', bytes above 127) as no character. */
static void every_byte_reads_as_its_alphabet_place(void **state)
{
    (void)state;
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for (int byte = 0; byte < 256; byte++) {
        const char *at = byte != 0 ? memchr(alphabet, byte, sizeof alphabet - 1) : NULL;
        int expected = at != NULL ? (int)(at - alphabet) : -1;
        assert_int_equal(b64url_value((char)byte), expected);
    }
}

/* Fences past 2^63 - 1 (or 20 digits) are malformed, whoever signed them:
 * signs the claims text by hand with the real key. */
static void fences_beyond_int64_are_refused(void **state)
{
    (void)state;
    struct token_claims c, out;
    char token[TOKEN_MAX_LEN], bad[TOKEN_MAX_LEN];
    make_claims(&c, LEASE_KIND_LOCK, "x", INT64_MAX);
    sign(&c, token);
    assert_int_equal(verify(token, &out), 0);
    assert_true(out.fence == INT64_MAX);
    replace_part(token, 3, "9223372036854775808", bad);
    refused(bad);
    replace_part(token, 3, "99999999999999999999", bad);
    refused(bad);
    replace_part(token, 3, "0", bad);
    refused(bad);
}

/* Rotation: a token signed by a key stays valid while that key is in the ring,
 * whichever key signs now, and fails once it is removed; fgt1 tokens verify
 * with the key "default". */
static void rotation(void **state)
{
    (void)state;
    struct token_claims c, out;
    struct fg_error err = {0};
    char old_token[TOKEN_MAX_LEN], new_token[TOKEN_MAX_LEN];
    make_claims(&c, LEASE_KIND_LOCK, "invoice:42", 77);
    struct token_keyring old = ring_of("k1", secret);
    assert_int_equal(token_sign(&c, &old, old_token, sizeof old_token, &err), 0);
    struct token_keyring both = ring_of("k2", other_secret);
    assert_int_equal(token_keyring_add(&both, "k1", secret, &err), 0);
    assert_int_equal(token_sign(&c, &both, new_token, sizeof new_token, &err), 0);
    assert_non_null(strstr(new_token, "fgt2.k2."));
    assert_int_equal(token_verify(old_token, &both, &out, &err), 0);
    assert_int_equal(token_verify(new_token, &both, &out, &err), 0);
    struct token_keyring only_new = ring_of("k2", other_secret);
    assert_int_equal(token_verify(new_token, &only_new, &out, &err), 0);
    assert_int_equal(token_verify(old_token, &only_new, &out, &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_FENCE_TOKEN);
    /* version 1: fgt1.<kind>.<fence>.<lease>.<name>.<mac>, the mac over the text before it */
    struct token_keyring legacy = ring_of(TOKEN_LEGACY_KEY, secret);
    char v1[TOKEN_MAX_LEN];
    int n = snprintf(v1, sizeof v1, "fgt1.l.77.%s.aW52b2ljZTo0Mg", c.lease_id);
    unsigned char mac[32];
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)v1, (size_t)n, mac,
         NULL);
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char *o = v1 + n;
    *o++ = '.';
    for (size_t i = 0; i < 32; i += 3) {
        unsigned v = (unsigned)mac[i] << 16 | (i + 1 < 32 ? (unsigned)mac[i + 1] << 8 : 0) |
                     (i + 2 < 32 ? mac[i + 2] : 0);
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = b64[v >> 6 & 63];
        if (i + 2 < 32)
            *o++ = b64[v & 63];
    }
    *o = '\0';
    assert_int_equal(token_verify(v1, &legacy, &out, &err), 0);
    assert_string_equal(out.name, "invoice:42");
    assert_int_equal(token_verify(v1, &both, &out, &err), -1);
    assert_int_equal(token_keyring_add(&legacy, "bad id!", secret, &err), -1);
    assert_int_equal(token_keyring_add(&legacy, TOKEN_LEGACY_KEY, secret, &err), -1);
    assert_int_equal(token_keyring_add(&legacy, "short", "too-short", &err), -1);
}

static void other_secret_is_refused(void **state)
{
    (void)state;
    struct token_claims c, out;
    char token[TOKEN_MAX_LEN];
    make_claims(&c, LEASE_KIND_LOCK, "invoice:42", 1734);
    sign(&c, token);
    struct fg_error err = {0};
    struct token_keyring other = ring_of("k1", other_secret);
    assert_int_equal(token_verify(token, &other, &out, &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_FENCE_TOKEN);
    struct token_keyring renamed = ring_of("k2", secret);
    assert_int_equal(token_verify(token, &renamed, &out, &err), -1);
}

static void forged_with_invalid_name_is_refused(void **state)
{
    (void)state;
    struct token_claims c;
    char token[TOKEN_MAX_LEN];
    make_claims(&c, LEASE_KIND_LOCK, "bad name", 3); /* a space is not a name byte */
    sign(&c, token);
    refused(token);
}

static void short_buffer_fails(void **state)
{
    (void)state;
    struct token_claims c;
    char out[40];
    struct fg_error err = {0};
    make_claims(&c, LEASE_KIND_LOCK, "invoice:42", 1734);
    struct token_keyring ring = ring_of("k1", secret);
    assert_int_equal(token_sign(&c, &ring, out, sizeof out, &err), -1);
}

static void lease_ids_are_fresh_hex(void **state)
{
    (void)state;
    char a[LEASE_ID_LEN + 1], b[LEASE_ID_LEN + 1];
    struct fg_error err = {0};
    assert_int_equal(token_new_lease_id(a, &err), 0);
    assert_int_equal(token_new_lease_id(b, &err), 0);
    assert_int_equal(strlen(a), LEASE_ID_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), LEASE_ID_LEN);
    assert_string_not_equal(a, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(longest_name_round_trips),
        cmocka_unit_test(signing_is_deterministic),
        cmocka_unit_test(altered_claims_are_refused),
        cmocka_unit_test(altered_signature_is_refused),
        cmocka_unit_test(every_truncation_is_refused),
        cmocka_unit_test(extra_parts_are_refused),
        cmocka_unit_test(non_canonical_base64_is_refused),
        cmocka_unit_test(every_byte_reads_as_its_alphabet_place),
        cmocka_unit_test(fences_beyond_int64_are_refused),
        cmocka_unit_test(rotation),
        cmocka_unit_test(other_secret_is_refused),
        cmocka_unit_test(forged_with_invalid_name_is_refused),
        cmocka_unit_test(short_buffer_fails),
        cmocka_unit_test(lease_ids_are_fresh_hex),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
