/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_locksets.c - lock sets: POST /v1/locksets/acquire, /renew and
 * /release. A set takes its locks one at a time in the global order of
 * lease/lockset.h, each through the ordinary lock transitions (one script per
 * lock, FIFO queue per lock), holding the ones it has while it waits for the
 * next: since every set climbs the same order, no cycle of waits, hence no
 * deadlock, can form. All or none: if the wait ends before the last lock is
 * held, the lock being waited for is given up and every lock taken is
 * released, and the answer names the lock that was not obtained.
 *
 * While it waits, the set is one parked connection (no thread), registered in
 * the waiter registry under the lease id of the lock it waits for, and it
 * renews the locks it already holds every third of their TTL. Each lock of a
 * set acquired with request_id R is taken under request id "set:R#<name>", so
 * a retried set finds its leases again and gets the same tokens.
 */
#include "http/handlers_locksets.h"

#include <stdlib.h>
#include <string.h>

#include "auth/keys.h"
#include "fglimits.h"
#include "gateway.h"
#include "lease/lease_wait.h"
#include "lease/lock.h"
#include "lease/lockset.h"
#include "lease/waiter.h"
#include "store/secret.h"
#include "util/clock.h"
#include "util/fgjson.h"
#include "util/log.h"

/* Handler state of an acquire of a set. */
struct lockset_wait {
    struct waiter waiter;                       /* registered under leases[next] */
    struct acquire_params params;               /* the body's (strings borrowed) */
    struct lockset set;                         /* the names, in the global order */
    char rids[LOCKSET_MAX][LOCKSET_RID_MAX];    /* per-lock request ids */
    char leases[LOCKSET_MAX][LEASE_ID_LEN + 1]; /* per-lock lease ids */
    struct lease_result held[LOCKSET_MAX];      /* grants of locks 0 .. next-1 */
    size_t next;                                /* the lock being acquired */
    char attach[LEASE_ID_LEN + 1];              /* id of this connection's attempt */
    bool waits;                                 /* wait_ms > 0: registered and parks */
    bool settled;                               /* answered or given up */
    int64_t renew_at;                           /* monotonic ms to renew the held locks */
};

static enum handler_result fail(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem(reply, err);
    return HANDLER_DONE;
}

/* After a cancel or release of lock name during a give-up (rc its result): logs a failure. */
static void give_up_lock(const char *name, int rc, const struct fg_error *err)
{
    if (rc != 0)
        log_message(LOG_WARN, "lockset_cleanup", "lock %s: %s", name, err->msg);
}

/* Gives up: the lock being waited for (if queued) and every lock held. */
static void abandon(struct lockset_wait *ls, bool queued)
{
    ls->settled = true;
    waiter_remove(&ls->waiter);
    struct lease_result res;
    struct fg_error err = {0};
    if (queued && ls->next < ls->set.n)
        give_up_lock(ls->set.names[ls->next],
                     lock_cancel(ls->set.names[ls->next], ls->leases[ls->next], ls->attach,
                                 LEASE_CANCEL_DROP, &res, &err),
                     &err);
    for (size_t i = 0; i < ls->next; i++)
        give_up_lock(ls->set.names[i], lock_release(ls->set.names[i], ls->leases[i], &res, &err),
                     &err);
}

static void lockset_wait_free(void *state)
{
    struct lockset_wait *ls = state;
    if (!ls->settled)
        abandon(ls, ls->waits);
    waiter_remove(&ls->waiter);
    free(ls);
}

/* 409 lock_busy (or the error of outcome) naming the lock not obtained, after giving up. */
static enum handler_result give_up(struct lockset_wait *ls, struct http_reply *reply,
                                   const struct lease_result *res, const char *detail)
{
    const char *name = ls->set.names[ls->next];
    struct fg_error err;
    abandon(ls, ls->waits);
    if (res != NULL && res->outcome == LEASE_FULL)
        fg_fail(&err, FG_ERR_TOO_MANY_WAITERS, "the queue of lock '%s' is full", name);
    else if (res != NULL && res->outcome == LEASE_ENDED)
        fg_fail(&err, FG_ERR_LEASE_LOST, "the lease of this request_id on lock '%s' has ended",
                name);
    else
        fg_fail(&err, FG_ERR_LOCK_BUSY, "lock '%s' %s; no lock of the set is held", name, detail);
    reply_problem_extra(reply, &err,
                        json_pack("{s:s, s:I}", "lock", name, "waiting",
                                  (json_int_t)(res != NULL ? res->waiting : 0)));
    return HANDLER_DONE;
}

