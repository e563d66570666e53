/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_sql.c - builds the statements of fenced writes (see fenced_sql.h for
 * their shape). Owns the one rule of SQL safety: identifiers come only from the
 * configuration and are quoted by sql_quote_ident; type names come from the
 * catalog (format_type output, already quoted by Postgres); every value is a
 * parameter. A statement reaches its table's rows alone (put_table). It must
 * not run SQL or look at request bodies.
 *
 * A write is one statement that does nothing but the write when it is
 * accepted, the common case; why a write was refused is asked afterwards, by
 * the refusal statement, which also keeps its audit row (fenced_sql.h).
 *
 * Default mode: c locks the resource's row of fencegate.resource_fences (FOR
 * UPDATE), which serializes the writers of one resource and, under READ
 * COMMITTED, reads the newest committed fence after waiting for a concurrent
 * writer. A write comes in two forms. The held form, a holder's every write
 * after its first, runs only where c finds the presented fence stored, which
 * is locked, not rewritten; it carries no upsert, whose ModifyTable Postgres
 * would set up for every write although it inserts nothing. When it wrote
 * nothing, the claiming form follows: a lower fence, or none, is raised by f,
 * an upsert that raises the stored fence only if it is not higher (ON CONFLICT
 * ... DO UPDATE ... WHERE, for a fence row that another writer inserts
 * meanwhile). f claims nothing for a revoked fence, nor for a PATCH or DELETE
 * whose row is missing (a 404 leaves no fence behind). The write runs only
 * when c holds the presented fence or f claimed it, and the fence is not
 * revoked. f sees the row as the statement's snapshot has it, and a DELETE
 * committed since (one the write waited for) leaves the write nothing to
 * write: a claiming PATCH or DELETE writes in a CTE w and, where f claimed
 * and w wrote nothing, fails (fencegate.fence_claim_used, SQLSTATE FGC01),
 * which undoes its claim; the gateway takes that for a write that wrote
 * nothing. Inside a batch, whose opening claimed every fence, the held form
 * is the whole write. A POST's insert names the key's unique index as its
 * arbiter (put_key_taken): a key a row has fails it as a unique violation.
 *
 * A table with a fence_column keeps the fence in its own row instead, the
 * classic guarded statement: the write sets the column to the presented fence
 * where the stored one (NULL: 0) is not higher, and where the fence is not
 * revoked. A delete, which takes the row and its fence away, keeps that fence
 * in the row's resource in fencegate.resource_fences (the one row such a table
 * has there), and a write that creates the row (PUT, POST) goes ahead only
 * where no higher fence is kept there: a token older than the delete cannot
 * bring the row back. As that guard reads what was committed when the
 * statement began, a row the write did create is looked at once more
 * (put_column_create), for a delete the write waited for; on a partitioned
 * table, which cannot say which rows a write created, every row it wrote.
 *
 * Asked for its row, either answers (resource, c0, c1, ...) for the row it
 * wrote, the resource built from the row's stored key (its canonical text),
 * and no row at all when it wrote nothing; a key the gateway knows as Postgres
 * prints it is not asked back (put_returning). The row is the key and the listed
 * columns, nothing else of the table (a column added later stays private).
 * Not asked for it (Prefer: return=minimal), a write answers nothing of the
 * row but, where the gateway cannot name the row itself (a key of a type it
 * does not read, such as timestamptz or bytea), the resource: the command's
 * row count tells whether it wrote.
 *
 * Every write but a delete also returns key_kept, its look at the key of the
 * row it wrote (put_key_kept): where a BEFORE trigger of the table changed it,
 * or a unique index took another row's key for the one asked, the statement
 * fails (SQLSTATE FGM01) and writes nothing, claims no fence: the fence and
 * the lock that judged the write are those of the key asked.
 *
 * A write to a default-mode table that wrote nothing although nothing refuses
 * it runs once more in its judged form: the same write as the CTE a, and a verdict g that runs only
 * where a wrote nothing, and reads the write's guard as the write read it,
 * locking the row (FOR UPDATE: its newest version, under the row security of
 * an UPDATE). A row there means that the guard passed and yet nothing was
 * written: a BEFORE trigger of the table returned NULL. Only that rare path
 * pays for it: the write statements themselves are unchanged.
 */
#include "store/fenced/fenced_sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/fenced/fenced_outcome.h"

/* The seed of the hash that names a row's lock (put_row_lock) among the
 * advisory locks of the database. */
#define ROW_LOCK_SEED "7046"

/* True when the presented fence was revoked: one probe of a small table, in
 * the statement's snapshot (a revoke answers only once every transaction that
 * began before its record's commit has ended: revocations.h). */
#define REVOKED "EXISTS (SELECT 1 FROM fencegate.revocations rv WHERE rv.fence = $1::bigint)"

/* The raise of a single write's fence (f): raises the stored fence to the
 * presented one unless it is higher; answers the resource only when it did. */
static const char fence_claim[] =
    " ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence, updated_at = clock_timestamp()"
    " WHERE rf.fence <= excluded.fence RETURNING rf.resource";

/* What a default-mode write needs to go ahead: the fence is not revoked, and
 * c holds the presented fence or f claimed it. */
