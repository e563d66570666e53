/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_locks.h - HTTP handlers of /v1/locks: acquire (possibly waiting),
 * renew, release and status.
 */
#ifndef FG_HANDLERS_LOCKS_H
#define FG_HANDLERS_LOCKS_H

#include "http/server.h"

enum handler_result handle_lock_acquire(struct http_request *req, struct http_reply *reply);
enum handler_result handle_lock_renew(struct http_request *req, struct http_reply *reply);
enum handler_result handle_lock_release(struct http_request *req, struct http_reply *reply);
enum handler_result handle_lock_status(struct http_request *req, struct http_reply *reply);

enum handler_result handle_lock_revoke(struct http_request *req, struct http_reply *reply);

#endif
