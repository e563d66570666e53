/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_op.c - reading fenced-write bodies (columns allowed, keys, batch
 * operations), value texts, identifier quoting and the shape of the write
 * statements, and the audit query's arguments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/audit_filter.h"
#include "store/fenced_op.h"
#include "store/fenced_sql.h"

static char *invoice_columns[] = {"customer", "amount_cents", "note", "meta"};
static char *odd_columns[] = {"co\"l; x"};
static struct table_config tables[] = {
    {.name = "invoices", .key = "id", .columns = invoice_columns, .ncolumns = 4},
    {.name = "we\"ird; DROP", .key = "k\xc3\xa9y", .columns = odd_columns, .ncolumns = 1},
};
static char *invoice_types[] = {"text", "bigint", "text", "jsonb"};
static bool invoice_json[] = {false, false, false, true};
static char *odd_types[] = {"character varying"};
static bool odd_json[] = {false};
static struct table_schema schemas[] = {
    {.cfg = &tables[0],
     .key_type = "text",
     .column_types = invoice_types,
     .column_json = invoice_json},
    {.cfg = &tables[1], .key_type = "integer", .column_types = odd_types, .column_json = odd_json},
};

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
    assert_int_equal(batch("{\"ops\": []}", &b, &err), FG_ERR_INVALID_FIELD);
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

static void quotes_identifiers(void **state)
{
    (void)state;
    char *q = sql_quote_ident("we\"ird; DROP");
    assert_string_equal(q, "\"we\"\"ird; DROP\"");
    free(q);
}