static const char claimed[] =
    " AND NOT " REVOKED " AND ((SELECT c.fence FROM c) = $1::bigint OR EXISTS (SELECT 1 FROM f))";

/* The same for the held form, whose c is only the presented fence's row. */
static const char held[] = " AND EXISTS (SELECT 1 FROM c) AND NOT " REVOKED;

/* The last look of a claiming PATCH or DELETE at its claim: true where the
 * write wrote (wrote: an SQL condition) or f claimed nothing, else the
 * statement fails with SQLSTATE FGC01 (sql/100_fence_claim_used.sql). Put in
 * a WHERE over the write's rows, it runs once even where there are none: the
 * function is STABLE, so the planner makes it a one-time filter. */
#define CLAIM_USED(wrote) "fencegate.fence_claim_used(" wrote " OR NOT EXISTS (SELECT 1 FROM f))"

/* Raising a fence row of a batch to greatest(stored, presented), always
 * updating so that the row is locked and the new value is computed on its
 * newest version; answers the fence now in force, so that the batch sees a
 * higher one. */
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
    free(schema->row_kinds);
    free(schema->key_type);
    free(schema->table_schema);
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

/* "<schema>"."<table>": s's table where Postgres found it at start-up. Never
 * the name alone: a WITH query of a statement named as the table (c, k, ...)
 * would stand for it in a FROM, and the statement read that query's rows. */
