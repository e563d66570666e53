/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_list.h - GET /v1/locks and GET /v1/semaphores: pages of the live
 * locks and semaphores by name prefix (docs/api.md "Listing leases").
 */
#ifndef FG_HANDLERS_LIST_H
#define FG_HANDLERS_LIST_H

#include "http/server.h"

enum handler_result handle_lock_list(struct http_request *req, struct http_reply *reply);
enum handler_result handle_sem_list(struct http_request *req, struct http_reply *reply);

#endif
