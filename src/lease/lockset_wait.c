/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lockset_wait.c - the acquire of a lock set as a kind of the park engine
 * (lockset_wait.h): its attempt takes the locks in order until one is held
 * elsewhere, its give-up releases what it took, a grant handed over
 * in-process moves it to the next lock without a script call, and hung-up
 * clients leave their locks' queues in batches (lease_leave_queues). Each
 * lock of a set acquired with request_id R is taken under a request id made
 * of R, the digest of the set's names and the lock's name
 * (lockset_request_ids), so a retried set finds its leases again and gets the
 * same tokens. A call for a lock that got no reply leaves that lock's lease,
 * which Redis may grant or queue all the same, to the janitor to drop
 * (lease_drop_if_unanswered), as a single acquire does. No HTTP: the handler
 * signs and writes.
 */
#include "lease/lockset_wait.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/keyset.h"
#include "gateway.h"
#include "lease/lease_keys.h"
#include "lease/lease_ops.h"
#include "lease/lease_wait.h"
#include "lease/lock.h"
#include "util/budget.h"
#include "util/log.h"

/* A set's lock whose lease ends more than ttl_ms / FINISH_SLACK_PART before the last lock's when
 * the set is complete is renewed then (finish). */
#define FINISH_SLACK_PART 10

/* The lock-set wait that owns park p. */
static struct lockset_wait *set_of(struct park *p)
{
    return PARK_OWNER(p, struct lockset_wait, park);
}

/* After a cancel or release of lock name during a give-up (rc its result): logs a failure. */
static void give_up_lock(const char *name, int rc, const struct fg_error *err)
{
    if (rc != 0)
        log_message(LOG_WARN, "lockset_cleanup", "lock %s: %s", name, err->msg);
}

/* The sets with a request_id running in this gateway, by request id (lockset_wait.h). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t given_back; /* a set in the table is done giving back */
    struct strmap sets;        /* struct lockset_wait by request */
} running = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, STRMAP_INIT};

/* ls begins: with a request_id it takes over the earlier attempt running here, once that one is
 * done giving back, and runs in its place. */
static void take_over(struct lockset_wait *ls)
{
    const char *hash = strrchr(ls->rids[0], '#');
    if (hash == NULL)
        return;
    snprintf(ls->request, sizeof ls->request, "%.*s", (int)(hash - ls->rids[0]), ls->rids[0]);
    pthread_mutex_lock(&running.lock);
    struct lockset_wait *earlier;
    for (;;) {
        struct strmap_node *node = strmap_find(&running.sets, ls->request);
        earlier = node != NULL ? STRMAP_ENTRY(node, struct lockset_wait, by_request) : NULL;
        if (earlier == NULL || !earlier->giving_back)
            break;
        pthread_cond_wait(&running.given_back, &running.lock);
    }
    if (earlier != NULL) {
        earlier->taken_over = true;
        strmap_remove(&running.sets, &earlier->by_request);
    }
    strmap_add(&running.sets, &ls->by_request, ls->request);
    pthread_mutex_unlock(&running.lock);
}

/* True if ls may give back what it holds (no retry took it over); it is then giving back until
 * given_back. */
static bool giving_back(struct lockset_wait *ls)
{
    pthread_mutex_lock(&running.lock);
    ls->giving_back = !ls->taken_over;
    pthread_mutex_unlock(&running.lock);
    return ls->giving_back;
}

/* True if a retry with ls's request_id runs in its place in this gateway. */
static bool was_taken_over(struct lockset_wait *ls)
{
    pthread_mutex_lock(&running.lock);
    bool taken = ls->taken_over;
    pthread_mutex_unlock(&running.lock);
    return taken;
}

static void given_back(struct lockset_wait *ls)
{
    pthread_mutex_lock(&running.lock);
    ls->giving_back = false;
    pthread_cond_broadcast(&running.given_back);
    pthread_mutex_unlock(&running.lock);
}

