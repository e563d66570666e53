/*
 * audit.c - writing and reading fencegate.rejections: one record per refused
 * request, whatever the backend. Stale Postgres writes record themselves inside
 * their own statement (fenced_sql.c); this file holds the insert for every
 * other refusal and the keyset-paginated query of GET /v1/audit/rejections, one
 * prepared statement per combination of filters so that each can use its index
 * (resources (GIN), (lock_name, id) or the key). Paging by id never skips a
 * record: sql/011 makes ids visible in id order.
 */
#include "store/audit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "store/pg.h"

static const char insert_sql[] =
    "INSERT INTO fencegate.rejections (at, resource, lock_name, presented_fence, current_fence,"
    " owner, client_addr, method, reason, source_id, resources)"
    " VALUES (CASE WHEN $1::bigint > 0 THEN to_timestamp($1::bigint / 1000.0)"
    " ELSE clock_timestamp() END, $2::text, $3::text, $4::bigint, $5::bigint, $6::text,"
    " $7::text, $8::text, $9::text, $10::text,"
    " CASE WHEN $11::text IS NULL THEN NULL ELSE ARRAY(SELECT json_array_elements_text($11::json))"
    " END)"
    " ON CONFLICT (source_id) DO NOTHING";

#define QUERY_COLUMNS                                                                              \
    "SELECT id, floor(extract(epoch FROM at) * 1000)::bigint AS at_ms, resource, lock_name,"       \
    " presented_fence, current_fence, owner, client_addr, method, reason,"                         \
    " array_to_json(resources)::text AS resources"                                                 \
    " FROM fencegate.rejections WHERE id > $1::bigint"                                             \
    " AND at >= to_timestamp($2::bigint / 1000.0)"
#define QUERY_ORDER " ORDER BY id LIMIT $3::int"

/* The query per filter combination; parameters $4 and $5 are the filters
 * present, resource first. */
static const struct {
    const char *name;
    const char *sql;
} queries[2][2] = {
    {{"audit_query", QUERY_COLUMNS QUERY_ORDER},
     {"audit_query_l", QUERY_COLUMNS " AND lock_name = $4::text" QUERY_ORDER}},
    {{"audit_query_r", QUERY_COLUMNS " AND resources @> ARRAY[$4::text]" QUERY_ORDER},
     {"audit_query_rl",
      QUERY_COLUMNS " AND resources @> ARRAY[$4::text] AND lock_name = $5::text" QUERY_ORDER}},
};

/* Text columns of a record copied as they are, renamed where the API says so. */
static const struct {
    const char *column;
    const char *member;
} text_members[] = {
    {"resource", "resource"},       {"lock_name", "lock"}, {"owner", "owner"},
    {"client_addr", "client_addr"}, {"method", "method"},  {"reason", "reason"},
};

static const char *const integer_members[] = {"id", "at_ms", "presented_fence", "current_fence"};

static int insert(struct pg_conn *conn, const struct audit_record *rec, struct fg_error *err)
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
    const char *params[] = {at,
                            rec->resource,
                            rec->lock_name,
                            presented,
                            current,
                            rec->owner != NULL && rec->owner[0] != '\0' ? rec->owner : NULL,
                            rec->client_addr,
                            rec->method,
                            rec->reason,
                            rec->source_id,
                            resources};
    int rc = conn != NULL ? pg_exec(conn, "audit_insert", insert_sql, 11, params, NULL, err)
                          : pg_query("audit_insert", insert_sql, 11, params, NULL, err);
    free(resources);
    return rc;
}

int audit_insert(const struct audit_record *rec, struct fg_error *err)
{
    return insert(NULL, rec, err);
}

int audit_insert_on(struct pg_conn *conn, const struct audit_record *rec, struct fg_error *err)
{
    return insert(conn, rec, err);
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
    char after[24], since[24], limit[16];
    snprintf(after, sizeof after, "%" PRId64, filter->after_id);
    snprintf(since, sizeof since, "%" PRId64, filter->since_ms);
    snprintf(limit, sizeof limit, "%d", filter->limit);
    const char *params[5] = {after, since, limit};
    int n = 3;
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
