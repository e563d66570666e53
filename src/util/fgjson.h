/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fgjson.h - typed, range-checked reads of request fields from jansson objects.
 * Every failure names the field, so that a 400 tells the client exactly what to
 * fix. Borrowed references only: nothing returned here must be freed.
 *
 * And the writing side of the request path: JSON texts (replies, log lines)
 * written into a caller's buffer without building or walking a jansson tree
 * through jansson's dumper, byte for byte what json_dumps(JSON_COMPACT) writes,
 * but for reals, which it writes in their shortest form (fgjson_real_text)
 * where jansson writes 17 digits.
 */
#ifndef FG_FGJSON_H
#define FG_FGJSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

/*
 * Reads optional integer field `field` of obj into *out when present, checking
 * min <= value <= max. A missing field leaves *out unchanged and sets *present
 * (if not NULL) to false. A wrong type (null too: a client leaves a member out
 * for its default) or a value out of range fails with FG_ERR_INVALID_FIELD
 * naming the field.
 */
int fgjson_int(const json_t *obj, const char *field, long long min, long long max, long long *out,
               bool *present, struct fg_error *err) FG_WUR;

/* Fails with FG_ERR_INVALID_FIELD: optional member field is null, which is
 * not a value of its type; a client leaves a member out for its default. */
int fgjson_null_refused(const char *field, struct fg_error *err);

/* Integer member field of a script's answer (cjson sends large numbers as
 * reals), or fallback when it is missing or no number. */
long long fgjson_answer_int(const json_t *obj, const char *field, long long fallback);

/*
 * Refuses a member of obj that allowed (a NULL-terminated list; NULL: none)
 * does not name: FG_ERR_INVALID_FIELD naming every unknown member, each
 * prefixed by where ("" at the top, "ops[3]." inside a batch).
 */
int fgjson_only(const json_t *obj, const char *const *allowed, const char *where,
                struct fg_error *err) FG_WUR;

/* True if list (NULL-terminated, may be NULL) holds name. */
bool fgjson_listed(const char *const *list, const char *name);

/*
 * The plain objects most request bodies and script answers are ({"ttl_ms":
 * 10000}, {"set": {"n": 1}}, {"fence":7,"applied":true}), read without
 * jansson's lexer: members named by plain strings whose values are plain
 * strings (printable ASCII, no escape), integers of at most 18 digits, true,
 * false, null, or objects of those nested up to 4 deep. Returns a new
 * reference, or NULL for anything else, right or wrong (an array, an escape,
 * a real, a repeated name, a syntax error): the caller then has jansson read
 * it, and name its error, as for any text.
 */
json_t *fgjson_parse_flat(const char *body, size_t len);

/* Room for the path of a member fgjson_parse_object names, its NUL included. */
#define FGJSON_MEMBER_MAX 128

/*
 * Parses body (len bytes) as a JSON object; an empty body is an empty object.
 * Returns a new reference, or NULL with FG_ERR_INVALID_JSON; but an integer
 * beyond 64 bits, which no reader of a member could take (jansson refuses
 * it), fails with FG_ERR_INVALID_FIELD naming its member by its path
 * ("ttl_ms", "set.n", "ops[2].row.id"; one nested over 16 deep by its
 * ancestor 16 deep), the path also written into too_big (FGJSON_MEMBER_MAX
 * bytes, "" for any other failure) for the caller to word that member's
 * refusal as its own bound does.
 */
json_t *fgjson_parse_object(const char *body, size_t len, char *too_big, struct fg_error *err);

/* The offset after the JSON string whose opening quote is s[at], in the JSON
 * text s of n bytes (n: the string runs to the end). Reads no value. */
size_t fgjson_string_end(const char *s, size_t n, size_t at);

/*
 * Reads the JSON file path for where (its name in the configuration, for the
 * message). A file that cannot be read or parsed fails with FG_ERR_CONFIG
 * naming the line and column and jansson's reason without the text it quotes,
 * which may be a secret's. Returns a new reference, or NULL.
 */
json_t *fgjson_load_file(const char *path, const char *where, struct fg_error *err);

