/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_semaphores.h - HTTP handlers of /v1/semaphores: acquire (possibly
 * waiting), renew, release and status.
 */
#ifndef FG_HANDLERS_SEMAPHORES_H
#define FG_HANDLERS_SEMAPHORES_H

#include "http/server.h"

enum handler_result handle_sem_acquire(struct http_request *req, struct http_reply *reply);
enum handler_result handle_sem_renew(struct http_request *req, struct http_reply *reply);
enum handler_result handle_sem_release(struct http_request *req, struct http_reply *reply);
enum handler_result handle_sem_status(struct http_request *req, struct http_reply *reply);

enum handler_result handle_sem_revoke(struct http_request *req, struct http_reply *reply);

#endif
