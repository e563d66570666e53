/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_batch_opening.c - the pipeline that opens a fenced batch: BEGIN, the
 * revocation check, one claim of fence rows, then the rows of each
 * fence-column table in table order, each row's lock and then the row, row
 * by row in the order of the key's values, each row once, each claim only
 * when it has something to claim, with the parameters each statement names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/batch_opening.h"

static char *columns[] = {"note"};
static char *types[] = {"text"};
static bool json[] = {false};
static struct table_config tables[] = {
    {.name = "invoices", .key = "id", .columns = columns, .ncolumns = 1},
    {.name = "stock", .key = "sku", .columns = columns, .ncolumns = 1, .fence_column = "fence"},
    {.name = "parts", .key = "id", .columns = columns, .ncolumns = 1, .fence_column = "fence"},
};
static const struct table_schema schemas[] = {
    {.cfg = &tables[0], .key_type = "text", .column_types = types, .column_json = json},
    {.cfg = &tables[1],
     .key_type = "text",
     .key_shape = {.form = KEY_FORM_TEXT},
     .column_types = types,
     .column_json = json},
    {.cfg = &tables[2],
     .key_type = "integer",
     .key_shape = {.form = KEY_FORM_INT32},
     .column_types = types,
     .column_json = json},
};
static char *const prefixes[] = {"pg:invoices/", "pg:stock/", "pg:parts/"};

static struct fenced_op op(size_t table, char *key)
{
    return (struct fenced_op){.kind = FENCED_DELETE, .table = table, .key = key};
}

/* Checks stmt's parameters against expected (n entries). */
static void params_are(const struct pg_group_stmt *stmt, const char *const *expected, int n)
{
    assert_int_equal(stmt->nparams, n);
    for (int i = 0; i < n; i++)
        assert_string_equal(stmt->params[i], expected[i]);
}

/* Checks that stmts claim the rows of schemas[table] whose keys are keys[0..n)
 * in that order: for each, the row's lock, then the row, both prepared. */
static void rows_claimed(const struct pg_group_stmt *stmts, size_t table, const char *const *keys,
                         size_t n)
{
    char *lock = fenced_sql_row_lock(&schemas[table]);
    char *claim = fenced_sql_column_claim(&schemas[table]);
    for (size_t i = 0; i < n; i++) {
        const char *const params[] = {prefixes[table], keys[i]};
        assert_string_equal(stmts[2 * i].sql, lock);
        assert_string_equal(stmts[2 * i + 1].sql, claim);
        assert_non_null(stmts[2 * i].name);
        assert_non_null(stmts[2 * i + 1].name);
        assert_string_not_equal(stmts[2 * i].name, stmts[2 * i + 1].name);
        params_are(&stmts[2 * i], params, 2);
        params_are(&stmts[2 * i + 1], params, 2);
    }
    free(lock);
    free(claim);
}

static void both_claims(void **state)
{
    (void)state;
    struct fenced_op ops[] = {op(1, "b"), op(0, "x"), op(1, "a"), op(0, "y")};
    struct fenced_batch batch = {.ops = ops, .nops = 4};
    struct batch_opening o = {0};
    batch_opening_build(&batch, 42, schemas, prefixes, 3, &o);
    assert_int_equal(o.n, 3 + 2 * 2); /* parts has no op: no claim of its rows */
    assert_string_equal(o.stmts[BATCH_OPENING_BEGIN].sql, "BEGIN");
    assert_int_equal(o.stmts[BATCH_OPENING_BEGIN].nparams, 0);
    const char *const revoked[] = {"42"};
    params_are(&o.stmts[BATCH_OPENING_REVOKED], revoked, 1);

    const struct table_schema *claimed[] = {&schemas[0], &schemas[0]};
    char *sql = fenced_sql_claim(claimed, 2);
    assert_string_equal(o.stmts[BATCH_OPENING_CLAIMS].sql, sql);
    free(sql);
    const char *const fence_rows[] = {"42", "pg:invoices/", "x", "pg:invoices/", "y"};
    params_are(&o.stmts[BATCH_OPENING_CLAIMS], fence_rows, 5);

    const char *const stock_rows[] = {"a", "b"};
    rows_claimed(&o.stmts[BATCH_OPENING_CLAIMS + 1], 1, stock_rows, 2);
    batch_opening_free(&o);
}

/* Fence-column tables are claimed in table order, whatever the order of the ops,
 * their rows by the key's value ("10" after "9") and each row once however spelt;
 * no claim of fence rows when no op needs one. */
static void column_claims_in_table_order(void **state)
{
    (void)state;
    struct fenced_op ops[] = {op(2, "10"), op(1, "s"), op(2, "9"), op(2, "10"), op(1, "S")};
    struct fenced_batch batch = {.ops = ops, .nops = 5};
    struct batch_opening o = {0};
    batch_opening_build(&batch, -5, schemas, prefixes, 3, &o);
    assert_int_equal(o.n, 2 + 2 * 2 + 2 * 2);
    const char *const revoked[] = {"-5"};
    params_are(&o.stmts[BATCH_OPENING_REVOKED], revoked, 1);
    const char *const stock_rows[] = {"S", "s"}; /* text keys in byte order */
    rows_claimed(&o.stmts[BATCH_OPENING_CLAIMS], 1, stock_rows, 2);
    const char *const parts_rows[] = {"9", "10"};
    rows_claimed(&o.stmts[BATCH_OPENING_CLAIMS + 4], 2, parts_rows, 2);
    assert_string_not_equal(o.stmts[BATCH_OPENING_CLAIMS].name,
                            o.stmts[BATCH_OPENING_CLAIMS + 4].name);
    batch_opening_free(&o);
}

static void fence_rows_only(void **state)
{
    (void)state;
    struct fenced_op ops[] = {op(0, "x")};
    struct fenced_batch batch = {.ops = ops, .nops = 1};
    struct batch_opening o = {0};
    batch_opening_build(&batch, 9, schemas, prefixes, 3, &o);
    assert_int_equal(o.n, 3);
    const char *const fence_rows[] = {"9", "pg:invoices/", "x"};
    params_are(&o.stmts[BATCH_OPENING_CLAIMS], fence_rows, 3);
    batch_opening_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(both_claims),
        cmocka_unit_test(column_claims_in_table_order),
        cmocka_unit_test(fence_rows_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
