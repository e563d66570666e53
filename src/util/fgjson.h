/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fgjson.h - typed, range-checked reads of request fields from jansson objects.
 * Every failure names the field, so that a 400 tells the client exactly what to
 * fix. Borrowed references only: nothing returned here must be freed.
 */
#ifndef FG_FGJSON_H
#define FG_FGJSON_H

#include <jansson.h>
#include <stdbool.h>

#include "util/error.h"

/*
 * Reads optional integer field `field` of obj into *out when present, checking
 * min <= value <= max. A missing field or JSON null leaves *out unchanged and
 * sets *present (if not NULL) to false. A wrong type or a value out of range
 * fails with FG_ERR_INVALID_FIELD naming the field.
 */
int fgjson_int(const json_t *obj, const char *field, long long min, long long max, long long *out,
               bool *present, struct fg_error *err) FG_WUR;

/* Integer member field of a script's answer (cjson sends large numbers as
 * reals), or fallback when it is missing or no number. */
long long fgjson_answer_int(const json_t *obj, const char *field, long long fallback);

/*
 * Reads optional string field `field` of obj (1..max_len bytes, no NUL) into
 * *out (borrowed from obj). Missing or null leaves *out unchanged.
 */
int fgjson_string(const json_t *obj, const char *field, size_t max_len, const char **out,
                  struct fg_error *err) FG_WUR;

/*
 * Refuses a member of obj that allowed (a NULL-terminated list; NULL: none)
 * does not name: FG_ERR_INVALID_FIELD naming every unknown member, each
 * prefixed by where ("" at the top, "ops[3]." inside a batch).
 */
int fgjson_only(const json_t *obj, const char *const *allowed, const char *where,
                struct fg_error *err) FG_WUR;

/* True if list (NULL-terminated, may be NULL) holds name. */
bool fgjson_listed(const char *const *list, const char *name);

/* Parses body (len bytes) as a JSON object; an empty body is an empty object.
 * Returns a new reference, or NULL with FG_ERR_INVALID_JSON. */
json_t *fgjson_parse_object(const char *body, size_t len, struct fg_error *err);

#endif