/* A new JSON string of text (NUL-terminated) whose bytes that are not UTF-8
 * become U+FFFD, as fgjson_out_strn writes them: where json_string would
 * answer NULL, and a problem body or a log line built around it would be
 * lost, for a byte a client sent or a cut left. */
json_t *fgjson_string(const char *text);

/* Room for any text of fgjson_real_text, its NUL included. */
#define FGJSON_REAL_MAX 32

/*
 * Writes into text (FGJSON_REAL_MAX bytes) the shortest decimal text of value
 * (finite) that reads back as the same double: "%.*g" at the fewest
 * significant digits, 1 to 17, that strtod turns into value again ("19.99"
 * where "%.17g" writes 19.989999999999998), an integral value below 1e21
 * written out ("100", not "1e+02"; "10000000000000000" for 1e16). A number
 * written with up to 15 significant digits comes back as it was written.
 * Returns its length.
 */
size_t fgjson_real_text(double value, char *text);

/* A JSON text being written into a buffer: the caller's (a per-thread one) and,
 * when that is too small, a heap one that replaces it. */
struct fgjson_out {
    char *buf;       /* where the text goes (the caller's, or heap) */
    size_t len;      /* bytes written */
    size_t cap;      /* bytes of buf */
    char *heap;      /* owned: buf once it moved to the heap, else NULL */
    bool need_comma; /* a member was written since the last brace opened */
};

/* Starts an empty text in buf (cap bytes, borrowed). */
void fgjson_out_init(struct fgjson_out *out, char *buf, size_t cap);
/* Frees the heap buffer, if the text needed one. */
void fgjson_out_free(struct fgjson_out *out);
/* The text written (up to a NUL written into it), as a new NUL-terminated
 * string owned by the caller; frees out's heap buffer. */
char *fgjson_out_take(struct fgjson_out *out);
/* Appends n bytes as they are. */
void fgjson_out_raw(struct fgjson_out *out, const char *text, size_t n);
/* Opens an object ({) or closes it (}). */
void fgjson_out_open(struct fgjson_out *out);
void fgjson_out_close(struct fgjson_out *out);
/* Opens an object as the next value (after a comma when one came before it
 * in the array being written; at the start of the text, as fgjson_out_open). */
void fgjson_out_open_item(struct fgjson_out *out);
/* Appends member key (plain text, written as it is) opening an array ([),
 * whose elements are the values written next, or closes that array (]). */
void fgjson_out_open_array(struct fgjson_out *out, const char *key);
void fgjson_out_close_array(struct fgjson_out *out);
/* Appends member key (plain text, written as it is) with a string value of
 * len bytes, escaped as jansson escapes it; bytes that are not UTF-8 become
 * U+FFFD (jansson refuses such a string). */
void fgjson_out_strn(struct fgjson_out *out, const char *key, const char *value, size_t len);
/* The same for a NUL-terminated value. */
void fgjson_out_str(struct fgjson_out *out, const char *key, const char *value);
/* Appends member key with an integer value. */
void fgjson_out_int(struct fgjson_out *out, const char *key, long long value);
/* Appends the members of object (borrowed) to the object being written. */
void fgjson_out_members(struct fgjson_out *out, const json_t *object);
/* Appends member key (plain text, written as it is) with value (any JSON
 * value, borrowed), written as json_dumps(JSON_COMPACT) writes it (reals in
 * their shortest form). */
void fgjson_out_member(struct fgjson_out *out, const char *key, const json_t *value);
/* Appends value (any JSON value, borrowed) as fgjson_out_member writes it. */
void fgjson_out_value(struct fgjson_out *out, const json_t *value);
/* Appends member key (plain text, written as it is; NULL: an element of the
 * array being written) with value text, a JSON text (borrowed) written as it
 * is, not read again: a row's numbers keep every digit Postgres wrote. NULL
 * text: null. */
void fgjson_out_json(struct fgjson_out *out, const char *key, const char *text);
/* value (any JSON value, borrowed) as fgjson_out_value writes it, as a new
 * NUL-terminated string owned by the caller. */
char *fgjson_dump(const json_t *value);

#endif
