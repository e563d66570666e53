/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_lease.c - acquire, renew, release, status and revoke for any kind
 * of lease. The acquire itself, its waiting included, lives in
 * lease/lease_wait.c: the handler here parses the request, parks it when the
 * wait says so, and answers how the acquire ended. Tokens are signed here and verified before any
 * renew or release.
 */
#include "http/handlers_lease.h"

#include <stdlib.h>
#include <string.h>

#include "auth/keyset.h"
#include "fglimits.h"
#include "gateway.h"
#include "http/status_query.h"
#include "store/backend/secret.h"
#include "store/fenced/revocations.h"
#include "util/fgjson.h"
#include "util/log.h"

static const char *lease_name(const struct http_request *req)
{
    return req->match.params[0];
}

static enum handler_result fail(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem(reply, err);
    return HANDLER_DONE;
}

/* The object of a lease: {"lock": name or {"semaphore": name, then its fence
 * and times (lease_reply_grant, lease_reply_renewed); token: its signed
 * token, or NULL for none. */
static void lease_facts(struct fgjson_out *out, const struct lease_ops *kind, const char *name,
                        const char *token, int64_t fence, int64_t ttl_ms, int64_t expires_at_ms)
{
    fgjson_out_open_item(out);
    fgjson_out_str(out, kind->noun, name);
    if (token != NULL)
        fgjson_out_str(out, "token", token);
    fgjson_out_int(out, "fence", fence);
    fgjson_out_int(out, "ttl_ms", ttl_ms);
    fgjson_out_int(out, "expires_at_ms", expires_at_ms);
}

int lease_reply_grant(struct fgjson_out *out, const struct lease_ops *kind, const char *name,
                      const char *lease_id, int64_t fence, int64_t ttl_ms, int64_t expires_at_ms,
                      struct fg_error *err)
{
    struct token_claims claims = {.kind = kind->token_kind, .fence = fence};
    snprintf(claims.name, sizeof claims.name, "%.200s", name);
    snprintf(claims.lease_id, sizeof claims.lease_id, "%s", lease_id);
    char token[TOKEN_MAX_LEN];
    if (token_sign(&claims, secret_current(), token, sizeof token, err) != 0)
        return -1;
    lease_facts(out, kind, name, token, fence, ttl_ms, expires_at_ms);
    return 0;
}

void lease_reply_renewed(struct fgjson_out *out, const struct lease_ops *kind, const char *name,
                         const struct lease_result *res)
{
    lease_facts(out, kind, name, NULL, res->fence, res->ttl_ms, res->expires_at_ms);
    fgjson_out_int(out, "hold_until_ms", res->hold_until_ms);
}

void lease_reply_released(struct http_reply *reply)
{
    char buf[32];
    struct fgjson_out out;
    fgjson_out_init(&out, buf, sizeof buf);
    fgjson_out_open(&out);
    fgjson_out_member(&out, "released", json_true());
    reply_json_out(reply, 200, &out);
}

/* Room for the answer of a lease: its name, token and numbers (a longer one
 * moves to the heap). */
#define FACTS_BUF 1024

/* Holders a lock's revoke tries in turn while each ends as it runs. */
#define REVOKE_ATTEMPTS 4

static enum handler_result reply_granted(const struct lease_ops *kind, struct http_request *req,
                                         struct http_reply *reply, const struct lease_result *res)
{
    char buf[FACTS_BUF];
    struct fgjson_out out;
    struct fg_error err = {0};
    fgjson_out_init(&out, buf, sizeof buf);
    if (lease_reply_grant(&out, kind, lease_name(req), res->lease_id, res->fence, res->ttl_ms,
                          res->expires_at_ms, &err) != 0) {
        fgjson_out_free(&out);
        return fail(reply, &err);
    }
    reply_json_out(reply, 200, &out);
    return HANDLER_DONE;
}

static enum handler_result reply_busy(struct http_reply *reply, const struct lease_result *res,
                                      const char *detail)
{
    struct fg_error err;
    fg_fail(&err, FG_ERR_LOCK_BUSY, "%s", detail);
    reply_problem_extra(reply, &err, json_pack("{s:I}", "waiting", (json_int_t)res->waiting));
    return HANDLER_DONE;
}

