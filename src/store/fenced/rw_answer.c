/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rw_answer.c - from the JSON answer of a fenced Redis write script to struct
 * rw_result: which outcome, and the facts that come with it (the fence stored,
 * the fence that refused the write, the key's type, the hash's size). It must
 * not run scripts or decide what a client is answered.
 */
#include "store/fenced/rw_answer.h"

#include <stdio.h>
#include <string.h>

#include "util/fgjson.h"

static const char *string_member(const json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));
    return s != NULL ? s : "";
}

bool rw_answer_norevoked(const json_t *answer)
{
    return strcmp(string_member(answer, "r"), "norevoked") == 0;
}

/* What an applied write stored: its "value", "fields" or "deleted" member. */
static json_t *after_of(const json_t *answer)
{
    static const char *const members[] = {"value", "fields", "deleted"};
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        json_t *after = json_object_get(answer, members[i]);
        if (after != NULL)
            return json_incref(after);
    }
    return NULL;
}

int rw_answer_read(const char *script, const json_t *answer, struct rw_result *res,
                   struct fg_error *err)
{
    const char *r = string_member(answer, "r");
    memset(res, 0, sizeof *res);
    res->outcome = fenced_outcome_named(r);
    switch (res->outcome) {
    case FENCED_APPLIED:
        res->fence = fgjson_answer_int(answer, "fence", 0);
        res->after = after_of(answer);
        return 0;
    case FENCED_STALE:
    case FENCED_REVOKED:
        res->current_fence = fgjson_answer_int(answer, "current", 0);
        res->at_ms = fgjson_answer_int(answer, "at_ms", 0);
        snprintf(res->audit_id, sizeof res->audit_id, "%s", string_member(answer, "audit_id"));
        return 0;
    case FENCED_TOO_MANY: res->hash_fields = fgjson_answer_int(answer, "fields", 0); return 0;
    case FENCED_WRONGTYPE:
        snprintf(res->type, sizeof res->type, "%s", string_member(answer, "type"));
        return 0;
    case FENCED_NOFLOOR:
    case FENCED_MISSING: return 0;
    case FENCED_EXPIRED:
    case FENCED_OUTCOME_COUNT: break;
    }
    return fg_fail(err, FG_ERR_INTERNAL, "%s answered '%s'", script, r);
}

void rw_result_clear(struct rw_result *res)
{
    json_decref(res->after);
    res->after = NULL;
}
