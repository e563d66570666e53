/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pg_reading.h - reading the answers of a libpq pipeline: which result
 * belongs to which statement, which one failed first, when the answers end
 * and when they are out of step with what was sent; and the row count of a
 * command's tag. Pure: pg.c receives the results and does what a step says.
 */
#ifndef FG_PG_READING_H
#define FG_PG_READING_H

#include <stdbool.h>
#include <stddef.h>

/* What one result of a pipeline is. */
enum pg_result_kind {
    PG_RESULT_OK,      /* a statement ran (rows or a command) */
    PG_RESULT_FAILED,  /* a statement failed */
    PG_RESULT_ABORTED, /* a statement skipped after an earlier failure */
    PG_RESULT_SYNC     /* the sync that ends the pipeline */
};

/* Where the reading of a pipeline's answers stands. */
struct pg_reading {
    size_t n;         /* the caller's statements */
    bool head;        /* a statement of its own (BEGIN) is sent before them */
    bool tail;        /* a statement of its own (COMMIT) is sent after them */
    size_t seen;      /* results read, the sync included */
    bool failed;      /* a result failed */
    size_t failed_at; /* the first failed one: a statement's index, n for head or tail */
};

/* What to do with a result. */
enum pg_reading_step {
    PG_READ_KEEP,       /* the answer of statement *stmt: keep its rows and count */
    PG_READ_FAILURE,    /* the first failure (of statement *stmt, n for head or tail): note it */
    PG_READ_SKIP,       /* nothing to keep (head, tail, a skipped statement, a later failure) */
    PG_READ_END,        /* the sync: every answer is in */
    PG_READ_OUT_OF_STEP /* not what was sent: the connection cannot be trusted */
};

/* Starts reading the answers of n statements, with head and tail as sent. */
void pg_reading_start(struct pg_reading *r, size_t n, bool head, bool tail);

/* The step for the next result, of kind; *stmt gets the caller's statement
 * it answers (n for head or tail). After PG_READ_END or PG_READ_OUT_OF_STEP
 * every further result is out of step. */
enum pg_reading_step pg_reading_next(struct pg_reading *r, enum pg_result_kind kind, size_t *stmt);

/*
 * The rows a command touched, from its tag's count as libpq gives it
 * (PQcmdTuples: "1", "0", or "" for a command without one): the count, or -1
 * when the tag has none.
 */
long pg_reading_count(const char *tuples);

#endif
