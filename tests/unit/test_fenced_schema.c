/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_schema.c - a writable table's catalog rows checked against its
 * configuration: the schema it gives, and each refusal naming the key to fix.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/fenced_schema.h"

/* Catalog rows of a table (id text key, note text, meta jsonb, lock_fence bigint, gen generated).
 */
static const char catalog[] =
    "[{\"name\": \"id\", \"type\": \"text\", \"is_json\": \"f\", \"read_only\": \"f\","
    "  \"is_unique\": \"t\", \"base_type\": \"text\", \"base_builtin\": \"t\", "
    "\"nondeterministic\": \"f\","
    "  \"json_kind\": \"string\"},"
    " {\"name\": \"note\", \"type\": \"text\", \"is_json\": \"f\", \"read_only\": \"f\","
    "  \"is_unique\": \"f\", \"base_type\": \"text\", \"base_builtin\": \"t\", "
    "\"nondeterministic\": \"f\","
    "  \"json_kind\": \"other\"},"
    " {\"name\": \"meta\", \"type\": \"jsonb\", \"is_json\": \"t\", \"read_only\": \"f\","
    "  \"is_unique\": \"f\", \"base_type\": \"jsonb\", \"base_builtin\": \"t\", "
    "\"nondeterministic\": \"f\","
    "  \"json_kind\": \"json\"},"
    " {\"name\": \"lock_fence\", \"type\": \"bigint\", \"is_json\": \"f\", \"read_only\": \"f\","
    "  \"is_unique\": \"f\", \"base_type\": \"int8\", \"base_builtin\": \"t\", "
    "\"nondeterministic\": \"f\"},"
    " {\"name\": \"gen\", \"type\": \"bigint\", \"is_json\": \"f\", \"read_only\": \"t\","
    "  \"is_unique\": \"f\", \"base_type\": \"int8\", \"base_builtin\": \"t\", "
    "\"nondeterministic\": \"f\"}]";

static char *columns[] = {"note", "meta"};

/* Loads t against the catalog above (or rows, if not NULL); returns the status. */
static int load(struct table_config *t, const char *rows, struct table_schema *s,
                struct fg_error *err)
{
    json_t *cat = json_loads(rows ? rows : catalog, 0, NULL);
    assert_non_null(cat);
    memset(s, 0, sizeof *s);
    int rc = fenced_schema_load(t, cat, s, err);
    json_decref(cat);
    return rc;
}

/* Expects t to be refused with FG_ERR_CONFIG naming `names` in the message. */
static void refused(struct table_config *t, const char *rows, const char *names)
{
    struct table_schema s;
    struct fg_error err = {0};
    assert_int_equal(load(t, rows, &s, &err), -1);
    assert_int_equal(err.code, FG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, names));
    table_schema_free(&s);
}

static void a_good_table(void **state)
{
    (void)state;
    struct table_config t = {.name = "inv", .key = "id", .columns = columns, .ncolumns = 2};
    struct table_schema s;
    struct fg_error err = {0};
    assert_int_equal(load(&t, NULL, &s, &err), 0);
    assert_ptr_equal(s.cfg, &t);
    assert_string_equal(s.key_type, "text");
    assert_int_equal(s.key_identity, KEY_IDENTITY_TEXT);
    assert_string_equal(s.column_types[0], "text");
    assert_string_equal(s.column_types[1], "jsonb");
    assert_false(s.column_json[0]);
    assert_true(s.column_json[1]);
    /* how the answered row writes the key, then each column */
    assert_int_equal(s.row_kinds[0], ROW_JSON_STRING);
    assert_int_equal(s.row_kinds[1], ROW_JSON_OTHER);
    assert_int_equal(s.row_kinds[2], ROW_JSON_JSON);
    assert_false(s.partitioned); /* its statements name it ONLY */
    table_schema_free(&s);
    t.fence_column = "lock_fence";
    assert_int_equal(load(&t, NULL, &s, &err), 0);
    table_schema_free(&s);
}

/* A partitioned table, which its statements name without ONLY (its rows are
 * its partitions'): the first catalog row says so for the whole table. */
static void a_partitioned_table(void **state)
{
    (void)state;
    struct table_config t = {.name = "inv", .key = "id", .columns = columns, .ncolumns = 2};
    json_t *cat = json_loads(catalog, 0, NULL);
    assert_non_null(cat);
    json_object_set_new(json_array_get(cat, 0), "partitioned", json_string("t"));
    struct table_schema s = {0};
    struct fg_error err = {0};
    assert_int_equal(fenced_schema_load(&t, cat, &s, &err), 0);
    assert_true(s.partitioned);
    table_schema_free(&s);
    json_decref(cat);
}

