/* SPDX-License-Identifier: Apache-2.0 */
/*
 * row_json.h - the JSON text of a written row, built by the gateway from the
 * row's columns as Postgres prints them (text results), byte for byte what
 * Postgres's row_to_json writes for the same row, so that an answered write
 * costs Postgres the columns it returns and nothing more. Each column's kind
 * says how row_to_json writes a value of its type; a type the gateway does
 * not write itself (ROW_JSON_OTHER) reaches it already as JSON, from the
 * statement's to_json. A row's text can also be cut down to some of its
 * members, each kept as it was written. Pure: no I/O.
 */
#ifndef FG_ROW_JSON_H
#define FG_ROW_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "util/fgjson.h"

/* How row_to_json writes a value of a column's type (a domain's: its base type's). */
enum row_json_kind {
    ROW_JSON_OTHER,     /* any other type: the column comes as to_json's text, written as is */
    ROW_JSON_NUMBER,    /* smallint .. numeric, real, double: a number, a string if JSON has none */
    ROW_JSON_BOOL,      /* boolean ("t" / "f"): true / false */
    ROW_JSON_JSON,      /* json, jsonb: its text as is */
    ROW_JSON_STRING,    /* a built-in type row_to_json writes as its text (text, uuid, date, ...) */
    ROW_JSON_TIMESTAMP, /* timestamp: ISO text with a 'T' between date and time */
    ROW_JSON_TIMESTAMPTZ, /* timestamptz: the same, and the offset always with its minutes */
    ROW_JSON_KIND_COUNT
};

/* The kind named by the catalog query's json_kind text ("number", ...); ROW_JSON_OTHER for any
 * other text. */
enum row_json_kind row_json_kind_of(const char *name);

/*
 * Appends to out the JSON object {"names[0]": value, ...} of n columns and a
 * NUL, so that out->buf is its text as a C string: texts[i] is column i's text
 * as Postgres printed it with DateStyle ISO (to_json's text for
 * ROW_JSON_OTHER), NULL for SQL NULL; kinds[i] its kind. Names and texts are
 * borrowed.
 */
void row_json_write(struct fgjson_out *out, const char *const *names, const char *const *texts,
                    const enum row_json_kind *kinds, size_t n);

/*
 * Appends to out the JSON object of the members of row whose entry in shown
 * is true, each member's text as it stands in row, and a NUL: row is an
 * object's text as row_to_json or row_json_write writes it (names and values
 * any JSON text, white space maybe between them), its member i shown by
 * shown[i]; it has n members (fewer: the rest are not there to show). Row and
 * shown are borrowed.
 */
void row_json_pick(struct fgjson_out *out, const char *row, const bool *shown, size_t n);

#endif
