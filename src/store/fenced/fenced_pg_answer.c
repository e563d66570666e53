/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_pg_answer.c - from the answer rows of fenced Postgres statements to
 * struct fenced_result: the resource, its fence, the row as JSON; for a write
 * that wrote nothing, the verdict of its refusal statement (refused as stale
 * or revoked, row missing, row in the way, or worth another try). It must not
 * run statements or decide the HTTP answer.
 */
#include "store/fenced/fenced_pg_answer.h"

#include <stdlib.h>
#include <string.h>

#include "util/fgjson.h"

int64_t fenced_pg_answer_fence(const json_t *answer)
{
    const char *text = json_string_value(json_object_get(answer, "fence"));
    return text ? strtoll(text, NULL, 10) : 0;
}

/* The row of an answer as JSON (null if none); a row jansson cannot represent
 * (e.g. a numeric beyond double) is kept as its JSON text. */
static json_t *row_of(const json_t *answer)
{
    const char *text = json_string_value(json_object_get(answer, "row"));
    if (text == NULL)
        return json_null();
    json_t *row = fgjson_parse_flat(text, strlen(text)); /* the common row, read fast */
    if (row == NULL)
        row = json_loads(text, JSON_DECODE_ANY, NULL);
    return row ? row : json_string(text);
}

/* The resource of an answer (owned; "" if none). */
static char *resource_of(const json_t *answer)
{
    const char *text = json_string_value(json_object_get(answer, "resource"));
    char *resource = strdup(text ? text : "");
    FG_ASSERT(resource != NULL);
    return resource;
}

/* A boolean member of an answer row ("t" / "f"). */
static bool flag_of(const json_t *answer, const char *member)
{
    const char *text = json_string_value(json_object_get(answer, member));
    return text != NULL && strcmp(text, "t") == 0;
}

void fenced_pg_answer_applied(const json_t *answer, int64_t presented, struct fenced_result *res)
{
    fenced_result_free(res);
    res->outcome = FENCED_APPLIED;
    res->resource = resource_of(answer);
    res->fence = presented;
    res->after = row_of(answer);
}

enum fenced_verdict fenced_pg_answer_verdict(const json_t *answer, enum fenced_kind kind,
                                             int64_t presented, struct fenced_result *res)
{
    fenced_result_free(res);
    res->resource = resource_of(answer);
    res->fence = fenced_pg_answer_fence(answer);
    bool revoked = flag_of(answer, "revoked");
    if (revoked || res->fence > presented) {
        res->outcome = revoked ? FENCED_REVOKED : FENCED_STALE;
        return FENCED_VERDICT_REFUSED;
    }
    res->outcome = FENCED_STALE; /* not refused by a fence: the caller decides */
    if (!flag_of(answer, "found"))
        return fenced_kind_needs_row(kind) ? FENCED_VERDICT_MISSING : FENCED_VERDICT_RETRY;
    return kind == FENCED_POST ? FENCED_VERDICT_EXISTS : FENCED_VERDICT_RETRY;
}

void fenced_pg_answer_read(const json_t *answer, struct fenced_result *res)
{
    memset(res, 0, sizeof *res);
    res->outcome = FENCED_APPLIED;
    res->resource = resource_of(answer);
    res->fence = fenced_pg_answer_fence(answer);
    res->after = row_of(answer);
}

json_t *fenced_pg_answer_stale(const json_t *claimed, int64_t presented)
{
    json_t *stale = json_array();
    size_t i;
    const json_t *row;
    json_array_foreach(claimed, i, row)
    {
        int64_t current = fenced_pg_answer_fence(row);
        if (current > presented)
            json_array_append_new(stale, json_pack("{s:O, s:I}", "resource",
                                                   json_object_get(row, "resource"),
                                                   "current_fence", (json_int_t)current));
    }
    return stale;
}
