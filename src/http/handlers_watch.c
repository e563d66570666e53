/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_watch.c - watching a lease: GET /v1/locks/{name}?watch=true&fence=N
 * &wait_ms=W (and the same on semaphores) answers as soon as the lease with
 * fence N no longer holds, with how it ended, or after wait_ms with its time
 * left. A watcher is a parked connection in the waiter registry, like a
 * waiter: the "fg:ended" doorbell wakes it when the lease is released or
 * revoked, and its own timer at the lease's expiry (Redis publishes nothing
 * then), with poll_ms as the backstop. It never changes a lease.
 */
#include <stdlib.h>
#include <string.h>

#include "fglimits.h"
#include "gateway.h"
#include "http/handlers_lease.h"
#include "lease/waiter.h"
#include "util/clock.h"
#include "util/integer.h"

#define WATCH_EXPIRY_SLACK_MS 2 /* re-check this long after the lease should have expired */

/* Handler state of a watch that waits. */
struct lease_watcher {
    struct waiter waiter;         /* registry entry; watch_* name the watched lease */
    const struct lease_ops *kind; /* lock or semaphore */
    char name[NAME_MAX_LEN + 1];  /* the lock or semaphore */
    long long fence;              /* the watched lease */
};

static void watcher_free(void *state)
{
    struct lease_watcher *lw = state;
    waiter_remove(&lw->waiter);
    free(lw);
}

/* Reads a decimal query argument into *out within [min, max]; absent: fallback. */
static int query_number(const struct http_request *req, const char *arg, long long min,
                        long long max, long long fallback, long long *out, struct fg_error *err)
{
    const char *text = http_request_query(req, arg);
    *out = fallback;
    if (text == NULL)
        return fallback >= 0 ? 0
                             : fg_fail(err, FG_ERR_INVALID_FIELD, "query '%s' is required", arg);
    if (integer_parse(text, min, max, out) != INTEGER_OK)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "query '%s' must be an integer from %lld to %lld",
                       arg, min, max);
    return 0;
}

/* The answer once the lease ended or the wait is over. */
static enum handler_result answer(struct lease_watcher *lw, struct http_reply *reply,
                                  const struct lease_watch *seen)
{
    json_t *body = json_pack("{s:s, s:I, s:b}", lw->kind->noun, lw->name, "fence",
                             (json_int_t)lw->fence, "held", seen->held);
    if (seen->held)
        json_object_set_new(body, "expires_in_ms", json_integer(seen->pttl_ms));
    else
        json_object_set_new(body, "reason", json_string(seen->reason));
    waiter_remove(&lw->waiter);
    reply_json(reply, 200, body);
    return HANDLER_DONE;
}

/* Looks at the lease until it ended or the wait is over, parking in between. */
static enum handler_result watch_step(struct http_reply *reply, struct lease_watcher *lw)
{
    for (;;) {
        unsigned reasons = waiter_take_reasons(&lw->waiter);
        struct fg_error err = {0};
        if (reasons & WAKE_HANGUP) { /* the client's normal end of a watch: nobody to answer */
            waiter_remove(&lw->waiter);
            return HANDLER_CLOSE;
        }
        if (reasons & WAKE_DRAIN) {
            waiter_remove(&lw->waiter);
            fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
            reply_problem(reply, &err);
            return HANDLER_DONE;
        }
        struct lease_watch seen;
        if (lw->kind->watch(lw->name, lw->fence, &seen, &err) != 0) {
            waiter_remove(&lw->waiter);
            reply_problem(reply, &err);
            return HANDLER_DONE;
        }
        int64_t now = clock_mono_ms();
        if (!seen.held || now >= lw->waiter.deadline_ms)
            return answer(lw, reply, &seen);
        int64_t delay = seen.pttl_ms >= 0 ? seen.pttl_ms + WATCH_EXPIRY_SLACK_MS : gw.cfg->poll_ms;
        if (delay > gw.cfg->poll_ms)
            delay = gw.cfg->poll_ms;
        if (waiter_park(&lw->waiter, now + delay))
            return HANDLER_SUSPEND;
    }
}

enum handler_result lease_handle_watch(const struct lease_ops *kind, struct http_request *req,
                                       struct http_reply *reply)
{
    if (req->state != NULL)
        return watch_step(reply, req->state);
    struct fg_error err = {0};
    long long fence = 0, wait_ms = 0;
    if (strcmp(http_request_query(req, "watch"), "true") != 0) {
        fg_fail(&err, FG_ERR_INVALID_FIELD, "query 'watch' must be true or false");
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    if (query_number(req, "fence", 1, INT64_MAX, -1, &fence, &err) != 0 ||
        query_number(req, "wait_ms", 0, WAIT_MAX_MS, WATCH_WAIT_DEFAULT_MS, &wait_ms, &err) != 0) {
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    if (gw.draining) {
        fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    struct lease_watcher *lw = calloc(1, sizeof *lw);
    FG_ASSERT(lw != NULL);
    lw->kind = kind;
    lw->fence = fence;
    snprintf(lw->name, sizeof lw->name, "%.200s", req->match.params[0]);
    lw->waiter.watch_kind = (char)kind->token_kind;
    lw->waiter.watch_fence = fence;
    lw->waiter.watch_name = lw->name;
    struct waiter_client client = http_request_waiter_client(req);
    if (waiter_add(&lw->waiter, &client, clock_mono_ms() + wait_ms, &err) != 0) {
        free(lw);
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    req->state = lw;
    req->state_free = watcher_free;
    return watch_step(reply, lw);
}
