/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.c - the live-lease check of require_live_lease: asks Redis, by the
 * token's kind, whether the lease with its fence still holds its lock or
 * semaphore. It decides nothing about writes; the handlers do.
 */
#include "lease/live.h"

#include <string.h>

#include "lease/lock.h"
#include "lease/semaphore.h"

int lease_live_check(const struct token_claims *claims, bool *ended, struct fg_error *err)
{
    struct lease_watch seen;
    int rc = claims->kind == LEASE_KIND_SEMAPHORE
                 ? sem_watch(claims->name, (long long)claims->fence, &seen, err)
                 : lock_watch(claims->name, (long long)claims->fence, &seen, err);
    *ended = rc == 0 && !seen.held && strcmp(seen.reason, "revoked") != 0;
    return rc;
}
