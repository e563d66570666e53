/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_outcome.c - the reasons refused fenced writes are audited and
 * answered with, for both stores. It must not know how either store checks a
 * fence.
 */
#include "store/fenced/fenced_outcome.h"

#include <stddef.h>

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
