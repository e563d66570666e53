/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_sql.c - builds the statements of fenced writes (see fenced_sql.h for
 * their shape). Owns the one rule of SQL safety: identifiers come only from the
 * configuration and are quoted by sql_quote_ident; type names come from the
 * catalog (format_type output, already quoted by Postgres); every value is a
 * parameter. It must not run SQL or look at request bodies.
 *
 * A write is one statement of five CTEs:
 *   v  whether the presented fence was revoked (fencegate.revocations); a
 *      revoked fence claims nothing, writes nothing and is audited by x
 *   f  upserts fencegate.resource_fences to greatest(stored, presented). For a
 *      PATCH or DELETE it does so only if the row or a fence of the resource
 *      exists: a write to a missing row (404) leaves no fence behind, and the
 *      statement then answers no row at all. The
 *      upsert always updates, so it locks the fence row (serializing writers of
 *      one resource) and, under READ COMMITTED, evaluates greatest() on the
 *      newest committed version after waiting for a concurrent writer; RETURNING
 *      gives the fence now in force.
 *   w  the write itself, guarded by "f's fence = presented fence".
 *   r  the audit row of a refused write, when f's fence > presented fence, so
 *      the record commits with the statement whatever the client does.
 *   x  the audit row of a write whose fence was revoked (reason "revoked").
 * Its answer row: resource, fence (NULL when revoked), row, revoked; no row
 * for a PATCH or DELETE that found neither its row nor a fence.
 *
 * A table with a fence_column keeps the fence in its own row instead, the
 * classic guarded statement, with these CTEs (v as above):
 *   w  the write, guarded by "stored fence (NULL: 0) <= presented fence" on the
 *      row itself, setting the column to the presented fence;
 *   c  only when w changed nothing: the row's fence, read FOR UPDATE so that,
 *      after waiting for a concurrent writer, it is the newest committed one;
 *   r  the audit row, when c's fence > presented fence.
 *   x  the audit row of a write whose fence was revoked (v, as above, guards
 *      every write of w).
 * Its answer carries "applied" (w changed the row), since the stored fence of
 * a row that w did not touch may equal the presented one (a POST on a row
 * that exists), and "revoked".
 */
#include "store/fenced_sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/fenced.h"

/* The start of every write: v, whether the presented fence was revoked. */
#define REVOKED_CTE                                                                                \
    "WITH v AS (SELECT EXISTS (SELECT 1 FROM fencegate.revocations rv"                             \
    " WHERE rv.fence = $1::bigint) AS revoked"

/* Raising a fence row to greatest(stored, presented), always updating so that
 * the row is locked and the new value is computed on its newest version. */
static const char fence_raise[] =
    " ON CONFLICT (resource) DO UPDATE SET fence = greatest(rf.fence, excluded.fence),"
    " updated_at = CASE WHEN rf.fence <= excluded.fence THEN clock_timestamp()"
    " ELSE rf.updated_at END RETURNING rf.resource, rf.fence";

static const char *const kind_methods[FENCED_KIND_COUNT] = {
    [FENCED_PATCH] = "PATCH",
    [FENCED_PUT] = "PUT",
    [FENCED_POST] = "POST",
    [FENCED_DELETE] = "DELETE",
};

const char *fenced_kind_method(enum fenced_kind kind)
{
    FG_ASSERT(kind < FENCED_KIND_COUNT);
    return kind_methods[kind];
}

bool fenced_kind_needs_row(enum fenced_kind kind)
{
    return kind == FENCED_PATCH || kind == FENCED_DELETE;
}

void table_schema_free(struct table_schema *schema)
{
    if (schema->cfg != NULL && schema->column_types != NULL)
        for (size_t i = 0; i < schema->cfg->ncolumns; i++)
            free(schema->column_types[i]);
    free(schema->column_types);
    free(schema->column_json);
    free(schema->key_type);
    memset(schema, 0, sizeof *schema);
}