static void put_table_name(FILE *out, const struct table_schema *s)
{
    if (s->table_schema != NULL) {
        put_ident(out, s->table_schema);
        fputc('.', out);
    }
    put_ident(out, s->cfg->name);
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

/* Postgres's own types whose text is one per value as their equality sees it:
 * numeric, timestamptz and bytea through their identity (fenced_sql_key_identity),
 * date and time types under the DateStyle every connection sets. */
static const char *const one_text_key_types[] = {
    "int2", "int4",    "int8",     "numeric", "text",      "varchar",     "bpchar", "name",  "char",
    "uuid", "date",    "time",     "timetz",  "timestamp", "timestamptz", "bool",   "bytea", "inet",
    "cidr", "macaddr", "macaddr8", "bit",     "varbit",    "oid",         "pg_lsn",
};

/* Types refused with a reason of their own (fenced_sql_key_refusal). */
static const struct {
    const char *type;
    const char *why;
} refused_key_types[] = {
    {"float4", "0 and -0 are equal but print differently"},
    {"float8", "0 and -0 are equal but print differently"},
    {"citext", "equality ignores case, its text keeps it"},
    {"interval", "'1 day' and '24 hours' are equal but print differently"},
    {"money", "its text follows the session's lc_monetary"},
};

static bool one_text_per_value(const struct key_column_type *t)
{
    if (t->is_enum)
        return true;
    for (size_t i = 0; t->builtin && i < sizeof one_text_key_types / sizeof *one_text_key_types;
         i++)
        if (strcmp(t->base_type, one_text_key_types[i]) == 0)
            return true;
    return false;
}

const char *fenced_sql_key_refusal(const struct key_column_type *t)
{
    if (t->nondeterministic_collation)
        return "its collation (or that of a unique index on it) is not deterministic: texts that "
               "differ compare equal";
    for (size_t i = 0; i < sizeof refused_key_types / sizeof refused_key_types[0]; i++)
        if (strcmp(t->base_type, refused_key_types[i].type) == 0)
            return refused_key_types[i].why;
    if (!one_text_per_value(t))
        return "equal values of the type may print differently (arrays, ranges, records, json); "
               "an integer, numeric, text, uuid, date or time type, or an enum, names a resource";
    return NULL;
}

enum key_identity fenced_sql_key_identity(const struct key_column_type *t)
{
    if (!t->builtin)
        return KEY_IDENTITY_TEXT;
    if (strcmp(t->base_type, "numeric") == 0)
        return KEY_IDENTITY_NUMERIC;
    if (strcmp(t->base_type, "timestamptz") == 0)
        return KEY_IDENTITY_UTC;
    if (strcmp(t->base_type, "bytea") == 0)
        return KEY_IDENTITY_HEX;
    return KEY_IDENTITY_TEXT;
}

/* The text around a key's expression that makes its identity's text. */
static const struct {
    const char *open, *close;
} identity_text[] = {
    [KEY_IDENTITY_TEXT] = {"(", ")::text"},
    [KEY_IDENTITY_NUMERIC] = {"trim_scale((", ")::numeric)::text"},
    [KEY_IDENTITY_UTC] = {"fencegate.utc_text((", ")::timestamptz)"},
    [KEY_IDENTITY_HEX] = {"E'\\\\x' || encode((", ")::bytea, 'hex')"},
};

/* The canonical resource of the key in parameter key_param of schema s's table:
 * prefix || the key's identity text (fenced_sql_key_identity). */
static void put_resource(FILE *out, int prefix_param, int key_param, const struct table_schema *s)
{
    fprintf(out, "$%d::text || %s$%d::%s%s", prefix_param, identity_text[s->key_identity].open,
            key_param, s->key_type, identity_text[s->key_identity].close);
}

/* The lock of the row of a fence-column table whose resource is prefix_param
 * || key_param's canonical text (fenced_sql.h, fenced_sql_row_lock), as a
 * boolean expression: "pg_advisory_xact_lock(...) IS NOT NULL" is true. */
static void put_row_lock(FILE *out, int prefix_param, int key_param, const struct table_schema *s)
{
    fputs("pg_advisory_xact_lock(hashtextextended(", out);
    put_resource(out, prefix_param, key_param, s);
    fputs(", " ROW_LOCK_SEED "))", out);
}

/* The canonical resource of the row of alias: prefix_param || its stored key's text. */
static void put_row_resource(FILE *out, int prefix_param, const char *alias,
                             const struct table_schema *s)
{
    fprintf(out, "$%d::text || %s%s.", prefix_param, identity_text[s->key_identity].open, alias);
    put_ident(out, s->cfg->key);
    fputs(identity_text[s->key_identity].close, out);
}

/* "(SELECT row_to_json(r.*) FROM (SELECT <alias>.<key>, <alias>.<column>, ...) AS r)":
 * the row as an answer shows it, the key and the listed columns in that order
 * (the fence column and any column not listed stay out). A bare r would be a
 * column named r of the subquery or of the table around it before it is the
 * subquery's row; r.* can only be the row. */
static void put_row_json(FILE *out, const char *alias, const struct table_schema *s)
{
    fprintf(out, "(SELECT row_to_json(r.*) FROM (SELECT %s.", alias);
    put_ident(out, s->cfg->key);
    for (size_t i = 0; i < s->cfg->ncolumns; i++) {
        fprintf(out, ", %s.", alias);
        put_ident(out, s->cfg->columns[i]);
    }
    fputs(") AS r)", out);
}

/* "<sep>t."<name>" AS c<i>": member i of the answered row (0 the key), as
 * to_json's text where the gateway does not write its kind itself. */
static void put_row_member(FILE *out, const char *sep, const char *name, enum row_json_kind kind,
                           size_t i)
{
    fprintf(out, kind == ROW_JSON_OTHER ? "%sto_json(t." : "%st.", sep);
    put_ident(out, name);
    fprintf(out, kind == ROW_JSON_OTHER ? ")::text AS c%zu" : " AS c%zu", i);
}

/* True if a write of s's table answers its row's resource: asked for its
 * row, where the gateway does not know the key as Postgres prints it
 * (key_prints_canonical); not asked, where the gateway cannot name the row
 * itself (key_identity_known), so that every answer and log line names the
 * row as Postgres does. */
static bool returns_resource(const struct table_schema *s, bool want_row)
{
    return want_row ? !key_prints_canonical(&s->key_shape) : !key_identity_known(&s->key_shape);
}

/* "<sep>CASE WHEN t."<key>" = $2::<key type> THEN true ELSE
 * fencegate.key_moved($2::<key type>, t."<key>") END AS key_kept": the look
 * of a write at the key of the row it wrote, which must be the key asked for,
 * by the key column's own equality (a numeric 1.0 and 1.00 are one key). A
 * BEFORE trigger that changes the key, or a unique index that takes two keys
 * for one (ON CONFLICT then updates the other row), would move the write onto
 * a row of another resource, under the fence and the lock of this one:
 * fencegate.key_moved (sql/130_key_moved.sql) fails the statement then
 * (SQLSTATE FGM01), undoing it whole. CASE calls it only where the keys
 * differ: an accepted write pays one comparison, and the set-up of the call it
 * does not make, which takes both keys in their own type (a polymorphic
 * function) rather than through casts to text, each of which the executor
 * would set up on every run too. A DELETE needs none: it returns the row its
 * WHERE matched, which a trigger cannot change. */
static void put_key_kept(FILE *out, const struct table_schema *s, const char *sep)
{
    fprintf(out, "%sCASE WHEN t.", sep);
    put_ident(out, s->cfg->key);
    fprintf(out, " = $2::%s THEN true ELSE fencegate.key_moved($2::%s, t.", s->key_type,
            s->key_type);
    put_ident(out, s->cfg->key);
    fputs(") END AS key_kept", out);
}

/* The answer of a write (its first member after sep, " RETURNING " or ", "):
 * the resource of the written row where returns_resource says so and, asked
 * for the row (want_row) but for a delete, its key and listed columns, from
 * which the gateway writes the row's JSON (row_json.h): the text row_to_json
 * would write, for less of Postgres's time. A key Postgres prints as the
 * gateway does (key_prints_canonical) is not returned. Last, but for a
 * delete, the look at the written row's key (put_key_kept), which every
 * write but a delete returns: a delete that answers neither resource nor row
 * returns nothing. */
static void put_returning(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                          const char *sep, bool want_row)
{
    bool known = key_prints_canonical(&s->key_shape);
    if (returns_resource(s, want_row)) {
        fputs(sep, out);
        put_row_resource(out, FENCED_PARAM_PREFIX + 1, "t", s);
        fputs(" AS resource", out);
        sep = ", ";
    }
    if (kind == FENCED_DELETE)
        return;
    if (want_row && !known) {
        put_row_member(out, sep, s->cfg->key, s->row_kinds[0], 0);
        sep = ", ";
    }
    for (size_t i = 0; want_row && i < s->cfg->ncolumns; i++) {
        put_row_member(out, sep, s->cfg->columns[i], s->row_kinds[i + 1], i + 1);
        sep = ", ";
    }
    put_key_kept(out, s, sep);
}

/* True if a write of kind returns anything (put_returning): every write but a
 * delete, and a delete that answers its resource. */
static bool returns_any(const struct table_schema *s, enum fenced_kind kind, bool want_row)
{
    return kind != FENCED_DELETE || returns_resource(s, want_row);
}

/* "ONLY <table>", or "<table>" for a partitioned table: the table whose rows
 * a statement reads, updates or deletes (fenced_sql.h). */
static void put_table(FILE *out, const struct table_schema *s)
{
    if (!s->partitioned)
        fputs("ONLY ", out);
    put_table_name(out, s);
}

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
    put_table(out, s);
    fputs(" AS t", out);
    put_key_match(out, s);
}

