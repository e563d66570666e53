/*
 * handlers_semaphores.c - the semaphore endpoints, shaped like the lock ones.
 * An acquire that may wait registers a waiter before its first script call (so
 * a grant published at once is not missed), then parks the connection between
 * attempts. Each resumption reads why it woke: a doorbell or timer re-checks, a
 * hang-up or drain leaves the queue, a passed deadline gives up but keeps a
 * grant that arrived meanwhile. Parked waiters near the head also re-check when
 * the earliest holder lease ends, so a slot freed by a crash is handed on even
 * when nobody releases. Tokens are signed here and verified before any renew or
 * release. No Redis or HTTP library calls of its own.
 *
 * Hand-over in-process: when a script (a release, say) grants slots to other
 * waiters of this same gateway, it answers those grants instead of ringing
 * their doorbell; the handler that ran it puts each grant into its waiter and
 * wakes it, and the woken waiter answers its client at once, without another
 * script call. A grant whose waiter is no longer here becomes an orphan, given
 * back after the doorbell's grace period.
 */
#include "http/handlers_semaphores.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "lease/doorbell.h"
#include "lease/semaphore.h"
#include "lease/waiter.h"
#include "util/log.h"

/* Waiters this close to the head re-check at the earliest holder expiry. */
#define EXPIRY_WATCHERS 3

/* Handler state of an acquire that waits. */
struct sem_wait {
    struct waiter waiter;          /* registry entry; waiter.lease_id is the lease */
    struct acquire_params params;  /* parsed body (strings borrowed from req->json) */
    char attach[LEASE_ID_LEN + 1]; /* id of this connection's attempt */
    char name[NAME_MAX_LEN + 1];   /* the semaphore */
    bool settled;                  /* answered: nothing left to give up */
    struct lease_grant delivered;  /* a grant handed over in-process */
    atomic_bool has_delivered;     /* delivered is set (store-release, load-acquire) */
};

static void hand_over(const char *name, const struct lease_result *res);

/* Ends the life of a wait. A request that ends unanswered (the connection died
 * while parked and the server dropped it without running the handler) still
 * leaves the queue here, so no ghost waiter holds up a slot. */
static void sem_wait_free(void *state)
{
    struct sem_wait *sw = state;
    waiter_remove(&sw->waiter);
    if (!sw->settled) {
        struct lease_result res;
        struct fg_error err = {0};
        if (sem_cancel(sw->name, sw->waiter.lease_id, sw->attach, LEASE_CANCEL_DROP, &res, &err) !=
            0)
            log_message(LOG_WARN, "waiter_cleanup", "semaphore %s: %s", sw->name, err.msg);
        else
            hand_over(sw->name, &res);
    }
    free(sw);
}

/* Marks the wait answered and unregisters it. */
static void settle(struct sem_wait *sw)
{
    sw->settled = true;
    waiter_remove(&sw->waiter);
}

static const char *sem_name(const struct http_request *req)
{
    return req->match.params[0];
}

/* waiter_deliver callback: stores the grant ctx in the wait owning w. */
static void take_grant(struct waiter *w, void *ctx)
{
    struct sem_wait *sw = (struct sem_wait *)((char *)w - offsetof(struct sem_wait, waiter));
    sw->delivered = *(const struct lease_grant *)ctx;
    atomic_store_explicit(&sw->has_delivered, true, memory_order_release);
}

/* Wakes the waiters of this gateway that the script answering res granted a
 * slot of semaphore name to; a grant without its waiter becomes an orphan. */
static void hand_over(const char *name, const struct lease_result *res)
{
    for (size_t i = 0; i < res->nhandoff; i++)
        if (!waiter_deliver(res->handoff[i].lease_id, take_grant, (void *)&res->handoff[i]))
            doorbell_add_orphan(LEASE_KIND_SEMAPHORE, res->handoff[i].lease_id, name);
}

static enum handler_result fail(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem(reply, err);
    return HANDLER_DONE;
}

