/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_op.h - the bodies of fenced Postgres writes, read and checked against
 * the writable tables: which table, which key, which columns and the text each
 * value is sent to Postgres as. Single writes (PATCH, PUT, POST, DELETE on
 * /v1/pg/...) and the operations of a batch become the same struct fenced_op.
 * Pure: no I/O; the conversion of a value to its column's type is left to
 * Postgres.
 */
#ifndef FG_FENCED_OP_H
#define FG_FENCED_OP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "fglimits.h"
#include "store/fenced/fenced_sql.h"
#include "util/error.h"

struct fenced_op {
    enum fenced_kind kind; /* what the operation does */
    size_t table;          /* index of its table in the schemas (= cfg->tables) */
    char *key;             /* the row's key, its canonical text (key_text.h; owned) */
    bool *written;         /* per writable column: set by this operation (owned) */
    char **values;         /* per writable column: its text, NULL for SQL NULL (owned) */
    size_t ncolumns;       /* entries in written and values */
    bool may_read;         /* its writer may read its table (pg:<table>:read): its answer's row
                              holds the key and every listed column, else only the key and the
                              columns it writes (set by the caller; false after a parse) */
};

struct fenced_batch {
    struct fenced_op *ops; /* operations in request order (owned) */
    size_t nops;           /* entries in ops */
};

/* Index of the writable table called name among schemas (ntables entries), or -1. */
long fenced_table_find(const struct table_schema *schemas, size_t ntables, const char *name);

/*
 * Reads the body of a single write of kind on schemas[table]. path_key is the
 * key from the URL (NULL for POST, whose key is inside the row). body is the
 * request's JSON object (borrowed). Fills *op (release with fenced_op_free, also
 * after a failure). Unknown or forbidden columns and malformed bodies fail with
 * FG_ERR_INVALID_FIELD naming the field.
 */
int fenced_op_parse(const struct table_schema *schemas, size_t table, enum fenced_kind kind,
                    const char *path_key, const json_t *body, struct fenced_op *op,
                    struct fg_error *err) FG_WUR;

/* Frees what op owns and zeroes it. */
void fenced_op_free(struct fenced_op *op);

/*
 * Reads a batch body {"ops": [{"op": "patch", "table", "key", "set"}, ...]}
 * whose "ops" passed its route's check (http/strict.h: 1 to
 * FENCED_BATCH_MAX_OPS items, no other member): operations "patch", "put",
 * "post", "delete".
 * A table that is not writable fails with FG_ERR_NOT_FOUND; everything else
 * with FG_ERR_INVALID_FIELD naming the operation ("ops[2].set.amount").
 * Release *batch with fenced_batch_free, also after a failure.
 */
int fenced_batch_parse(const struct table_schema *schemas, size_t ntables, const json_t *body,
                       struct fenced_batch *batch, struct fg_error *err) FG_WUR;

/* Frees what batch owns and zeroes it. */
void fenced_batch_free(struct fenced_batch *batch);

/*
 * The text a JSON value is sent to Postgres as: strings as they are, integers
 * and booleans as JSON prints them, reals as the shortest text that reads back
 * as the same double (19.99, never 19.989999999999998: fgjson_real_text),
 * objects and arrays (and every value of a json column) as JSON text with
 * such reals. *out is owned, NULL for JSON null. field names the value in
 * errors (a string containing NUL is refused).
 */
int fenced_value_text(const json_t *value, bool json_column, const char *field, char **out,
                      struct fg_error *err) FG_WUR;

#endif
