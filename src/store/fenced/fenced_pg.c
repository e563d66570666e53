/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_pg.c - running fenced writes against Postgres. At start-up it reads
 * the catalog for every writable table (types of key and columns, the key's
 * unique index), which fenced_schema.c checks against the configuration.
 * Afterwards it keeps one prepared statement per (table, operation, set of
 * written columns, form, row answered or not), built by fenced_sql.c. A write
 * whose command counts a row was applied; in the default mode one that wrote
 * nothing in the held form runs again in the claiming form; one that wrote
 * nothing then is followed by its table's refusal statement, which audits a
 * refusal and says why: stale, revoked, not found, or nothing refuses it. Then
 * the write runs once more: on a default-mode table in its judged form, which
 * writes, or says itself that a trigger of the table skipped it although its
 * guard passed (answered as applied, the row as it stands, its fence claimed
 * as an applied write's), or neither, and the refusal statement has the last
 * word; on a fence_column table as it ran, and one that wrote nothing again
 * is missing. Batches run in one transaction whose first statement claims
 * every resource's fence in a fixed order, their operations in one pipeline,
 * or, once one of them wrote nothing, one at a time (default mode: in their
 * judged forms), each judged where it stands. A write to a table that requires
 * a live lease runs in a transaction of its own (no write group), and it and
 * a batch that holds one commit only if the writer's lease still holds once
 * their statements have run. An answered row shows a writer that may not
 * read its table only the key and the columns it wrote.
 * It must not speak libpq (pg.c does) nor parse request bodies (fenced_op.c
 * does).
 */
#include "store/fenced/fenced_pg.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend/pg.h"
#include "store/backend/sqlstate.h"
#include "store/fenced/batch_opening.h"
#include "store/fenced/fenced_pg_answer.h"
#include "store/fenced/fenced_refusal.h"
#include "store/fenced/fenced_schema.h"
#include "store/fenced/revocations.h"
#include "store/fenced/row_json.h"
#include "store/fenced/write_group.h"
#include "util/clock.h"
#include "util/fgjson.h"

#define STMT_CACHE_MAX      4096 /* prepared write statements kept; further ones run unprepared */
#define PG_ERR_PREFIX       "postgres: "
#define BATCH_BUF           2048 /* room for a batch's answered items (more moves to the heap) */
#define ROW_TEXT_BUF        512 /* room for a row cut down for its writer (more moves to the heap) */
#define DEADLOCK_BACKOFF_MS 50  /* a deadlock's victim waits this long before it runs again */

/* A write statement of one (table, kind, written columns). */
struct write_stmt {
    size_t table;          /* index in fpg.schemas */
    enum fenced_kind kind; /* operation */
    enum fenced_form form; /* default mode: held or claiming */
    bool judged;           /* its judged form (fenced_sql_judged) */
    bool *written;         /* written columns (owned, the table's ncolumns entries) */
    bool want_row;         /* its answer carries the row */
    char name[32];         /* prepared statement name */
    char *sql;             /* statement text (owned) */
    int nparams;           /* parameters it takes */
};

static struct {
    const struct config *cfg;
    struct table_schema *schemas; /* per configured table, same order */
    size_t ntables;               /* entries in schemas */
    char **prefixes;              /* per table: resource prefix "pg:<table>/" */
    char **read_sql;              /* per table: its read statement */
    char **refusal_sql;           /* per table: its refusal statement */
    char **resource_sql;          /* per table: the resource of a key */
    pthread_mutex_t lock;         /* guards stmts */
    struct write_stmt **stmts;    /* cache of write statements */
    size_t nstmts;                /* entries in stmts */
} fpg = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The relation that the configured table name in parameter param names (an SQL
 * expression, its oid or NULL): the first of that name in the schemas of the
 * session's search_path, as Postgres finds an unqualified name, but never in
 * the gateway's own schema fencegate, which a role named fencegate finds first
 * ("$user" opens the default search_path): the tables of the gateway
 * (settings, revocations, rejections, ...) are no application's table of the
 * same name, and never served. */
#define TABLE_NAMED(param)                                                                         \
    "(SELECT r.oid FROM unnest(current_schemas(true)) WITH ORDINALITY AS sp (nsp, i)"              \
    " JOIN pg_namespace rn ON rn.nspname = sp.nsp JOIN pg_class r ON r.relnamespace = rn.oid"      \
    " AND r.relname = " param " WHERE rn.nspname <> 'fencegate' ORDER BY sp.i LIMIT 1)"

static const char catalog_sql[] =
    "SELECT a.attname AS name, format_type(a.atttypid, NULL) AS type, a.atttypmod AS typmod,"
    " format_type(a.atttypid, a.atttypmod) AS full_type,"
    " a.atttypid IN ('json'::regtype, 'jsonb'::regtype) AS is_json,"
    " a.attgenerated <> '' OR a.attidentity = 'a' AS read_only,"
    /* a unique index on the column alone that an ON CONFLICT (key) can take as its
     * arbiter: valid (not left by a failed CREATE INDEX CONCURRENTLY, which enforces
     * nothing) and checked at once, not DEFERRABLE (unique_deferrable: only such ones) */
    " EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique"
    " AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum AND i.indpred IS NULL"
    " AND i.indexprs IS NULL AND i.indisvalid AND i.indimmediate) AS is_unique,"
    " EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique"
    " AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum AND i.indpred IS NULL"
    " AND i.indexprs IS NULL AND i.indisvalid AND NOT i.indimmediate) AS unique_deferrable,"
    " (SELECT b.typname FROM pg_type d JOIN pg_type b ON b.oid = CASE WHEN d.typtype = 'd'"
    " THEN d.typbasetype ELSE d.oid END WHERE d.oid = a.atttypid) AS base_type,"
    " (SELECT b.typnamespace = 'pg_catalog'::regnamespace FROM pg_type d JOIN pg_type b"
    " ON b.oid = CASE WHEN d.typtype = 'd' THEN d.typbasetype ELSE d.oid END"
    " WHERE d.oid = a.atttypid) AS base_builtin,"
    " (SELECT b.typtype = 'e' FROM pg_type d JOIN pg_type b ON b.oid = CASE WHEN d.typtype = 'd'"
    " THEN d.typbasetype ELSE d.oid END WHERE d.oid = a.atttypid) AS base_enum,"
    /* a non-deterministic collation of the column, or of a unique index on it alone: an
     * ON CONFLICT (key) takes any such index as its arbiter, so an insert of 'A' would
     * update the row 'a' */
    " coalesce((SELECT NOT co.collisdeterministic FROM pg_collation co"
    " WHERE co.oid = a.attcollation), false) OR EXISTS (SELECT 1 FROM pg_index i"
    " JOIN pg_collation co ON co.oid = i.indcollation[0] WHERE i.indrelid = a.attrelid"
    " AND i.indisunique AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum"
    " AND i.indexprs IS NULL AND NOT co.collisdeterministic) AS nondeterministic,"
    /* how row_to_json writes the type (json_categorize_type): its own way for these, as a
     * string for another built-in scalar, maybe through a cast to json for a type of later
     * origin (16384: FirstNormalObjectId), through a domain over a domain unknown here */
    " (SELECT CASE WHEN b.oid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype,"
    " 'float4'::regtype, 'float8'::regtype, 'numeric'::regtype) THEN 'number'"
    " WHEN b.oid = 'bool'::regtype THEN 'bool'"
    " WHEN b.oid IN ('json'::regtype, 'jsonb'::regtype) THEN 'json'"
    " WHEN b.oid = 'timestamp'::regtype THEN 'timestamp'"
    " WHEN b.oid = 'timestamptz'::regtype THEN 'timestamptz'"
    " WHEN b.oid < 16384 AND b.typtype IN ('b', 'r', 'm') AND b.typelem = 0 THEN 'string'"
    " ELSE 'other' END FROM pg_type d JOIN pg_type b ON b.oid = CASE WHEN d.typtype = 'd'"
    " THEN d.typbasetype ELSE d.oid END WHERE d.oid = a.atttypid) AS json_kind,"
    /* where the table's rows are: a partitioned table's in its partitions (its statements
     * name it without ONLY, an ordinary table's with ONLY); the tables that inherit it, whose
     * rows its key does not single out (refused); the configured table ($2, a JSON array of
     * their names) that a partition's rows belong to as well, if any (refused) */
    " c.relkind = 'p' AS partitioned,"
    /* the schema search_path found the table in: its statements name it there, where no
     * name of their own (a WITH query c, k, ...) can stand for it */
    " (SELECT ns.nspname FROM pg_namespace ns WHERE ns.oid = c.relnamespace) AS table_schema,"
    " (SELECT string_agg(quote_ident(ch.relname), ', ' ORDER BY ch.relname) FROM pg_inherits h"
    " JOIN pg_class ch ON ch.oid = h.inhrelid WHERE h.inhparent = c.oid"
    " AND NOT ch.relispartition) AS inherited_by,"
    " (SELECT min(n.name) FROM json_array_elements_text($2::json) AS n (name)"
    " JOIN pg_partition_ancestors(c.oid) AS p ON p.relid = " TABLE_NAMED(
        "n.name") " WHERE p.relid <> c.oid) AS partition_of"
                  " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                  " WHERE c.oid = " TABLE_NAMED(
                      "$1::text") " AND c.relkind IN ('r', 'p')"
                                  " AND a.attnum > 0 AND NOT a.attisdropped";

