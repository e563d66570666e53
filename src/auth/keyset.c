/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keyset.c - the API key set: read from the configuration (and an optional keys
 * file), looked up by the hash of a presented key (once per connection while
 * the connection presents the same key: auth_memo), published whole. It decides
 * who a caller is and what a key may do; which scope a call needs is the route
 * table's business (http/routes.h), and answering 401/403 the server's.
 */
#include "auth/keyset.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/scope.h"
#include "util/fgjson.h"
#include "util/names.h"
#include "util/published.h"
#include "util/utf8.h"

/* SHA-256, fetched once: OpenSSL 3 looks the algorithm up again on every
 * EVP_sha256() digest, which cost more than the hashing of a key. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    FG_ASSERT(sha256_md != NULL);
}

static void sha256(const char *text, size_t len, unsigned char out[API_KEY_DIGEST])
{
    pthread_once(&sha256_once, sha256_fetch);
    FG_ASSERT(EVP_Digest(text, len, out, NULL, sha256_md, NULL) == 1);
}

void api_key_hash_hex(const char *text, size_t len, char out[2 * API_KEY_DIGEST + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char digest[API_KEY_DIGEST];
    sha256(text, len, digest);
    for (size_t i = 0; i < API_KEY_DIGEST; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[2 * API_KEY_DIGEST] = '\0';
}

int api_key_id_check(const char *id, struct fg_error *err)
{
    size_t len = strlen(id);
    if (len == 0 || len > API_KEY_ID_MAX)
        return fg_fail(err, FG_ERR_CONFIG, "a key id is 1 to %d bytes", API_KEY_ID_MAX);
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return fg_fail(err, FG_ERR_CONFIG, "a key id is made of A-Z a-z 0-9 . _ -");
    }
    return 0;
}

static int parse_digest(const char *hex, unsigned char out[API_KEY_DIGEST])
{
    if (strlen(hex) != 2 * API_KEY_DIGEST)
        return -1;
    for (size_t i = 0; i < API_KEY_DIGEST; i++) {
        int hi = name_hex_value(hex[2 * i]), lo = name_hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* Reads entry {"id", "sha256", "scopes"} into k; where names it in errors. */
static int key_parse(const json_t *entry, const char *where, struct api_key *k,
                     struct fg_error *err)
{
    struct fg_error why = {0};
    if (!json_is_object(entry))
        return fg_fail(err, FG_ERR_CONFIG, "%s must be an object {id, sha256, scopes}", where);
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)entry, name, v)
    {
        if (strcmp(name, "id") != 0 && strcmp(name, "sha256") != 0 && strcmp(name, "scopes") != 0)
            return fg_fail(err, FG_ERR_CONFIG, "unknown config key '%s.%.*s'", where,
                           utf8_cut_len(name, 60), name);
    }
    const json_t *id = json_object_get(entry, "id"), *hash = json_object_get(entry, "sha256");
    const json_t *scopes = json_object_get(entry, "scopes");
    if (!json_is_string(id) || api_key_id_check(json_string_value(id), &why) != 0)
        return fg_fail(err, FG_ERR_CONFIG, "%s.id: %s", where,
                       why.msg[0] ? why.msg : "must be a string");
    snprintf(k->id, sizeof k->id, "%s", json_string_value(id));
    if (!json_is_string(hash) || parse_digest(json_string_value(hash), k->sha256) != 0)
        return fg_fail(err, FG_ERR_CONFIG,
                       "%s.sha256: must be the 64 hex digits of the SHA-256 of the key", where);
    if (!json_is_array(scopes) || json_array_size(scopes) == 0)
        return fg_fail(err, FG_ERR_CONFIG, "%s.scopes: must be a non-empty array of strings",
                       where);
    k->scopes = calloc(json_array_size(scopes), sizeof *k->scopes);
    FG_ASSERT(k->scopes != NULL);
    for (size_t i = 0; i < json_array_size(scopes); i++) {
        const json_t *s = json_array_get(scopes, i);
        if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s) ||
            scope_check(json_string_value(s), &why) != 0)
            return fg_fail(err, FG_ERR_CONFIG, "%s.scopes[%zu]: %s", where, i,
                           why.msg[0] ? why.msg : "must be a string without NUL");
        k->scopes[k->nscopes++] = strdup(json_string_value(s));
    }
    return 0;
}