/* Maps the final answer of an acquire to its reply. */
static enum handler_result reply_acquired(const struct lease_ops *kind, struct http_request *req,
                                          struct http_reply *reply, const struct lease_result *res)
{
    struct fg_error err;
    switch (res->outcome) {
    case LEASE_GRANTED: return reply_granted(kind, req, reply, res);
    case LEASE_BUSY: return reply_busy(reply, res, kind->busy_detail);
    case LEASE_QUEUED:
        return reply_busy(reply, res, "this request_id is waiting in the queue already");
    case LEASE_FULL:
        fg_fail(&err, FG_ERR_TOO_MANY_WAITERS, "the queue of this %s is full (%lld waiting)",
                kind->noun, res->waiting);
        return fail(reply, &err);
    case LEASE_MISMATCH:
        fg_fail(&err, FG_ERR_LIMIT_MISMATCH,
                "limit %lld is in force while the %s has holders or waiters", res->limit,
                kind->noun);
        reply_problem_extra(reply, &err, json_pack("{s:I}", "limit", (json_int_t)res->limit));
        return HANDLER_DONE;
    case LEASE_ENDED:
        fg_fail(&err, FG_ERR_LEASE_LOST, "the lease of this request_id has already ended");
        return fail(reply, &err);
    case LEASE_SUPERSEDED:
        fg_fail(&err, FG_ERR_CONFLICT, "a retry with the same request_id took this wait over");
        return fail(reply, &err);
    default:
        fg_fail(&err, FG_ERR_INTERNAL, "unexpected acquire outcome %d", (int)res->outcome);
        return fail(reply, &err);
    }
}

static void log_subject(const struct lease_ops *kind, struct http_request *req)
{
    http_request_log_subject(req, "%s:%.200s", kind->noun, lease_name(req));
}

/* lease_wait_free as the request state's destructor. */
static void free_wait(void *state)
{
    lease_wait_free(state);
}

/* A grant answered without a wait of its own, kept until the request ends in case its answer
 * cannot reach the client (give_back_sent). */
struct grant_sent {
    const struct lease_ops *kind;
    int64_t fence;
    bool keep; /* the acquire carried a request_id: its retry finds the grant */
    char lease_id[LEASE_ID_LEN + 1];
};

static void give_back_wait(struct http_request *req)
{
    lease_wait_give_back(req->state);
}

static void give_back_sent(struct http_request *req)
{
    const struct grant_sent *g = req->state;
    lease_give_back_unanswered(g->kind, lease_name(req), g->lease_id, "", g->fence, g->keep);
}

/* The grant res was answered: if the answer cannot reach the client, the server gives it back
 * through the request's wait, or without one through what is kept here (keep: the acquire
 * carried a request_id). */
static void arm_give_back(const struct lease_ops *kind, struct http_request *req,
                          const struct lease_result *res, bool keep)
{
    if (req->state != NULL) {
        req->give_back = give_back_wait;
        return;
    }
    struct grant_sent *g = calloc(1, sizeof *g);
    FG_ASSERT(g != NULL);
    *g = (struct grant_sent){.kind = kind, .fence = res->fence, .keep = keep};
    memcpy(g->lease_id, res->lease_id, sizeof g->lease_id);
    req->state = g;
    req->state_free = free;
    req->give_back = give_back_sent;
}

void lease_reply_wait_problem(struct http_reply *reply, const struct fg_error *err,
                              const struct lease_ops *kind, const char *name)
{
    char refused[NAME_MAX_LEN + 16] = "";
    if (err->code == FG_ERR_FORBIDDEN)
        snprintf(refused, sizeof refused, "%s:%s", kind->noun, name);
    reply_problem_scope(reply, err, refused);
}

/* Answers how an acquire ended (end), or parks it (step); keep: it carried a request_id. */
static enum handler_result answer_acquire(const struct lease_ops *kind, struct http_request *req,
                                          struct http_reply *reply, enum park_step step,
                                          const struct lease_wait_end *end, bool keep)
{
    if (step == PARK_STEP_PARK)
        return HANDLER_SUSPEND;
    if (end->err.code != FG_OK)
        lease_reply_wait_problem(reply, &end->err, kind, lease_name(req));
    else if (end->busy_detail != NULL)
        reply_busy(reply, &end->res, end->busy_detail);
    else
        reply_acquired(kind, req, reply, &end->res);
    if (step == PARK_STEP_HANGUP)
        return HANDLER_CLOSE;
    if (reply->status == 200)
        arm_give_back(kind, req, &end->res, keep);
    return HANDLER_DONE;
}

