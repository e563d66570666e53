/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_lease.h - the lease endpoints, once for every kind of lease. Locks
 * and semaphores differ only in their transitions (lease/lock.h,
 * lease/semaphore.h), their words and whether acquire carries a limit; a
 * struct lease_ops names those, and the handlers here do the rest: parsing,
 * waiting on a parked connection, tokens, replies.
 */
#ifndef FG_HANDLERS_LEASE_H
#define FG_HANDLERS_LEASE_H

#include <jansson.h>
#include <stdbool.h>

#include "auth/token.h"
#include "http/server.h"
#include "lease/lease_request.h"
#include "lease/lease_result.h"
#include "util/metrics.h"

struct lease_ops {
    enum lease_kind token_kind; /* kind written into and checked in tokens */
    const char *noun;           /* "lock" or "semaphore": reply member, log subject */
    const char *busy_detail;    /* detail of 409 lock_busy */
    bool with_limit;            /* acquire requires "limit" */
    enum metric_kind metric;    /* kind label of the hold-time metric */
    int (*acquire)(const char *name, const struct acquire_params *p, const char *lease_id,
                   bool wait, const char *attach, struct lease_result *res, struct fg_error *err);
    int (*cancel)(const char *name, const char *lease_id, const char *attach,
                  enum lease_cancel_mode mode, struct lease_result *res, struct fg_error *err);
    int (*leave)(const char *name, const struct lease_leaver *ws, size_t n, bool *left,
                 struct fg_error *err);
    int (*release)(const char *name, const char *lease_id, struct lease_result *res,
                   struct fg_error *err);
    int (*renew)(const char *name, const char *lease_id, long long ttl_ms, struct lease_result *res,
                 struct fg_error *err);
    int (*status)(const char *name, json_t **out, struct fg_error *err);
    int (*revoke)(const char *name, long long fence, struct lease_result *res,
                  struct fg_error *err);
    int (*watch)(const char *name, long long fence, struct lease_watch *out, struct fg_error *err);
    /* locks: the current holder's fence (revoke names no fence); NULL for semaphores */
    int (*holder_fence)(const char *name, long long *fence, struct fg_error *err);
};

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

/* Gives back a grant whose waiter is gone (doorbell orphan callback). */
int lease_give_back_orphan(const struct lease_ops *kind, const char *name, const char *lease_id,
                           struct fg_error *err) FG_WUR;

#endif