/* ls ends: out of the table of running sets. */
static void stop_running(struct lockset_wait *ls)
{
    if (ls->request[0] == '\0')
        return;
    pthread_mutex_lock(&running.lock);
    strmap_remove(&running.sets, &ls->by_request);
    pthread_mutex_unlock(&running.lock);
}

/* True if a cancel (drop) of a set's place answered outcome with its queue's length once the
 * place left it: the place left the queue, or had been granted and was handed on (its grant came
 * as the wait ended), or was gone already. */
static bool left_queue(enum lease_outcome outcome)
{
    return outcome == LEASE_CANCELED || outcome == LEASE_RELEASED || outcome == LEASE_GONE;
}

/* Gives up: the lock waited for (if queued; its queue's length is then the set's waiting) and
 * every lock held, unless a retry took the set over (the retry holds them now); mine_only: only
 * the locks whose lease this attempt made, not those it adopted by request id. Held locks are
 * given up as this attempt's (drop with its attach): one a retry through another gateway took
 * over answers superseded and stays held; one that gets no reply is left to the janitor
 * (lease_drop). Each cancel has a deadline of its own (budget_set_aside): a set gives up when a
 * call spent the request's time too. */
static void abandon_some(struct lockset_wait *ls, bool queued, bool mine_only)
{
    ls->settled = true;
    if (!giving_back(ls))
        return;
    bool budget = budget_set_aside();
    struct lease_result res;
    struct fg_error err = {0};
    if (queued && ls->next < ls->set.n) {
        int rc = lease_drop(&lease_lock_ops, ls->set.names[ls->next], ls->leases[ls->next],
                            ls->attach, ls->params.request_id, &res, &err);
        give_up_lock(ls->set.names[ls->next], rc, &err);
        if (rc == 0 && left_queue(res.outcome))
            ls->waiting = res.waiting;
    }
    for (size_t i = 0; i < ls->next; i++)
        if (!(mine_only && ls->adopted[i]))
            give_up_lock(ls->set.names[i],
                         lease_drop(&lease_lock_ops, ls->set.names[i], ls->leases[i], ls->attach,
                                    ls->params.request_id, &res, &err),
                         &err);
    budget_restore(budget);
    given_back(ls);
}

static void abandon(struct lockset_wait *ls, bool queued)
{
    abandon_some(ls, queued, false);
}

/* What became of an earlier attempt's place (drop_earlier_place). */
enum place_drop { PLACE_DROPPED, PLACE_GRANTED, PLACE_LEFT_TO_RETRY };

/* A set that will not wait found its request id's place queued at lock next (found): an earlier
 * attempt still waits there, holding the locks before it, which this set took over as it found
 * them. It drops that place (mode place, naming the connection found waiting there: the earlier
 * attempt's gateway is rung and it answers 409 conflict), so that the set, which then gives up,
 * holds nothing and no grant goes to a place nobody waits in. PLACE_GRANTED if the place was
 * granted to that attempt in between (mode place never frees a grant): the set asks again, takes
 * the grant over as it took the locks before it, and goes on; the earlier attempt, taken over,
 * answers 409 conflict or the same leases. This set itself taken over by a later retry leaves the
 * place to it and answers 409 conflict: one here as it begins, one through another gateway as it
 * takes the place (or its grant) over, which the cancel then leaves alone. The cancel has a
 * deadline of its own, as abandon_some's. */
static enum place_drop drop_earlier_place(struct lockset_wait *ls, const struct lease_result *found)
{
    if (!giving_back(ls))
        return PLACE_LEFT_TO_RETRY;
    const char *name = ls->set.names[ls->next];
    struct lease_result res;
    struct fg_error err = {0};
    bool budget = budget_set_aside();
    int rc = lock_cancel(name, found->lease_id, found->attach, LEASE_CANCEL_PLACE, &res, &err);
    budget_restore(budget);
    given_back(ls);
    give_up_lock(name, rc, &err);
    if (rc == 0 && res.outcome == LEASE_GRANTED)
        return PLACE_GRANTED;
    if (rc == 0 && res.outcome == LEASE_SUPERSEDED)
        return PLACE_LEFT_TO_RETRY;
    /* The queue without the place: the cancel answers its length once the place left. */
    ls->waiting = rc == 0 && res.outcome == LEASE_CANCELED ? res.waiting
                  : found->waiting > 0                     ? found->waiting - 1
                                                           : 0;
    return PLACE_DROPPED;
}

