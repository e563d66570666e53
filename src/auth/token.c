/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token.c - signing and verifying fencing tokens. The text form is
 *   fgt2.<key id>.<kind>.<fence>.<lease id>.<base64url name>.<base64url HMAC-SHA256>
 * where the HMAC covers everything before the last dot. Tokens of version 1
 * (fgt1, without the key id) are still verified, with the key "default" (the
 * single secret of version 1), so an upgrade invalidates no token in flight. A verified token is
 * the only way a fence reaches storage: a made-up number never gets that far.
 */
#include "auth/token.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util/b64url.h"

#define TOKEN_PREFIX "fgt2"
#define TOKEN_V1     "fgt1"
#define TOKEN_PARTS  7
#define MAC_LEN      32
#define MAC_B64_LEN  43
#define SHA256_BLOCK 64

/*
 * HMAC-SHA256 with the keyed inner and outer digest states computed once per
 * thread and secret, then copied for each token: OpenSSL's one-shot HMAC()
 * looks the algorithm up again on every call, which cost more than the rest of
 * a lock request. The cache is per thread (no locking) and freed with it.
 */
struct hmac_cache {
    unsigned char key[TOKEN_SECRET_MAX]; /* the secret the states were keyed with */
    size_t key_len;                      /* its length; 0 before the first use */
    EVP_MD_CTX *inner;                   /* SHA-256 state after (key ^ ipad) */
    EVP_MD_CTX *outer;                   /* SHA-256 state after (key ^ opad) */
    EVP_MD_CTX *work;                    /* scratch copy of one of them */
};

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static pthread_key_t cache_key;

static void hmac_cache_free(void *arg)
{
    struct hmac_cache *c = arg;
    EVP_MD_CTX_free(c->inner);
    EVP_MD_CTX_free(c->outer);
    EVP_MD_CTX_free(c->work);
    free(c);
}

static void cache_key_create(void)
{
    FG_ASSERT(pthread_key_create(&cache_key, hmac_cache_free) == 0);
}