static void refusals(void **state)
{
    (void)state;
    struct table_config t = {.name = "inv", .key = "id", .columns = columns, .ncolumns = 2};
    refused(&t, "[]", "config key 'tables.inv': no table");
    t.key = "nope";
    refused(&t, NULL, "config key 'tables.inv.key'");
    t.key = "note"; /* not unique */
    refused(&t, NULL, "not a primary key or single-column unique key");
    t.key = "id";
    /* unique, but only under a DEFERRABLE constraint, which no ON CONFLICT can use */
    json_t *rows = json_loads(catalog, 0, NULL);
    assert_non_null(rows);
    json_object_set_new(json_array_get(rows, 0), "is_unique", json_string("f"));
    json_object_set_new(json_array_get(rows, 0), "unique_deferrable", json_string("t"));
    char *deferred = json_dumps(rows, 0);
    refused(&t, deferred, "is DEFERRABLE, which no INSERT ... ON CONFLICT");
    free(deferred);
    json_decref(rows);
    char *bad_columns[] = {"note", "missing"};
    t.columns = bad_columns;
    refused(&t, NULL, "has no column \"missing\"");
    char *generated[] = {"gen"};
    t.columns = generated;
    t.ncolumns = 1;
    refused(&t, NULL, "column \"gen\" cannot be written");
    char *key_again[] = {"id"};
    t.columns = key_again;
    refused(&t, NULL, "column \"id\" cannot be written");
    t.columns = columns;
    t.fence_column = "note";
    refused(&t, NULL,
            "config key 'tables.inv.fence_column': column \"note\" must be a writable bigint");
    t.fence_column = "gen";
    refused(&t, NULL, "must be a writable bigint column");
    t.fence_column = "absent";
    refused(&t, NULL, "has no column \"absent\"");
}

static void key_types(void **state)
{
    (void)state;
    struct table_config t = {.name = "n", .key = "k"};
    refused(&t,
            "[{\"name\": \"k\", \"type\": \"double precision\", \"is_unique\": \"t\","
            " \"base_type\": \"float8\", \"base_builtin\": \"t\", \"nondeterministic\": \"f\"}]",
            "cannot name a resource");
    refused(&t,
            "[{\"name\": \"k\", \"type\": \"jsonb\", \"is_unique\": \"t\","
            " \"base_type\": \"jsonb\", \"base_builtin\": \"t\", \"nondeterministic\": \"f\"}]",
            "cannot name a resource");
    refused(&t,
            "[{\"name\": \"k\", \"type\": \"public.int4\", \"is_unique\": \"t\","
            " \"base_type\": \"int4\", \"base_builtin\": \"f\", \"nondeterministic\": \"f\"}]",
            "cannot name a resource");
    refused(&t,
            "[{\"name\": \"k\", \"type\": \"text\", \"is_unique\": \"t\","
            " \"base_type\": \"text\", \"base_builtin\": \"t\", \"nondeterministic\": \"t\"}]",
            "cannot name a resource");
    struct table_schema s;
    struct fg_error err = {0};
    assert_int_equal(
        load(&t,
             "[{\"name\": \"k\", \"type\": \"numeric\","
             " \"full_type\": \"numeric(12,2)\", \"typmod\": \"786438\","
             " \"is_unique\": \"t\", \"base_type\": \"numeric\", \"base_builtin\": \"t\","
             " \"nondeterministic\": \"f\"}]",
             &s, &err),
        0);
    assert_true(s.key_identity == KEY_IDENTITY_NUMERIC && s.key_shape.scaled &&
                s.key_shape.scale == 2);
    assert_string_equal(s.key_type, "numeric");
    table_schema_free(&s);
    /* a type the gateway does not read is cast with its modifier, which rounds
     * as the column does; one it reads without (its text is checked instead) */
    assert_int_equal(
        load(
            &t,
            "[{\"name\": \"k\", \"type\": \"timestamp without time zone\","
            " \"full_type\": \"timestamp(0) without time zone\","
            " \"typmod\": \"0\", \"is_unique\": \"t\","
            " \"base_type\": \"timestamp\", \"base_builtin\": \"t\", \"nondeterministic\": \"f\"}]",
            &s, &err),
        0);
    assert_string_equal(s.key_type, "timestamp(0) without time zone");
    table_schema_free(&s);
    assert_int_equal(
        load(&t,
             "[{\"name\": \"k\", \"type\": \"character varying\","
             " \"full_type\": \"character varying(5)\","
             " \"typmod\": \"9\", \"is_unique\": \"t\","
             " \"base_type\": \"varchar\", \"base_builtin\": \"t\", \"nondeterministic\": \"f\"}]",
             &s, &err),
        0);
    assert_string_equal(s.key_type, "character varying");
    assert_int_equal(s.key_shape.max_chars, 5);
    table_schema_free(&s);
}