/* Gives up and answers 409 lock_busy (or the error of outcome) naming the lock not obtained,
 * with its queue's length (res's, or the one its waiter left; place_dropped: the set found an
 * earlier attempt's place there and dropped it, which set the length). A lock whose lease of
 * this request id ended was held by an attempt of this set, which was then answered: the locks
 * adopted by request id are that client's, and stay with it; the script's "ended" counts no
 * queue, so that answer has no length. */
static void give_up_naming(struct lockset_wait *ls, const struct lease_result *res,
                           bool place_dropped, const char *detail)
{
    const char *name = ls->set.names[ls->next];
    abandon_some(ls, ls->waits, res != NULL && res->outcome == LEASE_ENDED);
    ls->failed_lock = name;
    if (res != NULL && !place_dropped)
        ls->waiting = res->outcome == LEASE_ENDED ? -1 : res->waiting;
    if (res != NULL && res->outcome == LEASE_FULL)
        fg_fail(&ls->err, FG_ERR_TOO_MANY_WAITERS, "the queue of lock '%s' is full", name);
    else if (res != NULL && res->outcome == LEASE_ENDED)
        fg_fail(&ls->err, FG_ERR_LEASE_LOST, "the lease of this request_id on lock '%s' has ended",
                name);
    else
        fg_fail(&ls->err, FG_ERR_LOCK_BUSY, "lock '%s' %s; no lock of the set is held", name,
                detail);
}

/* Extends to the set's ttl the held locks whose leases end before ends_before (Redis time;
 * INT64_MAX: every one) and those a retry found by request id, as this attempt's; false (and
 * *lost names the lock, ls->lost_to_retry whether a retry of the request took it over) if one
 * was lost. */
static bool renew_held(struct lockset_wait *ls, int64_t now, int64_t ends_before, size_t *lost,
                       int *rc)
{
    *rc = 0;
    for (size_t i = 0; i < ls->next; i++) {
        if (ls->held[i].expires_at_ms >= ends_before && !ls->adopted[i])
            continue;
        struct lease_result res;
        if (lock_renew_attached(ls->set.names[i], ls->leases[i], ls->attach, ls->params.ttl_ms,
                                &res, &ls->err) != 0) {
            *rc = -1;
            *lost = i;
            return false;
        }
        if (res.outcome != LEASE_RENEWED) {
            *lost = i;
            ls->lost_to_retry = res.outcome == LEASE_SUPERSEDED;
            return false;
        }
        ls->held[i].expires_at_ms = res.expires_at_ms;
    }
    ls->renew_at = now + ls->params.ttl_ms / 3;
    return true;
}

/* A held lock was lost (renew_held): gives up what is still this attempt's and answers why: 409
 * conflict where a retry of the request took it over (the set is the retry's), else 410 naming
 * the lock, without a queue length (the renewal's "lost" counts none; the one the give-up may have
 * set is that of the lock waited for). */
static void lost_one(struct lockset_wait *ls, size_t lost, int rc, bool queued, const char *when)
{
    const char *name = ls->set.names[lost];
    abandon(ls, queued);
    if (rc != 0)
        return;
    if (ls->lost_to_retry) {
        fg_fail(&ls->err, FG_ERR_CONFLICT, "a retry with the same request_id took this set over");
        return;
    }
    ls->failed_lock = name;
    ls->waiting = -1;
    fg_fail(&ls->err, FG_ERR_LEASE_LOST, "lock '%s' of the set was lost %s", name, when);
}

