/*
 * handlers_locks.c - the lock endpoints. An acquire that may wait registers a
 * waiter before its first script call (so a grant published at once is not
 * missed), then parks the connection between attempts. Each resumption reads
 * why it woke: a doorbell or timer re-checks, a hang-up or drain leaves the
 * queue, a passed deadline gives up but keeps a grant that arrived meanwhile.
 * Tokens are signed here and verified before any renew or release.
 */
#include "http/handlers_locks.h"

#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "lease/lock.h"
#include "lease/waiter.h"
#include "util/log.h"
#include "util/metrics.h"

/* Handler state of an acquire that waits. */
struct lock_wait {
    struct waiter waiter;          /* registry entry; waiter.lease_id is the lease */
    struct acquire_params params;  /* parsed body (strings borrowed from req->json) */
    char attach[LEASE_ID_LEN + 1]; /* id of this connection's attempt */
    char name[NAME_MAX_LEN + 1];   /* the lock */
    bool settled;                  /* answered: nothing left to give up */
};

static const char *lock_name(const struct http_request *req)
{
    return req->match.params[0];
}

/* Ends the life of a wait. A request that ends unanswered (the connection died
 * while parked and the server dropped it without running the handler) still
 * leaves the queue here, so no ghost waiter holds up the lock. */
static void lock_wait_free(void *state)
{
    struct lock_wait *lw = state;
    waiter_remove(&lw->waiter);
    if (!lw->settled) {
        struct lease_result res;
        struct fg_error err = {0};
        if (lock_cancel(lw->name, lw->waiter.lease_id, lw->attach, LEASE_CANCEL_DROP, &res, &err) !=
            0)
            log_message(LOG_WARN, "waiter_cleanup", "lock %s: %s", lw->name, err.msg);
    }
    free(lw);
}

/* Marks the wait answered and unregisters it. */
static void settle(struct lock_wait *lw)
{
    lw->settled = true;
    waiter_remove(&lw->waiter);
}

static enum handler_result fail(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem(reply, err);
    return HANDLER_DONE;
}

