/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pg_reading.c - the order of a pipeline's answers (pg_reading.h): head, one
 * result per statement, tail, then the sync; after a failure, libpq answers
 * each statement still queued as skipped. It must not speak libpq.
 */
#include "store/backend/pg_reading.h"

#include <limits.h>

void pg_reading_start(struct pg_reading *r, size_t n, bool head, bool tail)
{
    *r = (struct pg_reading){.n = n, .head = head, .tail = tail, .failed_at = n};
}

/* The results sent before the sync. */
static size_t sent(const struct pg_reading *r)
{
    return r->n + (r->head ? 1 : 0) + (r->tail ? 1 : 0);
}

/* Ends the reading: every result from here on is out of step. */
static enum pg_reading_step out_of_step(struct pg_reading *r)
{
    r->seen = sent(r) + 1;
    return PG_READ_OUT_OF_STEP;
}

enum pg_reading_step pg_reading_next(struct pg_reading *r, enum pg_result_kind kind, size_t *stmt)
{
    size_t at = r->seen++;
    *stmt = r->n;
    if (at > sent(r))
        return out_of_step(r);
    if (at == sent(r)) /* the sync's place */
        return kind == PG_RESULT_SYNC ? PG_READ_END : out_of_step(r);
    /* a sync before every statement was answered, or a skip with no failure before it */
    if (kind == PG_RESULT_SYNC || (kind == PG_RESULT_ABORTED && !r->failed))
        return out_of_step(r);
    size_t first = r->head ? 1 : 0;
    if (at >= first && at < first + r->n)
        *stmt = at - first;
    if (kind == PG_RESULT_FAILED && !r->failed) {
        r->failed = true;
        r->failed_at = *stmt;
        return PG_READ_FAILURE;
    }
    if (kind != PG_RESULT_OK || r->failed || *stmt == r->n)
        return PG_READ_SKIP;
    return PG_READ_KEEP;
}

long pg_reading_count(const char *tuples)
{
    if (tuples == NULL || *tuples == '\0')
        return -1;
    long count = 0;
    for (const char *p = tuples; *p != '\0'; p++) {
        if (*p < '0' || *p > '9' || count > (LONG_MAX - 9) / 10)
            return -1;
        count = count * 10 + (*p - '0');
    }
    return count;
}
