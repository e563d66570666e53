/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_pg_answer.h - reading the one-row answers of the fenced Postgres
 * statements (fenced_sql.h), all text: a write's (resource, c0, c1, ...), the
 * refusal statement's (resource, fence, revoked, found), a judged form's
 * (wrote, ..., skipped), a read's (resource, fence, row), into struct
 * fenced_result. Pure: fenced_pg.c runs the
 * statements.
 */
#ifndef FG_FENCED_PG_ANSWER_H
#define FG_FENCED_PG_ANSWER_H

#include <jansson.h>
#include <stdint.h>

#include "store/fenced/fenced_result.h"
#include "store/fenced/fenced_sql.h"

/* The fence member of an answer row (text), 0 if it has none. */
int64_t fenced_pg_answer_fence(const json_t *answer);

/*
 * Fills *res (freed first) from the answer row of an accepted write on table
 * s of key (canonical) that presented fence presented: APPLIED, the resource
 * if the answer has it (else NULL: the caller names it from the key), and
 * with_row, the row's JSON text as row_json.h writes it from the columns
 * returned (else NULL: a delete, or return=minimal). answer may be NULL when
 * the statement had nothing to return.
 */
void fenced_pg_answer_applied(const json_t *answer, const struct table_schema *s, const char *key,
                              bool with_row, int64_t presented, struct fenced_result *res);

/* What the refusal statement found about a write that wrote nothing. */
enum fenced_verdict {
    FENCED_VERDICT_REFUSED, /* revoked, or a higher fence is stored: res says which */
    FENCED_VERDICT_MISSING, /* the row a PATCH or DELETE needs is not there */
    FENCED_VERDICT_EXISTS,  /* a POST met a row whose fence does not refuse it */
    FENCED_VERDICT_RETRY    /* nothing refuses the write now: the row changed meanwhile */
};

/*
 * The verdict on a write of kind that presented fence presented and wrote
 * nothing, from the answer of its refusal statement; fills *res (freed
 * first) with the resource and the fence stored now, and for REFUSED the
 * outcome (FENCED_STALE or FENCED_REVOKED).
 */
enum fenced_verdict fenced_pg_answer_verdict(const json_t *answer, enum fenced_kind kind,
                                             int64_t presented, struct fenced_result *res);

/* What the judged form of a write did (fenced_sql_judged). */
enum fenced_judged {
    FENCED_JUDGED_WROTE,   /* it wrote: its answer is an accepted write's */
    FENCED_JUDGED_SKIPPED, /* its guard passed, and a trigger of the table skipped it */
    FENCED_JUDGED_NOTHING  /* it wrote nothing, and nothing says its guard passed */
};

/* What the judged form of a write did, from its answer row (NULL: none). */
enum fenced_judged fenced_pg_answer_judged(const json_t *answer);

/* Fills *res (zeroed first; outcome APPLIED) from the answer of a read: its
 * row as row_to_json wrote it, NULL when there is none. */
void fenced_pg_answer_read(const json_t *answer, struct fenced_result *res);

/* A new array of {resource, current_fence}: the rows of claimed (a batch's
 * claim answers, borrowed) whose fence is higher than presented. */
json_t *fenced_pg_answer_stale(const json_t *claimed, int64_t presented);

#endif