static enum handler_result reply_granted(struct http_request *req, struct http_reply *reply,
                                         const struct lease_result *res)
{
    struct token_claims claims = {.kind = LEASE_KIND_LOCK, .fence = res->fence};
    snprintf(claims.name, sizeof claims.name, "%.200s", lock_name(req));
    snprintf(claims.lease_id, sizeof claims.lease_id, "%s", res->lease_id);
    char token[TOKEN_MAX_LEN];
    struct fg_error err = {0};
    if (token_sign(&claims, gw.secret, gw.secret_len, token, sizeof token, &err) != 0)
        return fail(reply, &err);
    reply_json(reply, 200,
               json_pack("{s:s, s:s, s:I, s:I, s:I}", "lock", lock_name(req), "token", token,
                         "fence", (json_int_t)res->fence, "ttl_ms", (json_int_t)res->ttl_ms,
                         "expires_at_ms", (json_int_t)res->expires_at_ms));
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
static enum handler_result reply_acquired(struct http_request *req, struct http_reply *reply,
                                          const struct lease_result *res)
{
    struct fg_error err;
    switch (res->outcome) {
    case LEASE_GRANTED: return reply_granted(req, reply, res);
    case LEASE_BUSY: return reply_busy(reply, res, "the lock is held");
    case LEASE_QUEUED:
        return reply_busy(reply, res, "this request_id is waiting in the queue already");
    case LEASE_FULL:
        fg_fail(&err, FG_ERR_TOO_MANY_WAITERS, "the queue of this lock is full (%lld waiting)",
                res->waiting);
        return fail(reply, &err);
    case LEASE_ENDED:
        fg_fail(&err, FG_ERR_LEASE_LOST, "the lease of this request_id has already ended");
        return fail(reply, &err);
    default:
        fg_fail(&err, FG_ERR_INTERNAL, "unexpected acquire outcome %d", (int)res->outcome);
        return fail(reply, &err);
    }
}

/* When a queued waiter should look again: the head waiters at the holder's
 * expiry (crash recovery), everyone at least every poll_ms (lost doorbells). */
static int64_t next_check(const struct lease_result *res)
{
    int64_t now = http_now_ms(), delay = gw.cfg->poll_ms;
    if (res->position < 3 && res->holder_pttl_ms >= 0 && res->holder_pttl_ms + 5 < delay)
        delay = res->holder_pttl_ms + 5;
    if (res->holder_pttl_ms < 0 && delay > 50)
        delay = 50; /* free but not granted to us: look again soon */
    return now + delay;
}

/* Gives up the wait: mode says whether a grant that arrived meanwhile is kept. */
static enum handler_result end_wait(struct http_request *req, struct http_reply *reply,
                                    struct lock_wait *lw, enum lease_cancel_mode mode,
                                    const struct fg_error *why)
{
    struct lease_result res;
    struct fg_error err = {0};
    int rc = lock_cancel(lock_name(req), lw->waiter.lease_id, lw->attach, mode, &res, &err);
    settle(lw);
    if (rc != 0)
        return fail(reply, &err);
    if (res.outcome == LEASE_GRANTED)
        return reply_granted(req, reply, &res);
    if (why != NULL)
        return fail(reply, why);
    return reply_busy(reply, &res, "wait_ms passed before the lock was granted");
}

/* Runs acquire attempts until the request is answered or parked. */
static enum handler_result wait_for_lock(struct http_request *req, struct http_reply *reply,
                                         struct lock_wait *lw)
{
    for (;;) {
        unsigned reasons = waiter_take_reasons(&lw->waiter);
        struct fg_error err = {0};
        if (reasons & WAKE_SUPERSEDED) {
            settle(lw);
            fg_fail(&err, FG_ERR_CONFLICT, "a retry with the same request_id took this wait over");
            return fail(reply, &err);
        }
        if (reasons & WAKE_DRAIN) {
            fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
            return end_wait(req, reply, lw, LEASE_CANCEL_DROP, &err);
        }
        if (reasons & WAKE_HANGUP) {
            fg_fail(&err, FG_ERR_LOCK_BUSY, "the client closed the connection while waiting");
            return end_wait(req, reply, lw, LEASE_CANCEL_DROP, &err);
        }
        if (http_now_ms() >= lw->waiter.deadline_ms)
            return end_wait(req, reply, lw, LEASE_CANCEL_TAKE, NULL);
        struct lease_result res;
        if (lock_acquire(lock_name(req), &lw->params, lw->waiter.lease_id, true, lw->attach, &res,
                         &err) != 0) {
            settle(lw);
            return fail(reply, &err);
        }
        if (res.outcome != LEASE_QUEUED) {
            settle(lw);
            return reply_acquired(req, reply, &res);
        }
        if (strcmp(res.lease_id, lw->waiter.lease_id) != 0)
            waiter_rekey(&lw->waiter, res.lease_id);
        if (waiter_park(&lw->waiter, next_check(&res)))
            return HANDLER_SUSPEND;
    }
}

/* An acquire that found the lock held and may wait: register the waiter, then
 * queue (the first queued attempt runs only once the waiter can be rung). */
static enum handler_result start_wait(struct http_request *req, struct http_reply *reply,
                                      const struct acquire_params *p, const char *lease_id)
{
    struct fg_error err = {0};
    if (gw.draining) {
        fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
        return fail(reply, &err);
    }
    struct lock_wait *lw = calloc(1, sizeof *lw);
    FG_ASSERT(lw != NULL);
    lw->params = *p;
    snprintf(lw->name, sizeof lw->name, "%.200s", lock_name(req));
    snprintf(lw->waiter.lease_id, sizeof lw->waiter.lease_id, "%s", lease_id);
    if (token_new_lease_id(lw->attach, &err) != 0 ||
        waiter_add(&lw->waiter, req, http_now_ms() + p->wait_ms, &err) != 0) {
        free(lw);
        return fail(reply, &err);
    }
    req->state = lw;
    req->state_free = lock_wait_free;
    return wait_for_lock(req, reply, lw);
}

enum handler_result handle_lock_acquire(struct http_request *req, struct http_reply *reply)
{
    if (req->state != NULL)
        return wait_for_lock(req, reply, req->state);
    struct fg_error err = {0};
    snprintf(req->log_subject, sizeof req->log_subject, "lock:%.200s", lock_name(req));
    json_t *body = http_request_json(req, &err);
    struct acquire_params p;
    char lease_id[LEASE_ID_LEN + 1];
    if (body == NULL || acquire_params_parse(body, gw.cfg, false, &p, &err) != 0 ||
        token_new_lease_id(lease_id, &err) != 0)
        return fail(reply, &err);
    snprintf(req->log_owner, sizeof req->log_owner, "%s", p.owner);
    /* Try once first: a free lock costs one script call and no waiter. */
    struct lease_result res;
    if (lock_acquire(lock_name(req), &p, lease_id, false, "", &res, &err) != 0)
        return fail(reply, &err);
    bool queued = res.outcome == LEASE_QUEUED; /* a retried request_id still waiting */
    if (p.wait_ms > 0 && (res.outcome == LEASE_BUSY || queued))
        return start_wait(req, reply, &p, queued ? res.lease_id : lease_id);
    return reply_acquired(req, reply, &res);
}

/* Verifies the token of a renew or release and that it is for this lock. */
static int verified_lease(const struct http_request *req, const char *token,
                          struct token_claims *claims, struct fg_error *err)
{
    if (token_verify(token, gw.secret, gw.secret_len, claims, err) != 0)
        return -1;
    if (claims->kind != LEASE_KIND_LOCK || strcmp(claims->name, lock_name(req)) != 0)
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN, "the token was issued for another lock");
    return 0;
}

