/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_wait.c - the acquire of a lock or a semaphore, up to its answer: the
 * first attempt here, the wait a kind of the park engine (park.h).
 *
 * An acquire costs one script call whether it is granted or queued: a free
 * lock or slot is granted at once, and an acquire that may wait joins the
 * queue in that same call. Only then does it register its waiter, so a grant
 * made to it in between (in-process or by the doorbell) finds no waiter and is
 * kept as an orphan, which the waiter takes back as it registers: one handed
 * over in-process answers it without a script call, one rung makes it look.
 * A first call that got no reply leaves its lease, which Redis may grant or
 * queue all the same, to the janitor to drop (doorbell_add_unanswered); one
 * that Redis refused before running it (a cluster down), or that was never
 * sent, leaves none.
 * It then parks between attempts; an attempt the doorbell woke (a grant from
 * another gateway, held for the claim window) first claims it with a lean
 * script (LEASE_ACQUIRE_RUNG). A passed deadline gives up but keeps a grant that
 * arrived meanwhile; a superseding retry, a drain or a hang-up leave the
 * queue (a hang-up of one that carries a request_id keeps its place for a
 * retry instead: kept_place.h). Waiters near the head re-check when the (first) holder's lease
 * should end, so a crashed holder's lease is handed on with nobody releasing.
 * A re-check that meets a backend outage (Redis restarting, fences not
 * reservable while Postgres is down) keeps the waiter parked until its
 * deadline: its place in the queue lives in Redis.
 *
 * Hand-over in-process: when a script grants to other waiters of this same
 * gateway (a semaphore release, say), it answers those grants instead of
 * ringing their doorbell; the script runner puts each grant into its waiter
 * and wakes it (lease_hand_over), and the woken waiter is answered without
 * another script call. A grant whose waiter is no longer here becomes an
 * orphan, given back after the doorbell's grace period. Hung-up clients leave
 * their queues in batches, one script call per lock and batch.
 *
 * This module speaks lease facts and problems: it neither signs tokens nor
 * writes replies.
 */
#include "lease/lease_wait.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "auth/keyset.h"
#include "gateway.h"
#include "lease/doorbell.h"
#include "lease/kept_place.h"
#include "lease/lease_keys.h"
#include "lease/park.h"
#include "util/log.h"

/* Waiters this close to the head re-check when the (first) holder's lease ends; a grant
 * made then rings the waiter it makes the last of them (lua/lib_lease.lua EXPIRY_WATCHERS). */
#define EXPIRY_WATCHERS 3

/* A waiter this many places back or more re-checks one poll_ms later per such
 * step, up to BACKSTOP_MAX_POLLS poll_ms: a long queue costs a bounded number
 * of re-checks a second, not one per waiter and poll_ms. */
#define BACKSTOP_STEP      100
#define BACKSTOP_MAX_POLLS 10

/* An acquire that waits. It keeps no copy of the request's body: a parked
 * request costs its connection, this and little else. */
struct lease_wait {
    struct park park;              /* the engine's; park.waiter.lease_id is the lease */
    const struct lease_ops *kind;  /* lock or semaphore */
    struct acquire_params params;  /* the acquire's (owner and request_id point into text) */
    const char *name;              /* the lock or semaphore (borrowed from the request) */
    struct lease_wait_end *end;    /* where its answer goes: the caller's, while the engine runs */
    int64_t fence;                 /* answered a grant: its fence; else 0 */
    bool parked;                   /* registered: a hang-up may keep its place (keep_place) */
    char attach[LEASE_ID_LEN + 1]; /* id of this connection's attempt */
    char text[];                   /* owner, NUL, request_id, NUL */
};

/* The lease wait that owns park p. */
static struct lease_wait *wait_of(struct park *p)
{
    return PARK_OWNER(p, struct lease_wait, park);
}

void lease_hand_over(enum lease_kind kind, const char *name, const struct lease_result *res)
{
    for (size_t i = 0; i < res->nhandoff; i++)
        if (!waiter_deliver(res->handoff[i].lease_id, &res->handoff[i]))
            doorbell_add_orphan(kind, res->handoff[i].lease_id, name, "", &res->handoff[i]);
}

