/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_write.c - the one path of a fenced write through the HTTP layer,
 * shared by the Postgres and Redis front ends: the writer's headers checked
 * the same way, the token's binding to the resource, and each outcome answered,
 * logged, counted and audited the same way. It must not know how either store
 * checks a fence or reads a body.
 *
 * A client that asks for Prefer: return=minimal (RFC 7240, as PostgREST reads
 * it) as its first return preference gets 204 for an applied write, whose
 * row is then not read back.
 */
#include "http/fenced_write.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "auth/keyset.h"
#include "http/prefer.h"
#include "lease/binding.h"
#include "lease/fence.h"
#include "lease/live.h"
#include "store/audit/audit_stream.h"
#include "store/backend/secret.h"
#include "store/fenced/fenced_owner.h"
#include "util/fgjson.h"
#include "util/log.h"

/* Room for the reply of an applied write with a common row (a larger one
 * moves to the heap). */
#define APPLIED_BUF 4096

#define HEADER_OWNER   "Fence-Owner"
#define HEADER_PREFER  "Prefer"
#define PREFER_MINIMAL "return=minimal"

int fenced_write_writer(struct http_request *req, enum metric_backend backend,
                        struct token_claims *claims, struct fenced_writer *who,
                        struct fg_error *err)
{
    const char *value = http_request_header(req, HTTP_HEADER_FENCE_TOKEN);
    size_t len = value != NULL ? strict_value_len(value) : 0;
    char token[TOKEN_MAX_LEN + 1];
    snprintf(token, sizeof token, "%.*s", (int)(len < sizeof token ? len : sizeof token - 1),
             len > 0 ? value : "");
    if (len == 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "header '" HTTP_HEADER_FENCE_TOKEN
                       "' is required: the token of the lease that "
                       "fences this write");
    if (token_verify(token, secret_current(), claims, err) != 0 ||
        fence_check_issued((enum lease_kind)claims->kind, claims->name, claims->fence, err) != 0) {
        metrics_fenced_write(backend, METRIC_WRITE_INVALID);
        return -1;
    }
    const char *owner = http_request_header(req, HEADER_OWNER);
    if (fenced_owner_check(owner, err) != 0)
        return -1;
    *who = (struct fenced_writer){
        .owner = owner,
        .client_addr = req->client_addr,
        .principal = req->principal != NULL ? req->principal->id : NULL,
        .trace_id = req->trace_id[0] != '\0' ? req->trace_id : NULL,
        .claims = claims,
        .lease_check = lease_live_look,
    };
    if (owner != NULL)
        http_request_log_owner(req, owner);
    return 0;
}

int fenced_write_bound(enum metric_backend backend, const struct resource_guard *guard,
                       const char *key, const struct token_claims *claims, const char *resource,
                       struct fg_error *err)
{
    if (binding_check(guard, key, claims, resource, err) == 0)
        return 0;
    metrics_fenced_write(backend, METRIC_WRITE_INVALID);
    return -1;
}

/* 409 stale_fence: both fences and the resource, and every stale resource of a batch. A
 * fence below Redis's write floor is told as such: the floor is no fence stored for the
 * key, and its lease may still hold (a restart that kept the lease's records). */
static void reply_stale(struct http_reply *reply, const struct fenced_writer *who,
                        const struct fenced_result *r, const char *method)
{
    struct fg_error err;
    log_stale_write(r->resource, who->claims->name, who->claims->fence, r->fence, method,
                    who->client_addr);
    if (r->below_floor)
        fg_fail(&err, FG_ERR_STALE_FENCE,
                "fence %" PRId64 " is below the write floor %" PRId64
                " of Redis keys, raised when Redis restarted or lost data: tokens issued before it "
                "are refused on %s and every Redis key; acquire again",
                who->claims->fence, r->fence, r->resource);
    else
        fg_fail(&err, FG_ERR_STALE_FENCE,
                "fence %" PRId64 " is older than fence %" PRId64 " stored for %s",
                who->claims->fence, r->fence, r->resource);
    json_t *extra =
        json_pack("{s:I, s:I, s:o}", "presented_fence", (json_int_t)who->claims->fence,
                  "current_fence", (json_int_t)r->fence, "resource", fgjson_string(r->resource));
    if (r->stale != NULL)
        json_object_set(extra, "stale", (json_t *)r->stale);
    reply_problem_extra(reply, &err, extra);
}

void fenced_write_refused(struct http_reply *reply, enum metric_backend backend,
                          const struct fenced_writer *who, const struct fenced_result *refused,
                          const char *method)
{
    const char *reason = fenced_outcome_reason(refused->outcome);
    FG_ASSERT(reason != NULL);
    metrics_fenced_write(backend, metrics_write_refused(reason));
    if (refused->audit_streamed)
        audit_stream_poke(refused->audit_slot);
    else
        metrics_audit_written(reason);
    if (refused->outcome == FENCED_STALE)
        reply_stale(reply, who, refused, method);
    else
        reply_write_lease_lost(reply, (long long)who->claims->fence, refused->resource, reason);
}

/* True if a Prefer line names a return preference: the first line that does
 * decides, a later one is a second instance of it (RFC 7240 2). */
static bool names_return(const char *value)
{
    return prefer_return_of(value) != PREFER_RETURN_NONE;
}

bool fenced_write_wants_row(const struct http_request *req)
{
    const char *line = http_request_header_first(req, HEADER_PREFER, names_return);
    return prefer_return_of(line) != PREFER_RETURN_MINIMAL;
}

void fenced_write_applied_minimal(struct http_reply *reply, enum metric_backend backend)
{
    metrics_fenced_write(backend, METRIC_WRITE_APPLIED);
    reply_no_content(reply, PREFER_MINIMAL);
}

void fenced_write_applied(struct http_reply *reply, enum metric_backend backend, int status,
                          const char *resource, long long fence, const char *member,
                          const char *after)
{
    metrics_fenced_write(backend, METRIC_WRITE_APPLIED);
    char buf[APPLIED_BUF];
    struct fgjson_out out;
    fgjson_out_init(&out, buf, sizeof buf);
    fgjson_out_open(&out);
    fgjson_out_member(&out, "applied", json_true());
    if (resource != NULL)
        fgjson_out_str(&out, "resource", resource);
    fgjson_out_int(&out, "fence", fence);
    fgjson_out_json(&out, member, after);
    reply_json_out(reply, status, &out);
}