bool fenced_sql_takes_prefix(const struct table_schema *s, enum fenced_kind kind, bool want_row)
{
    return s->cfg->fence_column == NULL || kind != FENCED_PATCH || returns_resource(s, want_row);
}

/* "UPDATE <table> AS t SET <column> = $4::<type>, ...": the start of every
 * update, one assignment per written column, its parameter numbered from
 * param. Returns what separates one more assignment ("" if none was
 * written). */
static const char *put_update_head(FILE *out, const struct table_schema *s, const bool *written,
                                   int param)
{
    const struct table_config *t = s->cfg;
    fputs("UPDATE ", out);
    put_table(out, s);
    fputs(" AS t SET ", out);
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

/* "INSERT INTO <table> AS t (<key>, <written columns>[, <fence column>])
 * SELECT $2::<key type>, <their parameters, numbered from param>": the start
 * of every insert. */
static void put_insert_head(FILE *out, const struct table_schema *s, const bool *written,
                            bool fence_column, int param)
{
    const struct table_config *t = s->cfg;
    fputs("INSERT INTO ", out);
    put_table_name(out, s);
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
    for (size_t i = 0; i < t->ncolumns; i++)
        if (written[i])
            fprintf(out, ", $%d::%s", param++, s->column_types[i]);
}

/* " ON CONFLICT (<key>) DO UPDATE SET <column> = excluded.<column>, ...": a
 * PUT replaces every writable column with the new row's value or its default
 * (the key itself when there is no other column, so that the row is still
 * answered). */
static void put_replace(FILE *out, const struct table_config *t)
{
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

/* " ON CONFLICT (<key>) DO UPDATE SET <a column> = t.<a column> WHERE
 * fencegate.key_taken(...)": an insert of a key that a row has fails as a
 * unique violation (sql/140_key_taken.sql), and one whose table lost the key's
 * unique index fails at once instead of inserting the key twice. The column
 * set is never written: the condition fails first. It is the first listed
 * one, as a PUT writes (the key where there is none). */
static void put_key_taken(FILE *out, const struct table_schema *s)
{
    const struct table_config *t = s->cfg;
    const char *column = t->ncolumns > 0 ? t->columns[0] : t->key;
    fputs(" ON CONFLICT (", out);
    put_ident(out, t->key);
    fputs(") DO UPDATE SET ", out);
    put_ident(out, column);
    fputs(" = t.", out);
    put_ident(out, column);
    fprintf(out, " WHERE fencegate.key_taken($2::%s)", s->key_type);
}

/* --- the default mode: fences in fencegate.resource_fences ------------------------------ */

/* "WITH c AS (...)": the lock of the resource's fence row where it holds the
 * presented fence (the held form, see the top of this file). */
static void put_fence_held(FILE *out, const struct table_schema *s)
{
    fputs("WITH c AS (SELECT 1 FROM fencegate.resource_fences rf WHERE rf.resource = ", out);
    put_resource(out, FENCED_PARAM_PREFIX + 1, FENCED_PARAM_KEY + 1, s);
    fputs(" AND rf.fence = $1::bigint FOR UPDATE)", out);
}

/* "WITH c AS (...), f AS (...)": the claim of the write's fence (see the top of this file). */
static void put_fence_claim(FILE *out, const struct table_schema *s, enum fenced_kind kind)
{
    fputs("WITH c AS (SELECT rf.fence FROM fencegate.resource_fences rf WHERE rf.resource = ", out);
    put_resource(out, FENCED_PARAM_PREFIX + 1, FENCED_PARAM_KEY + 1, s);
    fputs(
        " FOR UPDATE), f AS (INSERT INTO fencegate.resource_fences AS rf (resource, fence) SELECT ",
        out);
    put_resource(out, FENCED_PARAM_PREFIX + 1, FENCED_PARAM_KEY + 1, s);
    fputs(", $1::bigint WHERE coalesce((SELECT c.fence FROM c), 0) < $1::bigint AND NOT " REVOKED,
          out);
    if (fenced_kind_needs_row(kind)) {
        fputs(" AND EXISTS (SELECT 1 FROM ", out);
        put_table(out, s);
        fputs(" AS e WHERE e.", out);
        put_ident(out, s->cfg->key);
        fprintf(out, " = $2::%s)", s->key_type);
    }
    fprintf(out, "%s)", fence_claim);
}

/* The fence's part of a default-mode write in form (its WITH clause, c and,
 * claiming, f); returns the guard its write goes ahead on. */
static const char *put_fence_ctes(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                                  enum fenced_form form)
{
    if (form == FENCED_FORM_HELD)
        put_fence_held(out, s);
    else
        put_fence_claim(out, s, kind);
    return form == FENCED_FORM_HELD ? held : claimed;
}

/* The write of a default-mode statement, which goes ahead on guard (put_fence_ctes). */
static void put_claimed_dml(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                            const bool *written, const char *guard)
{
    const struct table_config *t = s->cfg;
    switch (kind) {
    case FENCED_PATCH:
        put_update_head(out, s, written, FENCED_PARAM_COUNT + 1);
        put_key_match(out, s);
        fputs(guard, out);
        break;
    case FENCED_PUT:
        put_insert_head(out, s, written, false, FENCED_PARAM_COUNT + 1);
        fprintf(out, " WHERE true%s", guard);
        put_replace(out, t);
        break;
    case FENCED_POST: /* an existing key fails the insert: 409 conflict */
        put_insert_head(out, s, written, false, FENCED_PARAM_COUNT + 1);
        fprintf(out, " WHERE true%s", guard);
        put_key_taken(out, s);
        break;
    case FENCED_DELETE:
        put_delete_head(out, s);
        fputs(guard, out);
        break;
    default: FG_ASSERT(!"unknown write kind");
    }
}

/* " RETURNING true AS wrote[, <its answer>]": what the write of a judged form,
 * or of a claiming PATCH or DELETE, returns. */
static void put_judged_returning(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                                 bool want_row)
{
    fputs(" RETURNING true AS wrote", out);
    put_returning(out, s, kind, ", ", want_row);
}

/* A default-mode write statement in form, answering what fenced_sql_write
 * says (and, a claiming PATCH or DELETE, wrote true before it): one whose f
 * claims the fence where its row is in the statement's snapshot writes in w
 * and keeps its claim only where w wrote (CLAIM_USED; see the top of this
 * file). */
static void put_default_write(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                              const bool *written, enum fenced_form form, bool want_row)
{
    const char *guard = put_fence_ctes(out, s, kind, form);
    if (form == FENCED_FORM_CLAIM && fenced_kind_needs_row(kind)) {
        fputs(", w AS (", out);
        put_claimed_dml(out, s, kind, written, guard);
        put_judged_returning(out, s, kind, want_row);
        fputs(") SELECT w.* FROM w WHERE " CLAIM_USED("EXISTS (SELECT 1 FROM w)"), out);
        return;
    }
    fputc(' ', out);
    put_claimed_dml(out, s, kind, written, guard);
    if (returns_any(s, kind, want_row))
        put_returning(out, s, kind, " RETURNING ", want_row);
}

/* --- tables with a fence column ---------------------------------------------------------- */

/* "coalesce(<alias>."<fence column>", 0)": the row's fence, 0 if never
 * written through the gateway. */
static void put_row_fence(FILE *out, const char *alias, const struct table_config *t)
{
    fprintf(out, "coalesce(%s.", alias);
    put_ident(out, t->fence_column);
    fputs(", 0)", out);
}

/* " AND <the row's fence> <= $1::bigint AND NOT <revoked>": the classic guard. */
static void put_row_guard(FILE *out, const struct table_config *t)
{
    fputs(" AND ", out);
    put_row_fence(out, "t", t);
    fputs(" <= $1::bigint AND NOT " REVOKED, out);
}

/* " AND NOT EXISTS (...)": no higher fence is kept for the key's resource,
 * that of a deleted row (put_column_delete): the guard of a write that may
 * create the row. */
static void put_no_higher_kept(FILE *out, const struct table_schema *s)
{
    fputs(" AND NOT EXISTS (SELECT 1 FROM fencegate.resource_fences rf WHERE rf.resource = ", out);
    put_resource(out, FENCED_PARAM_PREFIX + 1, FENCED_PARAM_KEY + 1, s);
    fputs(" AND rf.fence > $1::bigint)", out);
}

/* The fence and the condition of a write that may create a row of a table
 * with a fence column: it takes the row's lock first (fenced_sql_row_lock),
 * and goes ahead while the fence is not revoked and no higher one is kept. */
static void put_create_guard(FILE *out, const struct table_schema *s)
{
    fputs(", $1::bigint WHERE ", out);
    put_row_lock(out, FENCED_PARAM_PREFIX + 1, FENCED_PARAM_KEY + 1, s);
    fputs(" IS NOT NULL AND NOT " REVOKED, out);
    put_no_higher_kept(out, s);
}

/* "WITH d AS (...), k AS (...)": the delete of a table with a fence column,
 * the guarded delete in d, and the deleted row's fence kept for its resource
 * in fencegate.resource_fences in k (the higher of two, for a fence row a
 * concurrent delete inserts meanwhile). */
static void put_column_delete_ctes(FILE *out, const struct table_schema *s)
{
    fputs("WITH d AS (", out);
    put_delete_head(out, s);
    put_row_guard(out, s->cfg);
    fputs(" RETURNING t.", out);
    put_ident(out, s->cfg->key);
    fputs("), k AS (INSERT INTO fencegate.resource_fences AS rf (resource, fence) SELECT ", out);
    put_row_resource(out, FENCED_PARAM_PREFIX + 1, "d", s);
    fputs(", $1::bigint FROM d ON CONFLICT (resource) DO UPDATE SET fence ="
          " greatest(rf.fence, excluded.fence), updated_at = clock_timestamp())",
          out);
}

/* The delete of a table with a fence column (put_column_delete_ctes);
 * answers the resource where returns_resource says so, else a row per row
 * deleted. */
static void put_column_delete(FILE *out, const struct table_schema *s, bool want_row)
{
    put_column_delete_ctes(out, s);
    fputs(" SELECT ", out);
    if (returns_resource(s, want_row)) {
        put_row_resource(out, FENCED_PARAM_PREFIX + 1, "d", s);
        fputs(" AS resource", out);
    } else {
        fputs("true AS deleted", out);
    }
    fputs(" FROM d", out);
}

static void put_column_write(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                             const bool *written, int param)
{
    const struct table_config *t = s->cfg;
    switch (kind) {
    case FENCED_PATCH:
        fputs(put_update_head(out, s, written, param), out);
        put_ident(out, t->fence_column);
        fputs(" = $1::bigint", out);
        put_key_match(out, s);
        put_row_guard(out, t);
        break;
    case FENCED_PUT: /* replaces a row whose fence is not higher */
        put_insert_head(out, s, written, true, param);
        put_create_guard(out, s);
        put_replace(out, t);
        fputs(", ", out);
        put_ident(out, t->fence_column);
        fputs(" = excluded.", out);
        put_ident(out, t->fence_column);
        fputs(" WHERE ", out);
        put_row_fence(out, "t", t);
        fputs(" <= $1::bigint", out);
        break;
    case FENCED_POST: /* leaves an existing row alone */
        put_insert_head(out, s, written, true, param);
        put_create_guard(out, s);
        fputs(" ON CONFLICT (", out);
        put_ident(out, t->key);
        fputs(") DO NOTHING", out);
        break;
    default: FG_ASSERT(!"unknown write kind");
    }
}

/* Whether a write of s's table created its row, as w answers it
 * (put_column_create_cte): on an ordinary table, the row's xmax is 0 where
 * an INSERT made it (an ON CONFLICT update sets it). Postgres does not return
 * a system column from a partitioned table ("cannot retrieve a system column
 * in this context"): there every row a write wrote counts as created, and is
 * looked at once more (put_kept_check), which finds no more than the write's
 * guard did unless a higher fence was kept since its statement began. */
static const char *created_expr(const struct table_schema *s)
{
    return s->partitioned ? "true" : "t.xmax = 0";
}

/* "WITH w AS (...)": a write that may create a row of a table with a fence
 * column, in w, answering whether it created the row (created_expr) and,
 * want_row, what the write returns. */
static void put_column_create_cte(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                                  const bool *written, int param, bool want_row)
{
    fputs("WITH w AS (", out);
    put_column_write(out, s, kind, written, param);
    fprintf(out, " RETURNING %s AS created", created_expr(s));
    put_returning(out, s, kind, ", ", want_row);
    fputc(')', out);
}

/* " WHERE NOT w.created OR fencegate.fence_kept_check(...)": the last look of
 * a write that may create a row (put_column_create_cte) at the fence kept for
 * the row's resource: for a row it created (created_expr),
 * fencegate.fence_kept_check looks again with a snapshot taken after any
 * delete the write waited for, and fails the statement (FGK01) where a
 * higher fence is kept by then. */
static void put_kept_check(FILE *out, const struct table_schema *s)
{
    fputs(" WHERE NOT w.created OR fencegate.fence_kept_check(", out);
    put_resource(out, FENCED_PARAM_PREFIX + 1, FENCED_PARAM_KEY + 1, s);
    fputs(", $1::bigint)", out);
}

/* A write that may create a row of a table with a fence column, with its last
 * look at the kept fence (put_kept_check); answers what the write returns. */
static void put_column_create(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                              const bool *written, int param, bool want_row)
{
    put_column_create_cte(out, s, kind, written, param, want_row);
    fputs(" SELECT * FROM w", out);
    put_kept_check(out, s);
}

/* The read of a table with a fence column: the fence is the row's, or for a
 * missing row the one its delete kept in fencegate.resource_fences. */
static char *column_read(const struct table_schema *s)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("SELECT k.resource, CASE WHEN t.", out);
    put_ident(out, s->cfg->key);
    fputs(" IS NOT NULL THEN t.", out);
    put_ident(out, s->cfg->fence_column);
    fputs(" ELSE (SELECT rf.fence FROM fencegate.resource_fences rf WHERE rf.resource = k.resource)"
          " END AS fence, CASE WHEN t.",
          out);
    put_ident(out, s->cfg->key);
    fputs(" IS NOT NULL THEN ", out);
    put_row_json(out, "t", s);
    fputs("::text END AS row FROM (SELECT ", out);
    put_resource(out, 2, 1, s);
    fputs(" AS resource) AS k LEFT JOIN ", out);
    put_table(out, s);
    fputs(" AS t ON t.", out);
    put_ident(out, s->cfg->key);
    fprintf(out, " = $1::%s", s->key_type);
    return stream_close(out, &buf);
}

char *fenced_sql_row_lock(const struct table_schema *s)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("SELECT 1 WHERE ", out);
    put_row_lock(out, 1, 2, s);
    fputs(" IS NULL", out);
    return stream_close(out, &buf);
}