static enum handler_result reply_granted(struct http_request *req, struct http_reply *reply,
                                         const struct lease_result *res)
{
    struct token_claims claims = {.kind = LEASE_KIND_SEMAPHORE, .fence = res->fence};
    snprintf(claims.name, sizeof claims.name, "%.200s", sem_name(req));
    snprintf(claims.lease_id, sizeof claims.lease_id, "%s", res->lease_id);
    char token[TOKEN_MAX_LEN];
    struct fg_error err = {0};
    if (token_sign(&claims, gw.secret, gw.secret_len, token, sizeof token, &err) != 0)
        return fail(reply, &err);
    reply_json(reply, 200,
               json_pack("{s:s, s:s, s:I, s:I, s:I}", "semaphore", sem_name(req), "token", token,
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
    case LEASE_BUSY: return reply_busy(reply, res, "every slot of the semaphore is held");
    case LEASE_FULL:
        fg_fail(&err, FG_ERR_TOO_MANY_WAITERS, "the queue of this semaphore is full (%lld waiting)",
                res->waiting);
        return fail(reply, &err);
    case LEASE_MISMATCH:
        fg_fail(&err, FG_ERR_LIMIT_MISMATCH,
                "limit %lld is in force while the semaphore has holders or waiters", res->limit);
        reply_problem_extra(reply, &err, json_pack("{s:I}", "limit", (json_int_t)res->limit));
        return HANDLER_DONE;
    case LEASE_ENDED:
        fg_fail(&err, FG_ERR_LEASE_LOST, "the lease of this request_id has already ended");
        return fail(reply, &err);
    default:
        fg_fail(&err, FG_ERR_INTERNAL, "unexpected acquire outcome %d", (int)res->outcome);
        return fail(reply, &err);
    }
}

/* When a queued waiter should look again: the head waiters when the earliest
 * holder lease ends (crash recovery), everyone at least every poll_ms (lost
 * doorbells). */
static int64_t next_check(const struct lease_result *res)
{
    int64_t now = http_now_ms(), delay = gw.cfg->poll_ms;
    if (res->position < EXPIRY_WATCHERS && res->holder_pttl_ms >= 0 &&
        res->holder_pttl_ms + 5 < delay)
        delay = res->holder_pttl_ms + 5;
    if (res->holder_pttl_ms < 0 && delay > 50)
        delay = 50; /* no holder, yet queued: look again soon */
    return now + delay;
}

/* Gives up the wait: mode says whether a grant that arrived meanwhile is kept. */
static enum handler_result end_wait(struct http_request *req, struct http_reply *reply,
                                    struct sem_wait *sw, enum lease_cancel_mode mode,
                                    const struct fg_error *why)
{
    struct lease_result res;
    struct fg_error err = {0};
    int rc = sem_cancel(sem_name(req), sw->waiter.lease_id, sw->attach, mode, &res, &err);
    settle(sw);
    if (rc != 0)
        return fail(reply, &err);
    hand_over(sem_name(req), &res);
    if (res.outcome == LEASE_GRANTED)
        return reply_granted(req, reply, &res);
    if (why != NULL)
        return fail(reply, why);
    return reply_busy(reply, &res, "wait_ms passed before a slot was granted");
}

/* Runs acquire attempts until the request is answered or parked. */
static enum handler_result wait_for_slot(struct http_request *req, struct http_reply *reply,
                                         struct sem_wait *sw)
{
    for (;;) {
        unsigned reasons = waiter_take_reasons(&sw->waiter);
        struct fg_error err = {0};
        if (reasons & WAKE_SUPERSEDED) {
            settle(sw);
            fg_fail(&err, FG_ERR_CONFLICT, "a retry with the same request_id took this wait over");
            return fail(reply, &err);
        }
        if (reasons & WAKE_DRAIN) {
            fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
            return end_wait(req, reply, sw, LEASE_CANCEL_DROP, &err);
        }
        if (reasons & WAKE_HANGUP) {
            fg_fail(&err, FG_ERR_LOCK_BUSY, "the client closed the connection while waiting");
            return end_wait(req, reply, sw, LEASE_CANCEL_DROP, &err);
        }
        struct lease_result res;
        if (atomic_load_explicit(&sw->has_delivered, memory_order_acquire)) {
            settle(sw);
            res = (struct lease_result){.outcome = LEASE_GRANTED,
                                        .fence = sw->delivered.fence,
                                        .ttl_ms = sw->delivered.ttl_ms,
                                        .expires_at_ms = sw->delivered.expires_at_ms};
            memcpy(res.lease_id, sw->delivered.lease_id, sizeof res.lease_id);
            return reply_granted(req, reply, &res);
        }
        if (http_now_ms() >= sw->waiter.deadline_ms)
            return end_wait(req, reply, sw, LEASE_CANCEL_TAKE, NULL);
        if (sem_acquire(sem_name(req), &sw->params, sw->waiter.lease_id, true, sw->attach, &res,
                        &err) != 0) {
            settle(sw);
            return fail(reply, &err);
        }
        hand_over(sem_name(req), &res);
        if (res.outcome != LEASE_QUEUED) {
            settle(sw);
            return reply_acquired(req, reply, &res);
        }
        if (strcmp(res.lease_id, sw->waiter.lease_id) != 0)
            waiter_rekey(&sw->waiter, res.lease_id);
        if (waiter_park(&sw->waiter, next_check(&res)))
            return HANDLER_SUSPEND;
    }
}

/* First run of an acquire that may wait: register, then attempt. */
static enum handler_result start_wait(struct http_request *req, struct http_reply *reply,
                                      const struct acquire_params *p, const char *lease_id)
{
    struct fg_error err = {0};
    if (gw.draining) {
        fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
        return fail(reply, &err);
    }
    struct sem_wait *sw = calloc(1, sizeof *sw);
    FG_ASSERT(sw != NULL);
    sw->params = *p;
    snprintf(sw->name, sizeof sw->name, "%.200s", sem_name(req));
    snprintf(sw->waiter.lease_id, sizeof sw->waiter.lease_id, "%s", lease_id);
    if (token_new_lease_id(sw->attach, &err) != 0 ||
        waiter_add(&sw->waiter, req, http_now_ms() + p->wait_ms, &err) != 0) {
        free(sw);
        return fail(reply, &err);
    }
    req->state = sw;
    req->state_free = sem_wait_free;
    return wait_for_slot(req, reply, sw);
}

enum handler_result handle_sem_acquire(struct http_request *req, struct http_reply *reply)
{
    if (req->state != NULL)
        return wait_for_slot(req, reply, req->state);
    struct fg_error err = {0};
    snprintf(req->log_subject, sizeof req->log_subject, "semaphore:%.200s", sem_name(req));
    json_t *body = http_request_json(req, &err);
    struct acquire_params p;
    char lease_id[LEASE_ID_LEN + 1];
    if (body == NULL || acquire_params_parse(body, gw.cfg, true, &p, &err) != 0 ||
        token_new_lease_id(lease_id, &err) != 0)
        return fail(reply, &err);
    snprintf(req->log_owner, sizeof req->log_owner, "%s", p.owner);
    if (p.wait_ms > 0)
        return start_wait(req, reply, &p, lease_id);
    struct lease_result res;
    if (sem_acquire(sem_name(req), &p, lease_id, false, "", &res, &err) != 0)
        return fail(reply, &err);
    hand_over(sem_name(req), &res);
    return reply_acquired(req, reply, &res);
}

/* Verifies the token of a renew or release and that it is for this semaphore. */
static int verified_lease(const struct http_request *req, const char *token,
                          struct token_claims *claims, struct fg_error *err)
{
    if (token_verify(token, gw.secret, gw.secret_len, claims, err) != 0)
        return -1;
    if (claims->kind != LEASE_KIND_SEMAPHORE || strcmp(claims->name, sem_name(req)) != 0)
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                       "the token was issued for another lock or semaphore");
    return 0;
}

