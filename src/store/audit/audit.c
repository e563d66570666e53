/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit.c - writing and reading fencegate.rejections: one record per refused
 * request, whatever the backend. Stale Postgres writes record themselves inside
 * their own statement (fenced_sql.c) and stale Redis writes in the audit stream
 * (audit_stream.c stores them with audit_insert_copy, once per entry even when
 * a Redis that lost the stream used an entry id again); this file holds the one
 * insert of every other refusal (audit_insert, fenced_refusal.c) and the keyset-paginated query of
 * GET /v1/audit/rejections, one prepared statement per combination of filters so that each can use
 * its index (resources (GIN), (lock_name, id) or the key), and the per-minute counts and most
 * refused resources of GET /v1/audit/summary. Paging by id never skips a record: sql/011 makes ids
 * visible in id order. It also prunes records past limits.audit_retention_days, in small batches
 * (backend janitor).
 */
#include "store/audit/audit.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend/pg.h"
#include "util/log.h"
#include "util/metrics.h"

#define PRUNE_BATCH    500   /* records per delete statement */
#define PRUNE_BUSY_MS  1000  /* next batch while old records remain */
#define PRUNE_IDLE_MS  60000 /* next look once none remain */
#define PRUNE_FIRST_MS 1000  /* first look after start-up */

static const char prune_sql[] =
    "WITH doomed AS (SELECT id FROM fencegate.rejections"
    " WHERE at < now() - make_interval(days => $1::int) ORDER BY at LIMIT $2::int"
    " FOR UPDATE SKIP LOCKED)"
    " DELETE FROM fencegate.rejections r USING doomed WHERE r.id = doomed.id RETURNING r.id";

/* The insert of a refusal recorded directly (no source_id: every row stored). */
static const char insert_sql[] =
    "INSERT INTO fencegate.rejections (at, resource, lock_name, presented_fence, current_fence,"
    " owner, client_addr, method, reason, source_id, principal, resources, trace_id, lease_kind)"
    " VALUES (CASE WHEN $1::bigint > 0 THEN to_timestamp($1::bigint / 1000.0)"
    " ELSE clock_timestamp() END, $2::text, $3::text, $4::bigint, $5::bigint, $6::text,"
    " $7::text, $8::text, $9::text, $10::text, $11::text,"
    " CASE WHEN $12::text IS NULL THEN NULL ELSE ARRAY(SELECT json_array_elements_text($12::json))"
    " END, $13::text, $14::text)"
    " ON CONFLICT (source_id) DO NOTHING";

/*
 * The insert of a record copied from a queue, with the parameters of
 * insert_sql. A source_id names a stream entry, which a Redis that lost its stream (a
 * FLUSHALL, a restart without persistence, a failover to a replica behind) may
 * hand out again for another refusal: so a row of that source_id counts as
 * this record only if it holds the same contents (`same`: every column but id
 * and source_id, NULL-safe; at compared only when the record names it). A
 * record whose source_id holds another refusal is stored under a derived one,
 * the source_id, '#' and the md5 of its contents (text that no session setting
 * changes: at as its milliseconds), so that copying that same entry again
 * finds it there. Resources are stored as the trigger of sql/011 would make
 * them, so that they compare alike. Answers one row: `stored`, the source_id
 * stored under (NULL: none), and `repeat`, whether a row of the same contents
 * was there; neither means a row committed after the statement's snapshot
 * took the source_id (audit_insert_copy runs it again).
 */