enum handler_result lease_handle_acquire(const struct lease_ops *kind, struct http_request *req,
                                         struct http_reply *reply)
{
    struct lease_wait_end end;
    if (req->state != NULL) /* its wait keeps whether it carried a request_id */
        return answer_acquire(kind, req, reply, lease_wait_run(req->state, &end), &end, false);
    struct fg_error err = {0};
    log_subject(kind, req);
    json_t *body = http_request_json(req, &err);
    struct acquire_params p;
    if (body == NULL || acquire_params_parse(body, gw.cfg, kind->with_limit, &p, &err) != 0)
        return fail(reply, &err);
    char rid[SCOPED_REQUEST_ID_MAX]; /* lease_wait_begin copies it */
    p.request_id = acquire_request_id_scoped(
        p.request_id, req->principal != NULL ? req->principal->id : NULL, rid);
    http_request_log_owner(req, p.owner);
    bool keep = p.request_id[0] != '\0'; /* p's strings go with the body */
    struct lease_wait *lw;
    struct waiter_client client = http_request_waiter_client(req);
    enum park_step step = lease_wait_begin(kind, lease_name(req), &p, &client, &lw, &end);
    if (lw != NULL) { /* the wait copied what it keeps of the body */
        http_request_drop_body(req);
        req->state = lw;
        req->state_free = free_wait;
    }
    return answer_acquire(kind, req, reply, step, &end, keep);
}

/* Verifies the token of a renew or release and that it is for this lease. */
static int verified_lease(const struct lease_ops *kind, const struct http_request *req,
                          const char *token, struct token_claims *claims, struct fg_error *err)
{
    if (token_verify(token, secret_current(), claims, err) != 0)
        return -1;
    if (claims->kind != (char)kind->token_kind || strcmp(claims->name, lease_name(req)) != 0)
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                       "the token was issued for another lock or semaphore");
    return 0;
}

void lease_reply_lost(struct http_reply *reply, int64_t fence, const char *detail, bool released,
                      json_t *extra)
{
    struct fg_error err, ignored = {0};
    bool revoked = false;
    char why[REVOCATION_REASON_MAX + 1];
    if (revocation_find(fence, &revoked, why, sizeof why, &ignored) != 0 || !revoked) {
        fg_fail(&err, FG_ERR_LEASE_LOST, "%s %s", detail,
                released ? "was released" : "expired or was taken over");
        if (released) {
            if (extra == NULL)
                extra = json_object();
            json_object_set_new(extra, "reason", json_string("released"));
        }
    } else {
        fg_fail(&err, FG_ERR_LEASE_LOST, "%s was revoked by an operator%s%s", detail,
                why[0] != '\0' ? ": " : "", why);
        if (extra == NULL)
            extra = json_object();
        json_object_set_new(extra, "reason", json_string("revoked"));
        json_object_set_new(extra, "revoke_reason", json_string(why));
    }
    reply_problem_extra(reply, &err, extra);
}

/* 410 for a renew or release (op) whose lease is gone, logged as a lost lease
 * (lease_reply_lost; released: it is known to have been released). */
static enum handler_result lease_lost(const struct lease_ops *kind, struct http_request *req,
                                      struct http_reply *reply, const char *op,
                                      const struct token_claims *claims, bool released)
{
    log_lease_lost(kind->noun, lease_name(req), op, claims->fence, req->client_addr);
    lease_reply_lost(reply, claims->fence, "the lease", released, NULL);
    return HANDLER_DONE;
}

enum lease_end lease_renewal_end(enum lease_kind kind, const char *name, int64_t fence,
                                 int64_t *hold_until_ms)
{
    struct lease_result res;
    struct fg_error ignored = {0};
    bool revoked = true;
    char why[REVOCATION_REASON_MAX + 1];
    if (lease_gone(kind, name, (long long)fence, &res, &ignored) != 0)
        return LEASE_END_UNKNOWN;
    if (res.outcome == LEASE_RELEASED)
        return LEASE_END_RELEASED;
    if (res.outcome != LEASE_MAX_HOLD ||
        revocation_find(fence, &revoked, why, sizeof why, &ignored) != 0 || revoked)
        return LEASE_END_UNKNOWN;
    *hold_until_ms = res.hold_until_ms;
    return LEASE_END_MAX_HOLD;
}