/* Appends the entries of array keys to ks; where names the array in errors. */
static int keys_append(struct keyset *ks, const json_t *keys, const char *where,
                       struct fg_error *err)
{
    if (!json_is_array(keys))
        return fg_fail(err, FG_ERR_CONFIG, "%s must be an array of keys", where);
    size_t n = json_array_size(keys);
    struct api_key *grown = realloc(ks->keys, (ks->nkeys + n + 1) * sizeof *grown);
    FG_ASSERT(grown != NULL);
    ks->keys = grown;
    for (size_t i = 0; i < n; i++) {
        char entry[300];
        snprintf(entry, sizeof entry, "%s[%zu]", where, i);
        struct api_key *k = &ks->keys[ks->nkeys++];
        memset(k, 0, sizeof *k);
        if (key_parse(json_array_get(keys, i), entry, k, err) != 0)
            return -1;
        for (size_t j = 0; j + 1 < ks->nkeys; j++) {
            if (strcmp(ks->keys[j].id, k->id) == 0)
                return fg_fail(err, FG_ERR_CONFIG, "%s: key id '%s' is used twice", entry, k->id);
            if (memcmp(ks->keys[j].sha256, k->sha256, API_KEY_DIGEST) == 0)
                return fg_fail(err, FG_ERR_CONFIG, "%s: the same key as '%s'", entry,
                               ks->keys[j].id);
        }
    }
    return 0;
}

static int keys_file_append(struct keyset *ks, const char *path, struct fg_error *err)
{
    json_t *root = fgjson_load_file(path, "auth.keys_file", err);
    if (root == NULL)
        return -1;
    char where[300];
    snprintf(where, sizeof where, "auth.keys_file %.*s", utf8_cut_len(path, 200), path);
    int rc = keys_append(ks, root, where, err);
    json_decref(root);
    return rc;
}

static int set_mode(struct keyset *ks, const char *mode, const char *source, struct fg_error *err)
{
    if (strcmp(mode, "required") != 0 && strcmp(mode, "off") != 0)
        return fg_fail(err, FG_ERR_CONFIG, "%s: must be \"required\" or \"off\"", source);
    ks->required = strcmp(mode, "required") == 0;
    ks->mode_chosen = true;
    return 0;
}

