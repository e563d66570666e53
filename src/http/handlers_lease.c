/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_lease.c - acquire, renew, release and status for any kind of lease.
 *
 * An acquire costs one script call whether it is granted or queued: a free
 * lock or slot is granted at once, and an acquire that may wait joins the
 * queue in that same call. Only then does it register its waiter, so a grant
 * made to it in between (in-process or by the doorbell) finds no waiter and is
 * kept as an orphan, which the waiter takes back as it registers. It then
 * parks the connection between attempts. Each resumption reads why it woke: a doorbell or
 * timer re-checks, a hang-up or drain leaves the queue, a passed deadline gives
 * up but keeps a grant that arrived meanwhile. Waiters near the head re-check
 * when the (first) holder's lease should end, so a crashed holder's lease is
 * handed on with nobody releasing. A re-check that meets a backend outage
 * (Redis restarting, fences not reservable while Postgres is down) keeps the
 * waiter parked until its deadline: its place in the queue lives in Redis.
 *
 * Hand-over in-process: when a script grants to other waiters of this same
 * gateway (a semaphore release, say), it answers those grants instead of
 * ringing their doorbell; the handler that ran it puts each grant into its
 * waiter and wakes it, and the woken waiter answers its client without another
 * script call. A grant whose waiter is no longer here becomes an orphan, given
 * back after the doorbell's grace period. Tokens are signed here and verified
 * before any renew or release.
 */
#include "http/handlers_lease.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "lease/doorbell.h"
#include "lease/waiter.h"
#include "store/revocations.h"
#include "store/secret.h"
#include "util/clock.h"
#include "util/log.h"

/* Waiters this close to the head re-check when the (first) holder's lease ends. */
#define EXPIRY_WATCHERS 3

/* A waiter this many places back or more re-checks one poll_ms later per such
 * step, up to BACKSTOP_MAX_POLLS poll_ms: a long queue costs a bounded number
 * of re-checks a second, not one per waiter and poll_ms. */
#define BACKSTOP_STEP      100
#define BACKSTOP_MAX_POLLS 10

/* A waiter whose re-check met a backend outage keeps its place and looks again
 * after this long (until its own deadline). */
#define RECHECK_AFTER_OUTAGE_MS 200

/* Handler state of an acquire that waits. It keeps no copy of the request's
 * body: a parked request costs its connection, this and little else. */
struct lease_wait {
    struct waiter waiter;          /* registry entry; waiter.lease_id is the lease */
    const struct lease_ops *kind;  /* lock or semaphore */
    struct acquire_params params;  /* parsed body (owner and request_id point into text) */
    char attach[LEASE_ID_LEN + 1]; /* id of this connection's attempt */
    const char *name;              /* the lock or semaphore (the request's, borrowed) */
    bool settled;                  /* answered: nothing left to give up */
    struct lease_grant delivered;  /* a grant handed over in-process */
    atomic_bool has_delivered;     /* delivered is set (store-release, load-acquire) */
    char text[];                   /* owner, NUL, request_id, NUL */
};

static const char *lease_name(const struct http_request *req)
{
    return req->match.params[0];
}

static enum handler_result fail(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem(reply, err);
    return HANDLER_DONE;
}

/* The lease wait that owns registry entry w. */
static struct lease_wait *wait_of(struct waiter *w)
{
    return (struct lease_wait *)((char *)w - offsetof(struct lease_wait, waiter));
}

/* waiter_deliver callback: stores the grant ctx in the wait owning w. */
static void take_grant(struct waiter *w, void *ctx)
{
    struct lease_wait *lw = wait_of(w);
    lw->delivered = *(const struct lease_grant *)ctx;
    atomic_store_explicit(&lw->has_delivered, true, memory_order_release);
}

/* Wakes the waiters of this gateway that the script answering res granted a
 * lease of name to; a grant without its waiter becomes an orphan. */
static void hand_over(const struct lease_ops *kind, const char *name,
                      const struct lease_result *res)
{
    for (size_t i = 0; i < res->nhandoff; i++)
        if (!waiter_deliver(res->handoff[i].lease_id, take_grant, (void *)&res->handoff[i]))
            doorbell_add_orphan(kind->token_kind, res->handoff[i].lease_id, name);
}

/* Ends the life of a wait. A request that ends unanswered (the connection died
 * while parked and the server dropped it without running the handler) still
 * leaves the queue here, so no ghost waiter holds anything up. */