/* All locks are held: a set that queued for one renews every lock, so that each lease it answers
 * still holds (one taken before the wait may have been revoked, or have expired, meanwhile, and be
 * another client's now) and lasts about ttl_ms from now; one taken in one pass renews those whose
 * leases end more than ttl_ms / FINISH_SLACK_PART before the last one's and those a retry found
 * (granted to the attempt before): its leases began within the milliseconds the pass took, and
 * renewing them cost a script call a lock. Then the set is answered. */
static void finish(struct lockset_wait *ls, int64_t now)
{
    size_t lost = 0;
    int rc;
    int64_t last_ends = ls->held[ls->set.n - 1].expires_at_ms;
    int64_t ends_before =
        ls->waited ? INT64_MAX : last_ends - ls->params.ttl_ms / FINISH_SLACK_PART;
    if (ls->set.n > 1 && !renew_held(ls, now, ends_before, &lost, &rc)) {
        lost_one(ls, lost, rc, false, "while the rest was taken");
        return;
    }
    ls->settled = true;
}

/* When a parked set should look again: when a single waiter in its place of
 * the lock's queue would (lease_wait_next_check), or sooner to renew the
 * locks it holds. */
static int64_t next_check(const struct lockset_wait *ls, const struct lease_result *res,
                          int64_t now)
{
    int64_t at = lease_wait_next_check(res, now);
    if (ls->next > 0 && ls->renew_at < at)
        at = ls->renew_at;
    return at;
}

/* Lock next of the set is held (by grant g): on to the one after it. */
static void took(struct lockset_wait *ls, const struct lease_grant *g, int64_t now)
{
    ls->held[ls->next] = *g;
    snprintf(ls->leases[ls->next], sizeof ls->leases[0], "%s", g->lease_id);
    ls->next++;
    ls->asked_next = false;
    if (ls->next == 1)
        ls->renew_at = now + ls->params.ttl_ms / 3;
    if (ls->waits && ls->next < ls->set.n)
        waiter_rekey(&ls->park.waiter, ls->leases[ls->next]);
}

/* One acquire attempt on lock next: once it was asked for with wait, as an
 * attempt looking again, which the script looks up in the lock's queue (one
 * the doorbell woke first claims a grant another gateway made it). */
static int ask(struct lockset_wait *ls, const struct acquire_params *ap, struct lease_result *res)
{
    enum lease_acquire_wait again = ls->park.rung ? LEASE_ACQUIRE_RUNG : LEASE_ACQUIRE_AGAIN;
    enum lease_acquire_wait wait = ls->asked_next ? again
                                   : ls->waits    ? LEASE_ACQUIRE_QUEUE
                                                  : LEASE_ACQUIRE_ONCE;
    ls->asked_next = ls->waits;
    return lock_acquire(ls->set.names[ls->next], ap, ls->leases[ls->next], wait, ls->attach, res,
                        &ls->err);
}

/* The call asking for lock next failed (ls->err); first: the lock's first ask. One that got no
 * reply (503: its deadline passed, its connection broke) may reach Redis all the same and be
 * granted or queued, its answer dropped: as a single acquire's, that lease goes to the janitor to
 * drop, so that the set's 503 waits for no cancel of it; a set with a request_id leaves it to its
 * retry, which finds it. A first ask that Redis refused before running it made no lease
 * (lease_acquire_failed); a later one leaves the place an earlier ask queued in to the janitor
 * all the same. The set gives back the locks it took, and the place it queued in when Redis
 * answered the call. */
static void ask_failed(struct lockset_wait *ls, bool first)
{
    if (first)
        lease_acquire_failed(&lease_lock_ops, ls->set.names[ls->next], ls->leases[ls->next],
                             ls->attach, ls->params.request_id, &ls->err);
    else
        lease_drop_if_unanswered(&lease_lock_ops, ls->set.names[ls->next], ls->leases[ls->next],
                                 ls->attach, ls->params.request_id, &ls->err);
    abandon(ls, ls->waits && ls->err.code != FG_ERR_BACKEND_UNAVAILABLE);
}

