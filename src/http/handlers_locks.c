/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_locks.c - the lock endpoints: the lock transitions of lease/lock.h
 * behind the shared lease handlers (handlers_lease.c).
 */
#include "http/handlers_locks.h"

#include "http/handlers_lease.h"
#include "lease/lock.h"

static const struct lease_ops lock_ops = {
    .token_kind = LEASE_KIND_LOCK,
    .noun = "lock",
    .busy_detail = "the lock is held",
    .with_limit = false,
    .metric = METRIC_KIND_LOCK,
    .acquire = lock_acquire,
    .cancel = lock_cancel,
    .leave = lock_leave,
    .release = lock_release,
    .renew = lock_renew,
    .status = lock_status,
    .revoke = lock_revoke,
    .watch = lock_watch,
    .holder_fence = lock_holder_fence,
};

enum handler_result handle_lock_acquire(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_acquire(&lock_ops, req, reply);
}

enum handler_result handle_lock_renew(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_renew(&lock_ops, req, reply);
}

enum handler_result handle_lock_release(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_release(&lock_ops, req, reply);
}

enum handler_result handle_lock_status(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_status(&lock_ops, req, reply);
}

int lock_give_back_orphan(const char *name, const char *lease_id, struct fg_error *err)
{
    return lease_give_back_orphan(&lock_ops, name, lease_id, err);
}

enum handler_result handle_lock_revoke(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_revoke(&lock_ops, req, reply);
}
