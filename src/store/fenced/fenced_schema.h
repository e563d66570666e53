/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_schema.h - checking a writable table's catalog rows against its
 * configuration, into struct table_schema. Pure: fenced_pg.c reads the rows.
 */
#ifndef FG_FENCED_SCHEMA_H
#define FG_FENCED_SCHEMA_H

#include <jansson.h>

#include "config.h"
#include "store/fenced/fenced_sql.h"
#include "util/error.h"

/*
 * Fills *schema for table t (borrowed by it) from columns, the catalog rows of
 * t's columns (an array of objects {name, type, is_json, read_only, is_unique,
 * base_type, nondeterministic, json_kind, partitioned, inherited_by,
 * partition_of}, flags as "t"/"f", as fenced_pg.c's catalog query answers them;
 * borrowed). A table, key or column that does not exist, a table that others
 * inherit or that is a partition of another configured table, a key without a
 * single-column unique index or of a type that cannot name a resource, a column
 * that cannot be written or a fence column that is no writable bigint fails
 * with FG_ERR_CONFIG naming it. Release *schema with table_schema_free, also
 * after a failure.
 */
int fenced_schema_load(const struct table_config *t, const json_t *columns,
                       struct table_schema *schema, struct fg_error *err) FG_WUR;

/* Fails with FG_ERR_CONFIG saying that t's table is in no schema the gateway
 * looks in (fenced_pg.c TABLE_NAMED); -1. */
int fenced_schema_missing(const struct table_config *t, struct fg_error *err);

#endif
