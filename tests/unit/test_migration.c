/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_migration.c - a migration file's version, whether a database records it,
 * and a database migrated by a newer gateway.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "store/backend/migration.h"

static const struct embedded_file files[] = {
    {"001_init.sql", ""},
    {"011_audit_order.sql", ""},
    {"045_revocations.sql", ""},
    {NULL, NULL},
};

/* Rows as SELECT version FROM fencegate.schema_migrations answers: versions as text. */
static json_t *rows_of(const char *const *versions, size_t n)
{
    json_t *rows = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(rows, json_pack("{s:s}", "version", versions[i]));
    return rows;
}

static void version_of_file(void **state)
{
    (void)state;
    assert_int_equal(migration_version("001_init.sql"), 1);
    assert_int_equal(migration_version("011_audit_order.sql"), 11);
    assert_int_equal(migration_version("450_x.sql"), 450);
}

static void applied(void **state)
{
    (void)state;
    const char *const versions[] = {"1", "11"};
    json_t *rows = rows_of(versions, 2);
    assert_true(migration_applied(rows, 1));
    assert_true(migration_applied(rows, 11));
    assert_false(migration_applied(rows, 45));
    assert_false(migration_applied(rows, 0));
    json_t *none = json_array();
    assert_false(migration_applied(none, 1));
    json_decref(none);
    json_decref(rows);
}

static void unknown(void **state)
{
    (void)state;
    int version = -1;
    const char *const older[] = {"1", "11"};
    json_t *rows = rows_of(older, 2);
    assert_false(migration_unknown(rows, files, &version));
    assert_int_equal(version, -1);
    json_decref(rows);

    const char *const all[] = {"1", "11", "45"};
    rows = rows_of(all, 3);
    assert_false(migration_unknown(rows, files, &version));
    json_decref(rows);

    const char *const newer[] = {"1", "11", "45", "60", "70"};
    rows = rows_of(newer, 5);
    assert_true(migration_unknown(rows, files, &version));
    assert_int_equal(version, 60);
    json_decref(rows);

    json_t *none = json_array();
    assert_false(migration_unknown(none, files, &version));
    json_decref(none);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version_of_file),
        cmocka_unit_test(applied),
        cmocka_unit_test(unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