/* Starts a fresh end: no problem, no busy detail. */
static void end_clear(struct lease_wait_end *end)
{
    end->err = (struct fg_error){0};
    end->busy_detail = NULL;
}

void lease_drop_if_unanswered(const struct lease_ops *kind, const char *name, const char *lease_id,
                              const char *attach, const char *request_id,
                              const struct fg_error *err)
{
    if (err->code == FG_ERR_BACKEND_UNAVAILABLE && request_id[0] == '\0')
        doorbell_add_unanswered((char)kind->token_kind, lease_id, name, attach);
}

void lease_acquire_failed(const struct lease_ops *kind, const char *name, const char *lease_id,
                          const char *attach, const char *request_id, const struct fg_error *err)
{
    if (!err->not_run)
        lease_drop_if_unanswered(kind, name, lease_id, attach, request_id, err);
}

int lease_drop(const struct lease_ops *kind, const char *name, const char *lease_id,
               const char *attach, const char *request_id, struct lease_result *res,
               struct fg_error *err)
{
    if (kind->cancel(name, lease_id, attach, LEASE_CANCEL_DROP, res, err) == 0)
        return 0;
    lease_drop_if_unanswered(kind, name, lease_id, attach, request_id, err);
    return -1;
}

/* The head waiters look again when the (first) holder's lease ends (crash
 * recovery, a lease renewed shorter), the first BACKSTOP_STEP at least every
 * poll_ms (lost doorbells, a retry elsewhere that took the place over), those
 * further back less often: their turn is far off, and any waiter's re-check
 * hands a lock freed without a release on. */
int64_t lease_wait_next_check(const struct lease_result *res, int64_t now)
{
    long long polls = 1 + res->position / BACKSTOP_STEP;
    if (polls > BACKSTOP_MAX_POLLS)
        polls = BACKSTOP_MAX_POLLS;
    int64_t delay = gw.cfg->poll_ms * polls;
    if (res->position < EXPIRY_WATCHERS && res->holder_pttl_ms >= 0 &&
        res->holder_pttl_ms + 5 < delay)
        delay = res->holder_pttl_ms + 5;
    if (res->holder_pttl_ms < 0 && delay > 50)
        delay = 50; /* nothing held, yet queued: look again soon */
    return now + delay;
}

/* The attempt hook: the acquire once more, in the queue it is in. */
static enum park_try attempt(struct park *p, int64_t now, int64_t *next_check_ms)
{
    struct lease_wait *lw = wait_of(p);
    struct lease_wait_end *end = lw->end;
    end_clear(end);
    enum lease_acquire_wait wait = p->rung ? LEASE_ACQUIRE_RUNG : LEASE_ACQUIRE_AGAIN;
    if (lw->kind->acquire(lw->name, &lw->params, p->waiter.lease_id, wait, lw->attach, &end->res,
                          &end->err) != 0)
        return end->err.code == FG_ERR_BACKEND_UNAVAILABLE ? PARK_TRY_OUTAGE : PARK_TRY_ANSWERED;
    if (end->res.outcome != LEASE_QUEUED)
        return PARK_TRY_ANSWERED;
    if (strcmp(end->res.lease_id, p->waiter.lease_id) != 0) {
        waiter_rekey(&p->waiter, end->res.lease_id);
        kept_place_forget(end->res.lease_id);
    }
    *next_check_ms = lease_wait_next_check(&end->res, now);
    return PARK_TRY_WAIT;
}

/* True if the client of lw may hang up and keep its place for a retry: it carries a request_id,
 * places are kept (limits.kept_place_ms) and the gateway is not stopping. */
static bool may_keep(const struct lease_wait *lw)
{
    return lw->parked && lw->params.request_id[0] != '\0' && gw.cfg->kept_place_ms > 0 &&
           !gw.draining;
}

/* The client of lw hung up: keeps its place for a retry of its request_id (kept_place.h), for
 * limits.kept_place_ms at most and no longer than its wait. A grant that came to the wait as its
 * client went (handed over or rung, not taken up) is given back as an orphan of its attempt: a
 * place still queued, or a grant a retry took over, is left alone. Returns true if kept. */