static const char copy_sql[] =
    "WITH v AS (SELECT CASE WHEN $1::bigint > 0 THEN to_timestamp($1::bigint / 1000.0) END AS at,"
    " $2::text AS resource, $3::text AS lock_name, $4::bigint AS presented_fence,"
    " $5::bigint AS current_fence, $6::text AS owner, $7::text AS client_addr, $8::text AS method,"
    " $9::text AS reason, $10::text AS source_id, $11::text AS principal,"
    " coalesce(CASE WHEN $12::text IS NULL THEN NULL"
    " ELSE ARRAY(SELECT json_array_elements_text($12::json)) END, ARRAY[$2::text]) AS resources,"
    " $13::text AS trace_id, $14::text AS lease_kind),"
    " k AS (SELECT v.*, v.source_id || '#' || md5(row($1::bigint, v.resource, v.lock_name,"
    " v.presented_fence, v.current_fence, v.owner, v.client_addr, v.method, v.reason,"
    " v.principal, v.resources, v.trace_id, v.lease_kind)::text) AS derived FROM v),"
    " seen AS (SELECT r.source_id, (k.at IS NULL OR r.at = k.at)"
    " AND r.resource IS NOT DISTINCT FROM k.resource"
    " AND r.lock_name IS NOT DISTINCT FROM k.lock_name"
    " AND r.presented_fence IS NOT DISTINCT FROM k.presented_fence"
    " AND r.current_fence IS NOT DISTINCT FROM k.current_fence"
    " AND r.owner IS NOT DISTINCT FROM k.owner AND r.client_addr IS NOT DISTINCT FROM k.client_addr"
    " AND r.method IS NOT DISTINCT FROM k.method AND r.reason IS NOT DISTINCT FROM k.reason"
    " AND r.principal IS NOT DISTINCT FROM k.principal"
    " AND r.resources IS NOT DISTINCT FROM k.resources"
    " AND r.trace_id IS NOT DISTINCT FROM k.trace_id"
    " AND r.lease_kind IS NOT DISTINCT FROM k.lease_kind AS same"
    " FROM fencegate.rejections r, k WHERE r.source_id IN (k.source_id, k.derived)),"
    " ins AS (INSERT INTO fencegate.rejections (at, resource, lock_name, presented_fence,"
    " current_fence, owner, client_addr, method, reason, source_id, principal, resources,"
    " trace_id, lease_kind)"
    " SELECT coalesce(k.at, clock_timestamp()), k.resource, k.lock_name, k.presented_fence,"
    " k.current_fence, k.owner, k.client_addr, k.method, k.reason,"
    " CASE WHEN EXISTS (SELECT FROM seen WHERE seen.source_id = k.source_id) THEN k.derived"
    " ELSE k.source_id END, k.principal, k.resources, k.trace_id, k.lease_kind"
    " FROM k WHERE NOT EXISTS (SELECT FROM seen WHERE same)"
    " ON CONFLICT (source_id) DO NOTHING RETURNING source_id)"
    " SELECT (SELECT source_id FROM ins) AS stored, EXISTS (SELECT FROM seen WHERE same) AS repeat";

/* Runs of copy_sql for one record: a source_id taken by a commit after its
 * snapshot is seen by the next run, and only a derived one may be taken so
 * after that (by another gateway copying the same entry). */
#define COPY_RUNS 3

#define QUERY_COLUMNS                                                                              \
    "SELECT id, floor(extract(epoch FROM at) * 1000)::bigint AS at_ms, resource, lock_name,"       \
    " lease_kind, presented_fence, current_fence, owner, client_addr, method, reason, principal,"  \
    " trace_id, array_to_json(resources)::text AS resources"                                       \
    " FROM fencegate.rejections WHERE id > $1::bigint"                                             \
    " AND at >= to_timestamp($2::bigint / 1000.0)"                                                 \
    " AND ($4::bigint = 0 OR at < to_timestamp($4::bigint / 1000.0))"                              \
    " AND ($5::text IS NULL OR owner = $5::text)"                                                  \
    " AND ($6::text IS NULL OR lease_kind = $6::text)"
#define QUERY_ORDER " ORDER BY id LIMIT $3::int"

/* The query per filter combination; $4 (until, 0 for none), $5 (owner or
 * NULL) and $6 (lease kind or NULL: a record from before sql/120 names none
 * and matches no kind) are always there, $7 and $8 are the filters present,
 * resource first. */
static const struct {
    const char *name;
    const char *sql;
} queries[2][2] = {
    {{"audit_query", QUERY_COLUMNS QUERY_ORDER},
     {"audit_query_l", QUERY_COLUMNS " AND lock_name = $7::text" QUERY_ORDER}},
    {{"audit_query_r", QUERY_COLUMNS " AND resources @> ARRAY[$7::text]" QUERY_ORDER},
     {"audit_query_rl",
      QUERY_COLUMNS " AND resources @> ARRAY[$7::text] AND lock_name = $8::text" QUERY_ORDER}},
};

/* Text columns of a record copied as they are, renamed where the API says so. */
static const struct {
    const char *column;
    const char *member;
} text_members[] = {
    {"resource", "resource"}, {"lock_name", "lock"},          {"lease_kind", "lease_kind"},
    {"owner", "owner"},       {"client_addr", "client_addr"}, {"method", "method"},
    {"reason", "reason"},     {"principal", "principal"},     {"trace_id", "trace_id"},
};

static const char *const integer_members[] = {"id", "at_ms", "presented_fence", "current_fence"};

/* Runs the insert sql (named name) of rec on conn (NULL: a connection of the
 * pool), its rows in *rows when rows is not NULL; a failure is Postgres's own
 * answer. */
