/* SPDX-License-Identifier: Apache-2.0 */
/*
 * park.c - the park engine (park.h): the one wake loop of every wait and the
 * table of answers per wake reason. The waiter registry (waiter.c) holds the
 * waits, moves their lifecycle (wait_state.h) and wakes them; this module
 * decides what a woken wait does, through its kind's hooks, and does no I/O
 * of its own.
 *
 * The reasons are read in the order of the table: a retry that took the wait
 * over, a drain and a hang-up end it whatever else came, and the same way for
 * every kind (the give-up hook first gives up its place); then the caller's
 * API key, checked against the key set in force whatever woke the wait (a
 * reload wakes the waits of the keys it removed or changed, but a wait may
 * have registered as the reload ran); then a grant handed over in-process;
 * then a passed deadline; else the kind tries again. An attempt that answers
 * checks the key once more: a reload may have come while it ran, and what it
 * got is then given back. With auth off a wait has no key and nothing is
 * checked. The give-up and release hooks clean up: their Redis calls have
 * deadlines of their own (util/budget.h), whatever the run spent before.
 */
#include "lease/park.h"

#include <stdlib.h>
#include <string.h>

#include "auth/keyset.h"
#include "fglimits.h"
#include "util/budget.h"
#include "util/clock.h"

int64_t (*park_clock)(void) = clock_mono_ms;

/* The answers of the reasons that end any wait, read in this order. */
static const struct {
    unsigned reason;     /* enum waiter_wake bit */
    enum park_why why;   /* given to the kind's give-up hook */
    enum fg_code code;   /* the answer */
    const char *detail;  /* its detail */
    enum park_step step; /* answered, or only logged */
} ends[] = {
    {WAKE_SUPERSEDED, PARK_WHY_SUPERSEDED, FG_ERR_CONFLICT,
     "a retry with the same request_id took this wait over", PARK_STEP_ANSWER},
    {WAKE_DRAIN, PARK_WHY_DRAIN, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping",
     PARK_STEP_ANSWER},
    {WAKE_HANGUP, PARK_WHY_HANGUP, FG_ERR_LOCK_BUSY,
     "the client closed the connection while waiting", PARK_STEP_HANGUP},
};

/* The park that owns registry entry w. */
static struct park *park_of(struct waiter *w)
{
    return PARK_OWNER(w, struct park, waiter);
}

/* The registry's deliver hook: keeps the grant (under the registry lock) for take_grant; its
 * lease id is the waiter's own. */
static void deliver(struct waiter *w, const void *news)
{
    const struct lease_grant *g = news;
    park_of(w)->grant = (struct park_grant){g->fence, g->ttl_ms, g->expires_at_ms};
}

struct lease_grant park_grant_of(const struct park *p)
{
    struct lease_grant g = {.fence = p->grant.fence,
                            .ttl_ms = p->grant.ttl_ms,
                            .expires_at_ms = p->grant.expires_at_ms};
    memcpy(g.lease_id, p->waiter.lease_id, sizeof g.lease_id);
    return g;
}

/* The registry's leave hook: hands the waits of each kind to its leave_many hook at once. */
static void leave(struct waiter *const *ws, size_t n, bool *left)
{
    struct park **ps = calloc(n, sizeof *ps);
    size_t *at = calloc(n, sizeof *at);
    bool *done = calloc(n, sizeof *done), *out = calloc(n, sizeof *out);
    FG_ASSERT(ps != NULL && at != NULL && done != NULL && out != NULL);
    for (size_t first = 0; first < n; first++) {
        if (done[first])
            continue;
        const struct park_kind *kind = park_of(ws[first])->kind;
        size_t m = 0;
        for (size_t i = first; i < n; i++)
            if (!done[i] && park_of(ws[i])->kind == kind) {
                done[i] = true;
                at[m] = i;
                ps[m++] = park_of(ws[i]);
            }
        memset(out, 0, m * sizeof *out);
        kind->leave_many(ps, m, out);
        for (size_t k = 0; k < m; k++)
            left[at[k]] = out[k];
    }
    free(ps);
    free(at);
    free(done);
    free(out);
}

int park_register(struct park *p, const struct park_kind *kind, const struct waiter_client *client,
                  int64_t deadline_ms, struct fg_error *err)
{
    p->kind = kind;
    p->waiter.deliver = kind->take_grant != NULL ? deliver : NULL;
    p->waiter.leave = kind->leave_many != NULL ? leave : NULL;
    p->waiter.state = WAIT_REGISTERING;
    return waiter_add(&p->waiter, client, deadline_ms, err);
}

/* Runs the give-up hook of p for why, its calls with deadlines of their own (budget_set_aside):
 * a run whose look spent the request's time for Redis must still leave its place, and a cancel
 * given no time would never be written. */
static int give_up(struct park *p, enum park_why why, bool left, struct fg_error *err)
{
    bool budget = budget_set_aside();
    int rc = p->kind->give_up(p, why, left, err);
    budget_restore(budget);
    return rc;
}

