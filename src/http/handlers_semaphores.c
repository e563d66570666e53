/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_semaphores.c - the semaphore endpoints: the semaphore transitions of
 * lease/semaphore.h behind the shared lease handlers (handlers_lease.c).
 */
#include "http/handlers_semaphores.h"

#include "http/handlers_lease.h"
#include "lease/semaphore.h"

static const struct lease_ops semaphore_ops = {
    .token_kind = LEASE_KIND_SEMAPHORE,
    .noun = "semaphore",
    .busy_detail = "every slot of the semaphore is held",
    .with_limit = true,
    .metric = METRIC_KIND_SEMAPHORE,
    .acquire = sem_acquire,
    .cancel = sem_cancel,
    .leave = sem_leave,
    .release = sem_release,
    .renew = sem_renew,
    .status = sem_status,
    .revoke = sem_revoke,
    .watch = sem_watch,
};

enum handler_result handle_sem_acquire(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_acquire(&semaphore_ops, req, reply);
}

enum handler_result handle_sem_renew(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_renew(&semaphore_ops, req, reply);
}

enum handler_result handle_sem_release(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_release(&semaphore_ops, req, reply);
}

enum handler_result handle_sem_status(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_status(&semaphore_ops, req, reply);
}

int sem_give_back_orphan(const char *name, const char *lease_id, struct fg_error *err)
{
    return lease_give_back_orphan(&semaphore_ops, name, lease_id, err);
}

enum handler_result handle_sem_revoke(struct http_request *req, struct http_reply *reply)
{
    return lease_handle_revoke(&semaphore_ops, req, reply);
}
