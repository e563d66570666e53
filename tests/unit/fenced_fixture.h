/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_fixture.h - the writable tables of the fenced-write unit tests
 * (test_fenced_op.c, test_fenced_sql.c): invoices, and a table whose names need
 * quoting everywhere. Static data: included by one test file each.
 */
#ifndef FG_TEST_FENCED_FIXTURE_H
#define FG_TEST_FENCED_FIXTURE_H

#include <stdbool.h>

#include "store/fenced/fenced_sql.h"

static char *invoice_columns[] = {"customer", "amount_cents", "note", "meta"};
static char *odd_columns[] = {"co\"l; x"};
static struct table_config tables[] = {
    {.name = "invoices", .key = "id", .columns = invoice_columns, .ncolumns = 4},
    {.name = "we\"ird; DROP", .key = "k\xc3\xa9y", .columns = odd_columns, .ncolumns = 1},
};
static char *invoice_types[] = {"text", "bigint", "text", "jsonb"};
static bool invoice_json[] = {false, false, false, true};
/* the key's kind, then each column's */
static enum row_json_kind invoice_kinds[] = {ROW_JSON_STRING, ROW_JSON_STRING, ROW_JSON_NUMBER,
                                             ROW_JSON_STRING, ROW_JSON_JSON};
static char *odd_types[] = {"character varying"};
static bool odd_json[] = {false};
static enum row_json_kind odd_kinds[] = {ROW_JSON_NUMBER, ROW_JSON_OTHER};
static struct table_schema schemas[] = {
    {.cfg = &tables[0],
     .key_type = "text",
     .column_types = invoice_types,
     .column_json = invoice_json,
     .row_kinds = invoice_kinds,
     .key_shape = {.form = KEY_FORM_TEXT}},
    {.cfg = &tables[1],
     .key_type = "integer",
     .column_types = odd_types,
     .column_json = odd_json,
     .row_kinds = odd_kinds},
};

#endif
