/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_lease.h - the lease endpoints, once for every kind of lease. Locks
 * and semaphores differ only in what a struct lease_ops (lease/lease_ops.h)
 * names; an acquire waits in lease/lease_wait.h; the handlers here do the
 * rest: parsing, parking the request, tokens, replies.
 */
#ifndef FG_HANDLERS_LEASE_H
#define FG_HANDLERS_LEASE_H

#include <jansson.h>
#include <stdbool.h>

#include "http/server.h"
#include "lease/lease_ops.h"
#include "lease/lease_wait.h"

/* The endpoints, for the lease named by the route's first parameter. kind is
 * borrowed and must live as long as the server. */
enum handler_result lease_handle_acquire(const struct lease_ops *kind, struct http_request *req,
                                         struct http_reply *reply);
enum handler_result lease_handle_renew(const struct lease_ops *kind, struct http_request *req,
                                       struct http_reply *reply);
enum handler_result lease_handle_release(const struct lease_ops *kind, struct http_request *req,
                                         struct http_reply *reply);
enum handler_result lease_handle_status(const struct lease_ops *kind, struct http_request *req,
                                        struct http_reply *reply);
enum handler_result lease_handle_revoke(const struct lease_ops *kind, struct http_request *req,
                                        struct http_reply *reply);

/* GET .../{name}?watch=true&fence=N&wait_ms=W (handlers_watch.c). */
enum handler_result lease_handle_watch(const struct lease_ops *kind, struct http_request *req,
                                       struct http_reply *reply);

#endif
