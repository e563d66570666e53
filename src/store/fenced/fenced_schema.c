/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_schema.c - a writable table as the catalog describes it, checked
 * against its configuration: the table, its key and columns exist, the key has
 * a single-column unique index and a type whose text names one value, no
 * table inherits it and it is no partition of another configured table, the
 * columns and the fence column are neither generated nor identity ALWAYS
 * columns (privileges are Postgres's to check at each write). Every refusal names the
 * configuration key to fix. It must not query Postgres (fenced_pg.c does).
 */
#include "store/fenced/fenced_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The catalog row of column name, or NULL. */
static const json_t *catalog_column(const json_t *columns, const char *name)
{
    size_t i;
    const json_t *col;
    json_array_foreach(columns, i, col)
    {
        if (strcmp(json_string_value(json_object_get(col, "name")), name) == 0)
            return col;
    }
    return NULL;
}

/* A boolean of a catalog row (psql's "t" / "f"). */
static bool catalog_flag(const json_t *col, const char *flag)
{
    const char *v = json_string_value(json_object_get(col, flag));
    return v != NULL && strcmp(v, "t") == 0;
}

/* Types whose explicit cast to a length fits the value to it (cuts or pads it)
 * where storing it in a column of that length refuses it, by the name
 * format_type prints without a modifier, and how a cast names the type with no
 * length at all: a bare "character" or "bit" means a length of one. */
static const struct {
    const char *type; /* format_type(oid, NULL) */
    const char *cast; /* the same type of any length */
} length_types[] = {
    {"character", "bpchar"},
    {"character varying", "character varying"},
    {"bit", "\"bit\""},
    {"bit varying", "bit varying"},
};

/* The entry of length_types for type, an array of such a type included, or -1. */
static int length_type(const char *type)
{
    size_t n = strcspn(type, "[");
    for (size_t i = 0; i < sizeof length_types / sizeof length_types[0]; i++)
        if (strlen(length_types[i].type) == n && strncmp(type, length_types[i].type, n) == 0)
            return (int)i;
    return -1;
}

/* The column's type as a cast names it without a modifier (owned): format_type's
 * text, but a length type (length_types) of any length, so that a value of
 * another length reaches the column whole and the column's own assignment
 * refuses it (a cast to "bit" would cut "1010" to "1" first, one to
 * "character" cut "abc" to "a"); arrays of them alike ("bit[]"). */
static char *catalog_type(const json_t *col)
{
    const char *type = json_string_value(json_object_get(col, "type"));
    int i = length_type(type);
    char *copy = NULL;
    if (i < 0)
        copy = strdup(type);
    else
        FG_ASSERT(
            asprintf(&copy, "%s%s", length_types[i].cast, type + strlen(length_types[i].type)) > 0);
    FG_ASSERT(copy != NULL);
    return copy;
}

/* The key column's type as its casts name it (owned): for a type the gateway
 * does not read, with its modifier (timestamp(0)), so that the key's text
 * names the value the column stores (rounded as a cast does) both in its
 * resource and in the write; for the others, and for a length type
 * (length_types) whose cast with its length would pad or cut the key into
 * another row's (bit(4): "10" into "1000"), without (catalog_type): the key's
 * text checked against the modifier here, or a key of another length naming
 * no row, and refused by the column when written. */
static char *key_cast_type(const json_t *key, const struct key_shape *shape)
{
    if (shape->form != KEY_FORM_OTHER ||
        length_type(json_string_value(json_object_get(key, "type"))) >= 0)
        return catalog_type(key);
    char *copy = strdup(json_string_value(json_object_get(key, "full_type")));
    FG_ASSERT(copy != NULL);
    return copy;
}

/* How the gateway reads the key's text; a bound table's key must be of a type
 * it reads, or a spelling it passes as given could name a row under another
 * row's lock. */
static int key_shape_load(const struct table_config *t, const json_t *key, struct key_shape *shape,
                          struct fg_error *err)
{
    const char *type = json_string_value(json_object_get(key, "type"));
    const char *base = json_string_value(json_object_get(key, "base_type"));
    const char *typmod = json_string_value(json_object_get(key, "typmod"));
    *shape = key_shape_of(type ? type : "", base ? base : "", typmod ? atoi(typmod) : -1);
    if (shape->form == KEY_FORM_OTHER && t->guard.template != NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.%s': the rows of a table bound to a lock or "
                       "semaphore need a key of type " KEY_FORMS_READ " (column \"%s\" is %s)",
                       t->name, t->guard.semaphore ? "semaphore" : "lock", t->key,
                       type ? type : "?");
    return 0;
}

/* A fence column exists, is bigint and is an ordinary (writable) column. */
static int check_fence_column(const struct table_config *t, const json_t *columns,
                              struct fg_error *err)
{
    if (t->fence_column == NULL)
        return 0;
    const json_t *col = catalog_column(columns, t->fence_column);
    if (col == NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.fence_column': table \"%s\" has no column \"%s\"",
                       t->name, t->name, t->fence_column);
    const char *type = json_string_value(json_object_get(col, "type"));
    if (type == NULL || strcmp(type, "bigint") != 0 || catalog_flag(col, "read_only"))
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.fence_column': column \"%s\" must be a writable "
                       "bigint column (it is %s)",
                       t->name, t->fence_column, type ? type : "unknown");
    return 0;
}

