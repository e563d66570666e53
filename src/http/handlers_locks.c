/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_locks.c - the lock endpoints: the lock kind (lease/lease_ops.h)
 * behind the shared lease handlers (handlers_lease.c).
 */
#include "http/handlers_locks.h"

#include "http/handlers_lease.h"

enum handler_result handle_lock_acquire(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_acquire(&lease_lock_ops, req, reply);
}

enum handler_result handle_lock_renew(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_renew(&lease_lock_ops, req, reply);
}

enum handler_result handle_lock_release(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_release(&lease_lock_ops, req, reply);
}

enum handler_result handle_lock_status(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_status(&lease_lock_ops, req, reply);
}

enum handler_result handle_lock_revoke(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_revoke(&lease_lock_ops, req, reply);
}