/* --- start-up: the catalog ---------------------------------------------------------------- */

int fenced_pg_init(const struct config *cfg, struct fg_error *err)
{
    fpg.cfg = cfg;
    fpg.ntables = cfg->ntables;
    fpg.schemas = calloc(cfg->ntables + 1, sizeof *fpg.schemas);
    fpg.prefixes = calloc(cfg->ntables + 1, sizeof *fpg.prefixes);
    fpg.read_sql = calloc(cfg->ntables + 1, sizeof *fpg.read_sql);
    fpg.refusal_sql = calloc(cfg->ntables + 1, sizeof *fpg.refusal_sql);
    fpg.resource_sql = calloc(cfg->ntables + 1, sizeof *fpg.resource_sql);
    FG_ASSERT(fpg.schemas != NULL && fpg.prefixes != NULL && fpg.read_sql != NULL &&
              fpg.refusal_sql != NULL && fpg.resource_sql != NULL);
    json_t *names = json_array();
    for (size_t i = 0; i < cfg->ntables; i++)
        json_array_append_new(names, json_string(cfg->tables[i].name));
    char *configured = fgjson_dump(names);
    json_decref(names);
    for (size_t i = 0; i < cfg->ntables; i++) {
        const struct table_config *t = &cfg->tables[i];
        const char *params[] = {t->name, configured};
        json_t *columns = NULL;
        int rc = pg_query(NULL, catalog_sql, 2, params, &columns, err);
        if (rc == 0)
            rc = fenced_schema_load(t, columns, &fpg.schemas[i], err);
        json_decref(columns);
        if (rc != 0) {
            free(configured);
            return -1;
        }
        FG_ASSERT(asprintf(&fpg.prefixes[i], "pg:%s/", t->name) > 0);
        fpg.read_sql[i] = fenced_sql_read(&fpg.schemas[i]);
        fpg.refusal_sql[i] = fenced_sql_refusal(&fpg.schemas[i]);
        fpg.resource_sql[i] = fenced_sql_resource(&fpg.schemas[i]);
    }
    free(configured);
    return 0;
}

/* ALTER TABLE <schema>.t ADD COLUMN IF NOT EXISTS <fence_column> bigint, t
 * where the gateway finds it (TABLE_NAMED). */
static int add_fence_column(const struct table_config *t, struct fg_error *err)
{
    const char *params[] = {t->name};
    json_t *rows = NULL;
    if (pg_query(NULL,
                 "SELECT (SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)"
                 " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                 " WHERE c.oid = " TABLE_NAMED("$1::text") ") AS qualified",
                 1, params, &rows, err) != 0)
        return -1;
    const char *table = json_string_value(json_object_get(json_array_get(rows, 0), "qualified"));
    int rc = 0;
    if (table == NULL) {
        rc = fenced_schema_missing(t, err);
    } else {
        char *column = sql_quote_ident(t->fence_column), *sql = NULL;
        FG_ASSERT(
            asprintf(&sql, "ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s bigint", table, column) > 0);
        rc = pg_query(NULL, sql, 0, NULL, NULL, err);
        free(sql);
        free(column);
    }
    json_decref(rows);
    return rc;
}

int fenced_pg_movable(const struct config *cfg, const char *table, size_t *index,
                      struct fg_error *err)
{
    size_t i = 0;
    while (i < cfg->ntables && strcmp(cfg->tables[i].name, table) != 0)
        i++;
    if (i == cfg->ntables)
        return fg_fail(err, FG_ERR_CONFIG, "table '%s' is not under tables of the config", table);
    if (cfg->tables[i].fence_column == NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.fence_column' is not set: name the column first",
                       table);
    *index = i;
    return 0;
}

int fenced_pg_move_fences(const struct config *cfg, const char *table, long *moved,
                          struct fg_error *err)
{
    size_t i = 0;
    if (fenced_pg_movable(cfg, table, &i, err) != 0)
        return -1;
    if (add_fence_column(&cfg->tables[i], err) != 0 || fenced_pg_init(cfg, err) != 0)
        return -1;
    char *sql = fenced_sql_adopt_fences(&fpg.schemas[i]);
    const char *params[] = {fpg.prefixes[i]};
    json_t *rows = NULL;
    int rc = pg_query(NULL, sql, 1, params, &rows, err);
    free(sql);
    *moved = rc == 0 ? (long)json_array_size(rows) : 0;
    json_decref(rows);
    return rc;
}

void fenced_pg_shutdown(void)
{
    for (size_t i = 0; i < fpg.nstmts; i++) {
        free(fpg.stmts[i]->written);
        free(fpg.stmts[i]->sql);
        free(fpg.stmts[i]);
    }
    free(fpg.stmts);
    for (size_t i = 0; i < fpg.ntables; i++) {
        table_schema_free(&fpg.schemas[i]);
        free(fpg.prefixes[i]);
        free(fpg.read_sql[i]);
        free(fpg.refusal_sql[i]);
        free(fpg.resource_sql[i]);
    }
    free(fpg.schemas);
    free(fpg.prefixes);
    free(fpg.read_sql);
    free(fpg.refusal_sql);
    free(fpg.resource_sql);
    fpg.stmts = NULL;
    fpg.nstmts = 0;
    fpg.schemas = NULL;
    fpg.prefixes = NULL;
    fpg.read_sql = NULL;
    fpg.refusal_sql = NULL;
    fpg.resource_sql = NULL;
    fpg.ntables = 0;
}

const struct table_schema *fenced_pg_schemas(size_t *n)
{
    *n = fpg.ntables;
    return fpg.schemas;
}

/* --- the statement cache ------------------------------------------------------------------ */

/* The table keeps fences in a column of its rows. */
static bool column_mode(size_t table)
{
    return fpg.schemas[table].cfg->fence_column != NULL;
}

/* The statement to run for op in form (its answer with the row if want_row;
 * judged: its judged form): a cached prepared one (*owned_sql NULL), or, once
 * the cache is full, an unnamed one whose text the caller frees. */
static struct write_stmt stmt_for(const struct fenced_op *op, enum fenced_form form, bool want_row,
                                  bool judged, char **owned_sql)
{
    size_t ncolumns = fpg.schemas[op->table].cfg->ncolumns;
    struct write_stmt found = {0};
    *owned_sql = NULL;
    if (column_mode(op->table))
        form = FENCED_FORM_CLAIM; /* its one form */
    pthread_mutex_lock(&fpg.lock);
    for (size_t i = 0; i < fpg.nstmts; i++) {
        const struct write_stmt *s = fpg.stmts[i];
        if (s->table == op->table && s->kind == op->kind && s->form == form &&
            s->want_row == want_row && s->judged == judged &&
            memcmp(s->written, op->written, ncolumns * sizeof *op->written) == 0) {
            found = *s;
            pthread_mutex_unlock(&fpg.lock);
            return found;
        }
    }
    found.table = op->table;
    found.kind = op->kind;
    found.form = form;
    found.want_row = want_row;
    found.judged = judged;
    found.sql = judged ? fenced_sql_judged(&fpg.schemas[op->table], op->kind, op->written, form,
                                           want_row, &found.nparams)
                       : fenced_sql_write(&fpg.schemas[op->table], op->kind, op->written, form,
                                          want_row, &found.nparams);
    if (fpg.nstmts >= STMT_CACHE_MAX) {
        pthread_mutex_unlock(&fpg.lock);
        *owned_sql = found.sql;
        return found;
    }
    struct write_stmt *s = calloc(1, sizeof *s);
    struct write_stmt **grown = realloc(fpg.stmts, (fpg.nstmts + 1) * sizeof *fpg.stmts);
    FG_ASSERT(s != NULL && grown != NULL);
    *s = found;
    s->written = calloc(ncolumns + 1, sizeof *s->written);
    FG_ASSERT(s->written != NULL);
    memcpy(s->written, op->written, ncolumns * sizeof *op->written);
    snprintf(s->name, sizeof s->name, "fpg_w%zu", fpg.nstmts);
    fpg.stmts = grown;
    fpg.stmts[fpg.nstmts++] = s;
    found = *s;
    pthread_mutex_unlock(&fpg.lock);
    return found;
}

