/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_wait.c - the acquire of a lock or a semaphore, up to its answer.
 *
 * An acquire costs one script call whether it is granted or queued: a free
 * lock or slot is granted at once, and an acquire that may wait joins the
 * queue in that same call. Only then does it register its waiter, so a grant
 * made to it in between (in-process or by the doorbell) finds no waiter and is
 * kept as an orphan, which the waiter takes back as it registers. It then
 * parks between attempts. Each resumption reads why it woke: a doorbell or
 * timer re-checks, a hang-up or drain leaves the queue, a passed deadline gives
 * up but keeps a grant that arrived meanwhile. Waiters near the head re-check
 * when the (first) holder's lease should end, so a crashed holder's lease is
 * handed on with nobody releasing. A re-check that meets a backend outage
 * (Redis restarting, fences not reservable while Postgres is down) keeps the
 * waiter parked until its deadline: its place in the queue lives in Redis.
 *
 * Hand-over in-process: when a script grants to other waiters of this same
 * gateway (a semaphore release, say), it answers those grants instead of
 * ringing their doorbell; the request that ran it puts each grant into its
 * waiter and wakes it, and the woken waiter is answered without another
 * script call. A grant whose waiter is no longer here becomes an orphan, given
 * back after the doorbell's grace period.
 *
 * Each wait's state (wait_state.h) changes in wait_set only. This module
 * speaks lease facts and problems: it neither signs tokens nor writes replies.
 */
#include "lease/lease_wait.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "lease/doorbell.h"
#include "lease/wait_state.h"
#include "lease/waiter.h"
#include "util/clock.h"
#include "util/log.h"

/* Waiters this close to the head re-check when the (first) holder's lease ends. */
#define EXPIRY_WATCHERS 3

/* A waiter this many places back or more re-checks one poll_ms later per such
 * step, up to BACKSTOP_MAX_POLLS poll_ms: a long queue costs a bounded number
 * of re-checks a second, not one per waiter and poll_ms. */
#define BACKSTOP_STEP      100
#define BACKSTOP_MAX_POLLS 10

/* An acquire that waits. It keeps no copy of the request's body: a parked
 * request costs its connection, this and little else. */
struct lease_wait {
    struct waiter waiter;         /* registry entry; waiter.lease_id is the lease */
    const struct lease_ops *kind; /* lock or semaphore */
    struct acquire_params params; /* the acquire's (owner and request_id point into text) */
    const char *name;             /* the lock or semaphore (borrowed from the request) */
    struct {                      /* a grant handed over in-process, for waiter.lease_id */
        int64_t fence, ttl_ms, expires_at_ms;
    } delivered;
    enum wait_state state;         /* where it is in its life (wait_state.h); see wait_set */
    atomic_bool has_delivered;     /* delivered is set (store-release, load-acquire) */
    char attach[LEASE_ID_LEN + 1]; /* id of this connection's attempt */
    char text[];                   /* owner, NUL, request_id, NUL */
};

/* The lease wait that owns registry entry w. */
static struct lease_wait *wait_of(struct waiter *w)
{
    return (struct lease_wait *)((char *)w - offsetof(struct lease_wait, waiter));
}

/*
 * The one transition function of a lease wait: moves lw to the state that
 * follows ev (wait_state.h); an event its state never meets is a bug. A wait
 * that is answered or freed leaves the registry. Runs on the thread of its
 * request, or on the janitor's while the request is suspended (WAIT_EV_LEFT).
 * Returns the state it left.
 */
static enum wait_state wait_set(struct lease_wait *lw, enum wait_event ev)
{
    enum wait_state from = lw->state;
    lw->state = (enum wait_state)fsm_step(&wait_lifecycle, (int)from, (int)ev);
    if (lw->state == WAIT_ANSWERED || lw->state == WAIT_GONE)
        waiter_remove(&lw->waiter);
    return from;
}

/* The deliver hook of a wait's waiter: stores the grant news (for w's lease) in the wait owning w.
 */
static void take_grant(struct waiter *w, const void *news)
{
    struct lease_wait *lw = wait_of(w);
    const struct lease_grant *grant = news;
    lw->delivered.fence = grant->fence;
    lw->delivered.ttl_ms = grant->ttl_ms;
    lw->delivered.expires_at_ms = grant->expires_at_ms;
    atomic_store_explicit(&lw->has_delivered, true, memory_order_release);
}

