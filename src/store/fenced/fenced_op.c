/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_op.c - reading the bodies of fenced Postgres writes into struct
 * fenced_op: the table and key an operation names (the key in its canonical
 * text, whatever its spelling), the columns it writes and their values as
 * text. It decides every 4xx a malformed or forbidden body gets; it must not
 * talk to Postgres or build SQL.
 */
#include "store/fenced/fenced_op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fgjson.h"
#include "util/names.h"

#define FIELD_MAX 384 /* room for "ops[99].set.<column>" in an error */

/* What a body of each kind holds: the member with the columns, and whether
 * the key comes from outside the row (the path, or "key" of a batch op). */
static const struct {
    const char *name;    /* op name in a batch */
    const char *columns; /* member holding the columns, NULL if none */
    bool key_outside;    /* the key is given apart from the row */
} kinds[FENCED_KIND_COUNT] = {
    [FENCED_PATCH] = {"patch", "set", true},
    [FENCED_PUT] = {"put", "row", true},
    [FENCED_POST] = {"post", "row", false},
    [FENCED_DELETE] = {"delete", NULL, true},
};

long fenced_table_find(const struct table_schema *schemas, size_t ntables, const char *name)
{
    for (size_t i = 0; i < ntables; i++)
        if (strcmp(schemas[i].cfg->name, name) == 0)
            return (long)i;
    return -1;
}

void fenced_op_free(struct fenced_op *op)
{
    if (op->values != NULL)
        for (size_t i = 0; i < op->ncolumns; i++)
            free(op->values[i]);
    free(op->values);
    free(op->written);
    free(op->key);
    memset(op, 0, sizeof *op);
}

void fenced_batch_free(struct fenced_batch *batch)
{
    for (size_t i = 0; i < batch->nops; i++)
        fenced_op_free(&batch->ops[i]);
    free(batch->ops);
    memset(batch, 0, sizeof *batch);
}

int fenced_value_text(const json_t *value, bool json_column, const char *field, char **out,
                      struct fg_error *err)
{
    char number[FGJSON_REAL_MAX]; /* a real's text, or an integer's (21 bytes at most) */
    *out = NULL;
    if (json_is_null(value))
        return 0;
    if (json_column || json_is_object(value) || json_is_array(value)) {
        *out = fgjson_dump(value);
        return 0;
    }
    switch (json_typeof(value)) {
    case JSON_STRING:
        if (strlen(json_string_value(value)) != json_string_length(value))
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must not contain NUL", field);
        *out = strdup(json_string_value(value));
        break;
    case JSON_INTEGER:
        snprintf(number, sizeof number, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
        *out = strdup(number);
        break;
    case JSON_REAL:
        fgjson_real_text(json_real_value(value), number);
        *out = strdup(number);
        break;
    case JSON_TRUE: *out = strdup("true"); break;
    case JSON_FALSE: *out = strdup("false"); break;
    default: FG_ASSERT(!"unexpected JSON type");
    }
    FG_ASSERT(*out != NULL);
    return 0;
}

/* Index of column name among t's writable columns, or -1. */
static long column_index(const struct table_config *t, const char *name)
{
    for (size_t i = 0; i < t->ncolumns; i++)
        if (strcmp(t->columns[i], name) == 0)
            return (long)i;
    return -1;
}

/* Reads the key text of an operation from a JSON value (a key inside a row or
 * the "key" of a batch op). */
static int key_from_json(const json_t *value, const char *field, char **out, struct fg_error *err)
{
    if (!json_is_string(value) && !json_is_integer(value))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be a string or an integer",
                       field);
    if (fenced_value_text(value, false, field, out, err) != 0)
        return -1;
    if (!name_is_valid_key(*out, strlen(*out)))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field '%s' must be 1 to %d bytes of printable UTF-8", field,
                       SEGMENT_MAX_LEN);
    return 0;
}

/* Reads the columns object of op (member `member` of body); where prefixes the
 * field names in errors ("" or "ops[3]."). */
static int read_columns(const struct table_schema *s, const json_t *body, const char *member,
                        const char *where, struct fenced_op *op, struct fg_error *err)
{
    const struct table_config *t = s->cfg;
    char field[FIELD_MAX];
    snprintf(field, sizeof field, "%s%s", where, member);
    const json_t *columns = json_object_get(body, member);
    if (!json_is_object(columns))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be an object of columns", field);
    if (op->kind == FENCED_PATCH && json_object_size(columns) == 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must name at least one column",
                       field);
    const char *name;
    const json_t *value;
    json_object_foreach((json_t *)columns, name, value)
    {
        snprintf(field, sizeof field, "%s%s.%s", where, member, name);
        if (strcmp(name, t->key) == 0) {
            if (op->kind == FENCED_PATCH)
                return fg_fail(err, FG_ERR_INVALID_FIELD,
                               "field '%s': the key column cannot be changed", field);
            char *text = NULL, *key = NULL;
            int rc = key_from_json(value, field, &text, err);
            if (rc == 0)
                rc = key_canonical(&s->key_shape, text, field, &key, err);
            free(text);
            if (rc != 0)
                return -1;
            bool differs = op->key != NULL && strcmp(op->key, key) != 0;
            if (op->key == NULL)
                op->key = key;
            else
                free(key);
            if (differs)
                return fg_fail(err, FG_ERR_INVALID_FIELD,
                               "field '%s' must match the key of the row being written", field);
            continue;
        }
        long i = column_index(t, name);
        if (i < 0)
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "field '%s': column is not writable in table '%s'", field, t->name);
        if (fenced_value_text(value, s->column_json[i], field, &op->values[i], err) != 0)
            return -1;
        op->written[i] = true;
    }
    if (op->key == NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s%s.%s' (the key) is required", where,
                       member, t->key);
    return 0;
}