static void lease_wait_free(void *state)
{
    struct lease_wait *lw = state;
    waiter_remove(&lw->waiter);
    if (!lw->settled) {
        struct lease_result res;
        struct fg_error err = {0};
        if (lw->kind->cancel(lw->name, lw->waiter.lease_id, lw->attach, LEASE_CANCEL_DROP, &res,
                             &err) != 0)
            log_message(LOG_WARN, "waiter_cleanup", "%s %s: %s", lw->kind->noun, lw->name, err.msg);
        else
            hand_over(lw->kind, lw->name, &res);
    }
    free(lw);
}

/* Takes the waits ws[first..n) of the same lock or semaphore as ws[first] that
 * are not taken yet (taken[]) out of its queue, up to LEASE_LEAVE_MAX of them
 * in one script call. A wait that left is settled: its handler answers without
 * another call. */
static void leave_batch(struct waiter *const *ws, size_t first, size_t n, bool *taken)
{
    struct lease_wait *batch[LEASE_LEAVE_MAX];
    struct lease_leaver leavers[LEASE_LEAVE_MAX];
    bool left[LEASE_LEAVE_MAX];
    struct lease_wait *head = wait_of(ws[first]);
    taken[first] = true;
    batch[0] = head;
    leavers[0] = (struct lease_leaver){head->waiter.lease_id, head->attach};
    size_t nbatch = 1;
    for (size_t i = first + 1; i < n && nbatch < LEASE_LEAVE_MAX; i++) {
        struct lease_wait *lw = wait_of(ws[i]);
        if (taken[i] || lw->kind != head->kind || strcmp(lw->name, head->name) != 0)
            continue;
        taken[i] = true;
        batch[nbatch] = lw;
        leavers[nbatch++] = (struct lease_leaver){lw->waiter.lease_id, lw->attach};
    }
    struct fg_error err = {0};
    if (head->kind->leave(head->name, leavers, nbatch, left, &err) != 0) {
        log_message(LOG_WARN, "waiter_cleanup", "%s %s: %s", head->kind->noun, head->name, err.msg);
        return; /* each leaves on its own as it wakes */
    }
    for (size_t i = 0; i < nbatch; i++)
        batch[i]->settled = left[i];
}

/* waiter_leave_fn of lease waits whose clients hung up. */
static void leave_queues(struct waiter *const *ws, size_t n)
{
    bool *taken = calloc(n, sizeof *taken);
    FG_ASSERT(taken != NULL);
    for (size_t i = 0; i < n; i++)
        if (!taken[i])
            leave_batch(ws, i, n, taken);
    free(taken);
}

/* Marks the wait answered and unregisters it. */
static void settle(struct lease_wait *lw)
{
    lw->settled = true;
    waiter_remove(&lw->waiter);
}

