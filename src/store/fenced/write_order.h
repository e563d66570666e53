/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_order.h - the one order in which fenced Postgres writes take their
 * locks, and the order of a group of writes (write_group.h) that follows from
 * it. Pure: no I/O.
 *
 * Lock order. A table with a fence column: row after row, by table, then by
 * the value of the row's canonical key (key_compare: every spelling of a row
 * at one place), and for one row its lock (fenced_sql_row_lock), taken by a
 * write that may create the row (PUT, POST: a row not yet there has no lock
 * of its own), before the row itself. The default mode: a resource's fence
 * row before its table row. A batch takes the fence rows of all its
 * resources, in resource order, then the locks and rows of its fence-column
 * tables in the order above, all before any of its operations
 * (batch_opening.h); a single write those of its one row (its judged form,
 * fenced_sql_judged, in a transaction that takes the row's lock first); a
 * group its writes sorted by write_order_compare, so that a row's writes that
 * may create it, which take its lock, come before its other writes, which
 * take the row. Whatever else a write locks (a default-mode table row, the
 * fence kept for a deleted row in fencegate.resource_fences) it locks holding
 * the resource's fence row, or the row or its lock, which no other write
 * holds meanwhile. So no two writes wait for each other in a cycle, and
 * Postgres never rolls one back as a deadlock's victim; only a table's own
 * trigger that takes locks of its own can still make one.
 */
#ifndef FG_WRITE_ORDER_H
#define FG_WRITE_ORDER_H

#include "store/fenced/write_group.h"

/* Orders the writes a and b (borrowed) of a group: by table index, then,
 * within one table, by key_compare under the table's key shape, then, for one
 * row, a write that takes the row's lock (creates) before one that does not.
 * < 0, 0 or > 0; two spellings of one row compare as that row. */
int write_order_compare(const struct write_group_stmt *a, const struct write_group_stmt *b);

#endif
