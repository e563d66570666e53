/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_semaphores.c - the semaphore endpoints: the semaphore kind
 * (lease/lease_ops.h) behind the shared lease handlers (handlers_lease.c).
 */
#include "http/handlers_semaphores.h"

#include "http/handlers_lease.h"

enum handler_result handle_sem_acquire(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_acquire(&lease_semaphore_ops, req, reply);
}

enum handler_result handle_sem_renew(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_renew(&lease_semaphore_ops, req, reply);
}

enum handler_result handle_sem_release(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_release(&lease_semaphore_ops, req, reply);
}

enum handler_result handle_sem_status(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_status(&lease_semaphore_ops, req, reply);
}

enum handler_result handle_sem_revoke(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_revoke(&lease_semaphore_ops, req, reply);
}
