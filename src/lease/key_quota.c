/* SPDX-License-Identifier: Apache-2.0 */
/*
 * key_quota.c - one count per API key id in a map its owner locks
 * (key_quota.h).
 */
#include "lease/key_quota.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

struct key_quota *key_quota_of(struct strmap *quotas, const char *key_id)
{
    if (key_id == NULL)
        return NULL;
    struct strmap_node *node = strmap_find(quotas, key_id);
    if (node != NULL)
        return STRMAP_ENTRY(node, struct key_quota, node);
    size_t len = strlen(key_id);
    struct key_quota *q = calloc(1, sizeof *q + len + 1);
    FG_ASSERT(q != NULL);
    memcpy(q->id, key_id, len + 1);
    strmap_add(quotas, &q->node, q->id);
    return q;
}
