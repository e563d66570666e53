/*
 * token.h - fencing tokens: the opaque, unforgeable proof that a lease with a
 * given fence was issued by this gateway. A token carries the kind of lease (lock
 * or semaphore), its name, its fence and its lease id, signed with HMAC-SHA256
 * under the gateway secret. Pure functions: no I/O, no global state.
 */
#ifndef FG_TOKEN_H
#define FG_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "util/names.h"

#define LEASE_ID_LEN     32                       /* hex characters of a lease id */
#define TOKEN_MAX_LEN    (NAME_MAX_LEN * 2 + 160) /* longest token text, with NUL */
#define TOKEN_SECRET_MAX 256                      /* longest signing secret, in bytes */

enum lease_kind {
    LEASE_KIND_LOCK = 'l',
    LEASE_KIND_SEMAPHORE = 's',
};

struct token_claims {
    enum lease_kind kind;
    char name[NAME_MAX_LEN + 1];     /* lock or semaphore name */
    int64_t fence;                   /* the lease's fence, > 0 */
    char lease_id[LEASE_ID_LEN + 1]; /* lease id, hex */
};

/*
 * Writes the signed token for claims into out (capacity out_cap, at least
 * TOKEN_MAX_LEN). secret is secret_len bytes. Returns 0, or -1 if out is short.
 */
int token_sign(const struct token_claims *claims, const unsigned char *secret, size_t secret_len,
               char *out, size_t out_cap, struct fg_error *err) FG_WUR;

/*
 * Checks that token (NUL-terminated text) was signed under secret and fills
 * *claims from it. Any malformed, altered or forged token fails with
 * FG_ERR_INVALID_FENCE_TOKEN; the comparison of signatures is constant-time.
 */
int token_verify(const char *token, const unsigned char *secret, size_t secret_len,
                 struct token_claims *claims, struct fg_error *err) FG_WUR;

/* Fills lease_id (LEASE_ID_LEN + 1 bytes) with a fresh random hex lease id.
 * Returns 0, or -1 if the system has no randomness to give. */
int token_new_lease_id(char lease_id[LEASE_ID_LEN + 1], struct fg_error *err) FG_WUR;

#endif
