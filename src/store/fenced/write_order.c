/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_order.c - the order of a group of writes (write_order.h, which owns
 * the lock order of fenced Postgres writes). It decides only the order;
 * taking the locks and committing is write_group.c's.
 */
#include "store/fenced/write_order.h"

int write_order_compare(const struct write_group_stmt *a, const struct write_group_stmt *b)
{
    if (a->table != b->table)
        return a->table < b->table ? -1 : 1;
    int by_key = key_compare(a->shape, a->key, b->key);
    if (by_key != 0 || a->creates == b->creates)
        return by_key;
    return a->creates ? -1 : 1;
}
