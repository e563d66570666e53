/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_schema.c - a writable table's catalog rows checked against its
 * configuration: the schema it gives, and each refusal naming the key to fix.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/fenced_schema.h"

/* Catalog rows of a table (id text key, note text, meta jsonb, lock_fence bigint, gen generated).
 */
static const char catalog[] =
    "[{\"name\": \"id\", \"type\": \"text\", \"is_json\": \"f\", \"read_only\": \"f\","
    "  \"is_unique\": \"t\", \"base_type\": \"text\", \"nondeterministic\": \"f\","
    "  \"json_kind\": \"string\"},"
    " {\"name\": \"note\", \"type\": \"text\", \"is_json\": \"f\", \"read_only\": \"f\","
    "  \"is_unique\": \"f\", \"base_type\": \"text\", \"nondeterministic\": \"f\","
    "  \"json_kind\": \"other\"},"
    " {\"name\": \"meta\", \"type\": \"jsonb\", \"is_json\": \"t\", \"read_only\": \"f\","
    "  \"is_unique\": \"f\", \"base_type\": \"jsonb\", \"nondeterministic\": \"f\","
    "  \"json_kind\": \"json\"},"
    " {\"name\": \"lock_fence\", \"type\": \"bigint\", \"is_json\": \"f\", \"read_only\": \"f\","
    "  \"is_unique\": \"f\", \"base_type\": \"int8\", \"nondeterministic\": \"f\"},"
    " {\"name\": \"gen\", \"type\": \"bigint\", \"is_json\": \"f\", \"read_only\": \"t\","
    "  \"is_unique\": \"f\", \"base_type\": \"int8\", \"nondeterministic\": \"f\"}]";

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
    assert_false(s.key_numeric);
    assert_string_equal(s.column_types[0], "text");
    assert_string_equal(s.column_types[1], "jsonb");
    assert_false(s.column_json[0]);
    assert_true(s.column_json[1]);
    /* how the answered row writes the key, then each column */
    assert_int_equal(s.row_kinds[0], ROW_JSON_STRING);
    assert_int_equal(s.row_kinds[1], ROW_JSON_OTHER);
    assert_int_equal(s.row_kinds[2], ROW_JSON_JSON);
    table_schema_free(&s);
    t.fence_column = "lock_fence";
    assert_int_equal(load(&t, NULL, &s, &err), 0);
    table_schema_free(&s);
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
            " \"base_type\": \"float8\", \"nondeterministic\": \"f\"}]",
            "cannot name a resource");
    refused(&t,
            "[{\"name\": \"k\", \"type\": \"text\", \"is_unique\": \"t\","
            " \"base_type\": \"text\", \"nondeterministic\": \"t\"}]",
            "cannot name a resource");
    struct table_schema s;
    struct fg_error err = {0};
    assert_int_equal(load(&t,
                          "[{\"name\": \"k\", \"type\": \"numeric\","
                          " \"full_type\": \"numeric(12,2)\", \"typmod\": \"786438\","
                          " \"is_unique\": \"t\", \"base_type\": \"numeric\","
                          " \"nondeterministic\": \"f\"}]",
                          &s, &err),
                     0);
    assert_true(s.key_numeric && s.key_shape.scaled && s.key_shape.scale == 2);
    assert_string_equal(s.key_type, "numeric");
    table_schema_free(&s);
    /* a type the gateway does not read is cast with its modifier, which rounds
     * as the column does; one it reads without (its text is checked instead) */
    assert_int_equal(load(&t,
                          "[{\"name\": \"k\", \"type\": \"timestamp without time zone\","
                          " \"full_type\": \"timestamp(0) without time zone\","
                          " \"typmod\": \"0\", \"is_unique\": \"t\","
                          " \"base_type\": \"timestamp\", \"nondeterministic\": \"f\"}]",
                          &s, &err),
                     0);
    assert_string_equal(s.key_type, "timestamp(0) without time zone");
    table_schema_free(&s);
    assert_int_equal(load(&t,
                          "[{\"name\": \"k\", \"type\": \"character varying\","
                          " \"full_type\": \"character varying(5)\","
                          " \"typmod\": \"9\", \"is_unique\": \"t\","
                          " \"base_type\": \"varchar\", \"nondeterministic\": \"f\"}]",
                          &s, &err),
                     0);
    assert_string_equal(s.key_type, "character varying");
    assert_int_equal(s.key_shape.max_chars, 5);
    table_schema_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_good_table),
        cmocka_unit_test(refusals),
        cmocka_unit_test(key_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
