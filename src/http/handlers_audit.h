/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_audit.h - HTTP handlers of the audit of refused stale writes:
 * filtered, keyset-paginated records and their summary.
 */
#ifndef FG_HANDLERS_AUDIT_H
#define FG_HANDLERS_AUDIT_H

#include "http/server.h"

enum handler_result handle_audit_rejections(struct http_request *req, struct http_reply *reply);

/* GET /v1/audit/summary: rejections per minute and the most refused resources
 * of a time range (default: the last hour). */
enum handler_result handle_audit_summary(struct http_request *req, struct http_reply *reply);

#endif