/* Extends every held lock to the set's ttl; false (and *lost names the lock) if one was lost. */
static bool renew_held(struct lockset_wait *ls, size_t *lost, struct fg_error *err, int *rc)
{
    *rc = 0;
    for (size_t i = 0; i < ls->next; i++) {
        struct lease_result res;
        if (lock_renew(ls->set.names[i], ls->leases[i], ls->params.ttl_ms, &res, err) != 0) {
            *rc = -1;
            *lost = i;
            return false;
        }
        if (res.outcome != LEASE_RENEWED) {
            *lost = i;
            return false;
        }
        ls->held[i].expires_at_ms = res.expires_at_ms;
    }
    ls->renew_at = clock_mono_ms() + ls->params.ttl_ms / 3;
    return true;
}

/* All locks are held: renew them to one expiry, sign the tokens, answer in request order. */
static enum handler_result reply_set(struct lockset_wait *ls, struct http_reply *reply)
{
    struct fg_error err = {0};
    size_t lost = 0;
    int rc;
    if (ls->set.n > 1 && !renew_held(ls, &lost, &err, &rc)) {
        const char *name = ls->set.names[lost];
        abandon(ls, false);
        if (rc != 0)
            return fail(reply, &err);
        fg_fail(&err, FG_ERR_LEASE_LOST, "lock '%s' of the set was lost while the rest was taken",
                name);
        return fail(reply, &err);
    }
    ls->settled = true;
    waiter_remove(&ls->waiter);
    json_t *locks = json_array();
    for (size_t k = 0; k < ls->set.n; k++) {
        size_t i = 0;
        while (ls->set.asked_at[i] != k)
            i++;
        struct token_claims claims = {.kind = LEASE_KIND_LOCK, .fence = ls->held[i].fence};
        snprintf(claims.name, sizeof claims.name, "%s", ls->set.names[i]);
        snprintf(claims.lease_id, sizeof claims.lease_id, "%s", ls->leases[i]);
        char token[TOKEN_MAX_LEN];
        if (token_sign(&claims, secret_current(), token, sizeof token, &err) != 0) {
            json_decref(locks);
            return fail(reply, &err);
        }
        json_array_append_new(locks,
                              json_pack("{s:s, s:s, s:I, s:I, s:I}", "lock", ls->set.names[i],
                                        "token", token, "fence", (json_int_t)ls->held[i].fence,
                                        "ttl_ms", (json_int_t)ls->params.ttl_ms, "expires_at_ms",
                                        (json_int_t)ls->held[i].expires_at_ms));
    }
    reply_json(reply, 200, json_pack("{s:o}", "locks", locks));
    return HANDLER_DONE;
}

/* When a parked set should look again: the lock's own re-check time, capped by
 * the renewal of the held locks. */
static int64_t next_check(const struct lockset_wait *ls, const struct lease_result *res)
{
    int64_t at = clock_mono_ms() + gw.cfg->poll_ms;
    if (res->position < 3 && res->holder_pttl_ms >= 0)
        at = clock_mono_ms() + res->holder_pttl_ms + 5;
    if (res->holder_pttl_ms < 0)
        at = clock_mono_ms() + 50;
    if (ls->next > 0 && ls->renew_at < at)
        at = ls->renew_at;
    return at;
}

