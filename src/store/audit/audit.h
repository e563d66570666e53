/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit.h - the audit of rejected writes: one row in fencegate.rejections per
 * refused request (a batch included), whichever backend the write was for, and
 * the keyset-paginated query behind GET /v1/audit/rejections.
 */
#ifndef FG_AUDIT_H
#define FG_AUDIT_H

#include <jansson.h>
#include <stdint.h>

#include "store/audit/audit_filter.h"
#include "util/error.h"

struct pg_conn;

struct audit_record {
    const char *resource;    /* "pg:invoices/42" or "redis:app:x" */
    const char *lock_name;   /* name the presented token was issued for */
    const char *lease_kind;  /* its kind, "lock" or "semaphore"; NULL or "" when not known */
    int64_t presented_fence; /* the refused write's fence */
    int64_t current_fence;   /* the highest fence stored for the resource */
    const char *owner;       /* owner named by the writer, NULL if none */
    const char *client_addr; /* the writer's address */
    const char *method;      /* HTTP method of the write, e.g. "PATCH" */
    const char *reason;      /* why it was refused, e.g. "stale_fence" */
    int64_t at_ms;           /* when it was refused (epoch ms), 0 = now */
    const char *source_id;   /* key of a record copied from a queue (stored once), or NULL */
    const json_t *resources; /* every resource that refused the request (array of strings,
                                borrowed), or NULL: just resource */
    const char *principal;   /* id of the writer's API key, NULL or "" when auth is off */
    const char *trace_id;    /* trace id of the writer's traceparent, NULL or "" for none */
};

/*
 * Inserts the audit row of a refusal about to be answered (fenced_refusal.c).
 * conn: a connection the caller holds (outside a transaction, so that the row
 * commits on its own), or NULL for one of the pool. A refusal is answered only
 * once its record is stored, so any failure (Postgres unreachable, or refusing
 * the row: a constraint, a privilege, a trigger of fencegate.rejections) is
 * FG_ERR_BACKEND_UNAVAILABLE, Postgres's reason in the message (logged, not
 * answered), never an answer that blames the request.
 */
int audit_insert(struct pg_conn *conn, const struct audit_record *rec, struct fg_error *err) FG_WUR;

/* Inserts rec, copied from the Redis audit stream (audit_stream.c), on a
 * connection of the pool, once: a row with its source_id (required) and the
 * same contents is rec stored before, and rec is not stored again; a row with
 * its source_id and other contents is another refusal whose entry had that id
 * (a Redis that lost its stream hands ids out again), and rec is stored under
 * a source_id derived from its contents, once as well. A failure is Postgres's
 * own answer, by which the drain tells an entry that no insert can store (a
 * data or constraint error) from one held back by what may refuse every
 * entry. */
int audit_insert_copy(const struct audit_record *rec, struct fg_error *err) FG_WUR;

/*
 * The records matching filter (filter->resource: any of a record's resources),
 * in id order, which is commit order: a new object {"items": [{"id", "at_ms",
 * "resource", "resources", "lock", "lease_kind", "presented_fence", "current_fence", "owner",
 * "client_addr", "method", "reason", "principal"}], "next_after_id": <id of the last item
 * when the page is full, else null>} in *out.
 */
int audit_query(const struct audit_filter *filter, json_t **out, struct fg_error *err) FG_WUR;

/*
 * Deletes at most batch records older than days days, oldest first, skipping
 * rows another gateway is deleting (short statements, no long locks). *deleted
 * gets how many went.
 */
int audit_prune(long long days, int batch, int *deleted, struct fg_error *err) FG_WUR;

/* Janitor: prunes in the background, a batch a second while old records
 * remain, else once a minute; failures are logged once and retried later.
 * Returns when it is due next. */
int64_t audit_retention_tick(int64_t now_ms, long long days);

/*
 * Rejections within window w: a new object {"since_ms", "until_ms",
 * "per_minute": [{"minute_ms", "rejections"}] (minutes without any left out),
 * "top_resources": [{"resource", "rejections"}] (the top most refused, most
 * first)} in *out.
 */
int audit_summary(const struct audit_window *w, int top, json_t **out, struct fg_error *err) FG_WUR;

#endif