static enum handler_result reply_granted(const struct lease_ops *kind, struct http_request *req,
                                         struct http_reply *reply, const struct lease_result *res)
{
    struct token_claims claims = {.kind = kind->token_kind, .fence = res->fence};
    snprintf(claims.name, sizeof claims.name, "%.200s", lease_name(req));
    snprintf(claims.lease_id, sizeof claims.lease_id, "%s", res->lease_id);
    char token[TOKEN_MAX_LEN];
    struct fg_error err = {0};
    if (token_sign(&claims, secret_current(), token, sizeof token, &err) != 0)
        return fail(reply, &err);
    reply_json(reply, 200,
               json_pack("{s:s, s:s, s:I, s:I, s:I}", kind->noun, lease_name(req), "token", token,
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
    default:
        fg_fail(&err, FG_ERR_INTERNAL, "unexpected acquire outcome %d", (int)res->outcome);
        return fail(reply, &err);
    }
}

/* When a queued waiter should look again: the head waiters when the (first)
 * holder's lease ends (crash recovery), the first BACKSTOP_STEP at least every
 * poll_ms (lost doorbells), those further back less often: their turn is far
 * off, and any waiter's re-check hands a lock freed without a release on. */
static int64_t next_check(const struct lease_result *res)
{
    long long polls = 1 + res->position / BACKSTOP_STEP;
    if (polls > BACKSTOP_MAX_POLLS)
        polls = BACKSTOP_MAX_POLLS;
    int64_t now = clock_mono_ms(), delay = gw.cfg->poll_ms * polls;
    if (res->position < EXPIRY_WATCHERS && res->holder_pttl_ms >= 0 &&
        res->holder_pttl_ms + 5 < delay)
        delay = res->holder_pttl_ms + 5;
    if (res->holder_pttl_ms < 0 && delay > 50)
        delay = 50; /* nothing held, yet queued: look again soon */
    return now + delay;
}

/* Gives up the wait: mode says whether a grant that arrived meanwhile is kept. */
static enum handler_result end_wait(struct http_request *req, struct http_reply *reply,
                                    struct lease_wait *lw, enum lease_cancel_mode mode,
                                    const struct fg_error *why)
{
    struct lease_result res;
    struct fg_error err = {0};
    int rc = lw->kind->cancel(lw->name, lw->waiter.lease_id, lw->attach, mode, &res, &err);
    settle(lw);
    if (rc != 0)
        return fail(reply, &err);
    hand_over(lw->kind, lw->name, &res);
    if (res.outcome == LEASE_GRANTED)
        return reply_granted(lw->kind, req, reply, &res);
    if (why != NULL)
        return fail(reply, why);
    return reply_busy(reply, &res, "wait_ms passed before the lease was granted");
}

/* A grant handed over in-process, as the answer of an acquire. */
static struct lease_result delivered_result(const struct lease_wait *lw)
{
    struct lease_result res = {.outcome = LEASE_GRANTED,
                               .fence = lw->delivered.fence,
                               .ttl_ms = lw->delivered.ttl_ms,
                               .expires_at_ms = lw->delivered.expires_at_ms};
    memcpy(res.lease_id, lw->delivered.lease_id, sizeof res.lease_id);
    return res;
}

/* Runs acquire attempts until the request is answered or parked. */
static enum handler_result wait_for_lease(struct http_request *req, struct http_reply *reply,
                                          struct lease_wait *lw)
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
        if (reasons & WAKE_HANGUP) { /* nobody reads the answer: it is only logged */
            fg_fail(&err, FG_ERR_LOCK_BUSY, "the client closed the connection while waiting");
            if (lw->settled) { /* it left its queue with others (leave_queues) */
                settle(lw);
                fail(reply, &err);
            } else {
                end_wait(req, reply, lw, LEASE_CANCEL_DROP, &err);
            }
            return HANDLER_CLOSE;
        }
        struct lease_result res;
        if (atomic_load_explicit(&lw->has_delivered, memory_order_acquire)) {
            settle(lw);
            res = delivered_result(lw);
            return reply_granted(lw->kind, req, reply, &res);
        }
        if (clock_mono_ms() >= lw->waiter.deadline_ms)
            return end_wait(req, reply, lw, LEASE_CANCEL_TAKE, NULL);
        if (lw->kind->acquire(lw->name, &lw->params, lw->waiter.lease_id, true, lw->attach, &res,
                              &err) != 0) {
            if (err.code != FG_ERR_BACKEND_UNAVAILABLE) {
                settle(lw);
                return fail(reply, &err);
            }
            /* a backend outage: the place in the queue is kept in Redis; look again soon */
            if (waiter_park(&lw->waiter, clock_mono_ms() + RECHECK_AFTER_OUTAGE_MS))
                return HANDLER_SUSPEND;
            continue;
        }
        hand_over(lw->kind, lw->name, &res);
        if (res.outcome != LEASE_QUEUED) {
            settle(lw);
            return reply_acquired(lw->kind, req, reply, &res);
        }
        if (strcmp(res.lease_id, lw->waiter.lease_id) != 0)
            waiter_rekey(&lw->waiter, res.lease_id);
        if (waiter_park(&lw->waiter, next_check(&res)))
            return HANDLER_SUSPEND;
    }
}

/* An acquire whose first attempt queued it (res): register the waiter and
 * park. A grant made to it before it was registered was kept as an orphan
 * (hand_over, the doorbell), which it takes back here. */
