/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_pg.h - HTTP handlers of /v1/pg: fenced PATCH, PUT, POST and DELETE
 * of rows of the writable tables, GET of a row with its fence, and batches.
 */
#ifndef FG_HANDLERS_PG_H
#define FG_HANDLERS_PG_H

#include "http/server.h"

enum handler_result handle_pg_get(struct http_request *req, struct http_reply *reply);
enum handler_result handle_pg_patch(struct http_request *req, struct http_reply *reply);
enum handler_result handle_pg_put(struct http_request *req, struct http_reply *reply);
enum handler_result handle_pg_post(struct http_request *req, struct http_reply *reply);
enum handler_result handle_pg_delete(struct http_request *req, struct http_reply *reply);
enum handler_result handle_pg_batch(struct http_request *req, struct http_reply *reply);

#endif
