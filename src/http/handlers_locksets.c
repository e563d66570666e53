/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_locksets.c - lock sets: POST /v1/locksets/acquire, /renew and
 * /release. The acquire and its wait are lease/lockset_wait.c's: the handler
 * parses the body, checks the scopes, parks the request when told to and
 * signs the tokens of a set that is held. Renew and release take every token
 * of the set.
 */
#include "http/handlers_locksets.h"

#include <stdlib.h>
#include <string.h>

#include "auth/keyset.h"
#include "fglimits.h"
#include "gateway.h"
#include "http/handlers_lease.h"
#include "http/strict.h"
#include "lease/lock.h"
#include "lease/lockset.h"
#include "lease/lockset_wait.h"
#include "store/backend/secret.h"
#include "util/fgjson.h"

/* The room for the scope of a lock, "lock:<name>". */
#define LOCK_SCOPE_MAX (NAME_MAX_LEN + 8)

static enum handler_result fail(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem(reply, err);
    return HANDLER_DONE;
}

/* fail, naming in the member scope the scope refused (LOCK_SCOPE_MAX bytes; "": the
 * failure was another). */
static enum handler_result fail_scope(struct http_reply *reply, const struct fg_error *err,
                                      const char *refused)
{
    reply_problem_scope(reply, err, refused);
    return HANDLER_DONE;
}

static void free_set(void *state)
{
    lockset_wait_free(state);
}

/* Room for a set's answer before it moves to the heap. */
#define SET_BUF 4096

/* Opens a set's answer, {"locks": [, in out over buf (SET_BUF bytes). */
static void set_begin(struct fgjson_out *out, char *buf)
{
    fgjson_out_init(out, buf, SET_BUF);
    fgjson_out_open(out);
    fgjson_out_open_array(out, "locks");
}

/* Closes the set's answer of out and makes it the reply. */
static void set_end(struct fgjson_out *out, struct http_reply *reply)
{
    fgjson_out_close_array(out);
    reply_json_out(reply, 200, out);
}

/* Every lock is held: signs the tokens and answers them in request order. */
static enum handler_result reply_set(struct lockset_wait *ls, struct http_reply *reply)
{
    struct fg_error err = {0};
    char buf[SET_BUF];
    struct fgjson_out out;
    set_begin(&out, buf);
    for (size_t k = 0; k < ls->set.n; k++) {
        size_t i = lockset_asked(&ls->set, k);
        if (lease_reply_grant(&out, &lease_lock_ops, ls->set.names[i], ls->leases[i],
                              ls->held[i].fence, ls->params.ttl_ms, ls->held[i].expires_at_ms,
                              &err) != 0) {
            fgjson_out_free(&out);
            return fail(reply, &err);
        }
        fgjson_out_close(&out);
    }
    set_end(&out, reply);
    return HANDLER_DONE;
}

/* lockset_wait_give_back as the request's give-back (server.h). */
static void give_back_set(struct http_request *req)
{
    lockset_wait_give_back(req->state);
}

/* The members of a refusal naming ls's failed lock: "lock", and "waiting" when its queue's length
 * is known. */
static json_t *failed_lock_members(const struct lockset_wait *ls)
{
    if (ls->waiting < 0)
        return json_pack("{s:s}", "lock", ls->failed_lock);
    return json_pack("{s:s, s:I}", "lock", ls->failed_lock, "waiting", (json_int_t)ls->waiting);
}

/* Writes the answer of req's set ls after step, the engine's problem if set (or parks it). */
static enum handler_result answer(struct http_request *req, struct lockset_wait *ls,
                                  struct http_reply *reply, enum park_step step,
                                  const struct fg_error *problem)
{
    enum handler_result done = step == PARK_STEP_HANGUP ? HANDLER_CLOSE : HANDLER_DONE;
    if (step == PARK_STEP_PARK)
        return HANDLER_SUSPEND;
    char refused[LOCK_SCOPE_MAX] = "";
    if (problem->code == FG_ERR_FORBIDDEN && ls->denied_lock != NULL)
        snprintf(refused, sizeof refused, "lock:%s", ls->denied_lock);
    if (problem->code != FG_OK)
        fail_scope(reply, problem, refused);
    else if (ls->err.code != FG_OK && ls->failed_lock != NULL)
        reply_problem_extra(reply, &ls->err, failed_lock_members(ls));
    else if (ls->err.code != FG_OK)
        fail(reply, &ls->err);
    else if (reply_set(ls, reply) == HANDLER_DONE && reply->status == 200)
        req->give_back = give_back_set;
    return done;
}

