/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migration.h - which schema migrations a database has and which it lacks,
 * from the file names of sql/ and the rows of fencegate.schema_migrations.
 * Pure: pg.c runs the statements.
 */
#ifndef FG_MIGRATION_H
#define FG_MIGRATION_H

#include <jansson.h>
#include <stdbool.h>

#include "embedded.h"

/* The version a migration file is recorded under: the number its name starts
 * with ("011_audit_order.sql" is 11). */
int migration_version(const char *file);

/* True if rows (objects with a text "version", borrowed) record version. */
bool migration_applied(const json_t *rows, int version);

/* True, with *version set, if rows (as above) record a version that no file of
 * files (a table ending with a NULL name) carries: a newer gateway migrated the
 * database. */
bool migration_unknown(const json_t *rows, const struct embedded_file *files, int *version);

#endif
