/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_locksets.h - the lock set endpoints (POST /v1/locksets/acquire,
 * /renew, /release): all-or-none acquisition of up to 32 locks in one global
 * order, and renewal and release of every lock of a set.
 */
#ifndef FG_HANDLERS_LOCKSETS_H
#define FG_HANDLERS_LOCKSETS_H

#include "http/server.h"

enum handler_result handle_lockset_acquire(struct http_request *req, struct http_reply *reply);
enum handler_result handle_lockset_renew(struct http_request *req, struct http_reply *reply);
enum handler_result handle_lockset_release(struct http_request *req, struct http_reply *reply);

#endif