static void put_ident(FILE *out, const char *name)
{
    fputc('"', out);
    for (const char *p = name; *p != '\0'; p++) {
        if (*p == '"')
            fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

/* A string stream that must open: memory exhaustion is not a user error. */
static FILE *stream_open(char **buf, size_t *len)
{
    FILE *out = open_memstream(buf, len);
    FG_ASSERT(out != NULL);
    return out;
}

static char *stream_close(FILE *out, char **buf)
{
    FG_ASSERT(fclose(out) == 0);
    return *buf;
}

char *sql_quote_ident(const char *name)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    put_ident(out, name);
    return stream_close(out, &buf);
}

/* Key types whose text is not one per value, and why (fenced_sql_key_refusal). */
static const struct {
    const char *type;
    const char *why;
} refused_key_types[] = {
    {"float4", "0 and -0 are equal but print differently"},
    {"float8", "0 and -0 are equal but print differently"},
    {"citext", "equality ignores case, its text keeps it"},
    {"interval", "'1 day' and '24 hours' are equal but print differently"},
};

const char *fenced_sql_key_refusal(const char *base_type, bool nondeterministic_collation)
{
    if (nondeterministic_collation)
        return "its collation is not deterministic: texts that differ compare equal";
    for (size_t i = 0; i < sizeof refused_key_types / sizeof refused_key_types[0]; i++)
        if (strcmp(base_type, refused_key_types[i].type) == 0)
            return refused_key_types[i].why;
    return NULL;
}

bool fenced_sql_key_numeric(const char *base_type)
{
    return strcmp(base_type, "numeric") == 0;
}

/* The canonical resource of the key in parameter key_param of schema s's table:
 * prefix || key::type::text, the scale dropped for numeric keys. */
static void put_resource(FILE *out, int prefix_param, int key_param, const struct table_schema *s)
{
    if (s->key_numeric)
        fprintf(out, "$%d::text || trim_scale(($%d::%s)::numeric)::text", prefix_param, key_param,
                s->key_type);
    else
        fprintf(out, "$%d::text || ($%d::%s)::text", prefix_param, key_param, s->key_type);
}

/* "<name> AS (INSERT INTO fencegate.rejections (...) SELECT <resource>, ...,
 * <current>, ..., '<reason>', ... <rest>)": the audit row a write's statement
 * keeps of its own refusal, in the columns and with the reason
 * (fenced_outcome_reason) of every other refusal (audit.c, audit_refusal).
 * $4 to $8: the writer's lock, owner, address, method and principal. */
static void put_rejection(FILE *out, const char *name, const char *resource, const char *current,
                          enum fenced_outcome outcome, const char *rest)
{
    fprintf(out,
            "%s AS (INSERT INTO fencegate.rejections (resource, lock_name, presented_fence,"
            " current_fence, owner, client_addr, method, reason, principal)"
            " SELECT %s, $4::text, $1::bigint, %s, $5::text, $6::text, $7::text, '%s', $8::text"
            " %s)",
            name, resource, current, fenced_outcome_reason(outcome), rest);
}

/* Fence-guard of w: the write runs only if f kept the presented fence. */
static const char guard[] = "(SELECT f.fence FROM f) = $1::bigint";

/* " WHERE t."<key>" = $2::<key type>": the row an UPDATE or DELETE names. */
static void put_key_match(FILE *out, const struct table_schema *s)
{
    fputs(" WHERE t.", out);
    put_ident(out, s->cfg->key);
    fprintf(out, " = $2::%s", s->key_type);
}

/* "DELETE FROM <table> AS t WHERE t."<key>" = $2::<key type>": the start of every delete. */
static void put_delete_head(FILE *out, const struct table_schema *s)
{
    fputs("DELETE FROM ", out);
    put_ident(out, s->cfg->name);
    fputs(" AS t", out);
    put_key_match(out, s);
}

/* "UPDATE <table> AS t SET <column> = $9::<type>, ...": the start of every
 * update, one assignment per written column, its parameter numbered after the
 * common ones. Returns what separates one more assignment ("" if none was
 * written). */
static const char *put_update_head(FILE *out, const struct table_schema *s, const bool *written)
{
    const struct table_config *t = s->cfg;
    fputs("UPDATE ", out);
    put_ident(out, t->name);
    fputs(" AS t SET ", out);
    int param = FENCED_PARAM_COUNT + 1;
    const char *sep = "";
    for (size_t i = 0; i < t->ncolumns; i++) {
        if (!written[i])
            continue;
        fputs(sep, out);
        put_ident(out, t->columns[i]);
        fprintf(out, " = $%d::%s", param++, s->column_types[i]);
        sep = ", ";
    }
    return sep;
}

static void put_update(FILE *out, const struct table_schema *s, const bool *written)
{
    put_update_head(out, s, written);
    put_key_match(out, s);
    fprintf(out, " AND %s RETURNING t.*", guard);
}

/* "INSERT INTO <table> AS t (<key>, <written columns>[, <fence column>])
 * SELECT $2::<key type>, <their parameters>": the start of every insert. */
static void put_insert_head(FILE *out, const struct table_schema *s, const bool *written,
                            bool fence_column)
{
    const struct table_config *t = s->cfg;
    fputs("INSERT INTO ", out);
    put_ident(out, t->name);
    fputs(" AS t (", out);
    put_ident(out, t->key);
    for (size_t i = 0; i < t->ncolumns; i++) {
        if (!written[i])
            continue;
        fputs(", ", out);
        put_ident(out, t->columns[i]);
    }
    if (fence_column) {
        fputs(", ", out);
        put_ident(out, t->fence_column);
    }
    fprintf(out, ") SELECT $2::%s", s->key_type);
    int param = FENCED_PARAM_COUNT + 1;
    for (size_t i = 0; i < t->ncolumns; i++)
        if (written[i])
            fprintf(out, ", $%d::%s", param++, s->column_types[i]);
}

static void put_insert(FILE *out, const struct table_schema *s, const bool *written, bool upsert)
{
    const struct table_config *t = s->cfg;
    put_insert_head(out, s, written, false);
    fprintf(out, " WHERE %s", guard);
    if (upsert) {
        /* Replace: every writable column takes the new row's value or its default. */
        fputs(" ON CONFLICT (", out);
        put_ident(out, t->key);
        fputs(") DO UPDATE SET ", out);
        if (t->ncolumns == 0) {
            put_ident(out, t->key);
            fputs(" = excluded.", out);
            put_ident(out, t->key);
        }
        for (size_t i = 0; i < t->ncolumns; i++) {
            fputs(i > 0 ? ", " : "", out);
            put_ident(out, t->columns[i]);
            fputs(" = excluded.", out);
            put_ident(out, t->columns[i]);
        }
    }
    fputs(" RETURNING t.*", out);
}

static void put_delete(FILE *out, const struct table_schema *s)
{
    put_delete_head(out, s);
    fprintf(out, " AND %s RETURNING t.*", guard);
}

/* WHERE clause of f for writes that need an existing row: the row is there,
 * or the resource has a fence already (then a stale write is still refused
 * and audited, and nothing new is stored). */
static void put_target_exists(FILE *out, const struct table_schema *s)
{
    fputs(" AND (EXISTS (SELECT 1 FROM ", out);
    put_ident(out, s->cfg->name);
    fputs(" AS e WHERE e.", out);
    put_ident(out, s->cfg->key);
    fprintf(out,
            " = $2::%s) OR EXISTS (SELECT 1 FROM fencegate.resource_fences AS x"
            " WHERE x.resource = ",
            s->key_type);
    put_resource(out, 3, 2, s);
    fputs("))", out);
}

/* --- tables with a fence column ---------------------------------------------------------- */

/* "coalesce(t."<fence column>", 0)": the row's fence, 0 if never written through the gateway. */
static void put_row_fence(FILE *out, const struct table_config *t)
{
    fputs("coalesce(t.", out);
    put_ident(out, t->fence_column);
    fputs(", 0)", out);
}

static void put_row_guard(FILE *out, const struct table_config *t)
{
    fputs(" AND ", out);
    put_row_fence(out, t);
    fputs(" <= $1::bigint AND NOT (SELECT revoked FROM v)", out);
}

static void put_column_update(FILE *out, const struct table_schema *s, const bool *written)
{
    const struct table_config *t = s->cfg;
    fputs(put_update_head(out, s, written), out);
    put_ident(out, t->fence_column);
    fputs(" = $1::bigint", out);
    put_key_match(out, s);
    put_row_guard(out, t);
    fputs(" RETURNING t.*", out);
}

/* INSERT of the key, the written columns and the fence; a PUT replaces an
 * existing row whose fence is not higher, a POST leaves an existing row alone. */
static void put_column_insert(FILE *out, const struct table_schema *s, const bool *written,
                              bool upsert)
{
    const struct table_config *t = s->cfg;
    put_insert_head(out, s, written, true);
    fputs(", $1::bigint WHERE NOT (SELECT revoked FROM v) ON CONFLICT (", out);
    put_ident(out, t->key);
    if (!upsert) {
        fputs(") DO NOTHING RETURNING t.*", out);
        return;
    }
    fputs(") DO UPDATE SET ", out);
    for (size_t i = 0; i < t->ncolumns; i++) {
        put_ident(out, t->columns[i]);
        fputs(" = excluded.", out);
        put_ident(out, t->columns[i]);
        fputs(", ", out);
    }
    put_ident(out, t->fence_column);
    fputs(" = excluded.", out);
    put_ident(out, t->fence_column);
    fputs(" WHERE ", out);
    put_row_fence(out, t);
    fputs(" <= $1::bigint RETURNING t.*", out);
}

static void put_column_delete(FILE *out, const struct table_schema *s)
{
    put_delete_head(out, s);
    put_row_guard(out, s->cfg);
    fputs(" RETURNING t.*", out);
}

static char *column_write(const struct table_schema *s, enum fenced_kind kind, const bool *written)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs(REVOKED_CTE "), w AS (", out);
    switch (kind) {
    case FENCED_PATCH: put_column_update(out, s, written); break;
    case FENCED_PUT: put_column_insert(out, s, written, true); break;
    case FENCED_POST: put_column_insert(out, s, written, false); break;
    case FENCED_DELETE: put_column_delete(out, s); break;
    default: FG_ASSERT(!"unknown write kind");
    }
    fputs("), c AS (SELECT ", out);
    put_row_fence(out, s->cfg);
    fputs(" AS fence FROM ", out);
    put_ident(out, s->cfg->name);
    fputs(" AS t WHERE t.", out);
    put_ident(out, s->cfg->key);
    fprintf(out, " = $2::%s AND NOT EXISTS (SELECT 1 FROM w) FOR UPDATE), k AS (SELECT ",
            s->key_type);
    put_resource(out, 3, 2, s);
    fputs(" AS resource), ", out);
    put_rejection(out, "r", "k.resource", "c.fence", FENCED_STALE,
                  "FROM k, c WHERE c.fence > $1::bigint AND NOT (SELECT revoked FROM v)");
    fputs(", ", out);
    put_rejection(out, "x", "k.resource", "coalesce((SELECT fence FROM c), 0)", FENCED_REVOKED,
                  "FROM k WHERE (SELECT revoked FROM v)");
    fputs(
        " SELECT k.resource, coalesce((SELECT $1::bigint FROM w), (SELECT fence FROM c)) AS fence,"
        " EXISTS (SELECT 1 FROM w) AS applied, (SELECT row_to_json(w) FROM w)::text AS row,"
        " (SELECT revoked FROM v) AS revoked FROM k WHERE EXISTS (SELECT 1 FROM w)"
        " OR EXISTS (SELECT 1 FROM c) OR (SELECT revoked FROM v)",
        out);
    return stream_close(out, &buf);
}