char *fenced_sql_column_claim(const struct table_schema *s)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("SELECT ", out);
    put_row_resource(out, 1, "t", s);
    fputs(" AS resource, ", out);
    put_row_fence(out, "t", s->cfg);
    fputs(" AS fence FROM ", out);
    put_table(out, s);
    fputs(" AS t WHERE t.", out);
    put_ident(out, s->cfg->key);
    fprintf(out, " = $2::%s FOR UPDATE", s->key_type);
    return stream_close(out, &buf);
}

/* --- all tables --------------------------------------------------------------------------- */

char *fenced_sql_write(const struct table_schema *s, enum fenced_kind kind, const bool *written,
                       enum fenced_form form, bool want_row, int *nparams)
{
    FG_ASSERT(kind < FENCED_KIND_COUNT);
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    /* the column parameters follow the prefix, or the key where the prefix is not taken */
    *nparams =
        fenced_sql_takes_prefix(s, kind, want_row) ? FENCED_PARAM_COUNT : FENCED_PARAM_PREFIX;
    bool column = s->cfg->fence_column != NULL;
    if (column && kind == FENCED_DELETE)
        put_column_delete(out, s, want_row);
    else if (column && kind != FENCED_PATCH)
        put_column_create(out, s, kind, written, *nparams + 1, want_row);
    else if (column)
        put_column_write(out, s, kind, written, *nparams + 1);
    else
        put_default_write(out, s, kind, written, form, want_row);
    if (column && kind == FENCED_PATCH)
        put_returning(out, s, kind, " RETURNING ", want_row);
    if (kind != FENCED_DELETE)
        for (size_t i = 0; i < s->cfg->ncolumns; i++)
            *nparams += written[i] ? 1 : 0;
    return stream_close(out, &buf);
}

