/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_schema.c - a writable table as the catalog describes it, checked
 * against its configuration: the table, its key and columns exist, the key has
 * a single-column unique index and a type whose text names one value, the
 * columns and the fence column can be written. Every refusal names the
 * configuration key to fix. It must not query Postgres (fenced_pg.c does).
 */
#include "store/fenced/fenced_schema.h"

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

/* The column's type as a cast names it without a modifier (owned): format_type's
 * text, but "bpchar" for char(n), which format_type prints "character", and a
 * cast to "character" is a cast to char(1) that cuts the text to one letter. */
static char *catalog_type(const json_t *col)
{
    const char *type = json_string_value(json_object_get(col, "type"));
    char *copy = strdup(strcmp(type, "character") == 0 ? "bpchar" : type);
    FG_ASSERT(copy != NULL);
    return copy;
}

/* The key column's type as its casts name it (owned): for a type the gateway
 * does not read, with its modifier (timestamp(0), bit(4)), so that the key's
 * text names the value the column stores (rounded, cut or padded as a cast
 * does) both in its resource and in the write; for the others without
 * (catalog_type), the key's text checked against the modifier here. */
static char *key_cast_type(const json_t *key, const struct key_shape *shape)
{
    if (shape->form != KEY_FORM_OTHER)
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

int fenced_schema_load(const struct table_config *t, const json_t *columns,
                       struct table_schema *schema, struct fg_error *err)
{
    schema->cfg = t;
    if (json_array_size(columns) == 0)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s': no table \"%s\" in Postgres (search_path)", t->name,
                       t->name);
    const json_t *key = catalog_column(columns, t->key);
    if (key == NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.key': table \"%s\" has no column \"%s\"", t->name,
                       t->name, t->key);
    if (!catalog_flag(key, "is_unique"))
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.key': column \"%s\" is not a primary key or "
                       "single-column unique key",
                       t->name, t->key);
    const char *base = json_string_value(json_object_get(key, "base_type"));
    const char *refusal =
        fenced_sql_key_refusal(base ? base : "", catalog_flag(key, "nondeterministic"));
    if (refusal != NULL)
        return fg_fail(err, FG_ERR_CONFIG,
                       "config key 'tables.%s.key': column \"%s\" (%s) cannot name a resource: %s",
                       t->name, t->key, base ? base : "?", refusal);
    if (check_fence_column(t, columns, err) != 0 ||
        key_shape_load(t, key, &schema->key_shape, err) != 0)
        return -1;
    schema->key_type = key_cast_type(key, &schema->key_shape);
    schema->key_numeric = fenced_sql_key_numeric(base ? base : "");
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