static int written_params(const struct table_schema *s, enum fenced_kind kind, const bool *written)
{
    int n = FENCED_PARAM_COUNT;
    if (kind != FENCED_DELETE)
        for (size_t i = 0; i < s->cfg->ncolumns; i++)
            n += written[i] ? 1 : 0;
    return n;
}

/* The read of a table with a fence column: the fence is the row's. */
static char *column_read(const struct table_schema *s)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("SELECT k.resource, t.", out);
    put_ident(out, s->cfg->fence_column);
    fputs(" AS fence, row_to_json(t)::text AS row FROM (SELECT ", out);
    put_resource(out, 2, 1, s);
    fputs(" AS resource) AS k LEFT JOIN ", out);
    put_ident(out, s->cfg->name);
    fputs(" AS t ON t.", out);
    put_ident(out, s->cfg->key);
    fprintf(out, " = $1::%s", s->key_type);
    return stream_close(out, &buf);
}

char *fenced_sql_column_claim(const struct table_schema *s, size_t n)
{
    FG_ASSERT(n > 0);
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs(s->key_numeric ? "SELECT $1::text || trim_scale((t." : "SELECT $1::text || (t.", out);
    put_ident(out, s->cfg->key);
    fputs(s->key_numeric ? ")::numeric)::text AS resource, " : ")::text AS resource, ", out);
    put_row_fence(out, s->cfg);
    fputs(" AS fence FROM ", out);
    put_ident(out, s->cfg->name);
    fputs(" AS t WHERE t.", out);
    put_ident(out, s->cfg->key);
    fputs(" IN (", out);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s$%zu::%s", i > 0 ? ", " : "", i + 2, s->key_type);
    fputs(") ORDER BY t.", out);
    put_ident(out, s->cfg->key);
    fputs(" FOR UPDATE", out);
    return stream_close(out, &buf);
}

