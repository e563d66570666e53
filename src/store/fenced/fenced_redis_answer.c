/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_redis_answer.c - from the JSON answer of a fenced Redis write script
 * to struct fenced_result: which outcome, and the facts that come with it (the
 * fence stored, the fence that refused the write); an answer that took no
 * write (the key's type, a hash over its limit, a missing key, no write floor)
 * becomes the error the client is answered with. It must not run scripts.
 */
#include "store/fenced/fenced_redis_answer.h"

#include <stdlib.h>
#include <string.h>

#include "util/fgjson.h"

static const char *string_member(const json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));
    return s != NULL ? s : "";
}

static bool answered(const json_t *answer, const char *outcome)
{
    return strcmp(string_member(answer, "r"), outcome) == 0;
}

bool fenced_redis_answer_norevoked(const json_t *answer)
{
    return answered(answer, "norevoked");
}

bool fenced_redis_answer_nofloor(const json_t *answer)
{
    return answered(answer, "nofloor");
}

bool fenced_redis_answer_elsewhere(const json_t *answer)
{
    return answered(answer, "elsewhere");
}

bool fenced_redis_answer_ended(const json_t *answer)
{
    return answered(answer, "ended");
}

bool fenced_redis_answer_nolook(const json_t *answer)
{
    return answered(answer, "nolook");
}

/* The error of an answer that took no write. */
static int not_taken(const char *script, const json_t *answer, const char *resource,
                     struct fg_error *err)
{
    const char *r = string_member(answer, "r");
    if (strcmp(r, "wrongtype") == 0)
        return fg_fail(err, FG_ERR_CONFLICT, "%s holds a %.15s, not a %.20s", resource,
                       string_member(answer, "type"), string_member(answer, "want"));
    if (strcmp(r, "toomany") == 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'fields': the hash would hold %lld fields, over "
                       "limits.max_hash_fields (%lld)",
                       (long long)fgjson_answer_int(answer, "fields", 0),
                       (long long)fgjson_answer_int(answer, "max", 0));
    if (strcmp(r, "missing") == 0)
        return fg_fail(err, FG_ERR_NOT_FOUND, "no such key");
    if (strcmp(r, "nofloor") == 0)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                       "Redis lost its data and the fence sequence is not recovered yet");
    if (strcmp(r, "elsewhere") == 0)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                       "the Redis Cluster's slots keep moving; try again");
    if (strcmp(r, "ended") == 0 || strcmp(r, "nolook") == 0)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                       "whether the write's lease holds could not be told; try again");
    if (strcmp(r, "norevoked") == 0)
        return fg_fail(
            err, FG_ERR_BACKEND_UNAVAILABLE,
            "the revoked fences could not be rebuilt where the key is (a Redis Cluster's "
            "slots moving); try again");
    return fg_fail(err, FG_ERR_INTERNAL, "%s answered '%s'", script, r);
}

int fenced_redis_answer_read(const char *script, const json_t *answer, const char *resource,
                             struct fenced_result *res, struct fg_error *err)
{
    memset(res, 0, sizeof *res);
    if (answered(answer, "applied")) {
        res->outcome = FENCED_APPLIED;
        res->fence = fgjson_answer_int(answer, "fence", 0);
    } else if (answered(answer, "stale") || answered(answer, "revoked")) {
        res->outcome = answered(answer, "stale") ? FENCED_STALE : FENCED_REVOKED;
        res->fence = fgjson_answer_int(answer, "current", 0);
        res->below_floor = json_is_true(json_object_get(answer, "below_floor"));
        res->audit_streamed = true;
    } else {
        return not_taken(script, answer, resource, err);
    }
    res->resource = strdup(resource);
    FG_ASSERT(res->resource != NULL);
    return 0;
}
