/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lockset.c - names, request ids and tokens of lock sets. The global order is
 * bytewise ascending order of names: every set takes its locks in it, so no two
 * sets ever wait for each other in a cycle. It must not talk to Redis or know
 * of waiting connections.
 */
#include "lease/lockset.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/token.h"
#include "util/fnv.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

int lockset_names_check(const json_t *names, struct fg_error *err)
{
    size_t n = json_array_size(names);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(names, i);
        if (!json_is_string(v))
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'names[%zu]' must be a string", i);
        if (!name_is_valid_lock(json_string_value(v), json_string_length(v)))
            return fg_fail(err, FG_ERR_INVALID_NAME,
                           "field 'names[%zu]': 1 to %d bytes of A-Z a-z 0-9 . _ : / -", i,
                           NAME_MAX_LEN);
    }
    const char *twice = NULL; /* the first named twice in the global order */
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            const char *name = json_string_value(json_array_get(names, i));
            if (strcmp(name, json_string_value(json_array_get(names, j))) == 0 &&
                (twice == NULL || strcmp(name, twice) < 0))
                twice = name;
        }
    return twice == NULL
               ? 0
               : fg_fail(err, FG_ERR_INVALID_FIELD, "field 'names' names lock '%s' twice", twice);
}

void lockset_parse_names(const json_t *body, struct lockset *out)
{
    memset(out, 0, sizeof *out);
    const json_t *names = json_object_get(body, "names");
    size_t n = json_array_size(names);
    for (size_t i = 0; i < n; i++)
        snprintf(out->names[i], sizeof out->names[i], "%s",
                 json_string_value(json_array_get(names, i)));
    char asked[LOCKSET_MAX][NAME_MAX_LEN + 1];
    memcpy(asked, out->names, sizeof asked);
    qsort(out->names, n, sizeof out->names[0], by_name);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (strcmp(out->names[i], asked[j]) == 0)
                out->asked_at[i] = j;
    out->n = n;
}

size_t lockset_asked(const struct lockset *set, size_t k)
{
    size_t i = 0;
    while (set->asked_at[i] != k)
        i++;
    return i;
}

/* The digest of the names of set: FNV-1a over each name and a NUL after it, in the global order. */
static uint64_t names_digest(const struct lockset *set)
{
    uint64_t h = FNV1A_START;
    for (size_t i = 0; i < set->n; i++)
        h = fnv1a_byte(fnv1a_text(h, set->names[i]), '\0');
    return h;
}

void lockset_request_ids(const char *rid, const struct lockset *set, char out[][LOCKSET_RID_MAX])
{
    uint64_t digest = rid[0] != '\0' ? names_digest(set) : 0;
    for (size_t i = 0; i < set->n; i++) {
        if (rid[0] == '\0')
            out[i][0] = '\0';
        else
            snprintf(out[i], LOCKSET_RID_MAX, "set:%s:%016" PRIx64 "#%s", rid, digest,
                     set->names[i]);
    }
}

int lockset_tokens_check(const json_t *tokens, struct fg_error *err)
{
    for (size_t i = 0; i < json_array_size(tokens); i++) {
        const char *token = json_string_value(json_array_get(tokens, i));
        if (token == NULL || strlen(token) >= TOKEN_MAX_LEN)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'tokens[%zu]' must be a token", i);
    }
    return 0;
}

size_t lockset_parse_tokens(const json_t *body, const char *out[LOCKSET_MAX])
{
    const json_t *tokens = json_object_get(body, "tokens");
    size_t n = json_array_size(tokens);
    for (size_t i = 0; i < n; i++)
        out[i] = json_string_value(json_array_get(tokens, i));
    return n;
}
