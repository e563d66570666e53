/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_ops.c - the two kinds of lease (lease_ops.h): the lock transitions of
 * lock.h and the semaphore transitions of semaphore.h with their words, and
 * the give-back of each kind's orphaned grants. Holds no state.
 */
#include "lease/lease_ops.h"

#include "lease/lease_wait.h"
#include "lease/lock.h"
#include "lease/semaphore.h"

const struct lease_ops lease_lock_ops = {
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

const struct lease_ops lease_semaphore_ops = {
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

int lock_give_back_orphan(const char *name, const char *lease_id, const char *attach, bool drop,
                          struct fg_error *err)
{
    return lease_give_back_orphan(&lease_lock_ops, name, lease_id, attach, drop, err);
}

int sem_give_back_orphan(const char *name, const char *lease_id, const char *attach, bool drop,
                         struct fg_error *err)
{
    return lease_give_back_orphan(&lease_semaphore_ops, name, lease_id, attach, drop, err);
}
