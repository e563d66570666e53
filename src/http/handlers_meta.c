/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_meta.c - /metrics renders the metric store with the gauges read at
 * this moment (waiters and watches, requests in flight, the Postgres pool, the
 * fences left in the reservation, the process's own figures, and whether each
 * backend answers a ping); /v1/openapi.json answers the OpenAPI
 * document embedded from openapi/openapi.json at build time. Both answer while
 * Redis or Postgres is down: a backend that does not answer a ping within
 * probe_timeout_ms (http/readiness.h) shows as fencegate_backend_up 0.
 */
#include "http/handlers_meta.h"

#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "http/readiness.h"
#include "lease/waiter.h"
#include "store/backend/pg.h"
#include "util/metrics.h"
#include "util/procstat.h"

#define OPENAPI_FILE "openapi.json"

enum handler_result handle_metrics(struct http_request *req, struct http_reply *reply)
{
    (void)req;
    struct readiness found;
    readiness_check(true, &found);
    struct metrics_gauges gauges = {.waiters = waiter_count(),
                                    .watches = waiter_watch_count(),
                                    .in_flight = http_server_in_flight(true),
                                    .fence_headroom = found.fence_headroom};
    gauges.backend_up[METRIC_BACKEND_REDIS] = found.redis_up;
    gauges.backend_up[METRIC_BACKEND_PG] = found.pg_up;
    pg_pool_stats(&gauges.pg_pool_size, &gauges.pg_pool_in_use, &gauges.pg_pool_waiting);
    procstat_read(&gauges.process);
    reply_text(reply, 200, "text/plain; version=0.0.4; charset=utf-8", metrics_render(&gauges));
    return HANDLER_DONE;
}

enum handler_result handle_openapi(struct http_request *req, struct http_reply *reply)
{
    (void)req;
    for (const struct embedded_file *f = embedded_openapi; f->name != NULL; f++) {
        if (strcmp(f->name, OPENAPI_FILE) != 0)
            continue;
        char *text = strdup(f->source);
        FG_ASSERT(text != NULL);
        reply_text(reply, 200, "application/json", text);
        return HANDLER_DONE;
    }
    FG_ASSERT(!"openapi/" OPENAPI_FILE " is embedded at build time");
    return HANDLER_DONE;
}
