/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced.c - the reasons refused fenced writes are audited and answered with,
 * and the Fence-Owner rule, for both stores. It must not know how either store
 * checks a fence.
 */
#include "store/fenced/fenced.h"

#include <stddef.h>
#include <string.h>

#include "util/names.h"

/* Per outcome: the audit and lease_lost reason of a refusal, or NULL. */
static const char *const reasons[] = {
    [FENCED_APPLIED] = NULL,
    [FENCED_STALE] = "stale_fence",
    [FENCED_REVOKED] = "revoked",
    [FENCED_EXPIRED] = "lease_expired",
};

const char *fenced_outcome_reason(enum fenced_outcome outcome)
{
    return (size_t)outcome < sizeof reasons / sizeof reasons[0] ? reasons[outcome] : NULL;
}

int fenced_owner_check(const char *owner, struct fg_error *err)
{
    if (owner == NULL || name_is_valid_owner(owner, strlen(owner)))
        return 0;
    return fg_fail(err, FG_ERR_INVALID_FIELD,
                   "header 'Fence-Owner' must be 1 to %d bytes of printable UTF-8",
                   OWNER_NAME_MAX_LEN);
}
