/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch_opening.c - builds the opening pipeline of a fenced batch
 * (batch_opening.h): which claims it makes, in which order, with which
 * parameters. No I/O; running it and reading its answers is fenced_pg.c's.
 */
#include "store/fenced/batch_opening.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"

static void opening_add(struct batch_opening *o, char *sql, size_t nparams, const char **params)
{
    o->sql[o->n] = sql;
    o->stmts[o->n++] = (struct pg_group_stmt){NULL, sql, (int)nparams, params, NULL, -1};
}

/* Adds a statement of a row's claim, prepared under name, with its two
 * parameters; owns: o owns sql (the first of the statements that share it). */
static void row_add(struct batch_opening *o, const char *name, char *sql, bool owns,
                    const char **params)
{
    o->sql[o->n] = owns ? sql : NULL;
    o->stmts[o->n++] = (struct pg_group_stmt){name, sql, 2, params, NULL, -1};
}

/* True if the table of schema keeps fences in a column of its rows. */
static bool column_mode(const struct table_schema *schema)
{
    return schema->cfg->fence_column != NULL;
}

/* Sorts keys[0..n) in key order under shape and drops repeated rows; returns
 * how many are left. A batch holds at most FENCED_BATCH_MAX_OPS keys. */
static size_t sort_rows(const struct key_shape *shape, const char **keys, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && key_compare(shape, keys[j - 1], keys[j]) > 0; j--) {
            const char *k = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = k;
        }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (kept == 0 || key_compare(shape, keys[kept - 1], keys[i]) != 0)
            keys[kept++] = keys[i];
    return kept;
}

/* Adds the claim of the rows of fence-column table t that the batch writes,
 * row by row in key order: the row's lock, then the row. p: room for their
 * parameters; returns the room it took. */
static size_t claim_rows(struct batch_opening *o, const struct fenced_batch *batch, size_t t,
                         const struct table_schema *schema, const char *prefix, const char **p)
{
    const char **keys = calloc(batch->nops + 1, sizeof *keys);
    FG_ASSERT(keys != NULL);
    size_t n = 0;
    for (size_t i = 0; i < batch->nops; i++)
        if (batch->ops[i].table == t)
            keys[n++] = batch->ops[i].key;
    n = sort_rows(&schema->key_shape, keys, n);
    if (n == 0) {
        free(keys);
        return 0;
    }
    snprintf(o->names[2 * t], sizeof o->names[2 * t], "fpg_l%zu", t);
    snprintf(o->names[2 * t + 1], sizeof o->names[2 * t + 1], "fpg_k%zu", t);
    char *lock = fenced_sql_row_lock(schema), *claim = fenced_sql_column_claim(schema);
    for (size_t i = 0; i < n; i++) {
        p[2 * i] = prefix;
        p[2 * i + 1] = keys[i];
        row_add(o, o->names[2 * t], lock, i == 0, &p[2 * i]);
        row_add(o, o->names[2 * t + 1], claim, i == 0, &p[2 * i]);
    }
    free(keys);
    return 2 * n;
}

void batch_opening_build(const struct fenced_batch *batch, int64_t fence,
                         const struct table_schema *schemas, char *const *prefixes, size_t ntables,
                         struct batch_opening *o)
{
    size_t most = BATCH_OPENING_CLAIMS + 1 + 2 * batch->nops;
    o->stmts = calloc(most, sizeof *o->stmts);
    o->sql = calloc(most, sizeof *o->sql);
    /* the fence, the fence rows' (prefix, key) pairs, the rows' pairs */
    o->params = calloc(1 + 4 * batch->nops, sizeof *o->params);
    o->names = calloc(2 * ntables + 1, sizeof *o->names);
    const struct table_schema **claimed = calloc(batch->nops + 1, sizeof *claimed);
    FG_ASSERT(o->stmts != NULL && o->sql != NULL && o->params != NULL && o->names != NULL &&
              claimed != NULL);
    snprintf(o->fence, sizeof o->fence, "%" PRId64, fence);
    o->stmts[BATCH_OPENING_BEGIN] = (struct pg_group_stmt){NULL, "BEGIN", 0, NULL, NULL, -1};
    o->stmts[BATCH_OPENING_REVOKED] = (struct pg_group_stmt){
        NULL, "SELECT 1 AS revoked FROM fencegate.revocations WHERE fence = $1::bigint",
        1,    o->params,
        NULL, -1};
    o->n = BATCH_OPENING_CLAIMS;
    const char **p = o->params;
    p[0] = o->fence;
    size_t n = 0;
    for (size_t i = 0; i < batch->nops; i++) {
        const struct fenced_op *op = &batch->ops[i];
        if (column_mode(&schemas[op->table]))
            continue;
        claimed[n] = &schemas[op->table];
        p[1 + 2 * n] = prefixes[op->table];
        p[2 + 2 * n] = op->key;
        n++;
    }
    if (n > 0)
        opening_add(o, fenced_sql_claim(claimed, n), 1 + 2 * n, p);
    free(claimed);
    p += 1 + 2 * n;
    for (size_t t = 0; t < ntables; t++)
        if (column_mode(&schemas[t]))
            p += claim_rows(o, batch, t, &schemas[t], prefixes[t], p);
}

void batch_opening_free(struct batch_opening *o)
{
    for (size_t i = 0; i < o->n; i++) {
        free(o->sql[i]);
        json_decref(o->stmts[i].rows);
    }
    free(o->sql);
    free(o->stmts);
    free(o->params);
    free(o->names);
}