/* --- running writes ----------------------------------------------------------------------- */

/* The message of a Postgres failure without its "postgres: " prefix. */
static const char *pg_message(const struct fg_error *e)
{
    size_t n = strlen(PG_ERR_PREFIX);
    return strncmp(e->msg, PG_ERR_PREFIX, n) == 0 ? e->msg + n : e->msg;
}

/* True if value (not NULL), member i of s's row (0 the key, i > 0 column i - 1),
 * does not convert to its cast type (fit false) or does not fit its column as
 * storing it checks its length or precision (fit true), with the reason in *why. */
static bool value_fails(struct pg_conn *c, const struct table_schema *s, size_t i,
                        const char *value, bool fit, struct fg_error *why)
{
    const char *column = i == 0 ? s->cfg->key : s->cfg->columns[i - 1];
    char *sql = fit ? fenced_sql_fit_check(s)
                    : fenced_sql_cast_check(i == 0 ? s->key_type : s->column_types[i - 1]);
    const char *params[] = {fit ? column : value, value};
    int rc = pg_exec(c, NULL, sql, fit ? 2 : 1, params, NULL, why);
    free(sql);
    return rc != 0 && sqlstate_data_error(pg_last_sqlstate(c));
}

/* True if the last failure on c was a data error (SQLSTATE class 22). */
static bool data_error(const struct pg_conn *c)
{
    return sqlstate_data_error(pg_last_sqlstate(c));
}

/*
 * After a data error of op, finds the key or column whose value Postgres cannot
 * convert by trying each value alone, first against its cast type, then
 * against its column (a bit(4) of two bits, a varchar(3) of four letters), and
 * rewrites err to name it (prefixed by where, "" or "ops[3]: "). Returns false,
 * leaving err alone, if every value converts and fits on its own. Runs only on
 * the failure path; c must not be inside a failed transaction.
 */
static bool find_bad_value(struct pg_conn *c, const struct fenced_op *op, const char *where,
                           struct fg_error *err)
{
    const struct table_schema *s = &fpg.schemas[op->table];
    struct fg_error why = {0};
    for (int fit = 0; fit < 2; fit++) {
        if (value_fails(c, s, 0, op->key, fit, &why)) {
            fg_fail(err, FG_ERR_INVALID_FIELD, "%skey column '%s' (%s): %s", where, s->cfg->key,
                    s->key_type, pg_message(&why));
            return true;
        }
        for (size_t i = 0; i < op->ncolumns; i++) {
            if (!op->written[i] || op->values[i] == NULL)
                continue;
            if (value_fails(c, s, i + 1, op->values[i], fit, &why)) {
                fg_fail(err, FG_ERR_INVALID_FIELD, "%scolumn '%s' (%s): %s", where,
                        s->cfg->columns[i], s->column_types[i], pg_message(&why));
                return true;
            }
        }
    }
    return false;
}

/* True if the last failure on c ended the session before the statement ran,
 * or found its prepared statements stale and dropped it: worth one more try. */
static bool session_ended(const struct pg_conn *c)
{
    return sqlstate_session_ended(pg_last_sqlstate(c)) || pg_last_plans_stale(c);
}

/* op's statement, or its judged form (*owned_sql: its text when generated
 * for this write, which is then run unprepared, else NULL) with its
 * parameters in params (room for FENCED_PARAM_COUNT + op->ncolumns + 1;
 * fence: 24 bytes that keep the fence's text). */
static struct write_stmt write_args(const struct fenced_op *op, const struct fenced_writer *who,
                                    enum fenced_form form, bool want_row, bool judged,
                                    const char **params, char *fence, char **owned_sql)
{
    struct write_stmt st = stmt_for(op, form, want_row, judged, owned_sql);
    snprintf(fence, 24, "%" PRId64, who->claims->fence);
    params[FENCED_PARAM_FENCE] = fence;
    params[FENCED_PARAM_KEY] = op->key;
    int n = FENCED_PARAM_PREFIX;
    if (fenced_sql_takes_prefix(&fpg.schemas[op->table], op->kind, want_row))
        params[n++] = fpg.prefixes[op->table];
    for (size_t i = 0; op->kind != FENCED_DELETE && i < op->ncolumns; i++)
        if (op->written[i])
            params[n++] = op->values[i];
    if (op->kind == FENCED_DELETE && judged) /* the table's name, for its row security */
        params[n++] = fpg.schemas[op->table].cfg->name;
    FG_ASSERT(n == st.nparams);
    return st;
}

/* Rewrites the failure of c when a value was too large for its column: the
 * client's fault (400), not the gateway's. */
static void too_large(const struct pg_conn *c, struct fg_error *err)
{
    if (!sqlstate_too_large(pg_last_sqlstate(c)))
        return;
    char detail[sizeof err->msg];
    snprintf(detail, sizeof detail, "%s", pg_message(err));
    fg_fail(err, FG_ERR_INVALID_FIELD, "a value is too large: %s", detail);
}

/* What a write statement did: whether it wrote, and its answer row (owned;
 * NULL when it wrote nothing or was not asked for one); for its judged form,
 * whether it wrote nothing although its guard passed (a trigger skipped it);
 * whether it was rolled back because the lease it needs ended (gated). */
struct wrote {
    bool wrote;
    json_t *row;
    bool skipped;
    bool lease_ended;
};

/* What a try at a single write came to, beside 0 (its outcome is in *res)
 * and -1 (a failure). */
enum {
    TRY_NOTHING = 1,    /* it wrote nothing, and nothing refuses it */
    TRY_LEASE_ENDED = 2 /* the live lease it needs ended: refused as lease_expired */
};

/* True if op, written by who, commits only while who's lease holds: its table
 * requires a live lease (require_live_lease). */
static bool gated(const struct fenced_op *op, const struct fenced_writer *who)
{
    if (!fpg.schemas[op->table].cfg->guard.live_lease)
        return false;
    FG_ASSERT(who->lease_check != NULL);
    return true;
}

/* Asks whether who's lease still holds if any of ops[0..n) is gated; *lease
 * is FENCED_LEASE_HELD without asking otherwise. Redis first; for a lease it
 * says ended, the revocations on c, the connection the caller holds (inside
 * its transaction, if one is open), never one more of the pool: a write that
 * waited for one while holding c, and its rows, could stall the pool. */
static int ask_lease(struct pg_conn *c, const struct fenced_op *ops, size_t n,
                     const struct fenced_writer *who, enum fenced_lease *lease,
                     struct fg_error *err)
{
    *lease = FENCED_LEASE_HELD;
    size_t i = 0;
    while (i < n && !gated(&ops[i], who))
        i++;
    if (i == n)
        return 0;
    bool revoked = false;
    if (who->lease_check(who->claims, lease, err) != 0 ||
        (*lease == FENCED_LEASE_ENDED &&
         revocation_find_on(c, who->claims->fence, &revoked, NULL, 0, err) != 0))
        return -1;
    if (revoked)
        *lease = FENCED_LEASE_REVOKED;
    return 0;
}

/* Takes the outcome of a write statement, or of its judged form (whose one
 * answer row says), from its rows (freed) and count. */
static struct wrote wrote_of(json_t *rows, long count, bool judged)
{
    json_t *first = json_array_get(rows, 0);
    enum fenced_judged did = judged ? fenced_pg_answer_judged(first) : FENCED_JUDGED_NOTHING;
    bool wrote = judged ? did == FENCED_JUDGED_WROTE : count > 0;
    struct wrote w = {.wrote = wrote,
                      .row = wrote ? json_incref(first) : NULL,
                      .skipped = did == FENCED_JUDGED_SKIPPED};
    json_decref(rows);
    return w;
}