/* Checks that the caller may use every lock named (auth scopes), in the order of names (the
 * request's). refused (LOCK_SCOPE_MAX bytes): the scope of the first it may not, "" for none. */
static int permit_locks(const struct http_request *req, const char *const *names, size_t n,
                        char *refused, struct fg_error *err)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(refused, LOCK_SCOPE_MAX, "lock:%s", names[i]);
        if (http_request_permit(req, refused, err) != 0)
            return -1;
    }
    refused[0] = '\0';
    return 0;
}

enum handler_result handle_lockset_acquire(struct http_request *req, struct http_reply *reply)
{
    struct fg_error problem;
    if (req->state != NULL)
        return answer(req, req->state, reply, lockset_wait_run(req->state, &problem), &problem);
    struct fg_error err = {0};
    http_request_log_subject(req, "lockset");
    json_t *body = http_request_json(req, &err);
    struct lockset_wait *ls = calloc(1, sizeof *ls);
    FG_ASSERT(ls != NULL);
    const char *names[LOCKSET_MAX]; /* in the request's order */
    char refused[LOCK_SCOPE_MAX] = "";
    if (body != NULL)
        lockset_parse_names(body, &ls->set);
    if (body == NULL || acquire_params_parse(body, gw.cfg, false, &ls->params, &err) != 0 ||
        token_new_lease_id(ls->attach, &err) != 0)
        goto refused;
    char scoped[SCOPED_REQUEST_ID_MAX];
    const char *rid = acquire_request_id_scoped(
        ls->params.request_id, req->principal != NULL ? req->principal->id : NULL, scoped);
    lockset_request_ids(rid, &ls->set, ls->rids);
    for (size_t i = 0; i < ls->set.n; i++) {
        names[ls->set.asked_at[i]] = ls->set.names[i];
        if (token_new_lease_id(ls->leases[i], &err) != 0)
            goto refused;
    }
    if (permit_locks(req, names, ls->set.n, refused, &err) != 0)
        goto refused;
    http_request_log_subject(req, "lockset:%.200s", ls->set.names[0]);
    http_request_log_owner(req, ls->params.owner);
    req->state = ls;
    req->state_free = free_set;
    struct waiter_client client = http_request_waiter_client(req);
    return answer(req, ls, reply, lockset_wait_begin(ls, &client, &problem), &problem);
refused:
    free(ls);
    return fail_scope(reply, &err, refused);
}

/* Verified claims of every token of a renew or release body, all of locks, which the caller
 * may use (refused as permit_locks'). */
static int set_claims(struct http_request *req, const json_t *body,
                      struct token_claims claims[LOCKSET_MAX], size_t *n, char *refused,
                      struct fg_error *err)
{
    const char *tokens[LOCKSET_MAX], *names[LOCKSET_MAX];
    *n = lockset_parse_tokens(body, tokens);
    for (size_t i = 0; i < *n; i++) {
        if (token_verify(tokens[i], secret_current(), &claims[i], err) != 0)
            return -1;
        if (claims[i].kind != LEASE_KIND_LOCK)
            return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                           "tokens[%zu] was issued for a semaphore, not a lock", i);
        names[i] = claims[i].name;
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[j], names[i]) == 0)
                return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'tokens' names lock '%s' twice",
                               names[i]);
    }
    http_request_log_subject(req, "lockset:%.200s", claims[0].name);
    return permit_locks(req, names, *n, refused, err);
}

/* 410 for a renew or release of a set whose lock of lost is no longer held (ndone of the
 * others were done: the text done): member lock, and how the lease ended
 * (lease_reply_lost; released: it is known to have been released). out: the answer begun,
 * freed, or NULL. */