static bool keep_place(struct lease_wait *lw)
{
    if (!may_keep(lw))
        return false;
    int64_t now = park_clock(), until = now + gw.cfg->kept_place_ms;
    if (until > lw->park.waiter.deadline_ms)
        until = lw->park.waiter.deadline_ms;
    const struct api_key *key = lw->park.waiter.key;
    if (until <= now || !kept_place_add(lw->kind, lw->name, lw->park.waiter.lease_id, lw->attach,
                                        key != NULL ? key->id : NULL, lw->park.waiter.slot, until))
        return false;
    doorbell_add_orphan((char)lw->kind->token_kind, lw->park.waiter.lease_id, lw->name, lw->attach,
                        NULL);
    log_message(
        LOG_INFO, "place_kept",
        "%s %s: its client hung up; the place is kept %lld ms for a retry of its request_id",
        lw->kind->noun, lw->name, (long long)(until - now));
    return true;
}

/* The give-up hook: leaves the queue (unless the janitor took it out, or a hang-up keeps the
 * place), giving back a grant it got (its key revoked); at the deadline it keeps a grant that
 * arrived meanwhile, else answers busy. */
static int give_up(struct park *p, enum park_why why, bool left, struct fg_error *err)
{
    struct lease_wait *lw = wait_of(p);
    struct lease_wait_end *end = lw->end;
    end_clear(end);
    if (why == PARK_WHY_SUPERSEDED || left || (why == PARK_WHY_HANGUP && keep_place(lw)))
        return 0;
    if (why != PARK_WHY_DEADLINE) {
        struct lease_result res;
        return lease_drop(lw->kind, lw->name, p->waiter.lease_id, lw->attach, lw->params.request_id,
                          &res, err);
    }
    if (lw->kind->cancel(lw->name, p->waiter.lease_id, lw->attach, LEASE_CANCEL_TAKE, &end->res,
                         err) != 0) {
        lease_drop_if_unanswered(lw->kind, lw->name, p->waiter.lease_id, lw->attach,
                                 lw->params.request_id, err);
        return -1;
    }
    if (end->res.outcome != LEASE_GRANTED)
        end->busy_detail = "wait_ms passed before the lease was granted";
    return 0;
}

/* The take-grant hook: a grant handed over in-process is the acquire's answer. */
static bool take_grant(struct park *p)
{
    struct lease_wait *lw = wait_of(p);
    struct lease_result *res = &lw->end->res;
    end_clear(lw->end);
    res->outcome = LEASE_GRANTED;
    res->fence = p->grant.fence;
    res->ttl_ms = p->grant.ttl_ms;
    res->expires_at_ms = p->grant.expires_at_ms;
    memcpy(res->lease_id, p->waiter.lease_id, sizeof res->lease_id);
    return true;
}

/* Takes ps[first] (not taken yet) and the waits of ps[first + 1..n) of the same
 * lock or semaphore that are not taken yet (taken[]) out of its queue, up to
 * LEASE_LEAVE_MAX of them in one script call, setting left[] for those that left. */
static void leave_batch(struct park *const *ps, size_t first, size_t n, lease_queue_of_fn queue_of,
                        bool *taken, bool *left)
{
    size_t at[LEASE_LEAVE_MAX];
    struct lease_leaver leavers[LEASE_LEAVE_MAX];
    bool out[LEASE_LEAVE_MAX];
    struct lease_queue head = queue_of(ps[first]);
    taken[first] = true;
    at[0] = first;
    leavers[0] = head.leaver;
    size_t nbatch = 1;
    for (size_t i = first + 1; i < n && nbatch < LEASE_LEAVE_MAX; i++) {
        struct lease_queue q = queue_of(ps[i]);
        if (taken[i] || q.kind != head.kind || strcmp(q.name, head.name) != 0)
            continue;
        taken[i] = true;
        at[nbatch] = i;
        leavers[nbatch++] = q.leaver;
    }
    struct fg_error err = {0};
    if (head.kind->leave(head.name, leavers, nbatch, out, &err) != 0) {
        log_message(LOG_WARN, "waiter_cleanup", "%s %s: %s", head.kind->noun, head.name, err.msg);
        return; /* each leaves on its own as it wakes */
    }
    for (size_t k = 0; k < nbatch; k++)
        left[at[k]] = out[k];
}

