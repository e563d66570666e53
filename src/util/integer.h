/* SPDX-License-Identifier: Apache-2.0 */
/*
 * integer.h - the one reading of a decimal integer from text: query
 * arguments, fencectl's options and the environment's settings all follow it.
 * Pure: no I/O, no allocation.
 */
#ifndef FG_INTEGER_H
#define FG_INTEGER_H

/* How a text read as an integer turned out. */
enum integer_parse {
    INTEGER_OK,           /* *out holds the value */
    INTEGER_NOT_DECIMAL,  /* not an optional '-' then 1 or more digits 0-9, and nothing else */
    INTEGER_OUT_OF_RANGE, /* a decimal integer, but below min, above max or past long long */
};

/*
 * Reads text (NUL-terminated, not NULL) as a decimal integer in [min, max]
 * into *out. No white space, no '+', no base prefix; leading zeros are read
 * as decimal ("007" is 7). *out is written only on INTEGER_OK.
 */
enum integer_parse integer_parse(const char *text, long long min, long long max, long long *out);

/*
 * integer_parse for a text that must spell its integer the one way a fence
 * is written (a token's, fencectl's): no leading zero ("01", "00") and no
 * "-0", which are INTEGER_NOT_DECIMAL; "0" is 0.
 */
enum integer_parse integer_parse_exact(const char *text, long long min, long long max,
                                       long long *out);

/* The value of text, a decimal integer already checked (a query argument its
 * route's bounds passed), or absent when text is NULL, empty or no integer. */
long long integer_read(const char *text, long long absent);

#endif