/* True if the last failure on c rolled back a statement run on its own, which
 * is worth one more try: a session that ended (session_ended), or a
 * deadlock's victim (a lock that a trigger of the table takes, outside the
 * lock order of store/fenced/write_order.h). A victim first waits
 * DEADLOCK_BACKOFF_MS: the write it deadlocked with, woken by the rollback,
 * goes ahead, where a write run again at once could take the row back before
 * it and close the same cycle. */
static bool worth_again(const struct pg_conn *c)
{
    if (session_ended(c))
        return true;
    if (!sqlstate_deadlock(pg_last_sqlstate(c)))
        return false;
    clock_sleep_ms(DEADLOCK_BACKOFF_MS);
    return true;
}

/*
 * Ends the transaction that pg_exec_begun opened on c for a gated write whose
 * statement did *w: one that wrote, or that a trigger skipped, commits only if
 * who's lease still holds, asked now that the statement holds its rows, so
 * that a write that waited for a row commits only while its lease holds. Else
 * it is rolled back: a revoked lease's write as one that wrote nothing, which
 * the refusal path refuses as revoked, an ended one's with w->lease_ended. A
 * statement that wrote nothing commits without asking.
 */
static int end_gated(struct pg_conn *c, const struct fenced_op *op, const struct fenced_writer *who,
                     struct wrote *w, struct fg_error *err)
{
    enum fenced_lease lease = FENCED_LEASE_HELD;
    if ((w->wrote || w->skipped) && ask_lease(c, op, 1, who, &lease, err) != 0) {
        pg_rollback(c);
        return -1;
    }
    if (lease == FENCED_LEASE_HELD)
        return pg_exec(c, NULL, "COMMIT", 0, NULL, NULL, err);
    pg_rollback(c);
    json_decref(w->row);
    *w = (struct wrote){.lease_ended = lease == FENCED_LEASE_ENDED};
    return 0;
}

/*
 * Runs op's statement in form (judged: its judged form) on c and stores what
 * it did in *w. in_transaction: c is inside a transaction, where nothing is
 * retried. A gated write runs in a transaction of its own that end_gated
 * ends.
 */
static int exec_write(struct pg_conn *c, const struct fenced_op *op,
                      const struct fenced_writer *who, enum fenced_form form, bool want_row,
                      bool judged, bool in_transaction, struct wrote *w, struct fg_error *err)
{
    char *owned_sql, fence[24];
    const char *params[FENCED_PARAM_COUNT + op->ncolumns + 1];
    struct write_stmt st = write_args(op, who, form, want_row, judged, params, fence, &owned_sql);
    struct pg_group_stmt stmt = {owned_sql ? NULL : st.name, st.sql, st.nparams, params, NULL, -1};
    bool gate = !in_transaction && gated(op, who);
    int rc = gate ? pg_exec_begun(c, &stmt, err) : pg_exec_stmt(c, &stmt, err);
    if (rc != 0 && !in_transaction && worth_again(c))
        rc = gate ? pg_exec_begun(c, &stmt, err) : pg_exec_stmt(c, &stmt, err);
    free(owned_sql);
    if (rc != 0) {
        too_large(c, err);
        return -1;
    }
    *w = wrote_of(stmt.rows, stmt.count, judged);
    if (gate && end_gated(c, op, who, w, err) != 0) {
        json_decref(w->row);
        *w = (struct wrote){0};
        return -1;
    }
    return 0;
}

/* Runs op's statement in the next write group (store/fenced/write_group.h) and stores
 * what it did in *w; 1 when the group handed it back to run alone. A group
 * takes its rows in the lock order (store/fenced/write_order.h), the one of
 * batches and single writes: a PUT or POST, which takes the row's lock first,
 * before the row's other writes. Should Postgres still roll a group back as a
 * deadlock's victim (a trigger of the table's that takes locks of its own),
 * the victim runs again alone (write_alone) DEADLOCK_BACKOFF_MS later, as a
 * single write does (worth_again) and a batch (fenced_pg_batch), the rest of
 * its group at once. */
static int exec_grouped(const struct fenced_op *op, const struct fenced_writer *who, bool want_row,
                        struct wrote *w, struct fg_error *err)
{
    char *owned_sql, fence[24];
    const char *params[FENCED_PARAM_COUNT + op->ncolumns + 1];
    struct write_stmt st =
        write_args(op, who, FENCED_FORM_CLAIM, want_row, false, params, fence, &owned_sql);
    struct write_group_stmt stmt = {
        {owned_sql ? NULL : st.name, st.sql, st.nparams, params, NULL, -1},
        op->table,
        op->key,
        &fpg.schemas[op->table].key_shape,
        !fenced_kind_needs_row(op->kind)};
    enum write_group_result result;
    int rc = write_group_run(&stmt, &result, err);
    free(owned_sql);
    if (rc != 0)
        return -1;
    if (result == WRITE_GROUP_DEADLOCKED)
        clock_sleep_ms(DEADLOCK_BACKOFF_MS);
    if (result != WRITE_GROUP_COMMITTED)
        return 1;
    *w = wrote_of(stmt.stmt.rows, stmt.stmt.count, false);
    return 0;
}

/*
 * Runs the refusal statement of op's table on c after op wrote nothing, and
 * stores its answer row in *answer. audit: keep the audit row of a refusal
 * (not inside a batch, which audits after its rollback).
 */
static int exec_refusal(struct pg_conn *c, const struct fenced_op *op,
                        const struct fenced_writer *who, bool audit, json_t **answer,
                        struct fg_error *err)
{
    char name[32], fence[24];
    snprintf(name, sizeof name, "fpg_x%zu", op->table);
    snprintf(fence, sizeof fence, "%" PRId64, who->claims->fence);
    const char *params[FENCED_RPARAM_COUNT] = {
        [FENCED_PARAM_FENCE] = fence,
        [FENCED_PARAM_KEY] = op->key,
        [FENCED_PARAM_PREFIX] = fpg.prefixes[op->table],
        [FENCED_RPARAM_LOCK] = who->claims->name,
        [FENCED_RPARAM_OWNER] = who->owner,
        [FENCED_RPARAM_CLIENT] = who->client_addr,
        [FENCED_RPARAM_METHOD] = fenced_kind_method(op->kind),
        [FENCED_RPARAM_PRINCIPAL] = who->principal,
        [FENCED_RPARAM_AUDIT] = audit ? "t" : "f",
        [FENCED_RPARAM_TRACE] = who->trace_id,
        [FENCED_RPARAM_KIND] = token_kind_noun(who->claims->kind),
    };
    json_t *rows = NULL;
    if (pg_exec(c, name, fpg.refusal_sql[op->table], FENCED_RPARAM_COUNT, params, &rows, err) != 0)
        return -1;
    *answer = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return *answer != NULL ? 0 : fg_fail(err, FG_ERR_INTERNAL, "refusal statement answered no row");
}

/* The failure of a write that found no row twice: 404 for a PATCH or DELETE;
 * an insert that keeps meeting a row it cannot see is a conflict. */
static int missing(const struct fenced_op *op, struct fg_error *err)
{
    const char *table = fpg.schemas[op->table].cfg->name;
    if (fenced_kind_needs_row(op->kind))
        return fg_fail(err, FG_ERR_NOT_FOUND, "no row with key '%s' in table '%s'", op->key, table);
    return fg_fail(err, FG_ERR_CONFLICT, "a concurrent write to key '%s' of table '%s' won",
                   op->key, table);
}

/* A POST onto a row that exists and whose fence does not refuse it (fence
 * column), answered as the default mode's unique violation. */
static int exists(const struct fenced_op *op, struct fg_error *err)
{
    return fg_fail(err, FG_ERR_CONFLICT, "a row with key '%s' already exists in table '%s'",
                   op->key, fpg.schemas[op->table].cfg->name);
}

/* The resource of op's row (owned): its table's prefix and the identity of
 * its key as the gateway reads it (store/fenced/key_text.h). */
static char *op_resource(const struct fenced_op *op)
{
    size_t cap = strlen(op->key) + 1;
    char identity[cap], *resource = NULL;
    key_row_identity(&fpg.schemas[op->table].key_shape, op->key, identity, cap);
    FG_ASSERT(asprintf(&resource, "%s%s", fpg.prefixes[op->table], identity) > 0);
    return resource;
}