static void statements_quote_and_parameterize(void **state)
{
    (void)state;
    bool written[] = {true};
    int n = 0;
    char *sql = fenced_sql_write(&schemas[1], FENCED_PATCH, written, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    assert_non_null(strstr(sql, "UPDATE \"we\"\"ird; DROP\" AS t SET \"co\"\"l; x\" = $9::"
                                "character varying"));
    assert_non_null(strstr(sql, "t.\"k\xc3\xa9y\" = $2::integer"));
    assert_non_null(strstr(sql, "greatest(rf.fence, excluded.fence)"));
    free(sql);
    bool none[] = {false, false, false, false};
    sql = fenced_sql_write(&schemas[0], FENCED_DELETE, none, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT);
    assert_non_null(strstr(sql, "DELETE FROM \"invoices\""));
    free(sql);
    bool some[] = {false, true, false, false};
    sql = fenced_sql_write(&schemas[0], FENCED_PUT, some, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    assert_non_null(strstr(sql, "ON CONFLICT (\"id\") DO UPDATE SET \"customer\" = "
                                "excluded.\"customer\""));
    free(sql);
    const struct table_schema *both[] = {&schemas[0], &schemas[1]};
    sql = fenced_sql_claim(both, 2);
    assert_non_null(strstr(sql, "$4::text || ($5::integer)::text"));
    assert_non_null(strstr(sql, "ORDER BY v.resource"));
    free(sql);
    struct table_schema numeric = {
        .cfg = &tables[0], .key_type = "numeric(12,2)", .key_numeric = true};
    const struct table_schema *one[] = {&numeric};
    sql = fenced_sql_claim(one, 1);
    assert_non_null(strstr(sql, "$2::text || trim_scale(($3::numeric(12,2))::numeric)::text"));
    free(sql);
}

static void value_texts(void **state)
{
    (void)state;
    struct fg_error err = {0};
    char *out = NULL;
    json_t *v = parse("[true, 1.5, {\"a\": 1}, null]");
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
    json_decref(v);
}

/* Key types whose text is not one per value are refused; numeric gets its own identity. */
static void key_identity(void **state)
{
    (void)state;
    assert_null(fenced_sql_key_refusal("int4", false));
    assert_null(fenced_sql_key_refusal("text", false));
    assert_null(fenced_sql_key_refusal("numeric", false));
    assert_non_null(fenced_sql_key_refusal("text", true));
    assert_non_null(fenced_sql_key_refusal("float8", false));
    assert_non_null(fenced_sql_key_refusal("float4", false));
    assert_non_null(fenced_sql_key_refusal("citext", false));
    assert_non_null(fenced_sql_key_refusal("interval", false));
    assert_true(fenced_sql_key_numeric("numeric"));
    assert_false(fenced_sql_key_numeric("int8"));
}

static void owner_header(void **state)
{
    (void)state;
    struct fg_error err = {0};
    assert_int_equal(fenced_owner_check(NULL, &err), 0);
    assert_int_equal(fenced_owner_check("billing-7", &err), 0);
    assert_int_equal(fenced_owner_check("", &err), -1);
    assert_int_equal(fenced_owner_check("a\tb", &err), -1);
}

static void audit_arguments(void **state)
{
    (void)state;
    struct audit_filter f;
    struct fg_error err = {0};
    assert_int_equal(audit_filter_parse("pg:invoices/1", NULL, NULL, NULL, NULL, &f, &err), 0);
    assert_string_equal(f.resource, "pg:invoices/1");
    assert_null(f.lock_name);
    assert_int_equal(f.limit, 100);
    assert_int_equal(audit_filter_parse(NULL, "", "5", "1000", "12", &f, &err), 0);
    assert_null(f.lock_name);
    assert_int_equal(f.since_ms, 5);
    assert_int_equal(f.after_id, 12);
    assert_int_equal(audit_filter_parse(NULL, NULL, NULL, "0", NULL, &f, &err), -1);
    assert_int_equal(audit_filter_parse(NULL, NULL, NULL, "1001", NULL, &f, &err), -1);
    assert_int_equal(audit_filter_parse(NULL, NULL, "-1", NULL, NULL, &f, &err), -1);
    assert_int_equal(audit_filter_parse(NULL, NULL, NULL, NULL, "1x", &f, &err), -1);
    assert_int_equal(audit_filter_parse(NULL, NULL, NULL, " 5", NULL, &f, &err), -1);
    assert_non_null(strstr(err.msg, "limit"));

    assert_int_equal(audit_filter_parse(NULL, NULL, "100", NULL, NULL, &f, &err), 0);
    assert_int_equal(audit_filter_narrow("worker-1", "200", &f, &err), 0);
    assert_string_equal(f.owner, "worker-1");
    assert_int_equal(f.until_ms, 200);
    assert_int_equal(audit_filter_narrow("", NULL, &f, &err), 0);
    assert_null(f.owner);
    assert_int_equal(f.until_ms, 0);
    assert_int_equal(audit_filter_narrow(NULL, "100", &f, &err), -1);
    assert_int_equal(audit_filter_narrow(NULL, "0", &f, &err), -1);
    assert_non_null(strstr(err.msg, "until_ms"));
}

static void audit_windows(void **state)
{
    (void)state;
    struct audit_window w;
    struct fg_error err = {0};
    assert_int_equal(audit_window_parse(NULL, NULL, 10000000, &w, &err), 0);
    assert_int_equal(w.until_ms, 10000000);
    assert_int_equal(w.since_ms, 10000000 - AUDIT_WINDOW_DEFAULT_MS);
    assert_int_equal(audit_window_parse("5", "10", 10000000, &w, &err), 0);
    assert_int_equal(w.since_ms, 5);
    assert_int_equal(w.until_ms, 10);
    assert_int_equal(audit_window_parse("10", "10", 0, &w, &err), -1);
    assert_int_equal(audit_window_parse("0", "86400001", 0, &w, &err), -1);
    assert_int_equal(audit_window_parse("1", "86400001", 0, &w, &err), 0);
    assert_int_equal(audit_window_parse("x", NULL, 1000, &w, &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(patch_reads_columns_as_text),
        cmocka_unit_test(refuses_unknown_and_key_columns),
        cmocka_unit_test(put_and_post_keys),
        cmocka_unit_test(batch_operations),
        cmocka_unit_test(quotes_identifiers),
        cmocka_unit_test(statements_quote_and_parameterize),
        cmocka_unit_test(value_texts),
        cmocka_unit_test(key_identity),
        cmocka_unit_test(owner_header),
        cmocka_unit_test(audit_arguments),
        cmocka_unit_test(audit_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
