/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.c - the live-lease look of require_live_lease: asks Redis, by the
 * token's kind, whether the lease with its fence still holds its lock or
 * semaphore. It decides nothing about writes; the stores do.
 */
#include "lease/live.h"

#include <stdbool.h>
#include <string.h>

#include "lease/lock.h"
#include "lease/semaphore.h"

int lease_live_look(const struct token_claims *claims, enum fenced_lease *lease,
                    struct fg_error *err)
{
    struct lease_watch seen;
    *lease = FENCED_LEASE_HELD;
    if ((claims->kind == LEASE_KIND_SEMAPHORE
             ? sem_watch(claims->name, (long long)claims->fence, false, &seen, err)
             : lock_watch(claims->name, (long long)claims->fence, false, &seen, err)) != 0)
        return -1;
    if (!seen.held)
        *lease = strcmp(seen.reason, "revoked") == 0 ? FENCED_LEASE_REVOKED : FENCED_LEASE_ENDED;
    return 0;
}
