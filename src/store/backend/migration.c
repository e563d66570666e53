/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migration.c - the bookkeeping of schema migrations (migration.h): a file's
 * version, whether a database has it, and whether the database has one this
 * binary does not know. No I/O; applying them is pg.c's.
 */
#include "store/backend/migration.h"

#include <stdlib.h>

/* The version a row of fencegate.schema_migrations records. */
static int row_version(const json_t *row)
{
    return atoi(json_string_value(json_object_get(row, "version")));
}

int migration_version(const char *file)
{
    return atoi(file);
}

bool migration_applied(const json_t *rows, int version)
{
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row)
    {
        if (row_version(row) == version)
            return true;
    }
    return false;
}

/* True if a file of files carries version. */
static bool known(const struct embedded_file *files, int version)
{
    for (size_t j = 0; files[j].name != NULL; j++)
        if (migration_version(files[j].name) == version)
            return true;
    return false;
}

bool migration_unknown(const json_t *rows, const struct embedded_file *files, int *version)
{
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row)
    {
        if (!known(files, row_version(row))) {
            *version = row_version(row);
            return true;
        }
    }
    return false;
}