static int insert_row(struct pg_conn *conn, const char *name, const char *sql,
                      const struct audit_record *rec, json_t **rows, struct fg_error *err)
{
    char at[24], presented[24], current[24];
    char *resources = NULL;
    if (rec->resources != NULL) {
        resources = json_dumps(rec->resources, JSON_COMPACT);
        FG_ASSERT(resources != NULL);
    }
    snprintf(at, sizeof at, "%" PRId64, rec->at_ms);
    snprintf(presented, sizeof presented, "%" PRId64, rec->presented_fence);
    snprintf(current, sizeof current, "%" PRId64, rec->current_fence);
    const char *params[] = {
        at,
        rec->resource,
        rec->lock_name,
        presented,
        current,
        rec->owner != NULL && rec->owner[0] != '\0' ? rec->owner : NULL,
        rec->client_addr,
        rec->method,
        rec->reason,
        rec->source_id,
        rec->principal != NULL && rec->principal[0] != '\0' ? rec->principal : NULL,
        resources,
        rec->trace_id != NULL && rec->trace_id[0] != '\0' ? rec->trace_id : NULL,
        rec->lease_kind != NULL && rec->lease_kind[0] != '\0' ? rec->lease_kind : NULL};
    int rc = conn != NULL ? pg_exec(conn, name, sql, 14, params, rows, err)
                          : pg_query(name, sql, 14, params, rows, err);
    free(resources);
    return rc;
}

int audit_insert(struct pg_conn *conn, const struct audit_record *rec, struct fg_error *err)
{
    if (insert_row(conn, "audit_insert", insert_sql, rec, NULL, err) == 0)
        return 0;
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                   "postgres did not store the audit record of the refusal: %s", why);
}

int audit_insert_copy(const struct audit_record *rec, struct fg_error *err)
{
    FG_ASSERT(rec->source_id != NULL);
    for (int run = 0; run < COPY_RUNS; run++) {
        json_t *rows = NULL;
        if (insert_row(NULL, "audit_insert_copy", copy_sql, rec, &rows, err) != 0)
            return -1;
        const json_t *row = json_array_get(rows, 0);
        const char *repeat = json_string_value(json_object_get(row, "repeat"));
        bool done = json_string_value(json_object_get(row, "stored")) != NULL ||
                    (repeat != NULL && strcmp(repeat, "t") == 0);
        json_decref(rows);
        if (done)
            return 0;
    }
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                   "other inserts took the source id %s of an audit entry %d times in a row",
                   rec->source_id, COPY_RUNS);
}

/* Turns one row of text columns into an API record. */
static json_t *record_of(const json_t *row)
{
    json_t *rec = json_object();
    for (size_t i = 0; i < sizeof integer_members / sizeof integer_members[0]; i++) {
        const char *text = json_string_value(json_object_get(row, integer_members[i]));
        json_object_set_new(rec, integer_members[i],
                            text ? json_integer(strtoll(text, NULL, 10)) : json_null());
    }
    for (size_t i = 0; i < sizeof text_members / sizeof text_members[0]; i++) {
        json_t *v = json_object_get(row, text_members[i].column);
        json_object_set(rec, text_members[i].member, v ? v : json_null());
    }
    const char *resources = json_string_value(json_object_get(row, "resources"));
    json_t *list = resources != NULL ? json_loads(resources, 0, NULL) : NULL;
    json_object_set_new(rec, "resources", list != NULL ? list : json_array());
    return rec;
}

int audit_query(const struct audit_filter *filter, json_t **out, struct fg_error *err)
{
    char after[24], since[24], limit[16], until[24];
    snprintf(after, sizeof after, "%" PRId64, filter->after_id);
    snprintf(since, sizeof since, "%" PRId64, filter->since_ms);
    snprintf(limit, sizeof limit, "%d", filter->limit);
    snprintf(until, sizeof until, "%" PRId64, filter->until_ms);
    const char *params[8] = {after, since, limit, until, filter->owner, filter->lease_kind};
    int n = 6;
    if (filter->resource != NULL)
        params[n++] = filter->resource;
    if (filter->lock_name != NULL)
        params[n++] = filter->lock_name;
    bool by_resource = filter->resource != NULL, by_lock = filter->lock_name != NULL;
    json_t *rows = NULL;
    if (pg_query(queries[by_resource][by_lock].name, queries[by_resource][by_lock].sql, n, params,
                 &rows, err) != 0)
        return -1;
    json_t *items = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) json_array_append_new(items, record_of(row));
    json_decref(rows);
    json_t *last = json_array_get(items, json_array_size(items) - 1);
    json_t *next = json_array_size(items) == (size_t)filter->limit
                       ? json_incref(json_object_get(last, "id"))
                       : json_null();
    *out = json_pack("{s:o, s:o}", "items", items, "next_after_id", next);
    return 0;
}