static enum handler_result start_wait(const struct lease_ops *kind, struct http_request *req,
                                      struct http_reply *reply, const struct acquire_params *p,
                                      const char *attach, const struct lease_result *res)
{
    struct fg_error err = {0};
    size_t owner_len = strlen(p->owner), rid_len = strlen(p->request_id);
    struct lease_wait *lw = calloc(1, sizeof *lw + owner_len + rid_len + 2);
    FG_ASSERT(lw != NULL);
    lw->kind = kind;
    lw->params = *p;
    lw->params.owner = memcpy(lw->text, p->owner, owner_len + 1);
    lw->params.request_id = memcpy(lw->text + owner_len + 1, p->request_id, rid_len + 1);
    lw->name = lease_name(req);
    snprintf(lw->waiter.lease_id, sizeof lw->waiter.lease_id, "%s", res->lease_id);
    snprintf(lw->attach, sizeof lw->attach, "%s", attach);
    lw->waiter.leave = leave_queues;
    if (waiter_add(&lw->waiter, req, http_request_fd(req), clock_mono_ms() + p->wait_ms, &err) !=
        0) {
        struct lease_result left;
        struct fg_error ignored = {0};
        if (kind->cancel(lw->name, lw->waiter.lease_id, lw->attach, LEASE_CANCEL_DROP, &left,
                         &ignored) == 0)
            hand_over(kind, lw->name, &left);
        free(lw);
        return fail(reply, &err);
    }
    http_request_drop_body(req);
    req->state = lw;
    req->state_free = lease_wait_free;
    doorbell_adopt(lw->waiter.lease_id);
    if (waiter_park(&lw->waiter, next_check(res)))
        return HANDLER_SUSPEND;
    return wait_for_lease(req, reply, lw);
}

static void log_subject(const struct lease_ops *kind, struct http_request *req)
{
    http_request_log_subject(req, "%s:%.200s", kind->noun, lease_name(req));
}

enum handler_result lease_handle_acquire(const struct lease_ops *kind, struct http_request *req,
                                         struct http_reply *reply)
{
    if (req->state != NULL)
        return wait_for_lease(req, reply, req->state);
    struct fg_error err = {0};
    log_subject(kind, req);
    json_t *body = http_request_json(req, &err);
    struct acquire_params p;
    char lease_id[LEASE_ID_LEN + 1], attach[LEASE_ID_LEN + 1] = "";
    if (body == NULL || acquire_params_parse(body, gw.cfg, kind->with_limit, &p, &err) != 0 ||
        token_new_lease_id(lease_id, &err) != 0)
        return fail(reply, &err);
    http_request_log_owner(req, p.owner);
    /* One attempt that queues at once if it may wait (not while draining). */
    bool may_wait = p.wait_ms > 0 && !gw.draining;
    if (may_wait && token_new_lease_id(attach, &err) != 0)
        return fail(reply, &err);
    struct lease_result res;
    if (kind->acquire(lease_name(req), &p, lease_id, may_wait, attach, &res, &err) != 0)
        return fail(reply, &err);
    hand_over(kind, lease_name(req), &res);
    if (may_wait && res.outcome == LEASE_QUEUED)
        return start_wait(kind, req, reply, &p, attach, &res);
    if (p.wait_ms > 0 && (res.outcome == LEASE_BUSY || res.outcome == LEASE_QUEUED)) {
        fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
        return fail(reply, &err);
    }
    return reply_acquired(kind, req, reply, &res);
}

/* Verifies the token of a renew or release and that it is for this lease. */
static int verified_lease(const struct lease_ops *kind, const struct http_request *req,
                          const char *token, struct token_claims *claims, struct fg_error *err)
{
    if (token_verify(token, secret_current(), claims, err) != 0)
        return -1;
    if (claims->kind != kind->token_kind || strcmp(claims->name, lease_name(req)) != 0)
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                       "the token was issued for another lock or semaphore");
    return 0;
}

/* 410 for a renew or release (op) whose lease is gone, logged as a lost lease. */
static enum handler_result lease_lost(const struct lease_ops *kind, struct http_request *req,
                                      struct http_reply *reply, const char *op,
                                      const struct token_claims *claims)
{
    log_lease_lost(kind->noun, lease_name(req), op, claims->fence, req->client_addr);
    struct fg_error err;
    fg_fail(&err, FG_ERR_LEASE_LOST, "the lease expired or was taken over");
    return fail(reply, &err);
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
    if (body == NULL || renew_params_parse(body, &p, &err) != 0 ||
        verified_lease(kind, req, p.token, &claims, &err) != 0 ||
        kind->renew(lease_name(req), claims.lease_id, p.ttl_ms, &res, &err) != 0)
        return fail(reply, &err);
    hand_over(kind, lease_name(req), &res);
    if (res.outcome == LEASE_LOST)
        return lease_lost(kind, req, reply, "renew", &claims);
    if (res.outcome == LEASE_MAX_HOLD) {
        fg_fail(&err, FG_ERR_MAX_HOLD_EXCEEDED, "the hold has reached its max_hold_ms deadline");
        reply_problem_extra(reply, &err,
                            json_pack("{s:I}", "hold_until_ms", (json_int_t)res.hold_until_ms));
        return HANDLER_DONE;
    }
    reply_json(reply, 200,
               json_pack("{s:s, s:I, s:I, s:I, s:I}", kind->noun, lease_name(req), "fence",
                         (json_int_t)res.fence, "ttl_ms", (json_int_t)res.ttl_ms, "expires_at_ms",
                         (json_int_t)res.expires_at_ms, "hold_until_ms",
                         (json_int_t)res.hold_until_ms));
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
    if (body == NULL || release_params_parse(body, &token, &err) != 0 ||
        verified_lease(kind, req, token, &claims, &err) != 0 ||
        kind->release(lease_name(req), claims.lease_id, &res, &err) != 0)
        return fail(reply, &err);
    hand_over(kind, lease_name(req), &res);
    if (res.outcome == LEASE_LOST)
        return lease_lost(kind, req, reply, "release", &claims);
    if (res.held_ms >= 0)
        metrics_hold_time(kind->metric, res.held_ms);
    reply_json(reply, 200, json_pack("{s:b}", "released", 1));
    return HANDLER_DONE;
}

