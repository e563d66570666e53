/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_sql.h - the SQL text of fenced Postgres writes and reads, built from
 * the configuration and the column types read from the catalog at start-up.
 * Identifiers are always quoted here; values never appear in the text, only
 * numbered parameters cast to their column's type. Pure: no I/O.
 *
 * Every statement reads and writes the rows of its table alone: an ordinary
 * table as ONLY that table, never also the rows of a table that inherits it
 * (one made to after start-up, where the start-up check saw none), which its
 * key does not single out; a partitioned table with its partitions, which
 * hold its rows. An INSERT writes the table named.
 *
 * Every write statement takes the same leading parameters (FENCED_PARAM_*),
 * then one text parameter per written column, in configuration order. It
 * claims the fence and writes in one round trip; its command's row count is 1
 * when the write was accepted. Asked for the row, it then answers one row:
 * (resource, c0, c1, ...) - resource is the canonical resource of the written
 * row, c0 its key and c1.. its listed columns as Postgres prints them, each
 * as to_json's text where the gateway does not write the type's JSON itself
 * (row_json.h; none for a delete); resource and c0 only where the gateway
 * does not know them (key_prints_canonical), and no row at all where nothing
 * is left to return. Not asked, it answers nothing of the row, or (resource)
 * where the gateway cannot name the row itself (key_identity_known). Every
 * write but a delete answers one more member, key_kept (true), for the row it
 * wrote, and fails with SQLSTATE FGM01, writing nothing, where that row's key
 * is not the one asked (a BEFORE trigger changed it; fencegate.key_moved).
 * A refused write, one whose row is missing, or one a BEFORE trigger of the
 * table skipped (returned NULL) counts 0 and writes nothing; the refusal
 * statement then tells why, and keeps the audit row of a refusal, and where
 * nothing refuses the write, its judged form (fenced_sql_judged) runs it once
 * more and says itself whether its guard passed on what it wrote nothing to.
 * Accepted writes, the common case, pay for nothing else.
 */
#ifndef FG_FENCED_SQL_H
#define FG_FENCED_SQL_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "store/fenced/key_text.h"
#include "store/fenced/row_json.h"
#include "util/error.h"

enum fenced_kind {
    FENCED_PATCH,  /* update some columns of an existing row */
    FENCED_PUT,    /* insert or replace a row */
    FENCED_POST,   /* insert a new row */
    FENCED_DELETE, /* delete a row */
    FENCED_KIND_COUNT
};

/* Parameters shared by every write statement ($1 .. $FENCED_PARAM_COUNT), and
 * the first ones of the refusal statement. A PATCH of a table with a
 * fence_column that answers nothing takes no prefix (fenced_sql_takes_prefix):
 * its column parameters follow the key. */
enum fenced_param {
    FENCED_PARAM_FENCE,  /* $1 presented fence */
    FENCED_PARAM_KEY,    /* $2 key, as text */
    FENCED_PARAM_PREFIX, /* $3 resource prefix, "pg:<table>/" */
    FENCED_PARAM_COUNT
};

/* The further parameters of the refusal statement. */
enum fenced_refusal_param {
    FENCED_RPARAM_LOCK = FENCED_PARAM_COUNT, /* $4 lock the token was issued for (audit) */
    FENCED_RPARAM_OWNER,                     /* $5 owner named by the writer, or NULL (audit) */
    FENCED_RPARAM_CLIENT,                    /* $6 client address (audit) */
    FENCED_RPARAM_METHOD,                    /* $7 HTTP method (audit; PUT, POST: creates) */
    FENCED_RPARAM_PRINCIPAL,                 /* $8 id of the writer's API key, or NULL (audit) */
    FENCED_RPARAM_AUDIT,                     /* $9 "t": keep the audit row of a refusal */
    FENCED_RPARAM_TRACE,                     /* $10 trace id of the writer's traceparent, or NULL */
    FENCED_RPARAM_KIND, /* $11 "lock" or "semaphore": the token's kind (audit) */
    FENCED_RPARAM_COUNT
};

/* How a key's text in its type names a resource (fenced_sql_key_identity). */
enum key_identity {
    KEY_IDENTITY_TEXT,    /* the type's text as it is */
    KEY_IDENTITY_NUMERIC, /* the scale dropped: 1 and 1.0 are one value */
    KEY_IDENTITY_UTC,     /* timestamptz: its text in UTC, whatever the session's TimeZone */
    KEY_IDENTITY_HEX,     /* bytea: its hex text, whatever the session's bytea_output */
};

