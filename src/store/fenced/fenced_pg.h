/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_pg.h - fenced writes to Postgres tables: the schema of the writable
 * tables (read from the catalog at start-up), the prepared statements of each
 * (table, operation, column set), single writes, batches and reads. A write is
 * applied iff its fence >= the highest fence stored for its resource
 * ("pg:<table>/<key>") and was not revoked, and the write and the new fence
 * commit together; a refused write leaves one row in fencegate.rejections.
 */
#ifndef FG_FENCED_PG_H
#define FG_FENCED_PG_H

#include <jansson.h>
#include <stdint.h>

#include "config.h"
#include "store/fenced/fenced_op.h"
#include "store/fenced/fenced_result.h"
#include "store/fenced/fenced_writer.h"
#include "util/error.h"

/*
 * Reads the catalog for every table of cfg (borrowed for the process's life).
 * A table, key or column that does not exist, a key without a single-column
 * unique index, or a column that cannot be written fails with FG_ERR_CONFIG
 * naming it.
 */
int fenced_pg_init(const struct config *cfg, struct fg_error *err) FG_WUR;

/* Whether `fence-column TABLE` may move table's fences: cfg configures it with
 * a fence_column. Its index in cfg->tables, or -1 with FG_ERR_CONFIG naming
 * what is missing; touches no backend. */
int fenced_pg_movable(const struct config *cfg, const char *table, size_t *index,
                      struct fg_error *err) FG_WUR;

/*
 * `fencegate fence-column TABLE`: gives table t of cfg (one with a
 * fence_column) that column, a bigint, if it has none yet, then reads the
 * catalog (fenced_pg_init) and moves the table's fences from
 * fencegate.resource_fences into the column (fenced_sql_adopt_fences);
 * *moved: the rows raised. Idempotent; no gateway may write to the table
 * meanwhile (docs/operations.md).
 */
int fenced_pg_move_fences(const struct config *cfg, const char *table, long *moved,
                          struct fg_error *err) FG_WUR;

/* Frees the schemas and the statement cache. */
void fenced_pg_shutdown(void);

/* The writable tables, in configuration order (*n entries). */
const struct table_schema *fenced_pg_schemas(size_t *n);

/*
 * Runs one write. On success fills *res (APPLIED, STALE, REVOKED or EXPIRED,
 * a refusal audited once; release with fenced_result_free). A write to a
 * table that requires a live lease commits only if who's lease still holds
 * when its statement has run (who->lease_check, asked inside its
 * transaction); one whose lease ended is refused as EXPIRED with reason
 * lease_expired, and so is its refusal or missing row. want_row: an applied write's
 * result holds the row (the key and the listed columns; where op's writer may
 * not read its table, op->may_read false, the key and the columns op writes),
 * else the row is not read back. A PATCH or DELETE of a missing row fails with FG_ERR_NOT_FOUND, a
 * POST of an existing key with FG_ERR_CONFLICT, a value Postgres cannot
 * convert with FG_ERR_INVALID_FIELD naming the column.
 */
int fenced_pg_write(const struct fenced_op *op, const struct fenced_writer *who, bool want_row,
                    struct fenced_result *res, struct fg_error *err) FG_WUR;

/*
 * Runs the operations of batch in one transaction under one fence: all are
 * applied (APPLIED, after: the text of an array of {op, resource, row}, one
 * per op, each row as a single write's, if want_row; else NULL) or none. If any
 * resource holds a higher fence the result is STALE, one audit row is kept
 * for the request and nothing else changes. With an op on a table that
 * requires a live lease the batch commits only while who's lease holds, as a
 * single write does; else it is refused as EXPIRED, naming every such op's
 * resource. Failures name the operation
 * ("ops[2]: ..."), the first that fails where it stands in the batch (after
 * the operations before it).
 */
int fenced_pg_batch(const struct fenced_batch *batch, const struct fenced_writer *who,
                    bool want_row, struct fenced_result *res, struct fg_error *err) FG_WUR;

/* Reads the row of key in table (after: row_to_json's text, NULL if absent)
 * and its fence. */
int fenced_pg_read(size_t table, const char *key, struct fenced_result *res,
                   struct fg_error *err) FG_WUR;

#endif