enum handler_result lease_handle_status(const struct lease_ops *kind, struct http_request *req,
                                        struct http_reply *reply)
{
    const char *watch = http_request_query(req, "watch");
    if (req->state != NULL || (watch != NULL && strcmp(watch, "false") != 0))
        return lease_handle_watch(kind, req, reply);
    struct fg_error err = {0};
    json_t *status = NULL;
    if (kind->status(lease_name(req), &status, &err) != 0)
        return fail(reply, &err);
    reply_json(reply, 200, status);
    return HANDLER_DONE;
}

/* The fence a revoke names: a semaphore's body names it ("fence"), a lock's
 * is its current holder's (0 when nobody holds it). */
static int revoke_target(const struct lease_ops *kind, const char *name, const json_t *body,
                         long long *fence, struct fg_error *err)
{
    if (kind->holder_fence != NULL)
        return kind->holder_fence(name, fence, err);
    const json_t *f = json_object_get(body, "fence");
    if (!json_is_integer(f) || json_integer_value(f) < 1)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'fence' is required: the fence of the holder to revoke (>= 1)");
    *fence = json_integer_value(f);
    struct lease_watch seen;
    if (kind->watch(name, *fence, &seen, err) != 0)
        return -1;
    if (!seen.held)
        *fence = 0;
    return 0;
}

/* Reads the reason of a revoke body (the route admits only its members). */
static int revoke_body(const json_t *body, const char **reason, struct fg_error *err)
{
    const json_t *r = json_object_get(body, "reason");
    *reason = "";
    if (r == NULL)
        return 0;
    if (!json_is_string(r) || json_string_length(r) > REVOCATION_REASON_MAX ||
        strlen(json_string_value(r)) != json_string_length(r))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'reason' must be a string of at most %d bytes (without NUL)",
                       REVOCATION_REASON_MAX);
    *reason = json_string_value(r);
    return 0;
}

enum handler_result lease_handle_revoke(const struct lease_ops *kind, struct http_request *req,
                                        struct http_reply *reply)
{
    struct fg_error err = {0};
    log_subject(kind, req);
    json_t *body = http_request_json(req, &err);
    const char *reason = "";
    long long fence = 0;
    if (body == NULL || revoke_body(body, &reason, &err) != 0 ||
        revoke_target(kind, lease_name(req), body, &fence, &err) != 0)
        return fail(reply, &err);
    if (fence == 0) {
        reply_json(reply, 200, json_pack("{s:n}", "revoked_fence"));
        return HANDLER_DONE;
    }
    /* The durable record first: the Redis mirror can always be rebuilt from it. */
    struct lease_result res;
    if (revocation_record(fence, kind->noun, lease_name(req), reason, &err) != 0 ||
        kind->revoke(lease_name(req), fence, &res, &err) != 0)
        return fail(reply, &err);
    hand_over(kind, lease_name(req), &res);
    log_message(LOG_WARN, "lease_revoked", "%s %s: fence %lld revoked (%s)", kind->noun,
                lease_name(req), fence, reason[0] != '\0' ? reason : "no reason given");
    reply_json(reply, 200, json_pack("{s:I}", "revoked_fence", (json_int_t)fence));
    return HANDLER_DONE;
}

int lease_give_back_orphan(const struct lease_ops *kind, const char *name, const char *lease_id,
                           struct fg_error *err)
{
    struct lease_result res;
    if (kind->cancel(name, lease_id, "", LEASE_CANCEL_ORPHAN, &res, err) != 0)
        return -1;
    hand_over(kind, name, &res);
    return 0;
}