/* 409 max_hold_exceeded: the hold reached its deadline hold_until_ms. */
static enum handler_result max_hold_exceeded(struct http_reply *reply, int64_t hold_until_ms)
{
    struct fg_error err;
    fg_fail(&err, FG_ERR_MAX_HOLD_EXCEEDED, "the hold has reached its max_hold_ms deadline");
    reply_problem_extra(reply, &err,
                        json_pack("{s:I}", "hold_until_ms", (json_int_t)hold_until_ms));
    return HANDLER_DONE;
}

/* A renewal found its lease gone: 409 when it ended at its hold deadline (lease_renewal_end),
 * else what lease_lost answers. */
static enum handler_result renewal_gone(const struct lease_ops *kind, struct http_request *req,
                                        struct http_reply *reply, const struct token_claims *claims)
{
    int64_t hold_until_ms;
    enum lease_end end =
        lease_renewal_end(kind->token_kind, lease_name(req), claims->fence, &hold_until_ms);
    if (end == LEASE_END_MAX_HOLD)
        return max_hold_exceeded(reply, hold_until_ms);
    return lease_lost(kind, req, reply, "renew", claims, end == LEASE_END_RELEASED);
}

enum handler_result lease_handle_renew(const struct lease_ops *kind, struct http_request *req,
                                       struct http_reply *reply)
{
    struct fg_error err = {0};
    log_subject(kind, req);
    json_t *body = http_request_json(req, &err);
    struct renew_params p;
    struct token_claims claims;
    struct lease_result res;
    if (body != NULL)
        renew_params_read(body, &p);
    if (body == NULL || verified_lease(kind, req, p.token, &claims, &err) != 0 ||
        kind->renew(lease_name(req), claims.lease_id, p.ttl_ms, &res, &err) != 0)
        return fail(reply, &err);
    if (res.outcome == LEASE_LOST)
        return renewal_gone(kind, req, reply, &claims);
    if (res.outcome == LEASE_MAX_HOLD)
        return max_hold_exceeded(reply, res.hold_until_ms);
    char buf[FACTS_BUF];
    struct fgjson_out out;
    fgjson_out_init(&out, buf, sizeof buf);
    lease_reply_renewed(&out, kind, lease_name(req), &res);
    reply_json_out(reply, 200, &out);
    return HANDLER_DONE;
}

enum handler_result lease_handle_release(const struct lease_ops *kind, struct http_request *req,
                                         struct http_reply *reply)
{
    struct fg_error err = {0};
    log_subject(kind, req);
    json_t *body = http_request_json(req, &err);
    const char *token = NULL;
    struct token_claims claims;
    struct lease_result res;
    if (body != NULL)
        token = lease_request_token(body);
    if (body == NULL || verified_lease(kind, req, token, &claims, &err) != 0 ||
        kind->release(lease_name(req), claims.lease_id, (long long)claims.fence, &res, &err) != 0)
        return fail(reply, &err);
    if (res.outcome == LEASE_LOST)
        return lease_lost(kind, req, reply, "release", &claims, false);
    if (res.held_ms >= 0)
        metrics_hold_time(kind->metric, res.held_ms);
    lease_reply_released(reply);
    return HANDLER_DONE;
}

/* Reads and checks the query of req, a status request, into *q: every
 * parameter, whether or not it asks for a watch. */
static int status_query_read(const struct http_request *req, struct status_query *q,
                             struct fg_error *err)
{
    struct status_query_text text = {
        .watch = http_request_query(req, "watch"),
        .fence = http_request_query(req, "fence"),
        .wait_ms = http_request_query(req, "wait_ms"),
        .waiters = http_request_query(req, "waiters"),
    };
    return status_query_parse(&text, req->match.route->bounds, q, err);
}