enum handler_result handle_sem_renew(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    snprintf(req->log_subject, sizeof req->log_subject, "semaphore:%.200s", sem_name(req));
    json_t *body = http_request_json(req, &err);
    struct renew_params p;
    struct token_claims claims;
    struct lease_result res;
    if (body == NULL || renew_params_parse(body, &p, &err) != 0 ||
        verified_lease(req, p.token, &claims, &err) != 0 ||
        sem_renew(sem_name(req), claims.lease_id, p.ttl_ms, &res, &err) != 0)
        return fail(reply, &err);
    hand_over(sem_name(req), &res);
    if (res.outcome == LEASE_LOST) {
        log_lease_lost("semaphore", sem_name(req), "renew", claims.fence, req->client_addr);
        fg_fail(&err, FG_ERR_LEASE_LOST, "the lease expired or was given up");
        return fail(reply, &err);
    }
    if (res.outcome == LEASE_MAX_HOLD) {
        fg_fail(&err, FG_ERR_MAX_HOLD_EXCEEDED, "the renewal would pass max_hold_ms");
        reply_problem_extra(reply, &err,
                            json_pack("{s:I}", "hold_until_ms", (json_int_t)res.hold_until_ms));
        return HANDLER_DONE;
    }
    reply_json(reply, 200,
               json_pack("{s:s, s:I, s:I, s:I}", "semaphore", sem_name(req), "fence",
                         (json_int_t)res.fence, "ttl_ms", (json_int_t)res.ttl_ms, "expires_at_ms",
                         (json_int_t)res.expires_at_ms));
    return HANDLER_DONE;
}

enum handler_result handle_sem_release(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    snprintf(req->log_subject, sizeof req->log_subject, "semaphore:%.200s", sem_name(req));
    json_t *body = http_request_json(req, &err);
    const char *token = NULL;
    struct token_claims claims;
    struct lease_result res;
    if (body == NULL || release_params_parse(body, &token, &err) != 0 ||
        verified_lease(req, token, &claims, &err) != 0 ||
        sem_release(sem_name(req), claims.lease_id, &res, &err) != 0)
        return fail(reply, &err);
    hand_over(sem_name(req), &res);
    if (res.outcome == LEASE_LOST) {
        log_lease_lost("semaphore", sem_name(req), "release", claims.fence, req->client_addr);
        fg_fail(&err, FG_ERR_LEASE_LOST, "the lease expired or was given up");
        return fail(reply, &err);
    }
    reply_json(reply, 200, json_pack("{s:b}", "released", 1));
    return HANDLER_DONE;
}

enum handler_result handle_sem_status(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    json_t *status = NULL;
    if (sem_status(sem_name(req), &status, &err) != 0)
        return fail(reply, &err);
    reply_json(reply, 200, status);
    return HANDLER_DONE;
}

int sem_give_back_orphan(const char *name, const char *lease_id, struct fg_error *err)
{
    struct lease_result res;
    if (sem_cancel(name, lease_id, "", LEASE_CANCEL_ORPHAN, &res, err) != 0)
        return -1;
    hand_over(name, &res);
    return 0;
}