/* A table's rows are one set under one name: no table inherits it (a query of
 * it answers their rows too, which its key does not single out, while the
 * gateway reads and writes its own rows alone: fenced_sql.h), and it is no
 * partition of another configured table (one row would be two resources, with
 * a fence and a binding each). Checks the first catalog row, which names both
 * for the whole table. */
static int check_rows_apart(const struct table_config *t, const json_t *columns,
                            struct fg_error *err)
{
    const json_t *row = json_array_get(columns, 0);
    const char *heirs = json_string_value(json_object_get(row, "inherited_by"));
    const char *parent = json_string_value(json_object_get(row, "partition_of"));
    if (heirs != NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s': tables inherit from table \"%s\" (%s), and its "
                       "key does not single out a row among theirs",
                       t->name, t->name, heirs);
    if (parent != NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s': table \"%s\" is a partition of \"%s\", also "
                       "under tables: each of its rows would be two resources; list one of them",
                       t->name, t->name, parent);
    return 0;
}

int fenced_schema_missing(const struct table_config *t, struct fg_error *err)
{
    return fg_fail(err, FG_ERR_CONFIG,
                   "config key 'tables.%s': no table \"%s\" in Postgres (search_path, but for "
                   "the gateway's own schema fencegate)",
                   t->name, t->name);
}

int fenced_schema_load(const struct table_config *t, const json_t *columns,
                       struct table_schema *schema, struct fg_error *err)
{
    schema->cfg = t;
    if (json_array_size(columns) == 0)
        return fenced_schema_missing(t, err);
    if (check_rows_apart(t, columns, err) != 0)
        return -1;
    schema->partitioned = catalog_flag(json_array_get(columns, 0), "partitioned");
    const char *in = json_string_value(json_object_get(json_array_get(columns, 0), "table_schema"));
    if (in != NULL)
        schema->table_schema = strdup(in);
    FG_ASSERT(in == NULL || schema->table_schema != NULL);
    const json_t *key = catalog_column(columns, t->key);
    if (key == NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.key': table \"%s\" has no column \"%s\"", t->name,
                       t->name, t->key);
    schema->key_generated = catalog_flag(key, "read_only");
    if (!catalog_flag(key, "is_unique") && catalog_flag(key, "unique_deferrable"))
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.key': the unique key of column \"%s\" is DEFERRABLE, "
                       "which no INSERT ... ON CONFLICT (a PUT's, a POST's) can use: make it NOT "
                       "DEFERRABLE",
                       t->name, t->key);
    if (!catalog_flag(key, "is_unique"))
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.key': column \"%s\" is not a primary key or "
                       "single-column unique key",
                       t->name, t->key);
    schema->key_generated = catalog_flag(key, "read_only");
    const char *base = json_string_value(json_object_get(key, "base_type"));
    const struct key_column_type key_type = {base ? base : "", catalog_flag(key, "base_builtin"),
                                             catalog_flag(key, "base_enum"),
                                             catalog_flag(key, "nondeterministic")};
    const char *refusal = fenced_sql_key_refusal(&key_type);
    if (refusal != NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.key': column \"%s\" (%s) cannot name a resource: %s",
                       t->name, t->key, base ? base : "?", refusal);
    if (check_fence_column(t, columns, err) != 0 ||
        key_shape_load(t, key, &schema->key_shape, err) != 0)
        return -1;
    schema->key_type = key_cast_type(key, &schema->key_shape);
    schema->key_identity = fenced_sql_key_identity(&key_type);
    schema->column_types = calloc(t->ncolumns + 1, sizeof *schema->column_types);
    schema->column_json = calloc(t->ncolumns + 1, sizeof *schema->column_json);
    schema->row_kinds = calloc(t->ncolumns + 1, sizeof *schema->row_kinds);
    FG_ASSERT(schema->column_types != NULL && schema->column_json != NULL &&
              schema->row_kinds != NULL);
    schema->row_kinds[0] = row_json_kind_of(json_string_value(json_object_get(key, "json_kind")));
    for (size_t i = 0; i < t->ncolumns; i++) {
        const json_t *col = catalog_column(columns, t->columns[i]);
        if (col == NULL)
            return fg_fail(err, FG_ERR_CONFIG,
                           "config key 'tables.%s.columns': table \"%s\" has no column \"%s\"",
                           t->name, t->name, t->columns[i]);
        if (strcmp(t->columns[i], t->key) == 0 || catalog_flag(col, "read_only"))
            return fg_fail(err, FG_ERR_CONFIG,
                           "config key 'tables.%s.columns': column \"%s\" cannot be written "
                           "(the key, a generated or an identity ALWAYS column)",
                           t->name, t->columns[i]);
        schema->column_types[i] = catalog_type(col);
        schema->column_json[i] = catalog_flag(col, "is_json");
        schema->row_kinds[i + 1] =
            row_json_kind_of(json_string_value(json_object_get(col, "json_kind")));
    }
    return 0;
}