/* A writable table as the gateway knows it after start-up. */
struct table_schema {
    const struct table_config *cfg; /* name, key and writable columns (borrowed) */
    char *table_schema;             /* the schema Postgres found the table in at start-up, which
                                       every statement names it by (owned; NULL: the name alone) */
    char *key_type;                 /* SQL type of the key, as format_type prints it (owned) */
    char **column_types;            /* SQL type of each writable column (owned, cfg order) */
    bool *column_json;              /* the column is json or jsonb (owned, cfg order) */
    enum row_json_kind *row_kinds;  /* how the answered row writes the key, then each column */
    enum key_identity key_identity; /* how its key's text names a resource */
    struct key_shape key_shape;     /* how the gateway reads the key's text */
    bool partitioned;               /* a partitioned table: its rows are its partitions' */
    bool key_generated;             /* the table makes its key (identity ALWAYS, generated) */
};

/* Frees what schema owns (not cfg) and zeroes it. */
void table_schema_free(struct table_schema *schema);

/* Quotes an identifier as Postgres requires ("a""b"); returns an owned string. */
char *sql_quote_ident(const char *name);

/* The operation's method name ("PATCH", ...) and the kind of a method name
 * (FENCED_KIND_COUNT if none). */
const char *fenced_kind_method(enum fenced_kind kind);

/* True for the kinds that change an existing row (PATCH, DELETE). */
bool fenced_kind_needs_row(enum fenced_kind kind);

/* True if the write statement of kind on schema's table, answering its row or
 * not (want_row), takes the prefix parameter: in the default mode, on a
 * fence_column table where it names the resource's kept fence (every kind but
 * PATCH), and where it returns the resource. */
bool fenced_sql_takes_prefix(const struct table_schema *schema, enum fenced_kind kind,
                             bool want_row);

/* The two forms of a default-mode write (fenced_sql.c); a table with a
 * fence_column has one form, the same for both. */
enum fenced_form {
    FENCED_FORM_HELD, /* writes only where the presented fence is stored: no upsert */
    FENCED_FORM_CLAIM /* raises a lower fence, or stores a missing one, and writes */
};

/*
 * The write statement of kind and form on schema's table, writing the columns
 * whose entry in written (schema->cfg->ncolumns entries) is true; want_row: it
 * answers (resource, row) for the written row, else nothing. A claiming PATCH
 * or DELETE of the default mode answers wrote (true) before them, and where
 * it claimed the fence but wrote nothing (its row deleted since its snapshot)
 * fails with SQLSTATE FGC01, its claim undone. Returns an owned string;
 * *nparams gets the number of parameters it takes.
 */
char *fenced_sql_write(const struct table_schema *schema, enum fenced_kind kind,
                       const bool *written, enum fenced_form form, bool want_row, int *nparams);

/*
 * The judged form of a write statement to a default-mode table (schema has
 * no fence_column; fenced_sql_write: the same kind,
 * form, columns and parameters; a DELETE's takes one more, last: the table's
 * name as the configuration writes it). Run where the write statement wrote
 * nothing and the refusal statement found nothing to refuse it, it writes as
 * that statement does, and answers one row whatever it did: wrote (true, or
 * NULL where it wrote nothing) and the members the write statement answers,
 * then skipped: true where it wrote nothing although its guard passed, read
 * as the write read it (its row found and visible to it, the fence neither
 * stale for the resource nor revoked), so that a BEFORE trigger of the table
 * returned NULL: the table's own decision. A DELETE's skipped is never true
 * on a table whose row security applies (row_security_active): which rows its
 * policies hide is not read. Returns an owned string.
 */
char *fenced_sql_judged(const struct table_schema *schema, enum fenced_kind kind,
                        const bool *written, enum fenced_form form, bool want_row, int *nparams);

/* The resource of a key of schema's table ($1 the resource prefix, $2 the
 * key): answers one row (resource), named as every statement names it (its
 * identity: fenced_sql_key_identity). */
char *fenced_sql_resource(const struct table_schema *schema);

