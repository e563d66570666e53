/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_group.h - one-statement writes of many requests committed together.
 * A commit costs Postgres several times what a one-row statement does
 * (docs/performance.md, "Fenced Postgres writes"), so the writes that
 * arrive while a group is being committed wait and go together in the next:
 * one transaction, one round trip, statements in key order. Nothing of a group
 * is committed unless all of it is; a write that the group cannot take (its own
 * statement failed, or the commit was refused) is handed back to run on its own.
 */
#ifndef FG_WRITE_GROUP_H
#define FG_WRITE_GROUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "store/backend/pg.h"
#include "store/fenced/key_text.h"
#include "util/error.h"

/* A write: its statement and the row it writes, which order it within its
 * group in the lock order (write_order.h): by table, then by canonical key in
 * the order of the key's values (key_compare), so that every spelling of a row
 * takes its locks at one place in every group, a write that may create the
 * row first. */
struct write_group_stmt {
    struct pg_group_stmt stmt;     /* params borrowed until write_group_run returns */
    size_t table;                  /* the row's table (an index of the caller's) */
    const char *key;               /* the row's key, its canonical text */
    const struct key_shape *shape; /* how the table's keys read and order (borrowed) */
    bool creates;                  /* it may create the row: takes the row's lock first */
};

/* How a write fared in a group. */
enum write_group_result {
    WRITE_GROUP_COMMITTED, /* stmt->stmt holds its statement's rows and count */
    WRITE_GROUP_ALONE,     /* not written: run it on a connection of its own */
    WRITE_GROUP_DEADLOCKED /* not written, rolled back as a deadlock's victim (40P01): run it
                              on a connection of its own once the write it deadlocked with,
                              woken by the rollback, has gone ahead */
};

/*
 * Runs stmt in the next group and waits until that group is committed. 0 with
 * *result set; -1 with err when the group's connection failed (whether the
 * write took effect is then unknown, as for a lost pg_exec).
 */
int write_group_run(struct write_group_stmt *stmt, enum write_group_result *result,
                    struct fg_error *err) FG_WUR;

#endif
