/*
 * handlers_audit.h - HTTP handler of GET /v1/audit/rejections: the audit of
 * refused stale writes, filtered and keyset-paginated.
 */
#ifndef FG_HANDLERS_AUDIT_H
#define FG_HANDLERS_AUDIT_H

#include "http/server.h"

enum handler_result handle_audit_rejections(struct http_request *req, struct http_reply *reply);

#endif