/* Takes the locks in order until all are held, the set gives up, or it parks. */
static enum handler_result step(struct lockset_wait *ls, struct http_reply *reply)
{
    for (;;) {
        struct fg_error err = {0};
        unsigned reasons = ls->waits ? waiter_take_reasons(&ls->waiter) : 0;
        if (reasons & WAKE_SUPERSEDED) {
            ls->settled = true; /* the retry owns the leases now */
            waiter_remove(&ls->waiter);
            fg_fail(&err, FG_ERR_CONFLICT, "a retry with the same request_id took this wait over");
            return fail(reply, &err);
        }
        if (reasons & WAKE_HANGUP) { /* the client gave up its wait: nobody to answer */
            abandon(ls, true);
            return HANDLER_CLOSE;
        }
        if (reasons & WAKE_DRAIN) {
            abandon(ls, true);
            fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
            return fail(reply, &err);
        }
        if (ls->next == ls->set.n)
            return reply_set(ls, reply);
        int64_t now = clock_mono_ms();
        if (ls->waits && now >= ls->waiter.deadline_ms)
            return give_up(ls, reply, NULL, "was not obtained within wait_ms");
        size_t lost = 0;
        int rc;
        if (ls->next > 0 && now >= ls->renew_at && !renew_held(ls, &lost, &err, &rc)) {
            const char *name = ls->set.names[lost];
            abandon(ls, true);
            if (rc == 0)
                fg_fail(&err, FG_ERR_LEASE_LOST, "lock '%s' of the set was lost while waiting",
                        name);
            return fail(reply, &err);
        }
        struct acquire_params p = ls->params;
        p.request_id = ls->rids[ls->next];
        struct lease_result res;
        if (lock_acquire(ls->set.names[ls->next], &p, ls->leases[ls->next], ls->waits, ls->attach,
                         &res, &err) != 0) {
            abandon(ls, ls->waits);
            return fail(reply, &err);
        }
        if (res.outcome == LEASE_GRANTED) {
            snprintf(ls->leases[ls->next], sizeof ls->leases[0], "%s", res.lease_id);
            ls->held[ls->next++] = res;
            if (ls->next == 1)
                ls->renew_at = clock_mono_ms() + ls->params.ttl_ms / 3;
            if (ls->waits && ls->next < ls->set.n)
                waiter_rekey(&ls->waiter, ls->leases[ls->next]);
            continue;
        }
        if (res.outcome != LEASE_QUEUED || !ls->waits)
            return give_up(ls, reply, &res, "is held");
        if (strcmp(res.lease_id, ls->leases[ls->next]) != 0) {
            snprintf(ls->leases[ls->next], sizeof ls->leases[0], "%s", res.lease_id);
            waiter_rekey(&ls->waiter, res.lease_id);
        }
        if (waiter_park(&ls->waiter, next_check(ls, &res)))
            return HANDLER_SUSPEND;
    }
}

/* Checks that the caller may use every lock named (auth scopes). */
static int permit_locks(const struct http_request *req, const char *const *names, size_t n,
                        struct fg_error *err)
{
    char scope[NAME_MAX_LEN + 8];
    for (size_t i = 0; i < n; i++) {
        snprintf(scope, sizeof scope, "lock:%s", names[i]);
        if (http_request_permit(req, scope, err) != 0)
            return -1;
    }
    return 0;
}

enum handler_result handle_lockset_acquire(struct http_request *req, struct http_reply *reply)
{
    if (req->state != NULL)
        return step(req->state, reply);
    struct fg_error err = {0};
    http_request_log_subject(req, "lockset");
    json_t *body = http_request_json(req, &err);
    struct lockset_wait *ls = calloc(1, sizeof *ls);
    FG_ASSERT(ls != NULL);
    const char *names[LOCKSET_MAX];
    if (body == NULL || lockset_parse_names(body, &ls->set, &err) != 0 ||
        acquire_params_parse(body, gw.cfg, false, &ls->params, &err) != 0 ||
        token_new_lease_id(ls->attach, &err) != 0)
        goto refused;
    char scoped[SCOPED_REQUEST_ID_MAX];
    const char *rid = acquire_request_id_scoped(
        ls->params.request_id, req->principal != NULL ? req->principal->id : NULL, scoped);
    for (size_t i = 0; i < ls->set.n; i++) {
        names[i] = ls->set.names[i];
        lockset_request_id(rid, ls->set.names[i], ls->rids[i]);
        if (token_new_lease_id(ls->leases[i], &err) != 0)
            goto refused;
    }
    if (permit_locks(req, names, ls->set.n, &err) != 0)
        goto refused;
    http_request_log_subject(req, "lockset:%.200s", ls->set.names[0]);
    http_request_log_owner(req, ls->params.owner);
    ls->waits = ls->params.wait_ms > 0;
    if (ls->waits) {
        if (gw.draining) {
            fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
            goto refused;
        }
        snprintf(ls->waiter.lease_id, sizeof ls->waiter.lease_id, "%s", ls->leases[0]);
        struct waiter_client client = http_request_waiter_client(req);
        if (waiter_add(&ls->waiter, &client, clock_mono_ms() + ls->params.wait_ms, &err) != 0)
            goto refused;
    }
    req->state = ls;
    req->state_free = lockset_wait_free;
    return step(ls, reply);
refused:
    free(ls);
    return fail(reply, &err);
}

