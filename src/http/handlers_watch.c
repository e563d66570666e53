/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_watch.c - GET /v1/locks/{name}?watch=true&fence=N&wait_ms=W (and
 * the same on semaphores): starts the watch of lease/watch.h and writes what
 * it saw, or parks the request while it waits. The query is read and checked
 * with the status call's (handlers_lease.c, http/status_query.h).
 */
#include "gateway.h"
#include "http/handlers_lease.h"
#include "lease/watch.h"

static void watcher_free(void *state)
{
    lease_watcher_free(state);
}

/* Writes the answer of w after step, the engine's problem if set (or parks it). */
static enum handler_result answer(struct lease_watcher *w, struct http_reply *reply,
                                  enum park_step step, const struct fg_error *problem)
{
    if (step == PARK_STEP_PARK)
        return HANDLER_SUSPEND;
    if (problem->code != FG_OK)
        lease_reply_wait_problem(reply, problem, w->kind, w->name);
    else {
        json_t *body = json_pack("{s:s, s:I, s:b}", w->kind->noun, w->name, "fence",
                                 (json_int_t)w->fence, "held", w->seen.held);
        if (w->seen.held)
            json_object_set_new(body, "expires_in_ms", json_integer(w->seen.pttl_ms));
        else
            json_object_set_new(body, "reason", json_string(w->seen.reason));
        reply_json(reply, 200, body);
    }
    return step == PARK_STEP_HANGUP ? HANDLER_CLOSE : HANDLER_DONE;
}

enum handler_result lease_watch_resume(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    return answer(req->state, reply, lease_watcher_run(req->state, &err), &err);
}

enum handler_result lease_watch_start(const struct lease_ops *kind, struct http_request *req,
                                      struct http_reply *reply, long long fence, long long wait_ms)
{
    struct fg_error err = {0};
    if (gw.draining) {
        fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is stopping");
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    http_request_count_once_sent(req);
    struct waiter_client client = http_request_waiter_client(req);
    struct lease_watcher *w;
    enum park_step step =
        lease_watcher_begin(kind, req->match.params[0], fence, wait_ms, &client, &w, &err);
    if (w == NULL) {
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    req->state = w;
    req->state_free = watcher_free;
    return answer(w, reply, step, &err);
}
