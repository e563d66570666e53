/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reply.h - what a handler answers: a status, a JSON body and a few headers,
 * independent of the HTTP library. Errors become RFC 9457 problem+json bodies
 * through reply_problem, the one way a handler reports a failure.
 */
#ifndef FG_REPLY_H
#define FG_REPLY_H

#include <jansson.h>
#include <stdbool.h>

#include "util/error.h"
#include "util/fgjson.h"

struct http_reply {
    int status;               /* HTTP status code */
    json_t *body;             /* owned JSON body, or NULL for an empty body */
    enum fg_code problem;     /* FG_OK, or the code of an application/problem+json body */
    int retry_after_s;        /* Retry-After header in seconds, 0 for none */
    char *text;               /* owned non-JSON body (e.g. metrics), used when body is NULL */
    const char *content_type; /* content type of text (static string) */
    bool console;             /* a file of the operator console: sent with a strict CSP */
    const char *preference;   /* Preference-Applied header (static string), or NULL */
};

/* Sets a JSON reply; takes ownership of body (jansson "steals" it). */
void reply_json(struct http_reply *reply, int status, json_t *body);

/* Sets a problem+json reply for err: type /problems/<code>, title, status, detail. */
void reply_problem(struct http_reply *reply, const struct fg_error *err);

/* As reply_problem, adding the members of extra (stolen) to the problem body. */
void reply_problem_extra(struct http_reply *reply, const struct fg_error *err, json_t *extra);

/* As reply_problem; scope not "": err is the 403 forbidden of a scope the caller lacks
 * (api_key_permit), which the member scope names whole (detail may cut it). */
void reply_problem_scope(struct http_reply *reply, const struct fg_error *err, const char *scope);

/* 410 lease_lost for a fenced write refused because the lease of its token
 * (fence) no longer counts: reason "revoked" (an operator revoked it) or
 * "lease_expired" (require_live_lease found it no longer held). */
void reply_write_lease_lost(struct http_reply *reply, long long fence, const char *resource,
                            const char *reason);

/* Sets a JSON reply from the object being written in out, which it closes,
 * copies and frees: the fixed-shape replies of the request path, written
 * without building a jansson tree. */
void reply_json_out(struct http_reply *reply, int status, struct fgjson_out *out);

/* 204 No Content, with the Preference-Applied header preference (a static
 * string, RFC 7240) when not NULL. */
void reply_no_content(struct http_reply *reply, const char *preference);

/* Sets a plain-text style reply; takes ownership of text. */
void reply_text(struct http_reply *reply, int status, const char *content_type, char *text);

/* Frees what reply owns and resets it. */
void reply_clear(struct http_reply *reply);

/* Builds the problem body for err (new reference, never NULL): a detail with
 * bytes that are not UTF-8 has U+FFFD in their place. */
json_t *problem_new(const struct fg_error *err);

#endif