void lease_hand_over(enum lease_kind kind, const char *name, const struct lease_result *res)
{
    for (size_t i = 0; i < res->nhandoff; i++)
        if (!waiter_deliver(res->handoff[i].lease_id, &res->handoff[i]))
            doorbell_add_orphan(kind, res->handoff[i].lease_id, name);
}

void lease_wait_free(struct lease_wait *lw)
{
    waiter_remove(&lw->waiter); /* the janitor is done with it and will not take it up */
    if (wait_state_holds_place(wait_set(lw, WAIT_EV_END))) {
        struct lease_result res;
        struct fg_error err = {0};
        if (lw->kind->cancel(lw->name, lw->waiter.lease_id, lw->attach, LEASE_CANCEL_DROP, &res,
                             &err) != 0)
            log_message(LOG_WARN, "waiter_cleanup", "%s %s: %s", lw->kind->noun, lw->name, err.msg);
    }
    free(lw);
}

/* Takes the waits ws[first..n) of the same lock or semaphore as ws[first] that
 * are not taken yet (taken[]) out of its queue, up to LEASE_LEAVE_MAX of them
 * in one script call. A wait that left is answered without another call. */
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
        if (left[i])
            wait_set(batch[i], WAIT_EV_LEFT);
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

/* Parks lw until at (monotonic ms). Returns false if a wake came first: it
 * is awake again and reads why at once. */
static bool park(struct lease_wait *lw, int64_t at)
{
    wait_set(lw, WAIT_EV_PARK); /* before the registry sees it parked (leave_batch) */
    if (waiter_park(&lw->waiter, at))
        return true;
    wait_set(lw, WAIT_EV_WAKE);
    return false;
}

/* Starts a fresh end: no problem, no busy detail. */
static void end_clear(struct lease_wait_end *end)
{
    end->err = (struct fg_error){0};
    end->busy_detail = NULL;
}

/* Gives up the wait (WAIT_LEAVING): mode says whether a grant that arrived
 * meanwhile is kept. The end is that grant, else the failure to leave, else
 * why (NULL: wait_ms passed, a busy answer). */
static void leave_wait(struct lease_wait *lw, enum lease_cancel_mode mode,
                       const struct fg_error *why, struct lease_wait_end *end)
{
    int rc =
        lw->kind->cancel(lw->name, lw->waiter.lease_id, lw->attach, mode, &end->res, &end->err);
    wait_set(lw, WAIT_EV_ANSWER);
    if (rc != 0)
        return;
    if (end->res.outcome == LEASE_GRANTED)
        return;
    if (why != NULL)
        end->err = *why;
    else
        end->busy_detail = "wait_ms passed before the lease was granted";
}

/* A grant handed over in-process (WAIT_CLAIMING), as the answer of the acquire. */
static void claim(struct lease_wait *lw, struct lease_result *res)
{
    res->outcome = LEASE_GRANTED;
    res->fence = lw->delivered.fence;
    res->ttl_ms = lw->delivered.ttl_ms;
    res->expires_at_ms = lw->delivered.expires_at_ms;
    memcpy(res->lease_id, lw->waiter.lease_id, sizeof res->lease_id);
    wait_set(lw, WAIT_EV_ANSWER);
}

/* Reads why the awake wait lw woke and acts on it, until it is answered or
 * parks. */
