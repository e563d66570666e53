/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_answer.h - reading the one-row answers of the fenced Postgres
 * statements (fenced_sql.h): (resource, fence, row) as text, and on a table
 * with a fence column also applied; "revoked" when the writer's lease was
 * revoked. Pure: fenced_pg.c runs the statements.
 */
#ifndef FG_FENCED_ANSWER_H
#define FG_FENCED_ANSWER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/fenced.h"
#include "store/fenced_sql.h"

struct fenced_result {
    enum fenced_outcome outcome; /* APPLIED, STALE or REVOKED */
    char *resource;              /* resource written or (batch) the first stale one (owned) */
    int64_t fence;               /* highest fence of resource now, 0 if none is stored */
    json_t *row;                 /* the row after a write or read, or null (owned) */
    json_t *items;               /* batch: per op {resource, row}; when stale, per stale
                                    resource {resource, current_fence} (owned, or NULL) */
};

/* Frees what res owns and zeroes it. */
void fenced_result_free(struct fenced_result *res);

/* The fence member of an answer row (text), 0 if it has none. */
int64_t fenced_answer_fence(const json_t *answer);

/*
 * Fills *res (freed first) from the answer of a write of kind that presented
 * fence presented; answer NULL means no answer row: the target row and its
 * fence are missing. The write was applied if the answer says so (a fence
 * column) or the fence now stored is the presented one; revoked overrides.
 * Returns false if the row a PATCH or DELETE needs was missing (or no answer).
 */
bool fenced_answer_take(const json_t *answer, enum fenced_kind kind, int64_t presented,
                        struct fenced_result *res);

/* Fills *res (zeroed first; outcome APPLIED) from the answer of a read. */
void fenced_answer_read(const json_t *answer, struct fenced_result *res);

/* A new array of {resource, current_fence}: the rows of claimed (a batch's
 * claim answers, borrowed) whose fence is higher than presented. */
json_t *fenced_answer_stale(const json_t *claimed, int64_t presented);

#endif
