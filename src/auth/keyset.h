/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keyset.h - API keys: the key set of the configuration ("auth"), finding the key
 * a request presents, and whether that key holds a scope. Keys are kept as the
 * SHA-256 of their text only; a presented key is hashed and compared with every
 * known hash in constant time, so the check costs no round trip and leaks
 * nothing through its timing. A kept-alive connection presenting the same key
 * again is recognised by the text it presented last (auth_memo), without the
 * hash.
 *
 * The key set in force is published as one immutable object (auth_publish) and
 * replaced whole on SIGHUP. A replaced set is kept until auth_shutdown, so a
 * request may keep the key it found for as long as it runs, with no lock and no
 * reference count. A request that waits is held to the set in force by its
 * key's id (keyset_key_in_force): a reload that removed the key or took away a
 * scope it needs ends the wait, one that only changed the key's text (a
 * rotation) does not.
 */
#ifndef FG_KEYSET_H
#define FG_KEYSET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "fglimits.h"
#include "util/error.h"

#define API_KEY_DIGEST 32 /* bytes of a SHA-256 */

struct api_key {
    char id[API_KEY_ID_MAX + 1];          /* the key's name: logs, audit "principal" */
    unsigned char sha256[API_KEY_DIGEST]; /* SHA-256 of the key text */
    char **scopes;                        /* granted scopes (owned) */
    size_t nscopes;                       /* entries in scopes */
};

struct keyset {
    bool required;        /* auth.mode is "required" */
    bool mode_chosen;     /* auth.mode or FENCEGATE_AUTH_MODE was given (not the default) */
    struct api_key *keys; /* the known keys (owned) */
    size_t nkeys;         /* entries in keys */
};

/*
 * Builds the key set of the configuration: auth is the "auth" object of the
 * config file (borrowed, may be NULL); env_mode and env_keys_file are
 * FENCEGATE_AUTH_MODE and FENCEGATE_AUTH_KEYS_FILE (NULL if unset), which
 * override it (an empty keys file path, either way, is refused). loopback says
 * whether the gateway listens on a loopback address only (the default mode is
 * "off" then, "required" otherwise). Reads the keys file (a JSON array of key
 * entries) if one is named. Anything malformed fails with FG_ERR_CONFIG naming
 * the entry ("auth.keys[1].scopes[0]: ..."); so does "required" with no keys.
 * *out is owned by the caller (keyset_free).
 */
int keyset_from_config(const json_t *auth, const char *env_mode, const char *env_keys_file,
                       bool loopback, struct keyset **out, struct fg_error *err) FG_WUR;

/* Frees ks and everything it owns (NULL is fine). */
void keyset_free(struct keyset *ks);

/*
 * The key of ks whose text is presented (len bytes), or NULL. Hashes the text
 * once and compares it with every key's hash in constant time.
 */
const struct api_key *keyset_find(const struct keyset *ks, const char *presented, size_t len);

/*
 * The key a connection presented last, so that its next request presenting
 * the same text skips the hash: a kept-alive connection sends one key on every
 * call. One per connection, zero-initialised, used by one thread at a time.
 */
struct auth_memo {
    const struct keyset *keyset; /* the set the key was found in (borrowed) */
    const struct api_key *key;   /* the key found there (borrowed) */
    char *text;                  /* the presented text (owned, wiped when cleared) */
    size_t len;                  /* bytes of text */
};

/*
 * keyset_find through memo: if memo holds the same text (compared in constant
 * time; a proxy may send several clients' requests over one connection) found
 * in this same ks, its key; else keyset_find, remembering a key found. A key
 * set replaced on SIGHUP is a different ks, so a memo never outlives a change
 * of keys. The result is borrowed from ks.
 */
const struct api_key *keyset_find_memo(const struct keyset *ks, const char *presented, size_t len,
                                       struct auth_memo *memo);

/* Wipes and frees the text memo holds and empties it. */
void auth_memo_clear(struct auth_memo *memo);

/*
 * Reads an Authorization header value (NULL when absent): "Bearer <key>", the
 * scheme in any case, the key 1..API_KEY_TEXT_MAX visible ASCII bytes. Points
 * *key into header. Anything else fails with FG_ERR_UNAUTHORIZED saying why.
 */
int auth_bearer(const char *header, const char **key, size_t *len, struct fg_error *err) FG_WUR;

/*
 * With auth off by default (no auth.mode: a loopback gateway), a request that
 * came through a proxy on the same host must not be served as a loopback
 * client's. The name of the first forwarding header header_of(name, ctx)
 * finds (Forwarded, X-Forwarded-For, X-Forwarded-Host, X-Real-IP) when ks
 * refuses such requests, else NULL. A mode written in the configuration
 * ("off" too) serves them.
 */
const char *auth_proxy_refused(const struct keyset *ks,
                               const char *(*header_of)(const char *name, void *ctx), void *ctx);

/* True iff key holds a scope that grants needed; a NULL key (auth off) may do
 * everything. */
bool api_key_permits(const struct api_key *key, const char *needed);

/* 0 if api_key_permits(key, needed), else -1 with FG_ERR_FORBIDDEN naming the
 * key and the scope. */
int api_key_permit(const struct api_key *key, const char *needed, struct fg_error *err) FG_WUR;

/* api_key_permit for the scope of a lease: "<noun>:<name>", noun "lock" or
 * "semaphore" (the scope of the lease's own routes). */
int api_key_permit_lease(const struct api_key *key, const char *noun, const char *name,
                         struct fg_error *err) FG_WUR;

/*
 * For a request that waits and was admitted with key (borrowed from the set it
 * was found in; NULL: admitted with none, auth being off): the key that stands
 * for it in ks (NULL: none), the set in force now or one about to be. *now is
 * key itself while its own set is ks; after a reload, the key of the same id
 * (its text may have changed: a rotation keeps the id); NULL when ks has auth
 * off. Fails with FG_ERR_UNAUTHORIZED when ks has no key of that id, or
 * requires a key and the request came without one. Whether *now still holds
 * the scopes the request needs is the caller's to check.
 */
int keyset_key_in_force(const struct keyset *ks, const struct api_key *key,
                        const struct api_key **now, struct fg_error *err) FG_WUR;

/* True iff keys a and b grant the same scopes, in the same order. */
bool api_key_same_scopes(const struct api_key *a, const struct api_key *b);

/* Checks a key id: 1..API_KEY_ID_MAX bytes of A-Z a-z 0-9 . _ -. */
int api_key_id_check(const char *id, struct fg_error *err) FG_WUR;

/* SHA-256 of len bytes of text, as 64 lowercase hex digits plus NUL. */
void api_key_hash_hex(const char *text, size_t len, char out[2 * API_KEY_DIGEST + 1]);

/* Makes the key set in force ks (owned from now on; kept until auth_shutdown). */
void auth_publish(struct keyset *ks);

/* The key set in force, or NULL before the first auth_publish. */
const struct keyset *auth_current(void);

/* Frees every key set ever published. No request may be running. */
void auth_shutdown(void);

#endif