/* Verified claims of every token of a renew or release body, all of locks. */
static int set_claims(struct http_request *req, const json_t *body,
                      struct token_claims claims[LOCKSET_MAX], size_t *n, struct fg_error *err)
{
    const char *tokens[LOCKSET_MAX], *names[LOCKSET_MAX];
    if (lockset_parse_tokens(body, tokens, n, err) != 0)
        return -1;
    for (size_t i = 0; i < *n; i++) {
        if (token_verify(tokens[i], secret_current(), &claims[i], err) != 0)
            return -1;
        if (claims[i].kind != LEASE_KIND_LOCK)
            return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                           "tokens[%zu] was issued for a semaphore, not a lock", i);
        names[i] = claims[i].name;
    }
    http_request_log_subject(req, "lockset:%.200s", claims[0].name);
    return permit_locks(req, names, *n, err);
}

enum handler_result handle_lockset_renew(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    json_t *body = http_request_json(req, &err);
    struct token_claims claims[LOCKSET_MAX];
    size_t n = 0;
    long long ttl_ms = 0;
    if (body == NULL || set_claims(req, body, claims, &n, &err) != 0 ||
        fgjson_int(body, "ttl_ms", TTL_MIN_MS, TTL_MAX_MS, &ttl_ms, NULL, &err) != 0)
        return fail(reply, &err);
    json_t *locks = json_array();
    const char *lost = NULL, *capped = NULL;
    for (size_t i = 0; i < n; i++) {
        struct lease_result res;
        if (lock_renew(claims[i].name, claims[i].lease_id, ttl_ms, &res, &err) != 0) {
            json_decref(locks);
            return fail(reply, &err);
        }
        if (res.outcome == LEASE_LOST && lost == NULL)
            lost = claims[i].name;
        if (res.outcome == LEASE_MAX_HOLD && capped == NULL)
            capped = claims[i].name;
        if (res.outcome == LEASE_RENEWED)
            json_array_append_new(locks, json_pack("{s:s, s:I, s:I, s:I, s:I}", "lock",
                                                   claims[i].name, "fence", (json_int_t)res.fence,
                                                   "ttl_ms", (json_int_t)res.ttl_ms,
                                                   "expires_at_ms", (json_int_t)res.expires_at_ms,
                                                   "hold_until_ms", (json_int_t)res.hold_until_ms));
    }
    if (lost != NULL || capped != NULL) {
        json_decref(locks);
        fg_fail(&err, lost ? FG_ERR_LEASE_LOST : FG_ERR_MAX_HOLD_EXCEEDED,
                "lock '%s' of the set %s; the others were renewed", lost ? lost : capped,
                lost ? "is no longer held" : "has reached its max_hold_ms deadline");
        reply_problem_extra(reply, &err, json_pack("{s:s}", "lock", lost ? lost : capped));
        return HANDLER_DONE;
    }
    reply_json(reply, 200, json_pack("{s:o}", "locks", locks));
    return HANDLER_DONE;
}

enum handler_result handle_lockset_release(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    json_t *body = http_request_json(req, &err);
    struct token_claims claims[LOCKSET_MAX];
    size_t n = 0;
    if (body == NULL || set_claims(req, body, claims, &n, &err) != 0)
        return fail(reply, &err);
    const char *lost = NULL;
    for (size_t i = 0; i < n; i++) {
        struct lease_result res;
        if (lock_release(claims[i].name, claims[i].lease_id, &res, &err) != 0)
            return fail(reply, &err);
        if (res.outcome == LEASE_LOST && lost == NULL)
            lost = claims[i].name;
    }
    if (lost != NULL) {
        fg_fail(&err, FG_ERR_LEASE_LOST,
                "lock '%s' of the set was no longer held; the others were released", lost);
        reply_problem_extra(reply, &err, json_pack("{s:s}", "lock", lost));
        return HANDLER_DONE;
    }
    reply_json(reply, 200, json_pack("{s:b}", "released", 1));
    return HANDLER_DONE;
}
