/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_ops.c - /healthz answers while the process serves, draining too;
 * /readyz asks both backends (http/readiness.h: within probe_timeout_ms) and
 * answers 503 naming the one that does not answer, and 503 while the gateway
 * drains; /v1/gateways lists the gateway processes whose liveness mark in
 * Redis lasts.
 */
#include "http/handlers_ops.h"

#include "gateway.h"
#include "http/readiness.h"
#include "lease/instances.h"

enum handler_result handle_healthz(struct http_request *req, struct http_reply *reply)
{
    (void)req;
    reply_json(reply, 200, json_pack("{s:s}", "status", "ok"));
    return HANDLER_DONE;
}

enum handler_result handle_readyz(struct http_request *req, struct http_reply *reply)
{
    (void)req;
    struct readiness found;
    readiness_check(false, &found);
    bool redis_up = found.redis_up, pg_up = found.pg_up;
    bool draining = atomic_load(&gw.draining);
    if (redis_up && pg_up && !draining) {
        reply_json(reply, 200, json_pack("{s:s, s:s}", "redis", "up", "postgres", "up"));
        return HANDLER_DONE;
    }
    struct fg_error err;
    if (draining)
        fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "the gateway is draining: it takes no new work");
    else
        fg_fail(&err, FG_ERR_BACKEND_UNAVAILABLE, "%s%s%s", redis_up ? "" : found.redis_error.msg,
                !redis_up && !pg_up ? "; " : "", pg_up ? "" : found.pg_error.msg);
    reply_problem_extra(reply, &err,
                        json_pack("{s:s, s:s}", "redis", redis_up ? "up" : "down", "postgres",
                                  pg_up ? "up" : "down"));
    return HANDLER_DONE;
}

enum handler_result handle_gateways(struct http_request *req, struct http_reply *reply)
{
    (void)req;
    struct fg_error err = {0};
    json_t *list = NULL;
    if (lease_instances(gw.instance_id, &list, &err) != 0) {
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    reply_json(reply, 200, list);
    return HANDLER_DONE;
}