/* --- all tables --------------------------------------------------------------------------- */

char *fenced_sql_write(const struct table_schema *s, enum fenced_kind kind, const bool *written,
                       int *nparams)
{
    FG_ASSERT(kind < FENCED_KIND_COUNT);
    if (s->cfg->fence_column != NULL) {
        *nparams = written_params(s, kind, written);
        return column_write(s, kind, written);
    }
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs(REVOKED_CTE ", ", out);
    put_resource(out, 3, 2, s);
    fputs(" AS resource), f AS (INSERT INTO fencegate.resource_fences AS rf (resource, fence)"
          " SELECT v.resource, $1::bigint FROM v WHERE NOT v.revoked",
          out);
    if (kind == FENCED_PATCH || kind == FENCED_DELETE)
        put_target_exists(out, s);
    fprintf(out, "%s), w AS (", fence_raise);
    switch (kind) {
    case FENCED_PATCH: put_update(out, s, written); break;
    case FENCED_PUT: put_insert(out, s, written, true); break;
    case FENCED_POST: put_insert(out, s, written, false); break;
    case FENCED_DELETE: put_delete(out, s); break;
    default: FG_ASSERT(!"unknown write kind");
    }
    fputs("), ", out);
    put_rejection(out, "r", "f.resource", "f.fence", FENCED_STALE,
                  "FROM f WHERE f.fence > $1::bigint");
    fputs(", ", out);
    put_rejection(out, "x", "v.resource",
                  "coalesce((SELECT rf.fence FROM fencegate.resource_fences rf"
                  " WHERE rf.resource = v.resource), 0)",
                  FENCED_REVOKED, "FROM v WHERE v.revoked");
    fputs(" SELECT v.resource, f.fence, (SELECT row_to_json(w) FROM w)::text AS row,"
          " v.revoked FROM v LEFT JOIN f ON true WHERE v.revoked OR f.resource IS NOT NULL",
          out);
    *nparams = written_params(s, kind, written);
    return stream_close(out, &buf);
}