static enum lease_wait_step wait_on(struct lease_wait *lw, struct lease_wait_end *end)
{
    for (;;) {
        unsigned reasons = waiter_take_reasons(&lw->waiter);
        struct fg_error why;
        end_clear(end);
        if (reasons & WAKE_SUPERSEDED) {
            wait_set(lw, WAIT_EV_ANSWER);
            fg_fail(&end->err, FG_ERR_CONFLICT,
                    "a retry with the same request_id took this wait over");
            return LEASE_WAIT_ANSWER;
        }
        if (reasons & WAKE_DRAIN) {
            fg_fail(&why, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
            wait_set(lw, WAIT_EV_GIVE_UP);
            leave_wait(lw, LEASE_CANCEL_DROP, &why, end);
            return LEASE_WAIT_ANSWER;
        }
        if (reasons & WAKE_HANGUP) { /* nobody reads the answer: it is only logged */
            fg_fail(&why, FG_ERR_LOCK_BUSY, "the client closed the connection while waiting");
            if (lw->state == WAIT_LEFT) { /* it left its queue with others (leave_queues) */
                wait_set(lw, WAIT_EV_ANSWER);
                end->err = why;
            } else {
                wait_set(lw, WAIT_EV_GIVE_UP);
                leave_wait(lw, LEASE_CANCEL_DROP, &why, end);
            }
            return LEASE_WAIT_HANGUP;
        }
        if (atomic_load_explicit(&lw->has_delivered, memory_order_acquire)) {
            wait_set(lw, WAIT_EV_DELIVERED);
            claim(lw, &end->res);
            return LEASE_WAIT_ANSWER;
        }
        if (clock_mono_ms() >= lw->waiter.deadline_ms) {
            wait_set(lw, WAIT_EV_GIVE_UP);
            leave_wait(lw, LEASE_CANCEL_TAKE, NULL, end);
            return LEASE_WAIT_ANSWER;
        }
        wait_set(lw, WAIT_EV_RECHECK);
        if (lw->kind->acquire(lw->name, &lw->params, lw->waiter.lease_id, true, lw->attach,
                              &end->res, &end->err) != 0) {
            if (end->err.code != FG_ERR_BACKEND_UNAVAILABLE) {
                wait_set(lw, WAIT_EV_ANSWER);
                return LEASE_WAIT_ANSWER;
            }
            /* a backend outage: the place in the queue is kept in Redis; look again soon */
            if (park(lw, clock_mono_ms() + RECHECK_AFTER_OUTAGE_MS))
                return LEASE_WAIT_PARK;
            continue;
        }
        if (end->res.outcome != LEASE_QUEUED) {
            wait_set(lw, WAIT_EV_ANSWER);
            return LEASE_WAIT_ANSWER;
        }
        if (strcmp(end->res.lease_id, lw->waiter.lease_id) != 0)
            waiter_rekey(&lw->waiter, end->res.lease_id);
        if (park(lw, next_check(&end->res)))
            return LEASE_WAIT_PARK;
    }
}

/* An acquire whose first attempt queued it (end->res): registers its waiter
 * and parks. A grant made to it before it was registered was kept as an
 * orphan (lease_hand_over, the doorbell), which it takes back here. */
static enum lease_wait_step start(const struct lease_ops *kind, const char *name,
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
    lw->state = WAIT_REGISTERING;
    snprintf(lw->waiter.lease_id, sizeof lw->waiter.lease_id, "%s", end->res.lease_id);
    snprintf(lw->attach, sizeof lw->attach, "%s", attach);
    lw->waiter.leave = leave_queues;
    lw->waiter.deliver = take_grant;
    if (waiter_add(&lw->waiter, client, clock_mono_ms() + p->wait_ms, &end->err) != 0) {
        lease_wait_free(lw); /* leaves the queue it joined */
        return LEASE_WAIT_ANSWER;
    }
    *wait = lw;
    doorbell_adopt(lw->waiter.lease_id);
    if (park(lw, next_check(&end->res)))
        return LEASE_WAIT_PARK;
    return wait_on(lw, end);
}

enum lease_wait_step lease_wait_begin(const struct lease_ops *kind, const char *name,
                                      const struct acquire_params *p,
                                      const struct waiter_client *client, struct lease_wait **wait,
                                      struct lease_wait_end *end)
{
    *wait = NULL;
    end_clear(end);
    char lease_id[LEASE_ID_LEN + 1], attach[LEASE_ID_LEN + 1] = "";
    /* One attempt that queues at once if it may wait (not while draining). */
    bool may_wait = p->wait_ms > 0 && !gw.draining;
    if (token_new_lease_id(lease_id, &end->err) != 0 ||
        (may_wait && token_new_lease_id(attach, &end->err) != 0) ||
        kind->acquire(name, p, lease_id, may_wait, attach, &end->res, &end->err) != 0)
        return LEASE_WAIT_ANSWER;
    if (may_wait && end->res.outcome == LEASE_QUEUED)
        return start(kind, name, p, attach, client, wait, end);
    if (p->wait_ms > 0 && (end->res.outcome == LEASE_BUSY || end->res.outcome == LEASE_QUEUED))
        fg_fail(&end->err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
    return LEASE_WAIT_ANSWER;
}

enum lease_wait_step lease_wait_run(struct lease_wait *lw, struct lease_wait_end *end)
{
    if (lw->state == WAIT_PARKED)
        wait_set(lw, WAIT_EV_WAKE);
    return wait_on(lw, end);
}

int lease_give_back_orphan(const struct lease_ops *kind, const char *name, const char *lease_id,
                           struct fg_error *err)
{
    struct lease_result res;
    return kind->cancel(name, lease_id, "", LEASE_CANCEL_ORPHAN, &res, err);
}
