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
#include <stdint.h>

#include "http/server.h"
#include "lease/lease_ops.h"
#include "lease/lease_wait.h"
#include "util/fgjson.h"

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

/*
 * The answers of leases, written with fgjson's writer for the lease routes and
 * the lock sets alike. lease_reply_grant signs the token of lease lease_id of
 * kind's name and writes the object of a lease that holds into out:
 * {"<noun>": name, "token", "fence", "ttl_ms", "expires_at_ms"} (a whole
 * answer, or the next element of a lock set's list), left open for the caller
 * to close (fgjson_out_close, reply_json_out); it fails only when the token
 * cannot be signed. lease_reply_renewed writes the object of a renewed lease
 * likewise: {"<noun>": name, "fence", "ttl_ms", "expires_at_ms",
 * "hold_until_ms"}.
 * lease_reply_released answers 200 {"released": true}.
 */
int lease_reply_grant(struct fgjson_out *out, const struct lease_ops *kind, const char *name,
                      const char *lease_id, int64_t fence, int64_t ttl_ms, int64_t expires_at_ms,
                      struct fg_error *err) FG_WUR;
void lease_reply_renewed(struct fgjson_out *out, const struct lease_ops *kind, const char *name,
                         const struct lease_result *res);
void lease_reply_released(struct http_reply *reply);

/* How a lease that a renewal found gone ended, as far as lease_renewal_end tells. */
enum lease_end {
    LEASE_END_UNKNOWN,  /* expired, revoked, or its end no longer kept: lease_reply_lost looks */
    LEASE_END_RELEASED, /* released by its holder */
    LEASE_END_MAX_HOLD, /* at its hold deadline */
};

/* How the lease with fence of kind's name, which a renewal found gone, ended (lease/lease_result.h
 * lease_gone): LEASE_END_MAX_HOLD, *hold_until_ms then, when it ended at its hold deadline and
 * Postgres says it was not revoked; LEASE_END_RELEASED when it was released; else
 * LEASE_END_UNKNOWN, also when Redis or Postgres cannot be read. Runs only after the renewal. */
enum lease_end lease_renewal_end(enum lease_kind kind, const char *name, int64_t fence,
                                 int64_t *hold_until_ms);

/* The 410 lease_lost of a lease with fence (detail: detail, then how it ended) into reply:
 * revoked, with members reason and revoke_reason, when Postgres says so; else released, with
 * member reason "released", when the caller knows it was (released: lease_renewal_end); the
 * plain one otherwise, also when Postgres cannot be read. extra: further members (taken), or
 * NULL. */
void lease_reply_lost(struct http_reply *reply, int64_t fence, const char *detail, bool released,
                      json_t *extra);

/* The problem err that ended a wait for kind's name (an acquire's, a watch's) into reply: its 403
 * forbidden, which only a scope that its key lost while it waited gives (park.h), names the scope
 * of the lease in the member scope, as the route's check would. */
void lease_reply_wait_problem(struct http_reply *reply, const struct fg_error *err,
                              const struct lease_ops *kind, const char *name);

/* GET .../{name}?watch=true&fence=N&wait_ms=W (handlers_watch.c), its query
 * checked (http/status_query.h): starts the watch of the lease of kind with
 * fence for at most wait_ms, and answers what it saw or parks req. */
enum handler_result lease_watch_start(const struct lease_ops *kind, struct http_request *req,
                                      struct http_reply *reply, long long fence, long long wait_ms);

/* Runs the watch that req parked (its state), and answers it or parks it again. */
enum handler_result lease_watch_resume(struct http_request *req, struct http_reply *reply);

#endif
