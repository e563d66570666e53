/* SPDX-License-Identifier: Apache-2.0 */
/*
 * query_args.h - the query of a request as every route reads it: each name
 * and value decoded once, the form way ('+' is a space, %XX a byte), into
 * UTF-8 text without NUL; every name one the route lists, none given twice.
 * A parameter without a value (?waiters) or with an empty one (?waiters=) is
 * held without one, and every reader reads it as absent: its default.
 * Pure: the server hands the arguments over as the HTTP library split them
 * and looks them up here; handlers see only the decoded values.
 */
#ifndef FG_QUERY_ARGS_H
#define FG_QUERY_ARGS_H

#include <stddef.h>

#include "util/error.h"

/* How a raw query text decodes. */
enum query_text {
    QUERY_TEXT_OK,         /* decoded */
    QUERY_TEXT_BAD_ESCAPE, /* a '%' not followed by two hex digits */
    QUERY_TEXT_NUL,        /* a NUL byte (%00) */
    QUERY_TEXT_NOT_UTF8,   /* bytes that are not UTF-8 (a stray byte, a cut sequence) */
};

/* One argument of a query, decoded. */
struct query_arg {
    const char *name;  /* the name (in the table's text) */
    const char *value; /* the value (in the table's text); NULL for none (?watch, ?watch=) */
};

/* The arguments of one query in the order they were sent, with their text
 * after them in the same block. */
struct query_args {
    size_t n;                /* arguments held */
    size_t cap;              /* arguments there is room for */
    char *text;              /* where the next decoded text goes */
    char *text_end;          /* the end of the room for text */
    struct query_arg args[]; /* args[0..n), then the text */
};

/*
 * Decodes raw (NUL-terminated) the form way: '+' is a space, %XX the byte
 * XX, anything else itself. out must hold strlen(raw) + 1 bytes (decoding
 * never lengthens); on QUERY_TEXT_OK it is NUL-terminated and *out_len is
 * its length. Any other answer leaves out undefined.
 */
enum query_text query_args_decode(const char *raw, char *out, size_t *out_len);

/* A table with room for n arguments whose raw names and values take
 * text_bytes bytes, each with its NUL. Owned by the caller:
 * query_args_free. */
struct query_args *query_args_new(size_t n, size_t text_bytes);

/* Frees q (NULL is fine). */
void query_args_free(struct query_args *q);

/*
 * Decodes raw_name and raw_value (NULL: a bare name) with query_args_decode
 * and appends them to q, which must have room for them (query_args_new's
 * counts); an empty value is held as none, so that every route reads ?x= as
 * it reads ?x: absent. Returns 0, or -1 with FG_ERR_INVALID_FIELD naming the
 * parameter (as sent, when its name is what fails) and what is wrong.
 */
int query_args_add(struct query_args *q, const char *raw_name, const char *raw_value,
                   struct fg_error *err) FG_WUR;

/*
 * Checks q (NULL: no query) against listed, the route's query parameters
 * (NULL-terminated, may be NULL): in the order sent, the first argument that
 * is not listed answers "query parameter 'x' is unknown", the first that repeats
 * an earlier one "query parameter 'x' given twice" (two readers could
 * otherwise read two values). Returns 0, or -1 with FG_ERR_INVALID_FIELD.
 */
int query_args_check(const struct query_args *q, const char *const *listed,
                     struct fg_error *err) FG_WUR;

/* The argument of q named name (decoded), or NULL (also when q is NULL). */
const struct query_arg *query_args_find(const struct query_args *q, const char *name);

#endif
