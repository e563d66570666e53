/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced.c - the names of fenced-write outcomes (as the write scripts answer
 * them and as refusals are audited) and the Fence-Owner rule, for both stores.
 * It must not know how either store checks a fence.
 */
#include "store/fenced/fenced.h"

#include <stddef.h>
#include <string.h>

#include "util/names.h"

/* Per outcome: its name in a write script's answer, and its audit reason. */
static const struct {
    const char *answer; /* "r" of lua/rw_*.lua, NULL if no script answers it */
    const char *reason; /* audit and lease_lost reason of a refusal, or NULL */
} outcomes[FENCED_OUTCOME_COUNT] = {
    [FENCED_APPLIED] = {"applied", NULL},      [FENCED_STALE] = {"stale", "stale_fence"},
    [FENCED_REVOKED] = {"revoked", "revoked"}, [FENCED_EXPIRED] = {NULL, "lease_expired"},
    [FENCED_WRONGTYPE] = {"wrongtype", NULL},  [FENCED_NOFLOOR] = {"nofloor", NULL},
    [FENCED_MISSING] = {"missing", NULL},      [FENCED_TOO_MANY] = {"toomany", NULL},
};

enum fenced_outcome fenced_outcome_named(const char *name)
{
    for (int i = 0; name != NULL && i < FENCED_OUTCOME_COUNT; i++)
        if (outcomes[i].answer != NULL && strcmp(outcomes[i].answer, name) == 0)
            return (enum fenced_outcome)i;
    return FENCED_OUTCOME_COUNT;
}

const char *fenced_outcome_reason(enum fenced_outcome outcome)
{
    return outcome < FENCED_OUTCOME_COUNT ? outcomes[outcome].reason : NULL;
}

int fenced_owner_check(const char *owner, struct fg_error *err)
{
    if (owner == NULL || name_is_valid_owner(owner, strlen(owner)))
        return 0;
    return fg_fail(err, FG_ERR_INVALID_FIELD,
                   "header 'Fence-Owner' must be 1 to %d bytes of printable UTF-8",
                   OWNER_NAME_MAX_LEN);
}
