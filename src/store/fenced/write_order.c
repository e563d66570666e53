/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_order.c - the row order of a group of writes (write_order.h). It
 * decides only the order; taking the locks and committing is write_group.c's.
 */
#include "store/fenced/write_order.h"

int write_order_compare(const struct write_group_stmt *a, const struct write_group_stmt *b)
{
    if (a->table != b->table)
        return a->table < b->table ? -1 : 1;
    return key_compare(a->shape, a->key, b->key);
}