void lease_leave_queues(struct park *const *ps, size_t n, lease_queue_of_fn queue_of, bool *left)
{
    bool *taken = calloc(n, sizeof *taken);
    FG_ASSERT(taken != NULL);
    for (size_t i = 0; i < n; i++)
        if (!taken[i])
            leave_batch(ps, i, n, queue_of, taken, left);
    free(taken);
}

/* Where the lease wait of p waits. */
static struct lease_queue queue_of(struct park *p)
{
    struct lease_wait *lw = wait_of(p);
    return (struct lease_queue){lw->kind, lw->name, {p->waiter.lease_id, lw->attach}};
}

/* The leave-many hook: the waits of each lock or semaphore leave together, but for those
 * that may keep their place (may_keep): they stay, and keep it as they give up. */
static void leave_many(struct park *const *ps, size_t n, bool *left)
{
    struct park **leaving = calloc(n, sizeof *leaving);
    size_t *at = calloc(n, sizeof *at);
    bool *out = calloc(n, sizeof *out);
    FG_ASSERT(leaving != NULL && at != NULL && out != NULL);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!may_keep(wait_of(ps[i]))) {
            at[m] = i;
            leaving[m++] = ps[i];
        }
    lease_leave_queues(leaving, m, queue_of, out);
    for (size_t k = 0; k < m; k++)
        left[at[k]] = out[k];
    free(leaving);
    free(at);
    free(out);
}

/* The release hook: a wait whose request ends unanswered first leaves its
 * queue, so no ghost waiter holds anything up (or keeps its place for a
 * retry, keep_place). */
static void release(struct park *p, bool holds_place)
{
    struct lease_wait *lw = wait_of(p);
    struct lease_result res;
    struct fg_error err = {0};
    if (holds_place && !keep_place(lw) &&
        lease_drop(lw->kind, lw->name, p->waiter.lease_id, lw->attach, lw->params.request_id, &res,
                   &err) != 0)
        log_message(LOG_WARN, "waiter_cleanup", "%s %s: %s", lw->kind->noun, lw->name, err.msg);
    free(lw);
}

/* The permit hook: the scope of the lock or semaphore. */
static int permit(struct park *p, const struct api_key *key, struct fg_error *err)
{
    struct lease_wait *lw = wait_of(p);
    return api_key_permit_lease(key, lw->kind->noun, lw->name, err);
}

static const struct park_kind lease_wait_kind = {
    .attempt = attempt,
    .give_up = give_up,
    .take_grant = take_grant,
    .leave_many = leave_many,
    .release = release,
    .permit = permit,
};

void lease_wait_free(struct lease_wait *lw)
{
    if (lw != NULL)
        park_end(&lw->park);
}

/* The answer of lw after step: the engine's problem if it answered, else what the hooks put in
 * *lw->end. */
static enum park_step answer(struct lease_wait *lw, enum park_step step,
                             const struct fg_error *problem)
{
    if (step != PARK_STEP_PARK && problem->code != FG_OK) {
        lw->end->err = *problem;
        lw->end->busy_detail = NULL;
    }
    const struct lease_wait_end *end = lw->end;
    if (step == PARK_STEP_ANSWER && end->err.code == FG_OK && end->busy_detail == NULL &&
        end->res.outcome == LEASE_GRANTED)
        lw->fence = end->res.fence;
    lw->end = NULL;
    return step;
}

/* An acquire whose first attempt queued it (end->res): registers its waiter
 * and parks. A grant made to it before it was registered was kept as an
 * orphan (lease_hand_over with the grant, the doorbell without), which it
 * takes back here. */