/* A retry with the same request_id took this attempt over: the locks are its now, and this
 * attempt neither takes another nor gives one back. */
static enum park_try superseded(struct lockset_wait *ls)
{
    ls->settled = true;
    fg_fail(&ls->err, FG_ERR_CONFLICT, "a retry with the same request_id took this wait over");
    return PARK_TRY_ANSWERED;
}

/* The attempt hook: takes the locks in order until all are held, the set gives up, or it waits. */
static enum park_try attempt(struct park *p, int64_t now, int64_t *next_check_ms)
{
    struct lockset_wait *ls = set_of(p);
    for (;;) {
        if (ls->next == ls->set.n) {
            finish(ls, now);
            return PARK_TRY_ANSWERED;
        }
        size_t lost = 0;
        int rc;
        if (ls->next > 0 && now >= ls->renew_at && !renew_held(ls, now, INT64_MAX, &lost, &rc)) {
            lost_one(ls, lost, rc, true, "while waiting");
            return PARK_TRY_ANSWERED;
        }
        if (was_taken_over(ls)) /* a retry here: it goes on where this attempt was */
            return superseded(ls);
        struct acquire_params ap = ls->params;
        ap.request_id = ls->rids[ls->next];
        struct lease_result res;
        bool first = !ls->asked_next;
        if (ask(ls, &ap, &res) != 0) {
            ask_failed(ls, first);
            return PARK_TRY_ANSWERED;
        }
        if (res.outcome == LEASE_SUPERSEDED) /* a retry through another gateway took it over */
            return superseded(ls);
        ls->adopted[ls->next] |= (res.outcome == LEASE_GRANTED || res.outcome == LEASE_QUEUED) &&
                                 strcmp(res.lease_id, ls->leases[ls->next]) != 0;
        if (res.outcome == LEASE_GRANTED) {
            struct lease_grant g = {
                .fence = res.fence, .ttl_ms = res.ttl_ms, .expires_at_ms = res.expires_at_ms};
            memcpy(g.lease_id, res.lease_id, sizeof g.lease_id);
            took(ls, &g, now);
            continue;
        }
        bool earlier_place = res.outcome == LEASE_QUEUED && !ls->waits && ls->adopted[ls->next];
        enum place_drop drop = earlier_place ? drop_earlier_place(ls, &res) : PLACE_DROPPED;
        if (drop == PLACE_GRANTED)
            continue;
        if (drop == PLACE_LEFT_TO_RETRY)
            return superseded(ls);
        if (res.outcome != LEASE_QUEUED || !ls->waits) {
            give_up_naming(ls, &res, earlier_place, "is held");
            return PARK_TRY_ANSWERED;
        }
        if (strcmp(res.lease_id, ls->leases[ls->next]) != 0) {
            snprintf(ls->leases[ls->next], sizeof ls->leases[0], "%s", res.lease_id);
            waiter_rekey(&p->waiter, res.lease_id);
        }
        ls->waited = true;
        int slot = lease_keys_slot(LEASE_KIND_LOCK, ls->set.names[ls->next]);
        if (slot != p->waiter.slot) /* the next lock's queue: its slot's beat from now on */
            waiter_set_slot(&p->waiter, slot);
        *next_check_ms = next_check(ls, &res, now);
        return PARK_TRY_WAIT;
    }
}

/* The give-up hook: a retry owns the leases now; a drain or hang-up gives up
 * the lock waited for (unless the janitor took it out) and every lock held; a
 * deadline too, naming the lock not obtained; a key revoked as well, also
 * once the set was complete (an attempt that failed gave everything up
 * already). */
