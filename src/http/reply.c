/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reply.c - building replies and problem+json bodies. The title of each problem
 * is fixed per code, the detail says what exactly was wrong with this request.
 */
#include "http/reply.h"

#include <stdlib.h>
#include <string.h>

static const char *problem_title(enum fg_code code)
{
    switch (code) {
    case FG_ERR_INVALID_JSON: return "Request body is not valid JSON";
    case FG_ERR_INVALID_NAME: return "Invalid name";
    case FG_ERR_INVALID_FIELD: return "Invalid field";
    case FG_ERR_UNAUTHORIZED: return "Unauthorized";
    case FG_ERR_FORBIDDEN: return "Forbidden";
    case FG_ERR_INVALID_FENCE_TOKEN: return "Invalid fence token";
    case FG_ERR_NOT_FOUND: return "Not found";
    case FG_ERR_METHOD_NOT_ALLOWED: return "Method not allowed";
    case FG_ERR_LOCK_BUSY: return "Lock busy";
    case FG_ERR_STALE_FENCE: return "Stale fence";
    case FG_ERR_LIMIT_MISMATCH: return "Semaphore limit mismatch";
    case FG_ERR_MAX_HOLD_EXCEEDED: return "Maximum hold time exceeded";
    case FG_ERR_CONFLICT: return "Conflict";
    case FG_ERR_LEASE_LOST: return "Lease lost";
    case FG_ERR_BODY_TOO_LARGE: return "Request body too large";
    case FG_ERR_UNSUPPORTED_MEDIA_TYPE: return "Unsupported media type";
    case FG_ERR_MISDIRECTED_REQUEST: return "Misdirected request";
    case FG_ERR_TOO_MANY_WAITERS: return "Too many waiters";
    case FG_ERR_BACKEND_UNAVAILABLE: return "Backend unavailable";
    default: return "Internal error";
    }
}

json_t *problem_new(const struct fg_error *err)
{
    enum fg_code code = err->code == FG_OK ? FG_ERR_INTERNAL : err->code;
    char type[64];
    snprintf(type, sizeof type, "/problems/%s", fg_code_name(code));
    return json_pack("{s:s, s:s, s:i, s:s}", "type", type, "title", problem_title(code), "status",
                     fg_code_status(code), "detail", err->msg);
}

void reply_clear(struct http_reply *reply)
{
    json_decref(reply->body);
    free(reply->text);
    memset(reply, 0, sizeof *reply);
}

void reply_json(struct http_reply *reply, int status, json_t *body)
{
    reply_clear(reply);
    reply->status = status;
    reply->body = body;
}

void reply_problem_extra(struct http_reply *reply, const struct fg_error *err, json_t *extra)
{
    json_t *body = problem_new(err);
    if (extra != NULL) {
        json_object_update(body, extra);
        json_decref(extra);
    }
    reply_json(reply, json_integer_value(json_object_get(body, "status")), body);
    reply->problem = true;
    if (err->code == FG_ERR_BACKEND_UNAVAILABLE || err->code == FG_ERR_TOO_MANY_WAITERS)
        reply->retry_after_s = 1;
}

void reply_problem(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem_extra(reply, err, NULL);
}

void reply_text(struct http_reply *reply, int status, const char *content_type, char *text)
{
    reply_clear(reply);
    reply->status = status;
    reply->content_type = content_type;
    reply->text = text;
}

void reply_write_lease_lost(struct http_reply *reply, long long fence, const char *resource,
                            const char *reason)
{
    struct fg_error err;
    bool revoked = strcmp(reason, "revoked") == 0;
    fg_fail(&err, FG_ERR_LEASE_LOST, "the lease of fence %lld %s; nothing was written to %s", fence,
            revoked ? "was revoked" : "is no longer held", resource);
    reply_problem_extra(reply, &err,
                        json_pack("{s:I, s:s, s:s}", "presented_fence", (json_int_t)fence,
                                  "resource", resource, "reason", reason));
}