/* Cuts res->after, op's row (the key, then the listed columns), down to what
 * op's writer may see: all of it where it may read op's table, else the key
 * and, where the write stored them (stored; a write a trigger skipped stored
 * none), the columns op writes, so that a key with only the write scope learns
 * nothing through the answer that it did not write itself. The columns come
 * in the statement's one answer either way: leaving them out of it would
 * double the prepared statements for no round trip saved. */
static void row_shown(const struct fenced_op *op, bool stored, struct fenced_result *res)
{
    if (op->may_read || res->after == NULL)
        return;
    bool shown[op->ncolumns + 1];
    shown[0] = true;
    for (size_t i = 0; i < op->ncolumns; i++)
        shown[i + 1] = stored && op->written[i];
    char first[ROW_TEXT_BUF];
    struct fgjson_out text;
    fgjson_out_init(&text, first, sizeof first);
    row_json_pick(&text, res->after, shown, op->ncolumns + 1);
    free(res->after);
    res->after = fgjson_out_take(&text);
}

/* Fills *res (freed first) for op, written by who and applied; answer: the
 * statement's answer row, NULL when it returned none (return=minimal, or
 * nothing left to return); want_row: the row was asked for, answered as
 * row_shown cuts it. The resource is the answer's, or where the statement did
 * not return it op's key's, as the gateway reads it (store/fenced/key_text.h). */
static void applied(const struct fenced_op *op, const struct fenced_writer *who,
                    const json_t *answer, bool want_row, struct fenced_result *res)
{
    const struct table_schema *s = &fpg.schemas[op->table];
    fenced_pg_answer_applied(answer, s, op->key, want_row && op->kind != FENCED_DELETE,
                             who->claims->fence, res);
    row_shown(op, true, res);
    if (res->resource == NULL)
        res->resource = op_resource(op);
}

/* Runs op's statement in form (judged: its judged form, default mode) on c,
 * a connection of its own, and stores what it did in *w; a data error names
 * the value at fault. A statement that failed as one that wrote nothing (a
 * create that met a fence kept since, FGK01; a claiming PATCH or DELETE whose
 * row went away, its claim undone, FGC01) stores that it wrote nothing. */
static int write_alone(struct pg_conn *c, const struct fenced_op *op,
                       const struct fenced_writer *who, enum fenced_form form, bool want_row,
                       bool judged, struct wrote *w, struct fg_error *err)
{
    if (exec_write(c, op, who, form, want_row, judged, false, w, err) == 0)
        return 0;
    const char *state = pg_last_sqlstate(c);
    if (sqlstate_fence_kept_above(state) || sqlstate_claim_unused(state)) {
        /* a fence above its own kept since, or its row deleted since and its claim undone:
         * it wrote nothing, and the refusal path says why */
        *w = (struct wrote){0};
        return 0;
    }
    if (data_error(c))
        find_bad_value(c, op, "", err);
    return -1;
}

/* Runs the read statement of table for key on c and fills *res from its
 * answer (fenced_pg_answer_read: the row as it stands, NULL if none, and its
 * fence). in_transaction: c is inside a transaction, where nothing is retried. */
static int read_on(struct pg_conn *c, size_t table, const char *key, bool in_transaction,
                   struct fenced_result *res, struct fg_error *err)
{
    char name[32];
    snprintf(name, sizeof name, "fpg_r%zu", table);
    const char *params[] = {key, fpg.prefixes[table]};
    json_t *rows = NULL;
    int rc = pg_exec(c, name, fpg.read_sql[table], 2, params, &rows, err);
    if (rc != 0 && !in_transaction && session_ended(c))
        rc = pg_exec(c, name, fpg.read_sql[table], 2, params, &rows, err);
    if (rc == 0)
        fenced_pg_answer_read(json_array_get(rows, 0), res);
    json_decref(rows);
    return rc;
}

/*
 * Fills *res (freed first) for op, written by who to a default-mode table,
 * whose judged form on c said that a trigger of its table skipped it
 * (returned NULL) although its guard passed: the table's own decision,
 * answered as an applied write with the row as it stands (as row_shown cuts
 * it), read on c when want_row (NULL where the table kept none), and read for its resource where
 * the gateway cannot name the row itself (key_identity_known). Its fence
 * holds as an applied write's: its claim committed with the judged form,
 * under the lock of the resource's fence row. in_transaction: c is inside a
 * transaction.
 */
static int skipped(struct pg_conn *c, const struct fenced_op *op, const struct fenced_writer *who,
                   bool want_row, bool in_transaction, struct fenced_result *res,
                   struct fg_error *err)
{
    fenced_result_free(res);
    bool named = key_identity_known(&fpg.schemas[op->table].key_shape);
    if ((want_row || !named) && read_on(c, op->table, op->key, in_transaction, res, err) != 0)
        return -1;
    if (!want_row) { /* read only for the resource's name */
        free(res->after);
        res->after = NULL;
    }
    row_shown(op, false, res);
    res->outcome = FENCED_APPLIED;
    res->fence = who->claims->fence;
    if (res->resource == NULL)
        res->resource = op_resource(op);
    return 0;
}

/* Fills *res for op from what its judged form did on c (*w): applied where it
 * wrote, skipped() where a trigger of the table skipped it; nothing where it
 * wrote nothing else. */
static int judged_outcome(struct pg_conn *c, const struct fenced_op *op,
                          const struct fenced_writer *who, bool want_row, bool in_transaction,
                          const struct wrote *w, struct fenced_result *res, struct fg_error *err)
{
    if (w->wrote) {
        applied(op, who, w->row, want_row, res);
        return 0;
    }
    return w->skipped ? skipped(c, op, who, want_row, in_transaction, res, err) : 0;
}

/* The refusal path of op, which wrote nothing, on c: its refusal statement
 * says why, and audits a refusal. 0 when *res holds its outcome (refused),
 * 1 when nothing refuses it, -1 on failure (the row missing, or in the way).
 * The statement's own failure is the backend's, whatever Postgres said (its
 * audit insert refused by a constraint, a privilege, a trigger of
 * fencegate.rejections), as audit_insert's is: a refusal is answered only
 * once its record is stored. */
static int refused(struct pg_conn *c, const struct fenced_op *op, const struct fenced_writer *who,
                   struct fenced_result *res, struct fg_error *err)
{
    json_t *answer = NULL;
    if (exec_refusal(c, op, who, true, &answer, err) != 0) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                       "postgres did not store the audit record of the refusal: %s", why);
    }
    enum fenced_verdict verdict =
        fenced_pg_answer_verdict(answer, op->kind, who->claims->fence, res);
    json_decref(answer);
    switch (verdict) {
    case FENCED_VERDICT_REFUSED: return 0;
    case FENCED_VERDICT_MISSING: return missing(op, err);
    case FENCED_VERDICT_EXISTS: return exists(op, err);
    default: return 1;
    }
}

/* Adds resource to the resources of a refused write or batch, once. */
static void resources_add(json_t *resources, const char *resource)
{
    size_t i;
    const json_t *listed;
    json_array_foreach(resources, i, listed)
    {
        if (strcmp(json_string_value(listed), resource) == 0)
            return;
    }
    json_array_append_new(resources, fgjson_string(resource));
}

/* The refusal of op as a read of its row names it: the row's identity, and the
 * fence where its table keeps it (the row's own column on a fence_column table). */
static int refusal_of(const struct fenced_op *op, struct fenced_result *res, struct fg_error *err)
{
    if (fenced_pg_read(op->table, op->key, res, err) != 0)
        return -1;
    free(res->after);
    res->after = NULL;
    res->outcome = FENCED_EXPIRED;
    return 0;
}

/* Refuses ops[0..n) (n > 0) of who, which wrote nothing, because the live
 * lease they need ended: one audit record for the request (reason
 * "lease_expired") naming ops[0]'s resource and the fence now stored for it,
 * and in resources every op's. *res gets that refusal (EXPIRED). method: the
 * HTTP method to record. Runs on connections of its own. */
