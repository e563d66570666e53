/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_meta.h - endpoints that describe the gateway itself: GET /metrics
 * (Prometheus text) and GET /v1/openapi.json (the API description).
 */
#ifndef FG_HANDLERS_META_H
#define FG_HANDLERS_META_H

#include "http/server.h"

enum handler_result handle_metrics(struct http_request *req, struct http_reply *reply);
enum handler_result handle_openapi(struct http_request *req, struct http_reply *reply);

#endif
