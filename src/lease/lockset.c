/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lockset.c - names, request ids and tokens of lock sets. The global order is
 * bytewise ascending order of names: every set takes its locks in it, so no two
 * sets ever wait for each other in a cycle. It must not talk to Redis or know
 * of waiting connections.
 */
#include "lease/lockset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/token.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

int lockset_parse_names(const json_t *body, struct lockset *out, struct fg_error *err)
{
    memset(out, 0, sizeof *out);
    const json_t *names = json_object_get(body, "names");
    size_t n = json_array_size(names);
    if (!json_is_array(names) || n == 0 || n > LOCKSET_MAX)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'names' must be an array of 1 to %d lock names", LOCKSET_MAX);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(names, i);
        const char *name = json_string_value(v);
        if (name == NULL)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'names[%zu]' must be a string", i);
        if (!name_is_valid_lock(name, json_string_length(v)))
            return fg_fail(err, FG_ERR_INVALID_NAME,
                           "field 'names[%zu]': 1 to %d bytes of A-Z a-z 0-9 . _ : / -", i,
                           NAME_MAX_LEN);
        snprintf(out->names[i], sizeof out->names[i], "%s", name);
    }
    char asked[LOCKSET_MAX][NAME_MAX_LEN + 1];
    memcpy(asked, out->names, sizeof asked);
    qsort(out->names, n, sizeof out->names[0], by_name);
    for (size_t i = 0; i + 1 < n; i++)
        if (strcmp(out->names[i], out->names[i + 1]) == 0)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'names' names lock '%s' twice",
                           out->names[i]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (strcmp(out->names[i], asked[j]) == 0)
                out->asked_at[i] = j;
    out->n = n;
    return 0;
}

void lockset_request_id(const char *rid, const char *name, char out[LOCKSET_RID_MAX])
{
    if (rid[0] == '\0')
        out[0] = '\0';
    else
        snprintf(out, LOCKSET_RID_MAX, "set:%s#%s", rid, name);
}

int lockset_parse_tokens(const json_t *body, const char *out[LOCKSET_MAX], size_t *n,
                         struct fg_error *err)
{
    const json_t *tokens = json_object_get(body, "tokens");
    *n = json_array_size(tokens);
    if (!json_is_array(tokens) || *n == 0 || *n > LOCKSET_MAX)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'tokens' must be an array of 1 to %d tokens", LOCKSET_MAX);
    for (size_t i = 0; i < *n; i++) {
        out[i] = json_string_value(json_array_get(tokens, i));
        if (out[i] == NULL || strlen(out[i]) >= TOKEN_MAX_LEN)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'tokens[%zu]' must be a token", i);
    }
    return 0;
}