static int refuse_ended(const struct fenced_op *const *ops, size_t n,
                        const struct fenced_writer *who, const char *method,
                        struct fenced_result *res, struct fg_error *err)
{
    FG_ASSERT(n > 0);
    memset(res, 0, sizeof *res);
    json_t *resources = json_array();
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct fenced_result one = {0};
        rc = refusal_of(ops[i], &one, err);
        if (rc == 0)
            resources_add(resources, one.resource);
        if (rc == 0 && i == 0)
            *res = one;
        else
            fenced_result_free(&one);
    }
    res->resources = resources;
    struct pg_conn *c = rc == 0 ? pg_acquire(err) : NULL;
    rc = c != NULL ? fenced_refusal_audit(c, who, res, method, err) : -1;
    if (c != NULL)
        pg_release(c);
    if (rc != 0)
        fenced_result_free(res);
    return rc;
}

/* The refusal path of a single write op that wrote nothing, on c: for a
 * gated write, the end of its lease answers first (TRY_LEASE_ENDED), as it
 * would have had the write applied; then refused(). */
static int refused_single(struct pg_conn *c, const struct fenced_op *op,
                          const struct fenced_writer *who, struct fenced_result *res,
                          struct fg_error *err)
{
    enum fenced_lease lease;
    if (ask_lease(c, op, 1, who, &lease, err) != 0)
        return -1;
    return lease == FENCED_LEASE_ENDED ? TRY_LEASE_ENDED : refused(c, op, who, res, err);
}

/* The first try at a single write, on *c (taken from the pool when NULL; a
 * write to a fence-column table goes to a write group first, where the
 * connection is the group's, unless gated: a group commits without asking
 * its writers' leases; a default-mode write tries the held form first). 0
 * when *res holds its outcome, TRY_NOTHING or TRY_LEASE_ENDED, -1 on
 * failure. */
static int write_once(const struct fenced_op *op, const struct fenced_writer *who, bool want_row,
                      struct pg_conn **c, struct fenced_result *res, struct fg_error *err)
{
    struct wrote w = {0};
    int alone = 1;
    bool column = column_mode(op->table);
    if (*c == NULL && column && !gated(op, who) &&
        (alone = exec_grouped(op, who, want_row, &w, err)) < 0)
        return -1;
    if (alone && *c == NULL && (*c = pg_acquire(err)) == NULL)
        return -1;
    if (alone && !column &&
        write_alone(*c, op, who, FENCED_FORM_HELD, want_row, false, &w, err) != 0)
        return -1;
    if (alone && !w.wrote && !w.lease_ended &&
        write_alone(*c, op, who, FENCED_FORM_CLAIM, want_row, false, &w, err) != 0)
        return -1;
    if (w.lease_ended)
        return TRY_LEASE_ENDED;
    if (w.wrote) {
        applied(op, who, w.row, want_row, res);
        json_decref(w.row);
        return 0;
    }
    /* refused or missing: the refusal path, rare, asks why and audits */
    if (*c == NULL && (*c = pg_acquire(err)) == NULL)
        return -1;
    return refused_single(*c, op, who, res, err);
}

/* The last try at a single write to a default-mode table that wrote nothing
 * with nothing refusing it, on c: its judged form, which writes (a row
 * committed by the writer it waited for is not in the first try's snapshot)
 * or says that a trigger of the table skipped it (judged_outcome); where it
 * does neither, the refusal path once more. 0 when *res holds its outcome,
 * TRY_NOTHING or TRY_LEASE_ENDED, -1 on failure. */
static int write_judged(struct pg_conn *c, const struct fenced_op *op,
                        const struct fenced_writer *who, bool want_row, struct fenced_result *res,
                        struct fg_error *err)
{
    struct wrote w = {0};
    int rc = write_alone(c, op, who, FENCED_FORM_CLAIM, want_row, true, &w, err);
    if (rc == 0 && w.lease_ended)
        return TRY_LEASE_ENDED;
    if (rc == 0)
        rc = judged_outcome(c, op, who, want_row, false, &w, res, err);
    json_decref(w.row);
    if (rc != 0 || w.wrote || w.skipped)
        return rc;
    return refused_single(c, op, who, res, err);
}

int fenced_pg_write(const struct fenced_op *op, const struct fenced_writer *who, bool want_row,
                    struct fenced_result *res, struct fg_error *err)
{
    memset(res, 0, sizeof *res);
    struct pg_conn *c = NULL;
    int rc = write_once(op, who, want_row, &c, res, err);
    /* A row committed by the writer this one waited for is not in the write's
     * snapshot: a write that met a row that changed is tried once more. On a
     * fence_column table a write that wrote nothing again is never applied:
     * whether a trigger skipped it is not read there (only the default mode
     * reads its guard and claims its fence under one lock). */
    if (rc == TRY_NOTHING && column_mode(op->table))
        rc = write_once(op, who, want_row, &c, res, err);
    else if (rc == TRY_NOTHING)
        rc = write_judged(c, op, who, want_row, res, err);
    if (rc == TRY_NOTHING)
        rc = missing(op, err);
    if (c != NULL)
        pg_release(c);
    if (rc == TRY_LEASE_ENDED)
        rc = refuse_ended(&op, 1, who, fenced_kind_method(op->kind), res, err);
    if (rc != 0)
        fenced_result_free(res);
    return rc;
}

/* --- batches ------------------------------------------------------------------------------ */

/* Opens the batch on c (struct batch_opening): *revoked tells whether who's
 * fence was revoked, *claimed gets the (resource, fence) rows of every claim. */
static int open_batch(struct pg_conn *c, const struct fenced_batch *batch,
                      const struct fenced_writer *who, bool *revoked, json_t **claimed,
                      struct fg_error *err)
{
    struct batch_opening o = {0};
    batch_opening_build(batch, who->claims->fence, fpg.schemas, fpg.prefixes, fpg.ntables, &o);
    size_t failed;
    int rc = pg_exec_pipeline(c, o.stmts, o.n, &failed, err);
    *claimed = json_array();
    if (rc == 0) {
        *revoked = json_array_size(o.stmts[BATCH_OPENING_REVOKED].rows) > 0;
        for (size_t i = BATCH_OPENING_CLAIMS; i < o.n; i++)
            json_array_extend(*claimed, o.stmts[i].rows);
    }
    batch_opening_free(&o);
    return rc;
}

/* Adds the resource of every op of batch to resources, once each, named as
 * every statement names it (fenced_sql_resource: a timestamptz key in UTC, a
 * bytea key in hex, whatever the spelling of the op's key), on c in one
 * round trip. */
static int batch_resources(struct pg_conn *c, const struct fenced_batch *batch, json_t *resources,
                           struct fg_error *err)
{
    size_t n = batch->nops, failed;
    struct pg_group_stmt *stmts = calloc(n + 1, sizeof *stmts);
    const char **params = calloc(2 * n + 1, sizeof *params);
    char(*names)[32] = calloc(n + 1, sizeof *names);
    FG_ASSERT(stmts != NULL && params != NULL && names != NULL);
    for (size_t i = 0; i < n; i++) {
        const struct fenced_op *op = &batch->ops[i];
        snprintf(names[i], sizeof names[i], "fpg_n%zu", op->table);
        params[2 * i] = fpg.prefixes[op->table];
        params[2 * i + 1] = op->key;
        stmts[i] = (struct pg_group_stmt){
            names[i], fpg.resource_sql[op->table], 2, &params[2 * i], NULL, -1};
    }
    int rc = pg_exec_pipeline(c, stmts, n, &failed, err);
    for (size_t i = 0; i < n; i++) {
        const json_t *row = json_array_get(stmts[i].rows, 0);
        if (rc == 0)
            resources_add(resources, json_string_value(json_object_get(row, "resource")));
        json_decref(stmts[i].rows);
    }
    free(stmts);
    free(params);
    free(names);
    return rc;
}

/* After the rollback of a batch whose fence was revoked: one audit record for
 * the request, naming the first operation's resource and the fence stored for
 * it now, and in resources every resource of the batch. */
static int audit_revoked(struct pg_conn *c, const struct fenced_batch *batch,
                         const struct fenced_writer *who, struct fenced_result *res,
                         struct fg_error *err)
{
    json_t *answer = NULL;
    if (exec_refusal(c, &batch->ops[0], who, false, &answer, err) != 0)
        return -1;
    fenced_pg_answer_verdict(answer, batch->ops[0].kind, who->claims->fence, res);
    json_decref(answer);
    res->outcome = FENCED_REVOKED;
    res->resources = json_array();
    if (batch_resources(c, batch, res->resources, err) != 0)
        return -1;
    return fenced_refusal_audit(c, who, res, "POST", err);
}