/* Ends p: gives it up for why and answers *answer (unless giving up failed: that failure is the
 * answer). Returns step. */
static enum park_step end_with(struct park *p, enum park_why why, const struct fg_error *answer,
                               enum park_step step)
{
    bool left = p->waiter.state == WAIT_LEFT;
    waiter_step(&p->waiter, WAIT_EV_GIVE_UP);
    if (give_up(p, why, left, p->problem) == 0)
        *p->problem = *answer;
    waiter_step(&p->waiter, WAIT_EV_ANSWER);
    return step;
}

/* Ends p with the answer of ends[i]. */
static enum park_step end_as(struct park *p, size_t i)
{
    struct fg_error answer;
    fg_fail(&answer, ends[i].code, "%s", ends[i].detail);
    return end_with(p, ends[i].why, &answer, ends[i].step);
}

/* 0 while the API key p was admitted with allows its wait under the key set in force (auth off
 * now: always), else -1 with *err the answer a fresh request with that key would get: 401 when no
 * key of its id is configured, or a key is required now and the wait came without one (auth was
 * off), 403 naming a scope the key of its id lacks now. */
static int key_allows(struct park *p, struct fg_error *err)
{
    const struct api_key *now;
    if (keyset_key_in_force(auth_current(), p->waiter.key, &now, err) != 0)
        return -1;
    if (now == NULL || now == p->waiter.key || p->kind->permit == NULL)
        return 0;
    return p->kind->permit(p, now, err);
}

/* Reads why the woken p woke. Returns true with *step if that answers it (an
 * end of the table, a grant that answers, the deadline), false to try again. */
static bool woken(struct park *p, enum park_step *step)
{
    unsigned reasons = waiter_take_reasons(&p->waiter);
    p->rung = (reasons & WAKE_DOORBELL) != 0;
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
        if (reasons & ends[i].reason) {
            *step = end_as(p, i);
            return true;
        }
    struct fg_error refused = {0};
    if (key_allows(p, &refused) != 0) {
        *step = end_with(p, PARK_WHY_KEY, &refused, PARK_STEP_ANSWER);
        return true;
    }
    *step = PARK_STEP_ANSWER;
    if ((reasons & WAKE_DELIVERED) && p->kind->take_grant != NULL) {
        waiter_step(&p->waiter, WAIT_EV_DELIVERED);
        bool answered = p->kind->take_grant(p);
        if (answered)
            waiter_step(&p->waiter, WAIT_EV_ANSWER);
        return answered;
    }
    if (park_clock() < p->waiter.deadline_ms)
        return false;
    waiter_step(&p->waiter, WAIT_EV_GIVE_UP);
    give_up(p, PARK_WHY_DEADLINE, false, p->problem);
    waiter_step(&p->waiter, WAIT_EV_ANSWER);
    return true;
}

/* Runs p until it is answered or parks, its answer in *problem: first_look, it
 * tries at once (just registered), else it first reads why it woke. The hooks
 * reach *problem through p->problem while it runs; a parked wait carries none. */
static enum park_step wake_loop(struct park *p, bool first_look, struct fg_error *problem)
{
    for (;; first_look = false) {
        *problem = (struct fg_error){0};
        p->problem = problem;
        enum park_step step;
        if (!first_look && woken(p, &step)) {
            p->problem = NULL;
            return step;
        }
        waiter_step(&p->waiter, WAIT_EV_RECHECK);
        int64_t now = park_clock(), at = now;
        enum park_try found = p->kind->attempt(p, now, &at);
        if (found == PARK_TRY_ANSWERED) {
            struct fg_error refused = {0};
            if (key_allows(p, &refused) != 0)
                end_with(p, PARK_WHY_KEY, &refused, PARK_STEP_ANSWER);
            else
                waiter_step(&p->waiter, WAIT_EV_ANSWER);
            p->problem = NULL;
            return PARK_STEP_ANSWER;
        }
        p->problem = NULL;
        if (found == PARK_TRY_OUTAGE)
            at = now + RECHECK_AFTER_OUTAGE_MS;
        if (waiter_park(&p->waiter, at))
            return PARK_STEP_PARK;
    }
}

enum park_step park_wait(struct park *p, int64_t next_check_ms, struct fg_error *problem)
{
    *problem = (struct fg_error){0};
    if (waiter_park(&p->waiter, next_check_ms))
        return PARK_STEP_PARK;
    return wake_loop(p, false, problem);
}

enum park_step park_run(struct park *p, struct fg_error *problem)
{
    return wake_loop(p, p->waiter.state == WAIT_REGISTERING, problem);
}

void park_end(struct park *p)
{
    enum wait_state from = waiter_end(&p->waiter);
    bool budget = budget_set_aside(); /* a clean-up, as give_up's */
    p->kind->release(p, wait_state_holds_place(from));
    budget_restore(budget);
}
