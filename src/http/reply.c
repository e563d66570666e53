/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reply.c - building replies and problem+json bodies. The type, title, status
 * and Retry-After of each problem are fixed per code (FG_CODES, util/error.h);
 * the detail says what exactly was wrong with this request. A problem body is
 * never lost: its texts of a client's making (the detail, a resource) are
 * taken as fgjson_string takes them, never refused for a byte that is not
 * UTF-8.
 */
#include "http/reply.h"

#include <stdlib.h>
#include <string.h>

/* The code a problem reply for err carries: an unset error is a bug, answered
 * as internal. */
static enum fg_code problem_code(const struct fg_error *err)
{
    return err->code == FG_OK ? FG_ERR_INTERNAL : err->code;
}

json_t *problem_new(const struct fg_error *err)
{
    enum fg_code code = problem_code(err);
    char type[64];
    snprintf(type, sizeof type, "/problems/%s", fg_code_name(code));
    json_t *body = json_pack("{s:s, s:s, s:i, s:o}", "type", type, "title", fg_code_title(code),
                             "status", fg_code_status(code), "detail", fgjson_string(err->msg));
    FG_ASSERT(body != NULL);
    return body;
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
    enum fg_code code = problem_code(err);
    json_t *body = problem_new(err);
    if (extra != NULL) {
        json_object_update(body, extra);
        json_decref(extra);
    }
    reply_json(reply, fg_code_status(code), body);
    reply->problem = code;
    reply->retry_after_s = fg_code_retry_after(code);
}

void reply_problem(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem_extra(reply, err, NULL);
}

void reply_problem_scope(struct http_reply *reply, const struct fg_error *err, const char *scope)
{
    if (scope[0] == '\0')
        reply_problem(reply, err);
    else
        reply_problem_extra(reply, err, json_pack("{s:o}", "scope", fgjson_string(scope)));
}

void reply_text(struct http_reply *reply, int status, const char *content_type, char *text)
{
    reply_clear(reply);
    reply->status = status;
    reply->content_type = content_type;
    reply->text = text;
}

void reply_no_content(struct http_reply *reply, const char *preference)
{
    reply_clear(reply);
    reply->status = 204;
    reply->preference = preference;
}

void reply_json_out(struct http_reply *reply, int status, struct fgjson_out *out)
{
    fgjson_out_close(out);
    reply_text(reply, status, "application/json", fgjson_out_take(out));
}

void reply_write_lease_lost(struct http_reply *reply, long long fence, const char *resource,
                            const char *reason)
{
    struct fg_error err;
    bool revoked = strcmp(reason, "revoked") == 0;
    fg_fail(&err, FG_ERR_LEASE_LOST, "the lease of fence %lld %s; nothing was written to %s", fence,
            revoked ? "was revoked" : "is no longer held", resource);
    reply_problem_extra(reply, &err,
                        json_pack("{s:I, s:o, s:s}", "presented_fence", (json_int_t)fence,
                                  "resource", fgjson_string(resource), "reason", reason));
}
