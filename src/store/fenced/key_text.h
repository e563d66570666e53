/* SPDX-License-Identifier: Apache-2.0 */
/*
 * key_text.h - a row key's canonical text: the one spelling of a key's value
 * that Postgres prints for it ("042", "+42" and " 42" are all the integer 42,
 * "1.50e1" is the numeric 15.0). Writes send Postgres the canonical text, and
 * every decision taken from a key in the gateway (the lock that guards a row,
 * the order in which a group of writes locks its rows) is taken from it, so
 * two spellings of one row can never be two rows to the gateway and one to
 * Postgres. Pure: no I/O.
 */
#ifndef FG_KEY_TEXT_H
#define FG_KEY_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

/* How the gateway reads a key column's type. */
enum key_form {
    KEY_FORM_OTHER,   /* a type the gateway does not read: its text passes as given */
    KEY_FORM_INT16,   /* smallint */
    KEY_FORM_INT32,   /* integer */
    KEY_FORM_INT64,   /* bigint */
    KEY_FORM_NUMERIC, /* numeric */
    KEY_FORM_TEXT,    /* text, varchar: the bytes are the value */
    KEY_FORM_BPCHAR,  /* char(n): trailing spaces are not part of the value */
    KEY_FORM_UUID,    /* uuid */
    KEY_FORM_DATE     /* date (written YYYY-MM-DD) */
};

/* A key column as the gateway reads it. */
struct key_shape {
    enum key_form form; /* how its text is read */
    bool scaled;        /* numeric(p,s): a key keeps at most scale decimals */
    int scale;          /* s of numeric(p,s) (may be negative), when scaled */
    int max_chars;      /* n of varchar(n) or char(n): a key has at most n characters; 0: any */
};

/*
 * The shape of a key column from its catalog row: type (format_type of the
 * column's type without modifier: a domain prints its own name), base_type
 * (the type, or a domain's underlying type, as pg_type.typname) and typmod
 * (pg_attribute.atttypmod, -1 for none). A domain over a type that takes a
 * modifier (numeric, varchar, char) is KEY_FORM_OTHER: its modifier is not
 * known here.
 */
struct key_shape key_shape_of(const char *type, const char *base_type, int typmod);

/* The type names a shape of form KEY_FORM_OTHER is not, for messages. */
#define KEY_FORMS_READ "smallint, integer, bigint, numeric, text, varchar, char, uuid or date"

/*
 * The canonical text of key (printable UTF-8, NUL-terminated) for a column of
 * shape: *out gets an owned string. A spelling the gateway cannot read exactly
 * as Postgres does (hexadecimal integers, dates not written YYYY-MM-DD,
 * numbers out of range, more decimals than a numeric(p,s) keeps, more
 * characters than a varchar(n) or char(n) holds: Postgres stores such a text
 * cut to n when the rest is spaces, another row's key) fails with
 * FG_ERR_INVALID_FIELD naming field. KEY_FORM_OTHER copies key.
 */
int key_canonical(const struct key_shape *shape, const char *key, const char *field, char **out,
                  struct fg_error *err) FG_WUR;

/*
 * The identity of a canonical key: the text that names its row in resources
 * and lock templates. For numeric keys the scale is dropped (1.50 -> 1.5, as
 * Postgres's trim_scale); every other form's identity is its canonical text.
 * Writes it into out (cap bytes, at least strlen(canonical) + 1).
 */
void key_row_identity(const struct key_shape *shape, const char *canonical, char *out, size_t cap);

/*
 * True if key_row_identity names the row of a key of shape as Postgres does
 * (fenced_sql.h, resource identity): every form the gateway reads. A key of
 * KEY_FORM_OTHER passes as given, and only Postgres can name its row.
 */
bool key_identity_known(const struct key_shape *shape);

/*
 * True if Postgres prints a stored key of shape as its canonical text, and
 * that text is its identity (integers, uuid, date: no modifier and no
 * collation changes what is stored): the gateway then knows the written row's
 * key and resource without reading them back.
 */
bool key_prints_canonical(const struct key_shape *shape);

/*
 * Orders two canonical keys of one column as Postgres orders their values
 * (integers and numerics by value, dates by day, uuids by bytes), text as
 * bytes (the C collation): < 0, 0 or > 0. Equal values compare 0.
 */
int key_compare(const struct key_shape *shape, const char *a, const char *b);

#endif