static void hmac_rekey(struct hmac_cache *c, const unsigned char *secret, size_t secret_len)
{
    unsigned char block[SHA256_BLOCK] = {0}, pad[SHA256_BLOCK];
    if (secret_len > SHA256_BLOCK)
        FG_ASSERT(EVP_Digest(secret, secret_len, block, NULL, EVP_sha256(), NULL) == 1);
    else
        memcpy(block, secret, secret_len);
    for (size_t i = 0; i < SHA256_BLOCK; i++)
        pad[i] = block[i] ^ 0x36;
    FG_ASSERT(EVP_DigestInit_ex(c->inner, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(c->inner, pad, SHA256_BLOCK) == 1);
    for (size_t i = 0; i < SHA256_BLOCK; i++)
        pad[i] = block[i] ^ 0x5c;
    FG_ASSERT(EVP_DigestInit_ex(c->outer, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(c->outer, pad, SHA256_BLOCK) == 1);
    memcpy(c->key, secret, secret_len);
    c->key_len = secret_len;
}

static struct hmac_cache *hmac_cache_for(const unsigned char *secret, size_t secret_len)
{
    FG_ASSERT(secret_len > 0 && secret_len <= TOKEN_SECRET_MAX);
    pthread_once(&cache_once, cache_key_create);
    struct hmac_cache *c = pthread_getspecific(cache_key);
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        FG_ASSERT(c != NULL);
        c->inner = EVP_MD_CTX_new();
        c->outer = EVP_MD_CTX_new();
        c->work = EVP_MD_CTX_new();
        FG_ASSERT(c->inner && c->outer && c->work);
        pthread_setspecific(cache_key, c);
    }
    if (c->key_len != secret_len || memcmp(c->key, secret, secret_len) != 0)
        hmac_rekey(c, secret, secret_len);
    return c;
}

static void hmac_sha256(const unsigned char *secret, size_t secret_len, const char *data,
                        size_t len, unsigned char mac[MAC_LEN])
{
    struct hmac_cache *c = hmac_cache_for(secret, secret_len);
    unsigned char inner[MAC_LEN];
    FG_ASSERT(EVP_MD_CTX_copy_ex(c->work, c->inner) == 1 &&
              EVP_DigestUpdate(c->work, data, len) == 1 &&
              EVP_DigestFinal_ex(c->work, inner, NULL) == 1);
    FG_ASSERT(EVP_MD_CTX_copy_ex(c->work, c->outer) == 1 &&
              EVP_DigestUpdate(c->work, inner, MAC_LEN) == 1 &&
              EVP_DigestFinal_ex(c->work, mac, NULL) == 1);
}

int token_key_id_check(const char *id, struct fg_error *err)
{
    size_t len = strlen(id);
    if (len == 0 || len > TOKEN_KEY_ID_MAX)
        return fg_fail(err, FG_ERR_CONFIG, "a secret id is 1 to %d bytes", TOKEN_KEY_ID_MAX);
    for (size_t i = 0; i < len; i++)
        if (b64url_value(id[i]) < 0)
            return fg_fail(err, FG_ERR_CONFIG, "a secret id is made of A-Z a-z 0-9 _ -");
    return 0;
}

int token_keyring_add(struct token_keyring *ring, const char *id, const char *secret,
                      struct fg_error *err)
{
    size_t len = strlen(secret);
    if (token_key_id_check(id, err) != 0)
        return -1;
    if (len < TOKEN_SECRET_MIN || len > TOKEN_SECRET_MAX)
        return fg_fail(err, FG_ERR_CONFIG, "secret '%s' must be %d to %d bytes long", id,
                       TOKEN_SECRET_MIN, TOKEN_SECRET_MAX);
    if (ring->nkeys == TOKEN_KEYS_MAX)
        return fg_fail(err, FG_ERR_CONFIG, "at most %d secrets", TOKEN_KEYS_MAX);
    for (size_t i = 0; i < ring->nkeys; i++)
        if (strcmp(ring->keys[i].id, id) == 0)
            return fg_fail(err, FG_ERR_CONFIG, "secret id '%s' is used twice", id);
    struct token_key *k = &ring->keys[ring->nkeys++];
    snprintf(k->id, sizeof k->id, "%s", id);
    memcpy(k->secret, secret, len);
    k->secret_len = len;
    return 0;
}

int token_sign(const struct token_claims *claims, const struct token_keyring *ring, char *out,
               size_t out_cap, struct fg_error *err)
{
    FG_ASSERT(ring->nkeys > 0);
    const struct token_key *key = &ring->keys[0];
    char name_b64[NAME_MAX_LEN * 2];
    b64url_encode((const unsigned char *)claims->name, strlen(claims->name), name_b64);
    int n = snprintf(out, out_cap, TOKEN_PREFIX ".%s.%c.%" PRId64 ".%s.%s.", key->id,
                     (char)claims->kind, claims->fence, claims->lease_id, name_b64);
    if (n < 0 || (size_t)n + MAC_B64_LEN + 1 > out_cap)
        return fg_fail(err, FG_ERR_INTERNAL, "token buffer too small");
    unsigned char mac[MAC_LEN];
    hmac_sha256(key->secret, key->secret_len, out, (size_t)n - 1, mac);
    b64url_encode(mac, MAC_LEN, out + n);
    return 0;
}

/* Splits token into its dot-separated parts; returns their count, or -1 if
 * there are more than TOKEN_PARTS. */
static int token_split(const char *token, const char *parts[TOKEN_PARTS], size_t lens[TOKEN_PARTS])
{
    const char *p = token;
    for (int i = 0;; i++) {
        if (i == TOKEN_PARTS)
            return -1;
        const char *dot = strchr(p, '.');
        parts[i] = p;
        lens[i] = dot ? (size_t)(dot - p) : strlen(p);
        if (dot == NULL)
            return i + 1;
        p = dot + 1;
    }
}

/* Reads a fence: 1 .. 19 digits, no leading zero, at most 2^63 - 1. */
static int parse_fence(const char *s, size_t len, int64_t *fence)
{
    if (len == 0 || len > 19 || s[0] == '0')
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        int digit = s[i] - '0';
        if (v > (INT64_MAX - digit) / 10)
            return -1;
        v = v * 10 + digit;
    }
    *fence = v;
    return 0;
}