static int give_up(struct park *p, enum park_why why, bool left, struct fg_error *err)
{
    (void)err;
    struct lockset_wait *ls = set_of(p);
    if (why == PARK_WHY_SUPERSEDED)
        ls->settled = true;
    else if (why == PARK_WHY_DEADLINE)
        give_up_naming(ls, NULL, false, "was not obtained within wait_ms");
    else if (!ls->settled || (why == PARK_WHY_KEY && ls->err.code == FG_OK))
        abandon(ls, !left && !ls->settled);
    return 0;
}

/* The take-grant hook: the lock waited for was handed over; the set goes on. */
static bool take_grant(struct park *p)
{
    struct lease_grant g = park_grant_of(p);
    took(set_of(p), &g, park_clock());
    return false;
}

/* Where the set of p waits: the queue of the lock it waits for. */
static struct lease_queue queue_of(struct park *p)
{
    struct lockset_wait *ls = set_of(p);
    return (struct lease_queue){
        &lease_lock_ops, ls->set.names[ls->next], {ls->leases[ls->next], ls->attach}};
}

/* The leave-many hook: hung-up sets leave their locks' queues together. */
static void leave_many(struct park *const *ps, size_t n, bool *left)
{
    lease_leave_queues(ps, n, queue_of, left);
}

/* The release hook: an unanswered set gives up what it holds and frees itself. */
static void release(struct park *p, bool holds_place)
{
    struct lockset_wait *ls = set_of(p);
    if (!ls->settled)
        abandon(ls, holds_place && ls->waits);
    stop_running(ls);
    free(ls);
}

/* The permit hook: the scope of every lock of the set, in the order of the request's names. */
static int permit(struct park *p, const struct api_key *key, struct fg_error *err)
{
    struct lockset_wait *ls = set_of(p);
    for (size_t k = 0; k < ls->set.n; k++) {
        const char *name = ls->set.names[lockset_asked(&ls->set, k)];
        if (api_key_permit_lease(key, "lock", name, err) != 0) {
            ls->denied_lock = name;
            return -1;
        }
    }
    return 0;
}

static const struct park_kind lockset_kind = {
    .attempt = attempt,
    .give_up = give_up,
    .take_grant = take_grant,
    .leave_many = leave_many,
    .release = release,
    .permit = permit,
};

enum park_step lockset_wait_begin(struct lockset_wait *ls, const struct waiter_client *client,
                                  struct fg_error *problem)
{
    *problem = (struct fg_error){0};
    ls->park.kind = &lockset_kind;
    ls->waits = ls->params.wait_ms > 0;
    take_over(ls);
    if (!ls->waits) { /* one attempt, no registration */
        int64_t at;
        FG_ASSERT(attempt(&ls->park, park_clock(), &at) == PARK_TRY_ANSWERED);
        return PARK_STEP_ANSWER;
    }
    if (gw.draining) {
        ls->settled = true;
        fg_fail(&ls->err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
        return PARK_STEP_ANSWER;
    }
    snprintf(ls->park.waiter.lease_id, sizeof ls->park.waiter.lease_id, "%s", ls->leases[0]);
    ls->park.waiter.slot = lease_keys_slot(LEASE_KIND_LOCK, ls->set.names[ls->next]);
    if (park_register(&ls->park, &lockset_kind, client, park_clock() + ls->params.wait_ms,
                      &ls->err) != 0) {
        ls->settled = true;
        return PARK_STEP_ANSWER;
    }
    return park_run(&ls->park, problem);
}

enum park_step lockset_wait_run(struct lockset_wait *ls, struct fg_error *problem)
{
    return park_run(&ls->park, problem);
}

void lockset_wait_give_back(struct lockset_wait *ls)
{
    for (size_t i = 0; i < ls->next; i++)
        lease_give_back_unanswered(&lease_lock_ops, ls->set.names[i], ls->leases[i], ls->attach,
                                   ls->held[i].fence, ls->params.request_id[0] != '\0');
}

void lockset_wait_free(struct lockset_wait *ls)
{
    park_end(&ls->park); /* one never registered ends from WAIT_REGISTERING too */
}