/*
 * The refusal statement of schema's table, run after a write statement wrote
 * nothing ($1 .. $11: enum fenced_param, then enum fenced_refusal_param).
 * Answers one row (resource, fence, revoked, found): the fence stored for the
 * resource now (NULL if none; on a table with a fence column the row's, and
 * for a PUT or POST, whose guard reads it too, the higher of it and the fence
 * kept for the resource), whether the presented fence was revoked, and
 * whether the row exists. With $9 true, a revoked fence or a higher stored one
 * leaves its one audit row (reason "revoked" or "stale_fence") in the same
 * statement, so that it commits whatever the client does.
 */
char *fenced_sql_refusal(const struct table_schema *schema);

/*
 * The read statement of schema's table: $1 key, $2 resource prefix; answers
 * one row (resource, fence, row) with row and fence NULL when absent. The row
 * holds the key and the listed columns.
 */
char *fenced_sql_read(const struct table_schema *schema);

/*
 * The statement that moves the fences of schema's table (one with a
 * fence_column) from fencegate.resource_fences into that column: each row
 * whose resource ($1 prefix || its canonical key) has a stored fence above the
 * column's gets it. Answers one row per row raised. Run once, with no gateway
 * writing to the table, when a table moves to fence_column mode. A row that a
 * BEFORE UPDATE trigger moves to another key fails it whole (SQLSTATE FGM01,
 * fencegate.key_moved): its fence would land on another resource's row.
 */
char *fenced_sql_adopt_fences(const struct table_schema *schema);

/*
 * The claim of a batch: raises the fences of n resources at once, locking them
 * in resource order (so batches never deadlock each other). $1 is the fence,
 * then for each resource i its prefix $(2+2i) and key $(3+2i), a key of
 * schemas[i]'s table. Answers (resource, fence) per distinct resource.
 */
char *fenced_sql_claim(const struct table_schema *const *schemas, size_t n);

/* A key column's type as the catalog describes it, for fenced_sql_key_refusal. */
struct key_column_type {
    const char *base_type;           /* pg_type.typname of the type, or of a domain's base type */
    bool builtin;                    /* that type is one of Postgres's own (pg_catalog) */
    bool is_enum;                    /* that type is an enum */
    bool nondeterministic_collation; /* the column's collation, or a unique index's on it,
                                        compares unequal texts equal */
};

/*
 * Resource identity. A resource is "pg:<table>/" followed by the key's text in
 * its column type, which must be one text per value as the key's equality sees
 * it, or two paths could name one row under two fences. numeric keeps its
 * scale in text (1 = 1.0, texts "1" and "1.0"): its identity drops trailing
 * zeros (trim_scale); timestamptz and bytea print as the session's TimeZone
 * and bytea_output say: theirs is UTC and hex. Only the types known to print
 * each value one way (under the DateStyle the gateway fixes) and enums may
 * name resources; any other type is refused, with why (arrays, ranges, records
 * and jsonb compare the numbers inside them by value). NULL if a key of type t
 * may be used.
 */
const char *fenced_sql_key_refusal(const struct key_column_type *t);

/* The identity of a key of type t (one fenced_sql_key_refusal allows). */
enum key_identity fenced_sql_key_identity(const struct key_column_type *t);

/*
 * The lock of a row of a table with a fence column, created or not: a
 * transaction-scoped advisory lock named by the row's resource, which a write
 * that may create the row takes first, since a row not yet there has no lock
 * of its own; where it stands in the one lock order of fenced writes is
 * store/fenced/write_order.h's.
 *
 * fenced_sql_row_lock: takes the lock of the row whose key is $2 ($1 the
 * resource prefix); answers no row.
 */
char *fenced_sql_row_lock(const struct table_schema *schema);

/* The claim of a batch's row of a table with a fence column: locks the row
 * whose key is $2 and answers its (resource, fence) if it exists; $1 is the
 * resource prefix. */
char *fenced_sql_column_claim(const struct table_schema *schema);

/* SELECT $1::<type>: checks that a value converts to type. */
char *fenced_sql_cast_check(const char *type);

/* Checks that value $2 fits column $1 of schema's table as storing it would
 * (a bit(n) of n bits, a varchar(n) of at most n characters, a numeric(p, s)
 * within p digits): reads it with the column's type and modifier, as the
 * column's own text input would, into a row that is not stored. */
char *fenced_sql_fit_check(const struct table_schema *schema);

#endif