/* Applies the members of the "auth" object to ks; the keys file path goes to *file. */
static int auth_object(struct keyset *ks, const json_t *auth, const char **file,
                       struct fg_error *err)
{
    if (!json_is_object(auth))
        return fg_fail(err, FG_ERR_CONFIG, "config key 'auth' must be an object");
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)auth, name, v)
    {
        int rc;
        if (strcmp(name, "mode") == 0)
            rc = json_is_string(v) ? set_mode(ks, json_string_value(v), "auth.mode", err)
                                   : fg_fail(err, FG_ERR_CONFIG, "auth.mode must be a string");
        else if (strcmp(name, "keys") == 0)
            rc = keys_append(ks, v, "auth.keys", err);
        else if (strcmp(name, "keys_file") == 0 && json_is_string(v))
            rc = (*file = json_string_value(v), 0);
        else
            rc = fg_fail(err, FG_ERR_CONFIG, "unknown or mistyped config key 'auth.%.*s'",
                         utf8_cut_len(name, 60), name);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int keyset_from_config(const json_t *auth, const char *env_mode, const char *env_keys_file,
                       bool loopback, struct keyset **out, struct fg_error *err)
{
    struct keyset *ks = calloc(1, sizeof *ks);
    FG_ASSERT(ks != NULL);
    *out = ks;
    ks->required = !loopback;
    const char *file = NULL;
    if (auth != NULL && auth_object(ks, auth, &file, err) != 0)
        return -1;
    if (env_mode != NULL && set_mode(ks, env_mode, "FENCEGATE_AUTH_MODE", err) != 0)
        return -1;
    /* An empty path names no file: refused, as every other empty FENCEGATE_*
     * is, rather than read as "none" and leaving out the keys of the file that
     * the configuration names (FENCEGATE_AUTH_KEYS_FILE= overrides auth.keys_file). */
    if (env_keys_file != NULL && env_keys_file[0] == '\0')
        return fg_fail(err, FG_ERR_CONFIG, "FENCEGATE_AUTH_KEYS_FILE: must not be empty");
    if (file != NULL && file[0] == '\0')
        return fg_fail(err, FG_ERR_CONFIG, "auth.keys_file: must not be empty");
    if (env_keys_file != NULL)
        file = env_keys_file;
    if (file != NULL && keys_file_append(ks, file, err) != 0)
        return -1;
    if (ks->required && ks->nkeys == 0)
        return fg_fail(err, FG_ERR_CONFIG,
                       "auth.mode is \"required\" but no key is configured (auth.keys, "
                       "auth.keys_file); make one with `fencegate keys new --id ID --scope S`");
    return 0;
}

void keyset_free(struct keyset *ks)
{
    if (ks == NULL)
        return;
    for (size_t i = 0; i < ks->nkeys; i++) {
        for (size_t j = 0; j < ks->keys[i].nscopes; j++)
            free(ks->keys[i].scopes[j]);
        free(ks->keys[i].scopes);
    }
    free(ks->keys);
    free(ks);
}

/* True iff the n bytes at a and b are equal, in a time that depends on n only:
 * a word at a time, with no early exit (CRYPTO_memcmp goes a byte at a time,
 * which cost more than the hash with ten keys). */
static bool bytes_equal(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    uint64_t diff = 0;
    size_t i = 0;
    for (; i + sizeof diff <= n; i += sizeof diff) {
        uint64_t u, v;
        memcpy(&u, x + i, sizeof u);
        memcpy(&v, y + i, sizeof v);
        diff |= u ^ v;
    }
    for (; i < n; i++)
        diff |= (uint64_t)(x[i] ^ y[i]);
    return diff == 0;
}

const struct api_key *keyset_find(const struct keyset *ks, const char *presented, size_t len)
{
    unsigned char digest[API_KEY_DIGEST];
    sha256(presented, len, digest);
    const struct api_key *found = NULL;
    for (size_t i = 0; i < ks->nkeys; i++)
        if (bytes_equal(digest, ks->keys[i].sha256, API_KEY_DIGEST))
            found = &ks->keys[i];
    return found;
}

const struct api_key *keyset_find_memo(const struct keyset *ks, const char *presented, size_t len,
                                       struct auth_memo *memo)
{
    if (memo->keyset == ks && memo->len == len && bytes_equal(memo->text, presented, len))
        return memo->key;
    const struct api_key *found = keyset_find(ks, presented, len);
    if (found == NULL)
        return NULL;
    auth_memo_clear(memo);
    memo->text = malloc(len);
    FG_ASSERT(memo->text != NULL);
    memcpy(memo->text, presented, len);
    memo->len = len;
    memo->keyset = ks;
    memo->key = found;
    return found;
}

void auth_memo_clear(struct auth_memo *memo)
{
    if (memo->text != NULL)
        OPENSSL_cleanse(memo->text, memo->len);
    free(memo->text);
    memset(memo, 0, sizeof *memo);
}

int auth_bearer(const char *header, const char **key, size_t *len, struct fg_error *err)
{
    if (header == NULL)
        return fg_fail(err, FG_ERR_UNAUTHORIZED,
                       "this call needs an API key: Authorization: Bearer <key>");
    if (strncasecmp(header, "Bearer ", 7) != 0)
        return fg_fail(err, FG_ERR_UNAUTHORIZED,
                       "the Authorization header must read 'Bearer <key>'");
    const char *k = header + 7;
    while (*k == ' ')
        k++;
    size_t n = 0;
    while (k[n] > ' ' && k[n] < 0x7f)
        n++;
    size_t end = n;
    while (k[end] == ' ' || k[end] == '\t') /* not part of the value (RFC 9110 5.5) */
        end++;
    if (n == 0 || k[end] != '\0')
        return fg_fail(err, FG_ERR_UNAUTHORIZED,
                       "the bearer key must be one word of visible ASCII characters");
    if (n > API_KEY_TEXT_MAX)
        return fg_fail(err, FG_ERR_UNAUTHORIZED, "the bearer key is over %d bytes",
                       API_KEY_TEXT_MAX);
    *key = k;
    *len = n;
    return 0;
}

bool api_key_permits(const struct api_key *key, const char *needed)
{
    if (key == NULL)
        return true;
    for (size_t i = 0; i < key->nscopes; i++)
        if (scope_grants(key->scopes[i], needed))
            return true;
    return false;
}

int api_key_permit(const struct api_key *key, const char *needed, struct fg_error *err)
{
    if (api_key_permits(key, needed))
        return 0;
    return fg_fail(err, FG_ERR_FORBIDDEN, "key '%s' lacks the scope '%.*s'", key->id,
                   utf8_cut_len(needed, 150), needed);
}

int api_key_permit_lease(const struct api_key *key, const char *noun, const char *name,
                         struct fg_error *err)
{
    char needed[NAME_MAX_LEN + 16];
    snprintf(needed, sizeof needed, "%s:%s", noun, name);
    return api_key_permit(key, needed, err);
}

/* The key of ks with id, or NULL. */
static const struct api_key *keyset_find_id(const struct keyset *ks, const char *id)
{
    for (size_t i = 0; i < ks->nkeys; i++)
        if (strcmp(ks->keys[i].id, id) == 0)
            return &ks->keys[i];
    return NULL;
}

bool api_key_same_scopes(const struct api_key *a, const struct api_key *b)
{
    if (a->nscopes != b->nscopes)
        return false;
    for (size_t i = 0; i < a->nscopes; i++)
        if (strcmp(a->scopes[i], b->scopes[i]) != 0)
            return false;
    return true;
}

int keyset_key_in_force(const struct keyset *ks, const struct api_key *key,
                        const struct api_key **now, struct fg_error *err)
{
    *now = NULL;
    if (ks == NULL || !ks->required)
        return 0;
    if (key == NULL)
        return fg_fail(err, FG_ERR_UNAUTHORIZED,
                       "an API key is required: auth was turned on while this request waited");
    *now = keyset_find_id(ks, key->id);
    if (*now == NULL)
        return fg_fail(err, FG_ERR_UNAUTHORIZED,
                       "unknown API key: key '%s' was removed while this request waited", key->id);
    return 0;
}

static void keyset_free_any(void *ks)
{
    keyset_free(ks);
}

static struct published in_force = PUBLISHED_INIT(keyset_free_any);

void auth_publish(struct keyset *ks)
{
    published_set(&in_force, ks);
}

const struct keyset *auth_current(void)
{
    return published_get(&in_force);
}

void auth_shutdown(void)
{
    published_clear(&in_force);
}

const char *auth_proxy_refused(const struct keyset *ks,
                               const char *(*header_of)(const char *name, void *ctx), void *ctx)
{
    static const char *const forwarding[] = {"Forwarded", "X-Forwarded-For", "X-Forwarded-Host",
                                             "X-Real-IP"};
    if (ks == NULL || ks->required || ks->mode_chosen)
        return NULL;
    for (size_t i = 0; i < sizeof forwarding / sizeof forwarding[0]; i++)
        if (header_of(forwarding[i], ctx) != NULL)
            return forwarding[i];
    return NULL;
}
