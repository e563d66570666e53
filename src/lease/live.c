/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.c - the live-lease check of require_live_lease: asks Redis, by the
 * token's kind, whether the lease with its fence still holds its lock or
 * semaphore, and for a lease that ended, Postgres whether it was revoked. It
 * decides nothing about writes; the handlers and the Postgres store do.
 */
#include "lease/live.h"

#include <stdbool.h>
#include <string.h>

#include "lease/lock.h"
#include "lease/semaphore.h"
#include "store/fenced/revocations.h"

int lease_live_look(const struct token_claims *claims, enum fenced_lease *lease,
                    struct fg_error *err)
{
    struct lease_watch seen;
    *lease = FENCED_LEASE_HELD;
    if ((claims->kind == LEASE_KIND_SEMAPHORE
             ? sem_watch(claims->name, (long long)claims->fence, &seen, err)
             : lock_watch(claims->name, (long long)claims->fence, &seen, err)) != 0)
        return -1;
    if (!seen.held)
        *lease = strcmp(seen.reason, "revoked") == 0 ? FENCED_LEASE_REVOKED : FENCED_LEASE_ENDED;
    return 0;
}

int lease_live_check(const struct token_claims *claims, enum fenced_lease *lease,
                     struct fg_error *err)
{
    if (lease_live_look(claims, lease, err) != 0)
        return -1;
    if (*lease != FENCED_LEASE_ENDED)
        return 0;
    /* Redis tells how a lease ended for LEASE_RELEASED_KEPT_MS, and forgets it
     * with its data; a revocation is final, and Postgres keeps it. */
    bool revoked = false;
    if (revocation_find(claims->fence, &revoked, NULL, 0, err) != 0)
        return -1;
    *lease = revoked ? FENCED_LEASE_REVOKED : FENCED_LEASE_ENDED;
    return 0;
}