static bool is_lease_id(const char *s, size_t len)
{
    if (len != LEASE_ID_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* The key of ring called id (len bytes), or NULL. */
static const struct token_key *ring_key(const struct token_keyring *ring, const char *id,
                                        size_t len)
{
    for (size_t i = 0; i < ring->nkeys; i++)
        if (strlen(ring->keys[i].id) == len && memcmp(ring->keys[i].id, id, len) == 0)
            return &ring->keys[i];
    return NULL;
}

/*
 * Finds the key a token names and where its claims start: parts[first] is the
 * kind. Version 2 names its key; version 1 means the key "default".
 */
static const struct token_key *token_key_of(const struct token_keyring *ring, const char **parts,
                                            const size_t *lens, int nparts, int *first)
{
    if (nparts == TOKEN_PARTS && lens[0] == 4 && memcmp(parts[0], TOKEN_PREFIX, 4) == 0) {
        *first = 2;
        return ring_key(ring, parts[1], lens[1]);
    }
    if (nparts == TOKEN_PARTS - 1 && lens[0] == 4 && memcmp(parts[0], TOKEN_V1, 4) == 0) {
        *first = 1;
        return ring_key(ring, TOKEN_LEGACY_KEY, strlen(TOKEN_LEGACY_KEY));
    }
    return NULL;
}

int token_verify(const char *token, const struct token_keyring *ring, struct token_claims *claims,
                 struct fg_error *err)
{
    const char *parts[TOKEN_PARTS];
    size_t lens[TOKEN_PARTS];
    int nparts = strlen(token) < TOKEN_MAX_LEN ? token_split(token, parts, lens) : -1;
    int k = 0;
    const struct token_key *key = nparts > 0 ? token_key_of(ring, parts, lens, nparts, &k) : NULL;
    if (key == NULL)
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                       "malformed fence token, or signed by a key no longer in use");
    if (lens[k] != 1 || (parts[k][0] != TOKEN_KIND_LOCK && parts[k][0] != TOKEN_KIND_SEMAPHORE))
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN, "malformed fence token");
    unsigned char presented[MAC_LEN + 3], expected[MAC_LEN];
    if (b64url_decode(parts[k + 4], lens[k + 4], presented, sizeof presented) != MAC_LEN)
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN, "malformed fence token signature");
    hmac_sha256(key->secret, key->secret_len, token, (size_t)(parts[k + 4] - token) - 1, expected);
    if (CRYPTO_memcmp(presented, expected, MAC_LEN) != 0)
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN, "fence token signature does not match");
    long name_len =
        b64url_decode(parts[k + 3], lens[k + 3], (unsigned char *)claims->name, NAME_MAX_LEN);
    if (name_len <= 0 || parse_fence(parts[k + 1], lens[k + 1], &claims->fence) != 0 ||
        !is_lease_id(parts[k + 2], lens[k + 2]))
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN, "malformed fence token claims");
    claims->name[name_len] = '\0';
    if (!name_is_valid_lock(claims->name, (size_t)name_len))
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN, "malformed fence token claims");
    claims->kind = parts[k][0];
    memcpy(claims->lease_id, parts[k + 2], LEASE_ID_LEN);
    claims->lease_id[LEASE_ID_LEN] = '\0';
    return 0;
}

/* Random bytes for lease ids, drawn from getrandom a page at a time per thread. */
static _Thread_local struct {
    unsigned char bytes[4096];
    size_t used;
} random_pool = {.used = sizeof random_pool.bytes};

static int random_bytes(unsigned char *out, size_t n, struct fg_error *err)
{
    if (random_pool.used + n > sizeof random_pool.bytes) {
        if (getrandom(random_pool.bytes, sizeof random_pool.bytes, 0) !=
            (ssize_t)sizeof random_pool.bytes)
            return fg_fail(err, FG_ERR_INTERNAL, "getrandom failed: %s", strerror(errno));
        random_pool.used = 0;
    }
    memcpy(out, random_pool.bytes + random_pool.used, n);
    random_pool.used += n;
    return 0;
}

int token_new_lease_id(char lease_id[LEASE_ID_LEN + 1], struct fg_error *err)
{
    unsigned char raw[LEASE_ID_LEN / 2];
    if (random_bytes(raw, sizeof raw, err) != 0)
        return -1;
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        lease_id[2 * i] = hex[raw[i] >> 4];
        lease_id[2 * i + 1] = hex[raw[i] & 15];
    }
    lease_id[LEASE_ID_LEN] = '\0';
    return 0;
}

const char *token_kind_noun(char kind)
{
    return kind == TOKEN_KIND_SEMAPHORE ? "semaphore" : "lock";
}