enum handler_result handle_lock_renew(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    snprintf(req->log_subject, sizeof req->log_subject, "lock:%.200s", lock_name(req));
    json_t *body = http_request_json(req, &err);
    struct renew_params p;
    struct token_claims claims;
    struct lease_result res;
    if (body == NULL || renew_params_parse(body, &p, &err) != 0 ||
        verified_lease(req, p.token, &claims, &err) != 0 ||
        lock_renew(lock_name(req), claims.lease_id, p.ttl_ms, &res, &err) != 0)
        return fail(reply, &err);
    if (res.outcome == LEASE_LOST) {
        log_lease_lost("lock", lock_name(req), "renew", claims.fence, req->client_addr);
        fg_fail(&err, FG_ERR_LEASE_LOST, "the lease expired or was taken over");
        return fail(reply, &err);
    }
    if (res.outcome == LEASE_MAX_HOLD) {
        fg_fail(&err, FG_ERR_MAX_HOLD_EXCEEDED, "the renewal would pass max_hold_ms");
        reply_problem_extra(reply, &err,
                            json_pack("{s:I}", "hold_until_ms", (json_int_t)res.hold_until_ms));
        return HANDLER_DONE;
    }
    reply_json(reply, 200,
               json_pack("{s:s, s:I, s:I, s:I}", "lock", lock_name(req), "fence",
                         (json_int_t)res.fence, "ttl_ms", (json_int_t)res.ttl_ms, "expires_at_ms",
                         (json_int_t)res.expires_at_ms));
    return HANDLER_DONE;
}

enum handler_result handle_lock_release(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    snprintf(req->log_subject, sizeof req->log_subject, "lock:%.200s", lock_name(req));
    json_t *body = http_request_json(req, &err);
    const char *token = NULL;
    struct token_claims claims;
    struct lease_result res;
    if (body == NULL || release_params_parse(body, &token, &err) != 0 ||
        verified_lease(req, token, &claims, &err) != 0 ||
        lock_release(lock_name(req), claims.lease_id, &res, &err) != 0)
        return fail(reply, &err);
    if (res.outcome == LEASE_LOST) {
        log_lease_lost("lock", lock_name(req), "release", claims.fence, req->client_addr);
        fg_fail(&err, FG_ERR_LEASE_LOST, "the lease expired or was taken over");
        return fail(reply, &err);
    }
    if (res.held_ms >= 0)
        metrics_hold_time(METRIC_KIND_LOCK, res.held_ms);
    reply_json(reply, 200, json_pack("{s:b}", "released", 1));
    return HANDLER_DONE;
}

enum handler_result handle_lock_status(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    json_t *status = NULL;
    if (lock_status(lock_name(req), &status, &err) != 0)
        return fail(reply, &err);
    reply_json(reply, 200, status);
    return HANDLER_DONE;
}

int lock_give_back_orphan(const char *name, const char *lease_id, struct fg_error *err)
{
    struct lease_result res;
    return lock_cancel(name, lease_id, "", LEASE_CANCEL_ORPHAN, &res, err);
}
