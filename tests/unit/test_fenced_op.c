/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_op.c - reading fenced-write bodies (columns allowed, keys, batch
 * operations) and value texts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/fenced_op.h"
#include "store/fenced/fenced_sql.h"

#include "fenced_fixture.h"

static json_t *parse(const char *text)
{
    json_t *v = json_loads(text, JSON_ALLOW_NUL, NULL);
    assert_non_null(v);
    return v;
}

/* Parses a single write; returns its status (0, or the error code). */
static int single(enum fenced_kind kind, const char *key, const char *body, struct fenced_op *op,
                  struct fg_error *err)
{
    json_t *json = parse(body);
    int rc = fenced_op_parse(schemas, 0, kind, key, json, op, err);
    json_decref(json);
    return rc == 0 ? 0 : (int)err->code;
}

static void patch_reads_columns_as_text(void **state)
{
    (void)state;
    struct fenced_op op;
    struct fg_error err = {0};
    assert_int_equal(single(FENCED_PATCH, "42",
                            "{\"set\": {\"amount_cents\": 12, \"note\": \"hi\", \"customer\": null,"
                            " \"meta\": \"x\"}}",
                            &op, &err),
                     0);
    assert_string_equal(op.key, "42");
    assert_true(op.written[0] && op.written[1] && op.written[2] && op.written[3]);
    assert_null(op.values[0]);
    assert_string_equal(op.values[1], "12");
    assert_string_equal(op.values[2], "hi");
    assert_string_equal(op.values[3], "\"x\""); /* json column: JSON text */
    fenced_op_free(&op);
}

