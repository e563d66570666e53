/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token.h - fencing tokens: the opaque, unforgeable proof that a lease with a
 * given fence was issued by this gateway. A token carries the kind of lease (lock
 * or semaphore), its name, its fence and its lease id, signed with HMAC-SHA256
 * under one key of a keyring, whose id it names: the first key of the ring
 * signs, every key verifies, so the signing key rotates without invalidating
 * tokens in flight. Pure functions: no I/O, no global state.
 */
#ifndef FG_TOKEN_H
#define FG_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "fglimits.h"
#include "util/error.h"
#include "util/names.h"

#define LEASE_ID_LEN 32 /* hex characters of a lease id */
_Static_assert(TOKEN_MAX_LEN == NAME_MAX_LEN * 2 + 160, "a token holds two names and 160 bytes");
#define TOKEN_LEGACY_KEY "default" /* key id of the single secret; verifies fgt1 tokens */

/* The letters of the kinds of lease a token names (lease/lease_kind.h gives them their names). */
#define TOKEN_KIND_LOCK      'l'
#define TOKEN_KIND_SEMAPHORE 's'

/* The noun of a kind of lease, as the API names it: "lock" or "semaphore". */
const char *token_kind_noun(char kind);

struct token_claims {
    char kind;                       /* TOKEN_KIND_LOCK or TOKEN_KIND_SEMAPHORE */
    char name[NAME_MAX_LEN + 1];     /* lock or semaphore name */
    int64_t fence;                   /* the lease's fence, > 0 */
    char lease_id[LEASE_ID_LEN + 1]; /* lease id, hex */
};

struct token_key {
    char id[TOKEN_KEY_ID_MAX + 1];          /* named in the tokens it signs: A-Z a-z 0-9 _ - */
    unsigned char secret[TOKEN_SECRET_MAX]; /* HMAC key */
    size_t secret_len;                      /* bytes in secret, TOKEN_SECRET_MIN .. _MAX */
};

struct token_keyring {
    struct token_key keys[TOKEN_KEYS_MAX]; /* keys[0] signs; all verify */
    size_t nkeys;                          /* entries in keys, >= 1 once loaded */
};

/* Checks a signing key id: 1..TOKEN_KEY_ID_MAX bytes of A-Z a-z 0-9 _ - */
int token_key_id_check(const char *id, struct fg_error *err) FG_WUR;

/*
 * Appends a key to ring; fails with FG_ERR_CONFIG on a bad id, a secret of
 * a wrong length, a repeated id or a full ring.
 */
int token_keyring_add(struct token_keyring *ring, const char *id, const char *secret,
                      struct fg_error *err) FG_WUR;

/*
 * Writes the token for claims, signed with ring's first key, into out
 * (capacity out_cap, at least TOKEN_MAX_LEN). Returns 0, or -1 if out is short.
 */
int token_sign(const struct token_claims *claims, const struct token_keyring *ring, char *out,
               size_t out_cap, struct fg_error *err) FG_WUR;

/*
 * Checks that token (NUL-terminated text) was signed by the key of ring it
 * names and fills *claims from it. Any malformed, altered or forged token, or
 * one naming a key the ring no longer holds, fails with
 * FG_ERR_INVALID_FENCE_TOKEN; the comparison of signatures is constant-time.
 * Fences are 1 .. 2^63 - 1.
 */
int token_verify(const char *token, const struct token_keyring *ring, struct token_claims *claims,
                 struct fg_error *err) FG_WUR;

/* Fills lease_id (LEASE_ID_LEN + 1 bytes) with a fresh random hex lease id.
 * Returns 0, or -1 if the system has no randomness to give. */
int token_new_lease_id(char lease_id[LEASE_ID_LEN + 1], struct fg_error *err) FG_WUR;

#endif