/* After the rollback of a stale batch: one audit record for the request, naming
 * the first stale resource (in resource order) and, in resources, all of them. */
static int audit_stale(struct pg_conn *c, const json_t *stale, const struct fenced_writer *who,
                       struct fenced_result *res, struct fg_error *err)
{
    const json_t *first = json_array_get(stale, 0);
    res->outcome = FENCED_STALE;
    res->resource = strdup(json_string_value(json_object_get(first, "resource")));
    FG_ASSERT(res->resource != NULL);
    res->fence = json_integer_value(json_object_get(first, "current_fence"));
    res->stale = json_incref((json_t *)stale);
    res->resources = json_array();
    size_t i;
    const json_t *item;
    json_array_foreach(stale, i, item)
        json_array_append(res->resources, json_object_get(item, "resource"));
    return fenced_refusal_audit(c, who, res, "POST", err);
}

/* The failure of a batch whose op wrote nothing (in its judged form in the
 * default mode), from its refusal statement's verdict (its answer in one,
 * where op stands in the batch): a stale op is added to stale (audited after
 * the rollback), a revoked fence sets *revoked, a missing row or one in the
 * way fails as a single write would. An op nothing refuses fails as missing
 * in the default mode, as a single write does after its judged form (the
 * row hidden from the write, or an insert that met a row it cannot see); on
 * a fence_column table as a lost race, nothing being retried inside a batch
 * (a row hidden from the write, or a write a trigger of the table skipped,
 * is never answered applied there). */
static int batch_refused(const struct fenced_op *op, enum fenced_verdict verdict,
                         const struct fenced_result *one, json_t *stale, bool *revoked,
                         struct fg_error *err)
{
    if (verdict == FENCED_VERDICT_REFUSED && one->outcome == FENCED_REVOKED) {
        *revoked = true;
        return fg_fail(err, FG_ERR_LEASE_LOST, "the fence was revoked");
    }
    if (verdict == FENCED_VERDICT_REFUSED) {
        json_array_append_new(stale,
                              json_pack("{s:o, s:I}", "resource", fgjson_string(one->resource),
                                        "current_fence", (json_int_t)one->fence));
        return fg_fail(err, FG_ERR_STALE_FENCE, "resource %s holds fence %" PRId64, one->resource,
                       one->fence);
    }
    if (verdict == FENCED_VERDICT_EXISTS)
        return exists(op, err);
    if (verdict == FENCED_VERDICT_MISSING || !column_mode(op->table))
        return missing(op, err);
    return fg_fail(err, FG_ERR_CONFLICT, "a concurrent write to key '%s' of table '%s' won",
                   op->key, fpg.schemas[op->table].cfg->name);
}

/* Judges op, which wrote nothing inside the open transaction of a batch (its
 * judged form, default mode, said nothing of a trigger's skip), where it stands: after the
 * ops before it, before those after it. Its refusal statement says why
 * (batch_refused); -1 with err, *one its answer. */
static int judge_op(struct pg_conn *c, const struct fenced_op *op, const struct fenced_writer *who,
                    json_t *stale, bool *revoked, struct fenced_result *one, struct fg_error *err)
{
    json_t *answer = NULL;
    if (exec_refusal(c, op, who, false, &answer, err) != 0)
        return -1;
    enum fenced_verdict verdict =
        fenced_pg_answer_verdict(answer, op->kind, who->claims->fence, one);
    json_decref(answer);
    return batch_refused(op, verdict, one, stale, revoked, err);
}

/* Writes op's answered item {op, resource, row} into items, from its outcome one. */
static void add_item(struct fgjson_out *items, const struct fenced_op *op,
                     const struct fenced_result *one)
{
    fgjson_out_open_item(items);
    fgjson_out_str(items, "op", fenced_kind_method(op->kind));
    fgjson_out_str(items, "resource", one->resource);
    fgjson_out_json(items, "row", one->after);
    fgjson_out_close(items);
}

/* Runs the operations inside the open transaction, sent as one pipeline (one
 * round trip); items (the text of an array being written) gets one
 * {op, resource, row} per op if want_row, the row as its text. An op that
 * wrote nothing is not judged here: the ops after it ran too, and may have
 * changed its row (a PUT of the row a PATCH before it missed), so it sets
 * *wrote_nothing and fails the run; the batch then runs again op by op
 * (run_ops_one_by_one). failed names the op that failed, nops when none in
 * particular. */
static int run_ops(struct pg_conn *c, const struct fenced_batch *batch,
                   const struct fenced_writer *who, bool want_row, struct fgjson_out *items,
                   bool *wrote_nothing, size_t *failed, struct fg_error *err)
{
    size_t n = batch->nops;
    struct pg_group_stmt *stmts = calloc(n + 1, sizeof *stmts);
    struct write_stmt *written = calloc(n + 1, sizeof *written); /* the names stmts borrow */
    const char ***params = calloc(n + 1, sizeof *params);
    char **owned_sql = calloc(n + 1, sizeof *owned_sql), fence[24];
    FG_ASSERT(stmts != NULL && written != NULL && params != NULL && owned_sql != NULL);
    for (size_t i = 0; i < n; i++) {
        const struct fenced_op *op = &batch->ops[i];
        params[i] = calloc(FENCED_PARAM_COUNT + op->ncolumns + 1, sizeof **params);
        FG_ASSERT(params[i] != NULL);
        /* the opening claimed every fence: the held form is the whole write */
        written[i] =
            write_args(op, who, FENCED_FORM_HELD, want_row, false, params[i], fence, &owned_sql[i]);
        stmts[i] = (struct pg_group_stmt){owned_sql[i] ? NULL : written[i].name,
                                          written[i].sql,
                                          written[i].nparams,
                                          params[i],
                                          NULL,
                                          -1};
    }
    *failed = n;
    int rc = pg_exec_pipeline(c, stmts, n, failed, err);
    if (rc != 0)
        too_large(c, err);
    /* the ops before one that failed ran, and kept their counts (none on a lost connection) */
    size_t ran = rc == 0 ? n : *failed < n ? *failed : 0;
    for (size_t i = 0; i < ran && !*wrote_nothing; i++) {
        if (stmts[i].count <= 0) {
            *wrote_nothing = true;
            *failed = i;
            rc = fg_fail(err, FG_ERR_INTERNAL, "ops[%zu] wrote nothing", i);
        } else if (rc == 0 && want_row) {
            struct fenced_result one = {0};
            applied(&batch->ops[i], who, json_array_get(stmts[i].rows, 0), want_row, &one);
            add_item(items, &batch->ops[i], &one);
            fenced_result_free(&one);
        }
    }
    for (size_t i = 0; i < n; i++) {
        json_decref(stmts[i].rows);
        free(params[i]);
        free(owned_sql[i]);
    }
    free(stmts);
    free(written);
    free(params);
    free(owned_sql);
    if (rc == 0)
        *failed = n;
    return rc;
}

/* Runs the operations inside the open transaction one at a time, each (on a
 * default-mode table in its judged form, which also says whether a trigger
 * of its table skipped it: applied as a single write is, judged_outcome)
 * applied, or else judged where it stands (judge_op): the batch fails at the
 * first op that fails, and items gets one {op, resource, row} per op if
 * want_row. *failed names the op that failed. Only after a run of run_ops
 * met an op that wrote nothing: accepted batches pay one round trip for
 * their ops. */
static int run_ops_one_by_one(struct pg_conn *c, const struct fenced_batch *batch,
                              const struct fenced_writer *who, bool want_row,
                              struct fgjson_out *items, json_t *stale, bool *revoked,
                              size_t *failed, struct fg_error *err)
{
    for (size_t i = 0; i < batch->nops; i++) {
        const struct fenced_op *op = &batch->ops[i];
        struct wrote w = {0};
        struct fenced_result one = {0};
        bool judged = !column_mode(op->table);
        int rc = exec_write(c, op, who, FENCED_FORM_HELD, want_row, judged, true, &w, err);
        if (rc == 0)
            rc = judged_outcome(c, op, who, want_row, true, &w, &one, err);
        if (rc == 0 && !w.wrote && !w.skipped)
            rc = judge_op(c, op, who, stale, revoked, &one, err);
        json_decref(w.row);
        if (rc == 0 && want_row)
            add_item(items, op, &one);
        fenced_result_free(&one);
        if (rc != 0) {
            *failed = i;
            return -1;
        }
    }
    return 0;
}