static enum park_step start(const struct lease_ops *kind, const char *name,
                            const struct acquire_params *p, const char *attach,
                            const struct waiter_client *client, struct lease_wait **wait,
                            struct lease_wait_end *end)
{
    size_t owner_len = strlen(p->owner), rid_len = strlen(p->request_id);
    struct lease_wait *lw = calloc(1, sizeof *lw + owner_len + rid_len + 2);
    FG_ASSERT(lw != NULL);
    lw->kind = kind;
    lw->params = *p;
    lw->params.owner = memcpy(lw->text, p->owner, owner_len + 1);
    lw->params.request_id = memcpy(lw->text + owner_len + 1, p->request_id, rid_len + 1);
    lw->name = name;
    snprintf(lw->park.waiter.lease_id, sizeof lw->park.waiter.lease_id, "%s", end->res.lease_id);
    snprintf(lw->attach, sizeof lw->attach, "%s", attach);
    lw->park.waiter.slot = lease_keys_slot(kind->token_kind, name);
    int64_t now = park_clock();
    if (park_register(&lw->park, &lease_wait_kind, client, now + p->wait_ms, &end->err) != 0) {
        park_end(&lw->park); /* leaves the queue it joined */
        return PARK_STEP_ANSWER;
    }
    *wait = lw;
    lw->parked = true;
    doorbell_adopt(lw->park.waiter.lease_id);
    kept_place_forget(lw->park.waiter.lease_id);
    int64_t at = lease_wait_next_check(&end->res, now);
    lw->end = end;
    struct fg_error problem;
    return answer(lw, park_wait(&lw->park, at, &problem), &problem);
}

enum park_step lease_wait_begin(const struct lease_ops *kind, const char *name,
                                const struct acquire_params *p, const struct waiter_client *client,
                                struct lease_wait **wait, struct lease_wait_end *end)
{
    *wait = NULL;
    end_clear(end);
    char lease_id[LEASE_ID_LEN + 1], attach[LEASE_ID_LEN + 1] = "";
    /* One attempt that queues at once if it may wait (not while draining). */
    bool may_wait = p->wait_ms > 0 && !gw.draining;
    if (token_new_lease_id(lease_id, &end->err) != 0 ||
        (may_wait && token_new_lease_id(attach, &end->err) != 0))
        return PARK_STEP_ANSWER;
    if (kind->acquire(name, p, lease_id, may_wait ? LEASE_ACQUIRE_QUEUE : LEASE_ACQUIRE_ONCE,
                      attach, &end->res, &end->err) != 0) {
        lease_acquire_failed(kind, name, lease_id, attach, p->request_id, &end->err);
        return PARK_STEP_ANSWER;
    }
    if (may_wait && end->res.outcome == LEASE_QUEUED)
        return start(kind, name, p, attach, client, wait, end);
    if (p->wait_ms > 0 && (end->res.outcome == LEASE_BUSY || end->res.outcome == LEASE_QUEUED))
        fg_fail(&end->err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
    return PARK_STEP_ANSWER;
}

enum park_step lease_wait_run(struct lease_wait *lw, struct lease_wait_end *end)
{
    lw->end = end;
    end_clear(end);
    struct fg_error problem;
    return answer(lw, park_run(&lw->park, &problem), &problem);
}

int lease_give_back_orphan(const struct lease_ops *kind, const char *name, const char *lease_id,
                           const char *attach, bool drop, struct fg_error *err)
{
    struct lease_result res;
    return kind->cancel(name, lease_id, attach, drop ? LEASE_CANCEL_DROP : LEASE_CANCEL_ORPHAN,
                        &res, err);
}

void lease_give_back_unanswered(const struct lease_ops *kind, const char *name,
                                const char *lease_id, const char *attach, int64_t fence, bool keep)
{
    if (keep) {
        log_message(LOG_INFO, "grant_kept", "%s %s: fence %lld kept for a retry of its request_id",
                    kind->noun, name, (long long)fence);
        return;
    }
    struct lease_result res;
    struct fg_error err = {0};
    if (lease_drop(kind, name, lease_id, attach, "", &res, &err) != 0) {
        log_message(LOG_WARN, "grant_given_back", "%s %s: fence %lld: %s", kind->noun, name,
                    (long long)fence, err.msg);
        return;
    }
    if (res.outcome != LEASE_RELEASED)
        return; /* superseded: a retry holds it now; gone: it ended meanwhile */
    metrics_grant_given_back(kind->metric);
    log_message(LOG_WARN, "grant_given_back",
                "%s %s: fence %lld given back, its client was gone before the answer reached it",
                kind->noun, name, (long long)fence);
}

void lease_wait_give_back(struct lease_wait *lw)
{
    lease_give_back_unanswered(lw->kind, lw->name, lw->park.waiter.lease_id, lw->attach, lw->fence,
                               lw->params.request_id[0] != '\0');
}
