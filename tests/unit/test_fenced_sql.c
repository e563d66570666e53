/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_sql.c - identifier quoting, the shape of the write and claim
 * statements of both fence modes, and which key types may name a resource.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fenced_fixture.h"
#include "store/fenced_sql.h"

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
    assert_non_null(strstr(sql, "DELETE FROM \"invoices\" AS t WHERE t.\"id\" = $2::text AND "
                                "(SELECT f.fence FROM f) = $1::bigint RETURNING t.*"));
    free(sql);
    sql = fenced_sql_write(&schemas[0], FENCED_PATCH, (bool[]){true, true, false, false}, &n);
    assert_non_null(strstr(sql, "UPDATE \"invoices\" AS t SET \"customer\" = $9::text, "
                                "\"amount_cents\" = $10::bigint WHERE t.\"id\" = $2::text AND "
                                "(SELECT f.fence FROM f) = $1::bigint RETURNING t.*"));
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

/* A table keeping its fences in a column: the fence is written with the row,
 * and the row's own fence guards the write. */
static void fence_column_statements(void **state)
{
    (void)state;
    struct table_config t = tables[0];
    t.fence_column = "lock_fence";
    struct table_schema s = schemas[0];
    s.cfg = &t;
    bool some[] = {true, false, false, false};
    int n = 0;
    char *sql = fenced_sql_write(&s, FENCED_PUT, some, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    assert_non_null(strstr(sql,
                           "INSERT INTO \"invoices\" AS t (\"id\", \"customer\", \"lock_fence\")"
                           " SELECT $2::text, $9::text, $1::bigint WHERE"));
    free(sql);
    sql = fenced_sql_write(&s, FENCED_PATCH, some, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    assert_non_null(strstr(sql, "UPDATE \"invoices\" AS t SET \"customer\" = $9::text, "
                                "\"lock_fence\" = $1::bigint WHERE t.\"id\" = $2::text AND "
                                "coalesce(t.\"lock_fence\", 0) <= $1::bigint"));
    free(sql);
    sql = fenced_sql_write(&s, FENCED_DELETE, some, &n);
    assert_non_null(strstr(sql, "DELETE FROM \"invoices\" AS t WHERE t.\"id\" = $2::text AND "
                                "coalesce(t.\"lock_fence\", 0) <= $1::bigint AND NOT (SELECT "
                                "revoked FROM v) RETURNING t.*"));
    free(sql);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quotes_identifiers),
        cmocka_unit_test(statements_quote_and_parameterize),
        cmocka_unit_test(fence_column_statements),
        cmocka_unit_test(key_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