enum handler_result lease_handle_status(const struct lease_ops *kind, struct http_request *req,
                                        struct http_reply *reply)
{
    if (req->state != NULL) /* a watch that was parked */
        return lease_watch_resume(req, reply);
    struct fg_error err = {0};
    struct status_query q;
    if (status_query_read(req, &q, &err) != 0)
        return fail(reply, &err);
    if (q.watch)
        return lease_watch_start(kind, req, reply, q.fence, q.wait_ms);
    json_t *status = NULL;
    if (kind->status(lease_name(req), q.waiters, &status, &err) != 0)
        return fail(reply, &err);
    reply_json(reply, 200, status);
    return HANDLER_DONE;
}

/* The fence a revoke names: a semaphore's body names it ("fence"), a lock's
 * is its current holder's (0 when nobody holds it, or when the body names the
 * fence of another lease than the holder's). */
static int revoke_target(const struct lease_ops *kind, const char *name, const json_t *body,
                         long long *fence, struct fg_error *err)
{
    const json_t *f = json_object_get(body, "fence");
    bool lock = kind->holder_fence != NULL;
    if ((f != NULL || !lock) && (!json_is_integer(f) || json_integer_value(f) < 1))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'fence' %s the fence of the holder to revoke (>= 1)",
                       lock ? "must be" : "is required:");
    if (lock) {
        if (kind->holder_fence(name, fence, err) != 0)
            return -1;
        if (f != NULL && json_integer_value(f) != *fence)
            *fence = 0;
        return 0;
    }
    *fence = json_integer_value(f);
    struct lease_watch seen;
    if (kind->watch(name, *fence, false, &seen, err) != 0)
        return -1;
    if (!seen.held)
        *fence = 0;
    return 0;
}

/* The reason of a revoke body, "" for none: the gateway has checked it against
 * the bounds of the route's description before the handler runs. */
static const char *revoke_reason(const json_t *body)
{
    const char *reason = json_string_value(json_object_get(body, "reason"));
    return reason != NULL ? reason : "";
}

/* How long a revoke waits for the writes in flight at its revocation: a
 * gateway's transaction is a statement, or a write group's or a batch's
 * statements, each within statement_timeout_ms, sent at once; a write under a
 * live lease asks Redis (request_timeout_ms) before its COMMIT, and sees the
 * revoke there if it came first. */
static int64_t revoke_drain_ms(void)
{
    return gw.cfg->statement_timeout_ms + gw.cfg->request_timeout_ms;
}

enum handler_result lease_handle_revoke(const struct lease_ops *kind, struct http_request *req,
                                        struct http_reply *reply)
{
    struct fg_error err = {0};
    log_subject(kind, req);
    json_t *body = http_request_json(req, &err);
    long long fence = 0;
    if (body == NULL || revoke_target(kind, lease_name(req), body, &fence, &err) != 0)
        return fail(reply, &err);
    const char *reason = revoke_reason(body);
    bool recorded = fence != 0, named = json_object_get(body, "fence") != NULL;
    for (int attempt = 0; fence != 0; attempt++) {
        /* The durable record first: the Redis mirror can always be rebuilt from it. */
        struct lease_result res;
        if (revocation_record(fence, kind->noun, lease_name(req), reason, &err) != 0 ||
            kind->revoke(lease_name(req), fence, &res, &err) != 0)
            return fail(reply, &err);
        if (res.outcome != LEASE_GONE)
            break;
        /* The lease ended as the revoke ran (a release, an expiry; its fence
         * stays revoked): a lock's revoke is of whoever holds it now, unless
         * it named a fence, a semaphore's of the holder it named. */
        if (kind->holder_fence == NULL || named || attempt + 1 == REVOKE_ATTEMPTS)
            fence = 0;
        else if (kind->holder_fence(lease_name(req), &fence, &err) != 0)
            return fail(reply, &err);
    }
    /* Once for every fence recorded above: no write of theirs commits after the answer. */
    if (recorded && revocation_drain(revoke_drain_ms(), &err) != 0)
        return fail(reply, &err);
    if (fence == 0) {
        reply_json(reply, 200, json_pack("{s:n}", "revoked_fence"));
        return HANDLER_DONE;
    }
    metrics_revocation(kind->metric);
    log_message(LOG_WARN, "lease_revoked", "%s %s: fence %lld revoked (%s)", kind->noun,
                lease_name(req), fence, reason[0] != '\0' ? reason : "no reason given");
    reply_json(reply, 200, json_pack("{s:I}", "revoked_fence", (json_int_t)fence));
    return HANDLER_DONE;
}
