/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_order.h - the order in which a group of writes (write_group.h) locks
 * its rows: by table, then by the value of the row's canonical key. Every
 * group takes its locks in this one order, so two groups never wait for each
 * other in a cycle, and every spelling of a row takes its lock at one place.
 * Pure: no I/O.
 */
#ifndef FG_WRITE_ORDER_H
#define FG_WRITE_ORDER_H

#include "store/fenced/write_group.h"

/* Orders the rows of a and b (borrowed): by table index, then, within one
 * table, by key_compare under the table's key shape. < 0, 0 or > 0; two
 * spellings of one row compare 0. */
int write_order_compare(const struct write_group_stmt *a, const struct write_group_stmt *b);

#endif
