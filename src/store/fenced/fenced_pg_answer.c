/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_pg_answer.c - from the answer rows of fenced Postgres statements to
 * struct fenced_result: the resource, its fence, the row's JSON text (never
 * read into jansson, whose doubles would round its numbers); for a write
 * that wrote nothing, the verdict of its refusal statement (refused as stale
 * or revoked, row missing, row in the way, or worth another try) and what its
 * judged form did (wrote, skipped by a trigger of the table, or nothing). It
 * must not run statements or decide the HTTP answer.
 */
#include "store/fenced/fenced_pg_answer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/fenced/row_json.h"
#include "util/fgjson.h"

/* The stack buffer a written row's text starts in; a longer one moves to the heap. */
#define ROW_TEXT_FIRST_BUFFER 512

int64_t fenced_pg_answer_fence(const json_t *answer)
{
    const char *text = json_string_value(json_object_get(answer, "fence"));
    return text ? strtoll(text, NULL, 10) : 0;
}

/* The row of a read's answer (its member row, row_to_json's text; owned), or
 * NULL when there is none. */
static char *row_of(const json_t *answer)
{
    const char *text = json_string_value(json_object_get(answer, "row"));
    if (text == NULL)
        return NULL;
    char *row = strdup(text);
    FG_ASSERT(row != NULL);
    return row;
}

/* The row of a write's answer on table s (NULL: no answer row), as JSON text
 * (owned): its members c0 (the key; key, the canonical key written, where the
 * statement does not return it), c1, ... (the listed columns), written as
 * row_to_json would (row_json.h). */
static char *written_row(const json_t *answer, const struct table_schema *s, const char *key)
{
    size_t n = s->cfg->ncolumns + 1;
    const char *names[n], *texts[n];
    for (size_t i = 0; i < n; i++) {
        char member[24];
        snprintf(member, sizeof member, "c%zu", i);
        names[i] = i == 0 ? s->cfg->key : s->cfg->columns[i - 1];
        const json_t *text = json_object_get(answer, member);
        texts[i] = i == 0 && text == NULL ? key : json_string_value(text);
    }
    char first[ROW_TEXT_FIRST_BUFFER];
    struct fgjson_out text;
    fgjson_out_init(&text, first, sizeof first);
    row_json_write(&text, names, texts, s->row_kinds, n);
    return fgjson_out_take(&text);
}

/* The resource of an answer (owned), or absent, if_none. */
static char *resource_of(const json_t *answer, const char *if_none)
{
    const char *text = json_string_value(json_object_get(answer, "resource"));
    if (text == NULL && if_none == NULL)
        return NULL;
    char *resource = strdup(text ? text : if_none);
    FG_ASSERT(resource != NULL);
    return resource;
}

/* A boolean member of an answer row ("t" / "f"). */
static bool flag_of(const json_t *answer, const char *member)
{
    const char *text = json_string_value(json_object_get(answer, member));
    return text != NULL && strcmp(text, "t") == 0;
}

void fenced_pg_answer_applied(const json_t *answer, const struct table_schema *s, const char *key,
                              bool with_row, int64_t presented, struct fenced_result *res)
{
    fenced_result_free(res);
    res->outcome = FENCED_APPLIED;
    res->resource = resource_of(answer, NULL); /* the caller names it from the key if none */
    res->fence = presented;
    res->after = with_row ? written_row(answer, s, key) : NULL;
}

enum fenced_verdict fenced_pg_answer_verdict(const json_t *answer, enum fenced_kind kind,
                                             int64_t presented, struct fenced_result *res)
{
    fenced_result_free(res);
    res->resource = resource_of(answer, "");
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

enum fenced_judged fenced_pg_answer_judged(const json_t *answer)
{
    if (flag_of(answer, "wrote"))
        return FENCED_JUDGED_WROTE;
    return flag_of(answer, "skipped") ? FENCED_JUDGED_SKIPPED : FENCED_JUDGED_NOTHING;
}

void fenced_pg_answer_read(const json_t *answer, struct fenced_result *res)
{
    memset(res, 0, sizeof *res);
    res->outcome = FENCED_APPLIED;
    res->resource = resource_of(answer, "");
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
