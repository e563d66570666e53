/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_ops.h - operational endpoints: liveness, readiness and the gateway
 * processes alive.
 */
#ifndef FG_HANDLERS_OPS_H
#define FG_HANDLERS_OPS_H

#include "http/server.h"

enum handler_result handle_healthz(struct http_request *req, struct http_reply *reply);
enum handler_result handle_readyz(struct http_request *req, struct http_reply *reply);
enum handler_result handle_gateways(struct http_request *req, struct http_reply *reply);

#endif
