/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch_opening.h - the statements that open a batch of fenced Postgres
 * writes, sent as one pipeline (one round trip): BEGIN, the revocation check,
 * the claim of the gateway's fence rows of the batch's resources (in resource
 * order) and, for each fence-column table, its rows one by one in key order,
 * each row's lock and then the row (fenced_sql_row_lock: rows not yet created
 * included), each claim only when there is something to claim: the lock
 * order of store/fenced/write_order.h, which write groups and single writes
 * take too, so that batches never deadlock each other or them. Pure:
 * fenced_pg.c runs them.
 */
#ifndef FG_BATCH_OPENING_H
#define FG_BATCH_OPENING_H

#include <stddef.h>
#include <stdint.h>

#include "store/backend/pg.h"
#include "store/fenced/fenced_op.h"
#include "store/fenced/fenced_sql.h"

/* The opening of one batch. */
struct batch_opening {
    struct pg_group_stmt *stmts; /* the statements (owned array) */
    size_t n;                    /* entries in stmts */
    char **sql;                  /* per statement: its text when built for this batch (owned) */
    const char **params;         /* the parameters of all claims (owned array) */
    char (*names)[24];           /* the prepared names of the row claims (owned array) */
    char fence[24];              /* the fence's text */
};

/* Where the statements of an opening stand in stmts. */
enum {
    BATCH_OPENING_BEGIN,   /* BEGIN */
    BATCH_OPENING_REVOKED, /* answers a row when the fence was revoked */
    BATCH_OPENING_CLAIMS   /* the first claim, if any: each answers (resource, fence) rows
                              (a row's lock: none) */
};

/*
 * Builds in *o the opening of batch written under fence. schemas and prefixes
 * (each ntables entries, borrowed, and so are the ops' keys until o is freed):
 * the writable tables and their resource prefixes. Release with
 * batch_opening_free.
 */
void batch_opening_build(const struct fenced_batch *batch, int64_t fence,
                         const struct table_schema *schemas, char *const *prefixes, size_t ntables,
                         struct batch_opening *o);

/* Frees what o owns, the statements' rows included. */
void batch_opening_free(struct batch_opening *o);

#endif