static enum handler_result set_lost(struct http_reply *reply, struct fgjson_out *out,
                                    const struct token_claims *lost, bool released, size_t ndone,
                                    const char *done)
{
    if (out != NULL)
        fgjson_out_free(out);
    char detail[NAME_MAX_LEN + 64];
    snprintf(detail, sizeof detail, "%s %s; the lease of lock '%s' of the set",
             ndone > 0 ? "the others were" : "no other lock was", done, lost->name);
    lease_reply_lost(reply, lost->fence, detail, released, json_pack("{s:s}", "lock", lost->name));
    return HANDLER_DONE;
}

enum handler_result handle_lockset_renew(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    json_t *body = http_request_json(req, &err);
    struct token_claims claims[LOCKSET_MAX];
    size_t n = 0;
    long long ttl_ms = 0;
    char refused[LOCK_SCOPE_MAX] = "";
    const struct member_bound *ttl = strict_bound(req->match.route->bounds, "ttl_ms");
    if (body == NULL || set_claims(req, body, claims, &n, refused, &err) != 0 ||
        fgjson_int(body, "ttl_ms", ttl->min, ttl->max, &ttl_ms, NULL, &err) != 0)
        return fail_scope(reply, &err, refused);
    char buf[SET_BUF];
    struct fgjson_out out;
    set_begin(&out, buf);
    const struct token_claims *lost = NULL;
    bool lost_released = false;
    const char *capped = NULL;
    size_t renewed = 0;
    for (size_t i = 0; i < n; i++) {
        struct lease_result res;
        if (lock_renew(claims[i].name, claims[i].lease_id, ttl_ms, &res, &err) != 0) {
            fgjson_out_free(&out);
            return fail(reply, &err);
        }
        int64_t hold_until_ms;
        enum lease_end end = LEASE_END_UNKNOWN;
        if (res.outcome == LEASE_LOST)
            end =
                lease_renewal_end(LEASE_KIND_LOCK, claims[i].name, claims[i].fence, &hold_until_ms);
        if (end == LEASE_END_MAX_HOLD)
            res.outcome = LEASE_MAX_HOLD;
        if (res.outcome == LEASE_LOST && lost == NULL) {
            lost = &claims[i];
            lost_released = end == LEASE_END_RELEASED;
        }
        if (res.outcome == LEASE_MAX_HOLD && capped == NULL)
            capped = claims[i].name;
        if (res.outcome == LEASE_RENEWED) {
            renewed++;
            lease_reply_renewed(&out, &lease_lock_ops, claims[i].name, &res);
            fgjson_out_close(&out);
        }
    }
    if (lost != NULL)
        return set_lost(reply, &out, lost, lost_released, renewed, "renewed");
    if (capped != NULL) {
        fgjson_out_free(&out);
        fg_fail(&err, FG_ERR_MAX_HOLD_EXCEEDED,
                "lock '%s' of the set has reached its max_hold_ms deadline; %s renewed", capped,
                renewed > 0 ? "the others were" : "no other lock was");
        reply_problem_extra(reply, &err, json_pack("{s:s}", "lock", capped));
        return HANDLER_DONE;
    }
    set_end(&out, reply);
    return HANDLER_DONE;
}

enum handler_result handle_lockset_release(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    json_t *body = http_request_json(req, &err);
    struct token_claims claims[LOCKSET_MAX];
    size_t n = 0;
    char refused[LOCK_SCOPE_MAX] = "";
    if (body == NULL || set_claims(req, body, claims, &n, refused, &err) != 0)
        return fail_scope(reply, &err, refused);
    const struct token_claims *lost = NULL;
    size_t released = 0;
    for (size_t i = 0; i < n; i++) {
        struct lease_result res;
        if (lock_release(claims[i].name, claims[i].lease_id, (long long)claims[i].fence, &res,
                         &err) != 0)
            return fail(reply, &err);
        if (res.outcome == LEASE_LOST && lost == NULL)
            lost = &claims[i];
        released += res.outcome == LEASE_RELEASED;
    }
    if (lost != NULL)
        return set_lost(reply, NULL, lost, false, released, "released");
    lease_reply_released(reply);
    return HANDLER_DONE;
}