int audit_prune(long long days, int batch, int *deleted, struct fg_error *err)
{
    char days_text[24], batch_text[16];
    snprintf(days_text, sizeof days_text, "%lld", days);
    snprintf(batch_text, sizeof batch_text, "%d", batch);
    const char *params[] = {days_text, batch_text};
    json_t *rows = NULL;
    *deleted = 0;
    if (pg_query("audit_prune", prune_sql, 2, params, &rows, err) != 0)
        return -1;
    *deleted = (int)json_array_size(rows);
    json_decref(rows);
    metrics_audit_pruned(*deleted);
    return 0;
}

int64_t audit_retention_tick(int64_t now_ms, long long days)
{
    static int64_t next_ms;
    static bool failing;
    if (next_ms == 0)
        next_ms = now_ms + PRUNE_FIRST_MS;
    if (now_ms < next_ms)
        return next_ms;
    struct fg_error err = {0};
    int deleted = 0;
    if (audit_prune(days, PRUNE_BATCH, &deleted, &err) != 0) {
        if (!failing)
            log_message(LOG_WARN, "audit_prune_failed", "%s", err.msg);
        failing = true;
        next_ms = now_ms + PRUNE_IDLE_MS;
        return next_ms;
    }
    failing = false;
    if (deleted > 0)
        log_event(LOG_INFO, "audit_pruned",
                  json_pack("{s:i, s:I}", "records", deleted, "retention_days", (json_int_t)days));
    next_ms = now_ms + (deleted == PRUNE_BATCH ? PRUNE_BUSY_MS : PRUNE_IDLE_MS);
    return next_ms;
}

static const char summary_minutes_sql[] =
    "SELECT floor(extract(epoch FROM date_trunc('minute', at)) * 1000)::bigint AS minute_ms,"
    " count(*) AS rejections FROM fencegate.rejections"
    " WHERE at >= to_timestamp($1::bigint / 1000.0) AND at < to_timestamp($2::bigint / 1000.0)"
    " GROUP BY 1 ORDER BY 1";

/* A record counts once for each resource it lists (a batch refused on several), as ?resource=
 * matches it. */
static const char summary_resources_sql[] =
    "SELECT r AS resource, count(DISTINCT id) AS rejections"
    " FROM fencegate.rejections CROSS JOIN LATERAL unnest(resources) AS r"
    " WHERE at >= to_timestamp($1::bigint / 1000.0) AND at < to_timestamp($2::bigint / 1000.0)"
    " GROUP BY r ORDER BY count(DISTINCT id) DESC, r LIMIT $3::int";

/* Rows of text columns as objects whose columns in int_columns become integers (new array). */
static json_t *rows_typed(const json_t *rows, const char *const *int_columns, size_t nint)
{
    json_t *out = json_array();
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row)
    {
        json_t *o = json_deep_copy(row);
        for (size_t c = 0; c < nint; c++) {
            const char *text = json_string_value(json_object_get(row, int_columns[c]));
            json_object_set_new(o, int_columns[c],
                                json_integer(text ? strtoll(text, NULL, 10) : 0));
        }
        json_array_append_new(out, o);
    }
    return out;
}

int audit_summary(const struct audit_window *w, int top, json_t **out, struct fg_error *err)
{
    static const char *const minute_ints[] = {"minute_ms", "rejections"};
    static const char *const resource_ints[] = {"rejections"};
    char since[24], until[24], limit[16];
    snprintf(since, sizeof since, "%" PRId64, w->since_ms);
    snprintf(until, sizeof until, "%" PRId64, w->until_ms);
    snprintf(limit, sizeof limit, "%d", top);
    const char *params[] = {since, until, limit};
    json_t *minutes = NULL, *resources = NULL;
    if (pg_query("audit_summary_minutes", summary_minutes_sql, 2, params, &minutes, err) != 0)
        return -1;
    if (pg_query("audit_summary_resources", summary_resources_sql, 3, params, &resources, err) !=
        0) {
        json_decref(minutes);
        return -1;
    }
    *out = json_pack("{s:I, s:I, s:o, s:o}", "since_ms", (json_int_t)w->since_ms, "until_ms",
                     (json_int_t)w->until_ms, "per_minute", rows_typed(minutes, minute_ints, 2),
                     "top_resources", rows_typed(resources, resource_ints, 1));
    json_decref(minutes);
    json_decref(resources);
    return 0;
}
