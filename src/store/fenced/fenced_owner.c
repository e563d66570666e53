/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_owner.c - the Fence-Owner rule of fenced writes, for both stores. It
 * must not know how either store checks a fence.
 */
#include "store/fenced/fenced_owner.h"

#include <string.h>

#include "util/names.h"

int fenced_owner_check(const char *owner, struct fg_error *err)
{
    if (owner == NULL || name_is_valid_owner(owner, strlen(owner)))
        return 0;
    return fg_fail(err, FG_ERR_INVALID_FIELD,
                   "header 'Fence-Owner' must be 1 to %d bytes of printable UTF-8",
                   OWNER_NAME_MAX_LEN);
}