/* The catalog row of a column named name, of type type (format_type without a
 * modifier) and full_type (with it), as a one-key table's key or column. */
#define TYPED_ROW(name, type, full, base, unique)                                                  \
    "{\"name\": \"" name "\", \"type\": \"" type "\", \"full_type\": \"" full                      \
    "\", \"typmod\": \"-1\", \"is_unique\": \"" unique "\", \"base_type\": \"" base                \
    "\", \"base_builtin\": \"t\", \"nondeterministic\": \"f\", \"read_only\": \"f\", "             \
    "\"is_json\": \"f\","                                                                          \
    " \"json_kind\": \"string\"}"

/* Columns are cast to their type of any length: a bare bit or character is a
 * length of one, and a cast to it would cut the value before the column checks
 * its length ("1010" into bit(4) as "1"); arrays of them alike. Other types
 * keep format_type's text. */
static void column_cast_types(void **state)
{
    (void)state;
    char *typed[] = {"b4", "b1", "vb", "ch", "vc", "b4s", "chs", "qc", "ts"};
    struct table_config t = {.name = "x", .key = "id", .columns = typed, .ncolumns = 9};
    const char *rows =
        "[" TYPED_ROW("id", "integer", "integer", "int4", "t") "," TYPED_ROW("b4", "bit", "bit(4)", "bit", "f") "," TYPED_ROW("b1", "bit", "bit(1)", "bit", "f") "," TYPED_ROW(
            "vb", "bit varying", "bit varying(3)",
            "varbit",
            "f") "," TYPED_ROW("ch", "character", "character(3)", "bpchar",
                               "f") "," TYPED_ROW("vc", "character varying", "character varying(3)",
                                                  "varchar",
                                                  "f") "," TYPED_ROW("b4s", "bit[]", "bit(4)[]",
                                                                     "_bit",
                                                                     "f") "," TYPED_ROW("chs",
                                                                                        "character["
                                                                                        "]",
                                                                                        "character("
                                                                                        "3)[]",
                                                                                        "_bpchar",
                                                                                        "f") "," TYPED_ROW("qc",
                                                                                                           "\\\"char\\\"",
                                                                                                           "\\\"char\\\"",
                                                                                                           "char",
                                                                                                           "f") "," TYPED_ROW("ts",
                                                                                                                              "timestamp without time zone",
                                                                                                                              "timestamp(0) without time zone",
                                                                                                                              "timestamp",
                                                                                                                              "f") "]";
    struct table_schema s;
    struct fg_error err = {0};
    assert_int_equal(load(&t, rows, &s, &err), 0);
    assert_string_equal(s.column_types[0], "\"bit\"");
    assert_string_equal(s.column_types[1], "\"bit\"");
    assert_string_equal(s.column_types[2], "bit varying");
    assert_string_equal(s.column_types[3], "bpchar");
    assert_string_equal(s.column_types[4], "character varying");
    assert_string_equal(s.column_types[5], "\"bit\"[]");
    assert_string_equal(s.column_types[6], "bpchar[]");
    assert_string_equal(s.column_types[7], "\"char\""); /* one byte whatever the cast */
    assert_string_equal(s.column_types[8], "timestamp without time zone");
    table_schema_free(&s);
}

/* A key of a length type the gateway does not read is cast without its length:
 * with it, a cast pads or cuts the key into another row's (bit(4): "10" is
 * "1000", bit varying(3): "1011" is "101"), where storing it refuses it. */
static void length_type_keys(void **state)
{
    (void)state;
    struct table_config t = {.name = "x", .key = "id"};
    struct table_schema s;
    struct fg_error err = {0};
    assert_int_equal(load(&t, "[" TYPED_ROW("id", "bit", "bit(4)", "bit", "t") "]", &s, &err), 0);
    assert_int_equal(s.key_shape.form, KEY_FORM_OTHER);
    assert_string_equal(s.key_type, "\"bit\"");
    table_schema_free(&s);
    assert_int_equal(
        load(&t, "[" TYPED_ROW("id", "bit varying", "bit varying(3)", "varbit", "t") "]", &s, &err),
        0);
    assert_string_equal(s.key_type, "bit varying");
    table_schema_free(&s);
    /* arrays compare their elements as their type does, and print them as written */
    refused(&t, "[" TYPED_ROW("id", "character[]", "character(2)[]", "_bpchar", "t") "]",
            "cannot name a resource: equal values of the type may print differently");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_good_table),      cmocka_unit_test(a_partitioned_table),
        cmocka_unit_test(refusals),          cmocka_unit_test(key_types),
        cmocka_unit_test(column_cast_types), cmocka_unit_test(length_type_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