/* Rewrites the failure of a batch, after its rollback, to name the operation:
 * failed is its index, or nops when the claim failed (then a bad key is looked
 * for among all operations). data: the failure was a data error. */
static void blame_op(struct pg_conn *c, const struct fenced_batch *batch, size_t failed, bool data,
                     struct fg_error *err)
{
    char where[32];
    for (size_t i = 0; data && failed == batch->nops && i < batch->nops; i++) {
        snprintf(where, sizeof where, "ops[%zu]: ", i);
        if (find_bad_value(c, &batch->ops[i], where, err))
            return;
    }
    if (failed == batch->nops)
        return;
    snprintf(where, sizeof where, "ops[%zu]: ", failed);
    if (data && find_bad_value(c, &batch->ops[failed], where, err))
        return;
    char detail[sizeof err->msg];
    snprintf(detail, sizeof detail, "%s", err->msg);
    fg_fail(err, err->code, "%s%s", where, detail);
}

/* What follows a try at a batch that failed (batch_once). */
enum batch_next {
    BATCH_DONE,        /* its failure is the batch's answer */
    BATCH_AGAIN,       /* nothing was written and one more try may succeed */
    BATCH_AGAIN_LATER, /* as BATCH_AGAIN, for a deadlock's victim: DEADLOCK_BACKOFF_MS later */
    BATCH_OP_BY_OP,    /* an op wrote nothing: run the batch again, op by op */
    BATCH_LEASE_ENDED  /* the live lease it needs ended: nothing was written, refuse it */
};

/* One try at a batch, its ops in one pipeline or op_by_op (run_ops,
 * run_ops_one_by_one); *next says what follows a failure: BATCH_AGAIN on
 * prepared statements gone stale (a listed column's type altered: the next
 * runs on a new session), or on a row it created after a delete it waited for
 * kept a higher fence (FGK01, the next sees the kept fence and answers the
 * batch stale), BATCH_AGAIN_LATER when it failed as a deadlock's victim
 * (which the order of its claims leaves to locks that the tables' triggers
 * take: see exec_grouped), each worth one more try since nothing was written;
 * BATCH_OP_BY_OP when an op of the pipeline wrote nothing (rolled back,
 * nothing audited). A batch with a gated op asks whether who's lease holds
 * once its ops ran, before it commits, or is refused or fails for its rows
 * (an ended lease answers first, as for a single write): a lease that ended
 * rolls it back with *next BATCH_LEASE_ENDED (0 returned, *res empty), a
 * revoked one refuses it as revoked. */
static int batch_once(const struct fenced_batch *batch, const struct fenced_writer *who,
                      bool want_row, bool op_by_op, struct fenced_result *res,
                      enum batch_next *next, struct fg_error *err)
{
    memset(res, 0, sizeof *res);
    *next = BATCH_DONE;
    struct pg_conn *c = pg_acquire(err);
    if (c == NULL)
        return -1;
    json_t *claimed = NULL, *stale = NULL;
    char first[BATCH_BUF];
    struct fgjson_out items;
    fgjson_out_init(&items, first, sizeof first);
    fgjson_out_raw(&items, "[", 1);
    size_t failed = batch->nops; /* the operation to blame; nops: none in particular */
    bool revoked = false, wrote_nothing = false;
    enum fenced_lease lease = FENCED_LEASE_HELD;
    int rc = open_batch(c, batch, who, &revoked, &claimed, err);
    if (rc == 0 && revoked) {
        pg_rollback(c);
        rc = audit_revoked(c, batch, who, res, err);
        goto out;
    }
    if (rc == 0) {
        stale = fenced_pg_answer_stale(claimed, who->claims->fence);
        if (json_array_size(stale) > 0)
            rc = fg_fail(err, FG_ERR_STALE_FENCE, "a resource holds a higher fence");
        else if (op_by_op)
            rc = run_ops_one_by_one(c, batch, who, want_row, &items, stale, &revoked, &failed, err);
        else
            rc = run_ops(c, batch, who, want_row, &items, &wrote_nothing, &failed, err);
    }
    if (wrote_nothing) {
        pg_rollback(c);
        *next = BATCH_OP_BY_OP;
        goto out;
    }
    if (rc != 0)
        pg_rollback(c); /* its locks go before the lease is asked; its failure stays readable */
    struct fg_error asked = {0};
    if (ask_lease(c, batch->ops, batch->nops, who, &lease, &asked) != 0) {
        pg_rollback(c);
        *err = asked;
        rc = -1;
        goto out;
    }
    if (lease == FENCED_LEASE_ENDED) {
        pg_rollback(c);
        *next = BATCH_LEASE_ENDED;
        rc = 0;
        goto out;
    }
    revoked = revoked || lease == FENCED_LEASE_REVOKED;
    if (rc == 0 && !revoked)
        rc = pg_exec(c, NULL, "COMMIT", 0, NULL, NULL, err);
    if (revoked) {
        pg_rollback(c);
        rc = audit_revoked(c, batch, who, res, err);
        goto out;
    }
    if (rc != 0 && json_array_size(stale) > 0) {
        rc = audit_stale(c, stale, who, res, err);
        goto out;
    }
    if (rc != 0) {
        bool data = data_error(c);
        const char *state = pg_last_sqlstate(c);
        if (sqlstate_deadlock(state))
            *next = BATCH_AGAIN_LATER;
        else if (sqlstate_fence_kept_above(state) || pg_last_plans_stale(c))
            *next = BATCH_AGAIN;
        pg_rollback(c);
        blame_op(c, batch, failed, data, err);
        goto out;
    }
    res->outcome = FENCED_APPLIED;
    res->fence = who->claims->fence;
    if (want_row) {
        fgjson_out_close_array(&items);
        res->after = fgjson_out_take(&items);
    }
out:
    json_decref(claimed);
    json_decref(stale);
    fgjson_out_free(&items);
    pg_release(c);
    if (rc != 0)
        fenced_result_free(res);
    return rc;
}

/* The gated ops of batch into ops (room for batch->nops); returns how many. */
static size_t gated_ops(const struct fenced_batch *batch, const struct fenced_writer *who,
                        const struct fenced_op **ops)
{
    size_t n = 0;
    for (size_t i = 0; i < batch->nops; i++)
        if (gated(&batch->ops[i], who))
            ops[n++] = &batch->ops[i];
    return n;
}

int fenced_pg_batch(const struct fenced_batch *batch, const struct fenced_writer *who,
                    bool want_row, struct fenced_result *res, struct fg_error *err)
{
    bool op_by_op = false, retried = false;
    enum batch_next next;
    int rc = batch_once(batch, who, want_row, op_by_op, res, &next, err);
    /* the switch to op by op, once, does not take the one more try. A
     * deadlock's victim waits DEADLOCK_BACKOFF_MS, as a single write does
     * (worth_again), its connection given back: the write it deadlocked with,
     * woken by the rollback, commits first, where a batch run again at once
     * could take the row back before it and close the same cycle. */
    while (rc != 0 && (next == BATCH_OP_BY_OP || (next != BATCH_DONE && !retried))) {
        if (next == BATCH_AGAIN_LATER)
            clock_sleep_ms(DEADLOCK_BACKOFF_MS);
        retried = retried || next != BATCH_OP_BY_OP;
        op_by_op = op_by_op || next == BATCH_OP_BY_OP;
        rc = batch_once(batch, who, want_row, op_by_op, res, &next, err);
    }
    if (rc == 0 && next == BATCH_LEASE_ENDED) {
        const struct fenced_op **ops = calloc(batch->nops, sizeof *ops);
        FG_ASSERT(ops != NULL);
        rc = refuse_ended(ops, gated_ops(batch, who, ops), who, "POST", res, err);
        free(ops);
    }
    return rc;
}

/* --- reads -------------------------------------------------------------------------------- */

int fenced_pg_read(size_t table, const char *key, struct fenced_result *res, struct fg_error *err)
{
    FG_ASSERT(table < fpg.ntables);
    memset(res, 0, sizeof *res);
    struct pg_conn *c = pg_acquire(err);
    if (c == NULL)
        return -1;
    int rc = read_on(c, table, key, false, res, err);
    if (rc != 0 && data_error(c)) {
        struct fenced_op op = {.table = table, .key = (char *)key};
        find_bad_value(c, &op, "", err);
    }
    pg_release(c);
    return rc;
}
