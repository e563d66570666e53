/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.c - a watch of a lease as a kind of the park engine (watch.h): its
 * attempt looks at the lease once, its deadline looks a last time, and it has
 * nothing to give up or leave. A look after the first that finds Redis
 * unavailable (restarting, failing over, a cluster slot split by a reshard)
 * keeps the watch parked: nothing says the lease ended, and the next look,
 * soon, tells it as soon as Redis answers.
 */
#include "lease/watch.h"

#include <stdio.h>
#include <stdlib.h>

#include "auth/keyset.h"
#include "gateway.h"

#define WATCH_EXPIRY_SLACK_MS 2 /* re-check this long after the lease should have expired */

/* The watcher that owns park p. */
static struct lease_watcher *watcher_of(struct park *p)
{
    return PARK_OWNER(p, struct lease_watcher, park);
}

/* The attempt hook: looks at the lease; answered once it ended or the wait is over, else parks
 * until its expiry (or poll_ms). Only the first look answers an outage. */
static enum park_try attempt(struct park *p, int64_t now, int64_t *next_check_ms)
{
    struct lease_watcher *w = watcher_of(p);
    if (w->kind->watch(w->name, w->fence, true, &w->seen, p->problem) != 0) {
        if (!w->looked || p->problem->code != FG_ERR_BACKEND_UNAVAILABLE)
            return PARK_TRY_ANSWERED;
        *p->problem = (struct fg_error){0};
        return PARK_TRY_OUTAGE;
    }
    w->looked = true;
    if (!w->seen.held || now >= p->waiter.deadline_ms)
        return PARK_TRY_ANSWERED;
    int64_t delay =
        w->seen.pttl_ms >= 0 ? w->seen.pttl_ms + WATCH_EXPIRY_SLACK_MS : gw.cfg->poll_ms;
    if (delay > gw.cfg->poll_ms)
        delay = gw.cfg->poll_ms;
    *next_check_ms = now + delay;
    return PARK_TRY_WAIT;
}

/* The give-up hook: at the deadline a last look is the answer; otherwise nothing is held. */
static int give_up(struct park *p, enum park_why why, bool left, struct fg_error *err)
{
    (void)left;
    struct lease_watcher *w = watcher_of(p);
    if (why != PARK_WHY_DEADLINE)
        return 0;
    return w->kind->watch(w->name, w->fence, false, &w->seen, err);
}

static void release(struct park *p, bool holds_place)
{
    (void)holds_place;
    free(watcher_of(p));
}

/* The permit hook: the scope of the watched lock or semaphore. */
static int permit(struct park *p, const struct api_key *key, struct fg_error *err)
{
    struct lease_watcher *w = watcher_of(p);
    return api_key_permit_lease(key, w->kind->noun, w->name, err);
}

static const struct park_kind watch_kind = {
    .attempt = attempt,
    .give_up = give_up,
    .release = release,
    .permit = permit,
};

enum park_step lease_watcher_begin(const struct lease_ops *kind, const char *name, long long fence,
                                   long long wait_ms, const struct waiter_client *client,
                                   struct lease_watcher **out, struct fg_error *err)
{
    struct lease_watcher *w = calloc(1, sizeof *w);
    FG_ASSERT(w != NULL);
    w->kind = kind;
    w->fence = fence;
    snprintf(w->name, sizeof w->name, "%.200s", name);
    w->park.waiter.watch_kind = (char)kind->token_kind;
    w->park.waiter.watch_fence = fence;
    w->park.waiter.watch_name = w->name;
    *out = NULL;
    if (park_register(&w->park, &watch_kind, client, park_clock() + wait_ms, err) != 0) {
        park_end(&w->park);
        return PARK_STEP_ANSWER;
    }
    *out = w;
    return park_run(&w->park, err);
}

enum park_step lease_watcher_run(struct lease_watcher *w, struct fg_error *err)
{
    return park_run(&w->park, err);
}

void lease_watcher_free(struct lease_watcher *w)
{
    park_end(&w->park);
}
