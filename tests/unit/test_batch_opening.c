/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_batch_opening.c - the pipeline that opens a fenced batch: BEGIN, the
 * revocation check, one claim of fence rows, then one claim per fence-column
 * table in table order, each only when it has something to claim, with the
 * parameters each statement names.
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
    {.cfg = &tables[1], .key_type = "text", .column_types = types, .column_json = json},
    {.cfg = &tables[2], .key_type = "integer", .column_types = types, .column_json = json},
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

/* Checks that stmt claims the rows of schemas[table] whose keys params names
 * after the table's prefix (n parameters in all). */
static void column_claim_is(const struct pg_group_stmt *stmt, size_t table,
                            const char *const *params, int n)
{
    char *sql = fenced_sql_column_claim(&schemas[table], (size_t)n - 1);
    assert_string_equal(stmt->sql, sql);
    free(sql);
    params_are(stmt, params, n);
}

static void both_claims(void **state)
{
    (void)state;
    struct fenced_op ops[] = {op(1, "b"), op(0, "x"), op(1, "a"), op(0, "y")};
    struct fenced_batch batch = {.ops = ops, .nops = 4};
    struct batch_opening o = {0};
    batch_opening_build(&batch, 42, schemas, prefixes, 3, &o);
    assert_int_equal(o.n, 4); /* parts has no op: no claim of its rows */
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

    const char *const stock_rows[] = {"pg:stock/", "b", "a"};
    column_claim_is(&o.stmts[BATCH_OPENING_CLAIMS + 1], 1, stock_rows, 3);
    batch_opening_free(&o);
}

/* Fence-column tables are claimed in table order, whatever the order of the ops;
 * no claim of fence rows when no op needs one. */
static void column_claims_in_table_order(void **state)
{
    (void)state;
    struct fenced_op ops[] = {op(2, "7"), op(1, "s"), op(2, "3")};
    struct fenced_batch batch = {.ops = ops, .nops = 3};
    struct batch_opening o = {0};
    batch_opening_build(&batch, -5, schemas, prefixes, 3, &o);
    assert_int_equal(o.n, 4);
    const char *const revoked[] = {"-5"};
    params_are(&o.stmts[BATCH_OPENING_REVOKED], revoked, 1);
    const char *const stock_rows[] = {"pg:stock/", "s"};
    column_claim_is(&o.stmts[BATCH_OPENING_CLAIMS], 1, stock_rows, 2);
    const char *const parts_rows[] = {"pg:parts/", "7", "3"};
    column_claim_is(&o.stmts[BATCH_OPENING_CLAIMS + 1], 2, parts_rows, 3);
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