/* --- the judged form: a write that says why it wrote nothing ------------------------------ */

/* "WITH ..., a AS (...)": the write of a judged form as a, one row per row
 * written (wrote true, then what the write statement would answer), with
 * the fence's part of that write statement before it. Returns the guard its
 * write goes ahead on (put_fence_ctes). */
static const char *put_judged_write(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                                    const bool *written, enum fenced_form form, bool want_row)
{
    const char *guard = put_fence_ctes(out, s, kind, form);
    fputs(", a AS (", out);
    put_claimed_dml(out, s, kind, written, guard);
    put_judged_returning(out, s, kind, want_row);
    fputc(')', out);
    return guard;
}

/* " FROM <table> AS t WHERE t."<key>" = $2::<key type>": the row a verdict looks at. */
static void put_verdict_row(FILE *out, const struct table_schema *s)
{
    fputs(" FROM ", out);
    put_table(out, s);
    fputs(" AS t", out);
    put_key_match(out, s);
}

/*
 * ", g AS (...)": the verdict of a judged form, a row only where a (the write,
 * put_judged_write) wrote nothing and yet the write's guard passed, read as
 * the write read it:
 *  - a PATCH or DELETE: its row, locked (FOR UPDATE, so that the newest
 *    version is read and the row security of an UPDATE applies), passes the
 *    guard; a DELETE only where no row security applies to the table (its
 *    own policies, not an UPDATE's, choose the rows it sees; table_param
 *    names the table);
 *  - a PUT or POST, whose insert or update nothing but an error stops
 *    silently (a row that row security hides from the update or from its
 *    read fails the upsert, and a POST onto a row fails its insert): the
 *    guard passed; a POST met no row.
 */