char *fenced_sql_read(const struct table_schema *s)
{
    if (s->cfg->fence_column != NULL)
        return column_read(s);
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("SELECT k.resource, (SELECT fence FROM fencegate.resource_fences rf"
          " WHERE rf.resource = k.resource) AS fence,"
          " (SELECT row_to_json(t) FROM ",
          out);
    put_ident(out, s->cfg->name);
    fputs(" AS t WHERE t.", out);
    put_ident(out, s->cfg->key);
    fprintf(out, " = $1::%s)::text AS row FROM (SELECT ", s->key_type);
    put_resource(out, 2, 1, s);
    fputs(" AS resource) AS k", out);
    return stream_close(out, &buf);
}

char *fenced_sql_claim(const struct table_schema *const *schemas, size_t n)
{
    FG_ASSERT(n > 0);
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("INSERT INTO fencegate.resource_fences AS rf (resource, fence)"
          " SELECT DISTINCT v.resource, $1::bigint FROM (VALUES ",
          out);
    for (size_t i = 0; i < n; i++) {
        fputs(i > 0 ? ", (" : "(", out);
        put_resource(out, (int)(2 + 2 * i), (int)(3 + 2 * i), schemas[i]);
        fputs(")", out);
    }
    fprintf(out, ") AS v (resource) ORDER BY v.resource%s", fence_raise);
    return stream_close(out, &buf);
}

char *fenced_sql_cast_check(const char *type)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fprintf(out, "SELECT $1::%s", type);
    return stream_close(out, &buf);
}
