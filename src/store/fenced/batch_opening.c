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

/* True if the table of schema keeps fences in a column of its rows. */
static bool column_mode(const struct table_schema *schema)
{
    return schema->cfg->fence_column != NULL;
}

void batch_opening_build(const struct fenced_batch *batch, int64_t fence,
                         const struct table_schema *schemas, char *const *prefixes, size_t ntables,
                         struct batch_opening *o)
{
    size_t most = BATCH_OPENING_CLAIMS + 1 + ntables;
    o->stmts = calloc(most, sizeof *o->stmts);
    o->sql = calloc(most, sizeof *o->sql);
    o->params = calloc(1 + 2 * batch->nops + ntables + batch->nops, sizeof *o->params);
    const struct table_schema **claimed = calloc(batch->nops + 1, sizeof *claimed);
    FG_ASSERT(o->stmts != NULL && o->sql != NULL && o->params != NULL && claimed != NULL);
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
    for (size_t t = 0; t < ntables; t++) {
        if (!column_mode(&schemas[t]))
            continue;
        size_t rows = 0;
        p[0] = prefixes[t];
        for (size_t i = 0; i < batch->nops; i++)
            if (batch->ops[i].table == t)
                p[1 + rows++] = batch->ops[i].key;
        if (rows > 0) {
            opening_add(o, fenced_sql_column_claim(&schemas[t], rows), 1 + rows, p);
            p += 1 + rows;
        }
    }
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
}