static void put_verdict(FILE *out, const struct table_schema *s, enum fenced_kind kind,
                        const char *guard, int table_param)
{
    fputs(", g AS (SELECT 1", out);
    if (fenced_kind_needs_row(kind)) {
        put_verdict_row(out, s);
        fputs(guard, out);
        if (kind == FENCED_DELETE)
            fprintf(out, " AND NOT row_security_active(quote_ident($%d::text))", table_param);
        fputs(" AND NOT EXISTS (SELECT 1 FROM a) FOR UPDATE)", out);
        return;
    }
    fprintf(out, " WHERE true%s", guard);
    if (kind == FENCED_POST) {
        fputs(" AND NOT EXISTS (SELECT 1", out);
        put_verdict_row(out, s);
        fputc(')', out);
    }
    fputs(" AND NOT EXISTS (SELECT 1 FROM a))", out);
}

char *fenced_sql_judged(const struct table_schema *s, enum fenced_kind kind, const bool *written,
                        enum fenced_form form, bool want_row, int *nparams)
{
    FG_ASSERT(kind < FENCED_KIND_COUNT && s->cfg->fence_column == NULL);
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    *nparams =
        fenced_sql_takes_prefix(s, kind, want_row) ? FENCED_PARAM_COUNT : FENCED_PARAM_PREFIX;
    const char *guard = put_judged_write(out, s, kind, written, form, want_row);
    if (kind != FENCED_DELETE)
        for (size_t i = 0; i < s->cfg->ncolumns; i++)
            *nparams += written[i] ? 1 : 0;
    else
        *nparams += 1; /* the table's name, for its row security */
    put_verdict(out, s, kind, guard, *nparams);
    fputs(" SELECT a.*, EXISTS (SELECT 1 FROM g) AS skipped FROM (SELECT) AS one"
          " LEFT JOIN a ON true",
          out);
    /* a claim is kept by a write that wrote, or that a trigger skipped */
    if (form == FENCED_FORM_CLAIM && fenced_kind_needs_row(kind))
        fputs(" WHERE " CLAIM_USED("EXISTS (SELECT 1 FROM a) OR EXISTS (SELECT 1 FROM g)"), out);
    return stream_close(out, &buf);
}