/* Fills op from body (or a batch op object), whose key is key (NULL: inside the
 * row); the key is kept in its canonical text (key_text.h). */
static int parse_op(const struct table_schema *schemas, size_t table, enum fenced_kind kind,
                    const char *key, const json_t *body, const char *where, struct fenced_op *op,
                    struct fg_error *err)
{
    const struct table_schema *s = &schemas[table];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->table = table;
    op->ncolumns = s->cfg->ncolumns;
    op->written = calloc(op->ncolumns + 1, sizeof *op->written);
    op->values = calloc(op->ncolumns + 1, sizeof *op->values);
    FG_ASSERT(op->written != NULL && op->values != NULL);
    char field[FIELD_MAX];
    snprintf(field, sizeof field, "%s%s", where, where[0] != '\0' ? "key" : s->cfg->key);
    if (key != NULL && key_canonical(&s->key_shape, key, field, &op->key, err) != 0)
        return -1;
    if (s->key_generated && !fenced_kind_needs_row(kind)) { /* the row cannot be named */
        snprintf(field, sizeof field, "%s%s", where, kinds[kind].columns);
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field '%s': table '%s' makes its key column \"%s\" itself (an identity or "
                       "generated column), so no PUT or POST can write a row of it; PATCH and "
                       "DELETE can",
                       field, s->cfg->name, s->cfg->key);
    }
    if (kinds[kind].columns == NULL)
        return 0;
    return read_columns(s, body, kinds[kind].columns, where, op, err);
}

int fenced_op_parse(const struct table_schema *schemas, size_t table, enum fenced_kind kind,
                    const char *path_key, const json_t *body, struct fenced_op *op,
                    struct fg_error *err)
{
    FG_ASSERT(kind < FENCED_KIND_COUNT);
    FG_ASSERT((path_key != NULL) == kinds[kind].key_outside);
    memset(op, 0, sizeof *op);
    if (kinds[kind].columns != NULL) {
        const char *allowed[] = {kinds[kind].columns, NULL};
        if (fgjson_only(body, allowed, "", err) != 0)
            return -1;
    }
    return parse_op(schemas, table, kind, path_key, body, "", op, err);
}

/* The kind named by a batch op's "op" member, or FENCED_KIND_COUNT. */
static enum fenced_kind kind_named(const char *name)
{
    for (int k = 0; k < FENCED_KIND_COUNT; k++)
        if (strcmp(kinds[k].name, name) == 0)
            return (enum fenced_kind)k;
    return FENCED_KIND_COUNT;
}

static int parse_batch_op(const struct table_schema *schemas, size_t ntables, const json_t *item,
                          size_t index, struct fenced_op *op, struct fg_error *err)
{
    static const char *const allowed[] = {"op", "table", "key", "set", "row", NULL};
    char where[32];
    snprintf(where, sizeof where, "ops[%zu].", index);
    if (!json_is_object(item))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'ops[%zu]' must be an object", index);
    if (fgjson_only(item, allowed, where, err) != 0)
        return -1;
    const char *op_name = json_string_value(json_object_get(item, "op"));
    enum fenced_kind kind = op_name ? kind_named(op_name) : FENCED_KIND_COUNT;
    if (kind == FENCED_KIND_COUNT)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field '%sop' must be one of \"patch\", \"put\", \"post\", \"delete\"",
                       where);
    const char *table_name = json_string_value(json_object_get(item, "table"));
    if (table_name == NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%stable' must be a string", where);
    long table = fenced_table_find(schemas, ntables, table_name);
    if (table < 0)
        return fg_fail(err, FG_ERR_NOT_FOUND, "field '%stable': no writable table of that name",
                       where);
    static const char *const column_members[] = {"set", "row"};
    for (size_t i = 0; i < 2; i++) {
        const char *member = column_members[i];
        bool own = kinds[kind].columns != NULL && strcmp(kinds[kind].columns, member) == 0;
        if (!own && json_object_get(item, member) != NULL)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s%s' does not belong to a \"%s\"",
                           where, member, op_name);
    }
    const json_t *key_value = json_object_get(item, "key");
    char *key = NULL;
    char field[FIELD_MAX];
    snprintf(field, sizeof field, "%skey", where);
    if (key_value == NULL && kinds[kind].key_outside)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' is required", field);
    if (key_value != NULL && key_from_json(key_value, field, &key, err) != 0) {
        free(key);
        return -1;
    }
    int rc = parse_op(schemas, (size_t)table, kind, key, item, where, op, err);
    free(key);
    return rc;
}

int fenced_batch_parse(const struct table_schema *schemas, size_t ntables, const json_t *body,
                       struct fenced_batch *batch, struct fg_error *err)
{
    memset(batch, 0, sizeof *batch);
    const json_t *ops = json_object_get(body, "ops");
    size_t n = json_array_size(ops);
    batch->ops = calloc(n, sizeof *batch->ops);
    FG_ASSERT(batch->ops != NULL);
    for (size_t i = 0; i < n; i++) {
        batch->nops++;
        if (parse_batch_op(schemas, ntables, json_array_get(ops, i), i, &batch->ops[i], err) != 0)
            return -1;
    }
    return 0;
}