static void refuses_unknown_and_key_columns(void **state)
{
    (void)state;
    struct fenced_op op;
    struct fg_error err = {0};
    assert_int_equal(single(FENCED_PATCH, "1", "{\"set\": {\"updated_at\": 1}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    assert_non_null(strstr(err.msg, "set.updated_at"));
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_PATCH, "1", "{\"set\": {\"id\": \"2\"}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_PATCH, "1", "{\"set\": {}}", &op, &err), FG_ERR_INVALID_FIELD);
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_PATCH, "1", "{\"row\": {\"note\": 1}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_PATCH, "1", "{\"set\": {\"note\": \"a\\u0000b\"}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    fenced_op_free(&op);
}

static void put_and_post_keys(void **state)
{
    (void)state;
    struct fenced_op op;
    struct fg_error err = {0};
    assert_int_equal(single(FENCED_PUT, "7", "{\"row\": {\"id\": 7, \"note\": \"n\"}}", &op, &err),
                     0);
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_PUT, "7", "{\"row\": {\"id\": \"8\"}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_POST, NULL, "{\"row\": {\"id\": \"9\"}}", &op, &err), 0);
    assert_string_equal(op.key, "9");
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_POST, NULL, "{\"row\": {\"note\": \"x\"}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_POST, NULL, "{\"row\": {\"id\": null}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    fenced_op_free(&op);
}

/* A table that makes its key itself (an identity ALWAYS, a generated column):
 * no PUT or POST, alone or in a batch, names a row of it; PATCH and DELETE do. */
static void a_key_the_table_makes(void **state)
{
    (void)state;
    struct fenced_op op;
    struct fg_error err = {0};
    schemas[0].key_generated = true;
    assert_int_equal(single(FENCED_POST, NULL, "{\"row\": {\"id\": \"9\"}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    assert_non_null(
        strstr(err.msg, "field 'row': table 'invoices' makes its key column \"id\" itself"));
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_PUT, "7", "{\"row\": {\"note\": \"n\"}}", &op, &err),
                     FG_ERR_INVALID_FIELD);
    fenced_op_free(&op);
    assert_int_equal(single(FENCED_PATCH, "7", "{\"set\": {\"note\": \"n\"}}", &op, &err), 0);
    fenced_op_free(&op);
    struct fenced_batch b;
    json_t *json = parse("{\"ops\": [{\"op\": \"delete\", \"table\": \"invoices\", \"key\": 2},"
                         " {\"op\": \"put\", \"table\": \"invoices\", \"key\": \"3\","
                         " \"row\": {}}]}");
    assert_int_equal(fenced_batch_parse(schemas, 2, json, &b, &err), -1);
    assert_non_null(strstr(err.msg, "field 'ops[1].row': table 'invoices' makes its key column"));
    fenced_batch_free(&b);
    json_decref(json);
    schemas[0].key_generated = false;
}

static int batch(const char *body, struct fenced_batch *b, struct fg_error *err)
{
    json_t *json = parse(body);
    int rc = fenced_batch_parse(schemas, 2, json, b, err);
    json_decref(json);
    return rc == 0 ? 0 : (int)err->code;
}

static void batch_operations(void **state)
{
    (void)state;
    struct fenced_batch b;
    struct fg_error err = {0};
    assert_int_equal(batch("{\"ops\": [{\"op\": \"patch\", \"table\": \"invoices\", \"key\": \"1\","
                           " \"set\": {\"note\": \"a\"}}, {\"op\": \"delete\", \"table\":"
                           " \"invoices\", \"key\": 2}, {\"op\": \"post\", \"table\": "
                           "\"invoices\", \"row\": {\"id\": \"3\"}}]}",
                           &b, &err),
                     0);
    assert_int_equal(b.nops, 3);
    assert_int_equal(b.ops[1].kind, FENCED_DELETE);
    assert_string_equal(b.ops[1].key, "2");
    assert_string_equal(b.ops[2].key, "3");
    fenced_batch_free(&b);
    assert_int_equal(batch("{\"ops\": [{\"op\": \"patch\", \"table\": \"nope\", \"key\": \"1\","
                           " \"set\": {\"note\": \"a\"}}]}",
                           &b, &err),
                     FG_ERR_NOT_FOUND);
    fenced_batch_free(&b);
    assert_int_equal(batch("{\"ops\": [{\"op\": \"upsert\", \"table\": \"invoices\"}]}", &b, &err),
                     FG_ERR_INVALID_FIELD);
    fenced_batch_free(&b);
    assert_int_equal(batch("{\"ops\": [{\"op\": \"patch\", \"table\": \"invoices\", \"key\": \"1\","
                           " \"row\": {\"note\": \"a\"}}]}",
                           &b, &err),
                     FG_ERR_INVALID_FIELD);
    assert_non_null(strstr(err.msg, "ops[0]"));
    fenced_batch_free(&b);
}

static void value_texts(void **state)
{
    (void)state;
    struct fg_error err = {0};
    char *out = NULL;
    json_t *v = parse("[true, 1.5, {\"a\": 1}, null, 19.99, 0.1, {\"price\": 19.99}, 100.0, 7]");
    assert_int_equal(fenced_value_text(json_array_get(v, 0), false, "f", &out, &err), 0);
    assert_string_equal(out, "true");
    free(out);
    assert_int_equal(fenced_value_text(json_array_get(v, 1), false, "f", &out, &err), 0);
    assert_string_equal(out, "1.5");
    free(out);
    assert_int_equal(fenced_value_text(json_array_get(v, 2), false, "f", &out, &err), 0);
    assert_string_equal(out, "{\"a\":1}");
    free(out);
    assert_int_equal(fenced_value_text(json_array_get(v, 3), true, "f", &out, &err), 0);
    assert_null(out);
    /* reals as written, not "%.17g"'s 19.989999999999998, in any column */
    static const struct {
        size_t at;
        bool json_column;
        const char *text;
    } reals[] = {
        {4, false, "19.99"},
        {5, false, "0.1"},
        {4, true, "19.99"},
        {5, true, "0.1"},
        {6, true, "{\"price\":19.99}"},
        {6, false, "{\"price\":19.99}"},
        {7, false, "100"},
        {7, true, "100.0"},
        {8, false, "7"},
    };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        assert_int_equal(fenced_value_text(json_array_get(v, reals[i].at), reals[i].json_column,
                                           "f", &out, &err),
                         0);
        assert_string_equal(out, reals[i].text);
        free(out);
    }
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(patch_reads_columns_as_text),
        cmocka_unit_test(refuses_unknown_and_key_columns),
        cmocka_unit_test(put_and_post_keys),
        cmocka_unit_test(a_key_the_table_makes),
        cmocka_unit_test(batch_operations),
        cmocka_unit_test(value_texts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
