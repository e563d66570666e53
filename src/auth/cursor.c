/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cursor.c - sealing and opening listing cursors with OpenSSL's AES-256-GCM.
 * The key is HMAC-SHA256(token secret, CURSOR_LABEL), so a cursor can be
 * turned into neither a token nor a token's key; each is bound to the listing
 * and the caller it was made for (authenticated, not sealed). It must not
 * know what a listing holds.
 */
#include "auth/cursor.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>

#define CURSOR_LABEL "fencegate listing cursor v1"
#define CURSOR_KEY   32
#define CURSOR_TEXT  (NAME_MAX_LEN + 1) /* the name, NUL-padded to one length */
#define CURSOR_BYTES (CURSOR_NONCE + CURSOR_TEXT + CURSOR_TAG)

/* The cursor key derived from a token key. */
static void cursor_key(const struct token_key *k, unsigned char out[CURSOR_KEY])
{
    unsigned int len = CURSOR_KEY;
    FG_ASSERT(HMAC(EVP_sha256(), k->secret, (int)k->secret_len, (const unsigned char *)CURSOR_LABEL,
                   sizeof CURSOR_LABEL - 1, out, &len) != NULL);
}

/* Runs AES-256-GCM over CURSOR_TEXT bytes of in into out, with bound as the
 * data authenticated along (not sealed), encrypting (tag written) or
 * decrypting (tag checked). Returns 0, or -1 when the tag does not match. */
static int gcm(bool encrypt, const unsigned char key[CURSOR_KEY],
               const unsigned char nonce[CURSOR_NONCE], const char *bound, const unsigned char *in,
               unsigned char *out, unsigned char tag[CURSOR_TAG])
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    FG_ASSERT(ctx != NULL);
    int len = 0, rc = -1;
    FG_ASSERT(EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL, encrypt) == 1 &&
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, CURSOR_NONCE, NULL) == 1 &&
              EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, encrypt) == 1 &&
              EVP_CipherUpdate(ctx, NULL, &len, (const unsigned char *)bound, (int)strlen(bound)) ==
                  1 &&
              EVP_CipherUpdate(ctx, out, &len, in, CURSOR_TEXT) == 1);
    if (!encrypt)
        FG_ASSERT(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, CURSOR_TAG, tag) == 1);
    if (EVP_CipherFinal_ex(ctx, out + len, &len) == 1) {
        rc = 0;
        if (encrypt)
            FG_ASSERT(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, CURSOR_TAG, tag) == 1);
    }
    EVP_CIPHER_CTX_free(ctx);
    return rc;
}

int cursor_seal(const char *name, const char *bound, const struct token_keyring *ring,
                char out[CURSOR_TEXT_MAX], struct fg_error *err)
{
    unsigned char key[CURSOR_KEY], text[CURSOR_TEXT] = {0}, sealed[CURSOR_BYTES];
    size_t len = strlen(name);
    FG_ASSERT(len <= NAME_MAX_LEN && ring->nkeys > 0);
    memcpy(text, name, len);
    if (getrandom(sealed, CURSOR_NONCE, 0) != CURSOR_NONCE)
        return fg_fail(err, FG_ERR_INTERNAL, "getrandom failed: %s", strerror(errno));
    cursor_key(&ring->keys[0], key);
    FG_ASSERT(gcm(true, key, sealed, bound, text, sealed + CURSOR_NONCE,
                  sealed + CURSOR_NONCE + CURSOR_TEXT) == 0);
    b64url_encode(sealed, sizeof sealed, out);
    return 0;
}

int cursor_open(const char *text, const char *bound, const struct token_keyring *ring,
                char name[NAME_MAX_LEN + 1], struct fg_error *err)
{
    unsigned char sealed[CURSOR_BYTES], plain[CURSOR_TEXT + 1], key[CURSOR_KEY];
    if (b64url_decode(text, strlen(text), sealed, sizeof sealed) == (long)sizeof sealed)
        for (size_t i = 0; i < ring->nkeys; i++) {
            cursor_key(&ring->keys[i], key);
            if (gcm(false, key, sealed, bound, sealed + CURSOR_NONCE, plain,
                    sealed + CURSOR_NONCE + CURSOR_TEXT) == 0 &&
                plain[NAME_MAX_LEN] == '\0') {
                memcpy(name, plain, NAME_MAX_LEN + 1);
                return 0;
            }
        }
    return fg_fail(err, FG_ERR_INVALID_FIELD,
                   "query parameter 'cursor' must be the next_cursor of a previous page");
}