char *fenced_sql_resource(const struct table_schema *s)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("SELECT ", out);
    put_resource(out, 1, 2, s);
    fputs(" AS resource", out);
    return stream_close(out, &buf);
}

char *fenced_sql_refusal(const struct table_schema *s)
{
    const struct table_config *t = s->cfg;
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("WITH k AS (SELECT ", out);
    put_resource(out, FENCED_PARAM_PREFIX + 1, FENCED_PARAM_KEY + 1, s);
    fputs(" AS resource), s AS (SELECT k.resource, " REVOKED " AS revoked, ", out);
    if (t->fence_column != NULL) {
        /* the row's own fence, read once a writer that holds the row has committed;
         * without a row, and for a create (PUT, POST: $7), whose guard reads it too, the
         * fence kept for the resource, that of a deleted row */
        fputs("CASE WHEN e.fence IS NULL OR $7::text IN ('PUT', 'POST') THEN greatest(e.fence,"
              " (SELECT rf.fence FROM fencegate.resource_fences rf WHERE rf.resource ="
              " k.resource)) ELSE e.fence END AS fence, e.fence IS NOT NULL AS found"
              " FROM k LEFT JOIN (SELECT ",
              out);
        put_row_fence(out, "t", t);
        fputs(" AS fence FROM ", out);
        put_table(out, s);
        fputs(" AS t", out);
        put_key_match(out, s);
        fputs(" FOR UPDATE) AS e ON true)", out);
    } else {
        fputs("(SELECT rf.fence FROM fencegate.resource_fences rf WHERE rf.resource = k.resource)"
              " AS fence, EXISTS (SELECT 1 FROM ",
              out);
        put_table(out, s);
        fputs(" AS t", out);
        put_key_match(out, s);
        fputs(") AS found FROM k)", out);
    }
    /* the audit row, in the columns and with the reasons of every other (fenced_refusal.c) */
    fprintf(out,
            ", r AS (INSERT INTO fencegate.rejections (resource, lock_name, presented_fence,"
            " current_fence, owner, client_addr, method, reason, principal, trace_id, lease_kind)"
            " SELECT s.resource, $4::text, $1::bigint, coalesce(s.fence, 0), $5::text, $6::text,"
            " $7::text, CASE WHEN s.revoked THEN '%s' ELSE '%s' END, $8::text, $10::text,"
            " $11::text FROM s"
            " WHERE $9::boolean AND (s.revoked OR s.fence > $1::bigint))"
            " SELECT s.resource, s.fence, s.revoked, s.found FROM s",
            fenced_outcome_reason(FENCED_REVOKED), fenced_outcome_reason(FENCED_STALE));
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
          " WHERE rf.resource = k.resource) AS fence, (SELECT ",
          out);
    put_row_json(out, "t", s);
    fputs(" FROM ", out);
    put_table(out, s);
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

char *fenced_sql_fit_check(const struct table_schema *s)
{
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("SELECT json_populate_record(NULL::", out);
    put_table_name(out, s);
    fputs(", json_build_object($1::text, $2::text)) IS NULL", out);
    return stream_close(out, &buf);
}

char *fenced_sql_adopt_fences(const struct table_schema *s)
{
    FG_ASSERT(s->cfg->fence_column != NULL);
    char *buf = NULL;
    size_t len;
    FILE *out = stream_open(&buf, &len);
    fputs("UPDATE ", out);
    put_table(out, s);
    fputs(" AS t SET ", out);
    put_ident(out, s->cfg->fence_column);
    fputs(" = rf.fence FROM fencegate.resource_fences rf WHERE rf.resource = ", out);
    put_row_resource(out, 1, "t", s);
    fputs(" AND coalesce(t.", out);
    put_ident(out, s->cfg->fence_column);
    /* The row must keep the resource whose fence it takes: a BEFORE UPDATE
     * trigger that changes the key would carry it to another row's resource
     * (put_key_kept's look, by resource). */
    fputs(", 0) < rf.fence RETURNING rf.fence, CASE WHEN ", out);
    put_row_resource(out, 1, "t", s);
    fputs(" = rf.resource THEN true ELSE fencegate.key_moved(rf.resource, ", out);
    put_row_resource(out, 1, "t", s);
    fputs(") END AS key_kept", out);
    return stream_close(out, &buf);
}
