/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fgjson.c - field readers for request bodies: the one place that decides what a
 * wrong type or an out-of-range number looks like to a client. And the JSON
 * writer of the request path (replies, log lines): straight into a per-thread
 * buffer, byte for byte jansson's compact form but for reals (the shortest
 * text that reads back as the same double), without jansson's dumper and its
 * allocations. Must not: decide what a reply or a line holds.
 */
#include "util/fgjson.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/utf8.h"

int fgjson_int(const json_t *obj, const char *field, long long min, long long max, long long *out,
               bool *present, struct fg_error *err)
{
    const json_t *v = json_object_get(obj, field);
    if (present != NULL)
        *present = false;
    if (v == NULL)
        return 0;
    if (json_is_null(v))
        return fgjson_null_refused(field, err);
    if (!json_is_integer(v))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be an integer", field);
    long long n = json_integer_value(v);
    if (n < min || n > max)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be between %lld and %lld", field,
                       min, max);
    *out = n;
    if (present != NULL)
        *present = true;
    return 0;
}

int fgjson_null_refused(const char *field, struct fg_error *err)
{
    return fg_fail(err, FG_ERR_INVALID_FIELD,
                   "field '%s' must not be null: leave it out for its default", field);
}

long long fgjson_answer_int(const json_t *obj, const char *field, long long fallback)
{
    const json_t *v = json_object_get(obj, field);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (long long)json_real_value(v);
    return fallback;
}

bool fgjson_listed(const char *const *list, const char *name)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

int fgjson_only(const json_t *obj, const char *const *allowed, const char *where,
                struct fg_error *err)
{
    char names[160];
    size_t used = 0, unknown = 0;
    const char *name;
    const json_t *value;
    json_object_foreach((json_t *)obj, name, value)
    {
        if (fgjson_listed(allowed, name))
            continue;
        int w = snprintf(names + used, sizeof names - used, "%s'%s%.*s'", unknown ? ", " : "",
                         where, utf8_cut_len(name, 40), name);
        unknown++;
        if (w < 0 || (size_t)w >= sizeof names - used)
            break; /* the first few name the problem well enough */
        used += (size_t)w;
    }
    if (unknown == 0)
        return 0;
    names[used] = '\0';
    return fg_fail(err, FG_ERR_INVALID_FIELD, "unknown field%s %s", unknown > 1 ? "s" : "", names);
}

#define FLAT_DEPTH 4 /* objects nested deeper are left to jansson */

/* A reading position in a body of n bytes. */
struct flat_scan {
    const char *s; /* the body */
    size_t n;      /* its length */
    size_t at;     /* the next byte to read */
};

static void skip_space(struct flat_scan *p)
{
    while (p->at < p->n && (p->s[p->at] == ' ' || p->s[p->at] == '\t' || p->s[p->at] == '\n' ||
                            p->s[p->at] == '\r'))
        p->at++;
}

static bool take(struct flat_scan *p, char c)
{
    skip_space(p);
    if (p->at >= p->n || p->s[p->at] != c)
        return false;
    p->at++;
    return true;
}

/* A string of printable ASCII without escapes after its opening quote: sets
 * *start and *len, false for anything else. */
static bool plain_string(struct flat_scan *p, const char **start, size_t *len)
{
    size_t from = p->at;
    while (p->at < p->n && p->s[p->at] != '"') {
        unsigned char c = (unsigned char)p->s[p->at];
        if (c < 0x20 || c > 0x7E || c == '\\')
            return false;
        p->at++;
    }
    if (p->at >= p->n)
        return false;
    *start = p->s + from;
    *len = p->at++ - from;
    return true;
}

/* An integer of at most 18 digits without leading zeros, as jansson reads it,
 * into *v; false for anything else. */
static bool plain_digits(struct flat_scan *p, long long *v)
{
    bool negative = p->s[p->at] == '-';
    size_t from = p->at += negative;
    long long n = 0;
    while (p->at < p->n && p->s[p->at] >= '0' && p->s[p->at] <= '9' && p->at - from < 18)
        n = n * 10 + (p->s[p->at++] - '0');
    size_t digits = p->at - from;
    if (digits == 0 || (digits > 1 && p->s[from] == '0'))
        return false;
    if (p->at < p->n && strchr("0123456789.eE", p->s[p->at]) != NULL)
        return false; /* more digits, a fraction or an exponent */
    *v = negative ? -n : n;
    return true;
}

/* A value that is no object, as scan_value reads it: a string (JSON_STRING:
 * len bytes at text, borrowed from the body), an integer (JSON_INTEGER:
 * number), JSON_TRUE, JSON_FALSE or JSON_NULL. */
struct flat_value {
    json_type type;
    const char *text;
    size_t len;
    long long number;
};

/* The value at p, when it is no object, into m: a plain string, an integer,
 * true, false or null; false for anything else. */
static bool scan_value(struct flat_scan *p, struct flat_value *m)
{
    static const struct {
        const char *text;
        size_t len;
        json_type type;
    } words[] = {{"true", 4, JSON_TRUE}, {"false", 5, JSON_FALSE}, {"null", 4, JSON_NULL}};
    skip_space(p);
    if (p->at >= p->n)
        return false;
    char c = p->s[p->at];
    if (c == '"') {
        p->at++;
        m->type = JSON_STRING;
        return plain_string(p, &m->text, &m->len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        m->type = JSON_INTEGER;
        return plain_digits(p, &m->number);
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (p->n - p->at >= words[i].len &&
            memcmp(p->s + p->at, words[i].text, words[i].len) == 0) {
            p->at += words[i].len;
            m->type = words[i].type;
            return true;
        }
    return false;
}

static json_t *flat_object(struct flat_scan *p, int depth);

/* The value at p, in an object nested depth deep: a plain string, an integer,
 * true, false, null or an object of those (up to FLAT_DEPTH deep); NULL for
 * anything else. */
static json_t *plain_value(struct flat_scan *p, int depth)
{
    skip_space(p);
    if (p->at < p->n && p->s[p->at] == '{' && depth < FLAT_DEPTH) {
        p->at++;
        return flat_object(p, depth + 1);
    }
    struct flat_value m = {.type = JSON_NULL};
    if (!scan_value(p, &m))
        return NULL;
    switch (m.type) {
    case JSON_STRING: return json_stringn_nocheck(m.text, m.len);
    case JSON_INTEGER: return json_integer(m.number);
    case JSON_TRUE: return json_true();
    case JSON_FALSE: return json_false();
    default: return json_null();
    }
}

/* An object being built, nested depth deep. */
struct flat_tree {
    json_t *obj;
    int depth;
};

/* Sets the member named key (key_len bytes) of t, reading its value at p;
 * false for a repeated name (left to jansson) or a value that is not plain. */
static bool tree_member(struct flat_tree *t, struct flat_scan *p, const char *key, size_t key_len)
{
    if (json_object_getn(t->obj, key, key_len) != NULL)
        return false;
    json_t *value = plain_value(p, t->depth);
    return value != NULL && json_object_setn_new_nocheck(t->obj, key, key_len, value) == 0;
}

/* The members and closing brace of an object whose opening brace p just read,
 * each set in t; false for anything parse_flat leaves to jansson. */
static bool each_member(struct flat_scan *p, struct flat_tree *t)
{
    bool more = !take(p, '}');
    while (more) {
        const char *key;
        size_t key_len;
        if (!take(p, '"') || !plain_string(p, &key, &key_len) || !take(p, ':') ||
            !tree_member(t, p, key, key_len))
            return false;
        more = take(p, ',');
        if (!more && !take(p, '}'))
            return false;
    }
    return true;
}

/* The object whose opening brace p just read, nested depth deep; NULL for
 * anything parse_flat leaves to jansson. */
static json_t *flat_object(struct flat_scan *p, int depth)
{
    struct flat_tree t = {json_object(), depth};
    FG_ASSERT(t.obj != NULL);
    if (each_member(p, &t))
        return t.obj;
    json_decref(t.obj);
    return NULL;
}

json_t *fgjson_parse_flat(const char *body, size_t len)
{
    struct flat_scan p = {body, len, 0};
    if (!take(&p, '{'))
        return NULL;
    json_t *obj = flat_object(&p, 1);
    skip_space(&p);
    if (obj != NULL && p.at == p.n)
        return obj;
    json_decref(obj);
    return NULL;
}

#define PATH_DEPTH 16 /* containers a path names; a value deeper is named by its ancestor */

/* The path of the value a scan of a body is in ("ops[2].set.n"), as far as
 * it fits in text: a member's name after its object's path and a dot, an
 * item's index in brackets after its array's path. */
struct member_path {
    char text[FGJSON_MEMBER_MAX];
    size_t len;               /* of text */
    int depth;                /* objects and arrays open */
    size_t base[PATH_DEPTH];  /* the length of text where each of the first ones began */
    size_t index[PATH_DEPTH]; /* the index of each one's current item; SIZE_MAX: an object */
};

/* True if m's innermost container is one its path names. */
static bool path_named(const struct member_path *m)
{
    return m->depth > 0 && m->depth <= PATH_DEPTH;
}

/* Sets the last step of m's path, that of the value in its innermost
 * container, which path_named: mark ("." or "") and len bytes of step after
 * that container's path. */
static void path_step(struct member_path *m, const char *mark, const char *step, size_t len)
{
    size_t at = m->base[m->depth - 1];
    int w = snprintf(m->text + at, sizeof m->text - at, "%s%.*s", mark, (int)len, step);
    m->len = w < 0 ? at : at + (size_t)w < sizeof m->text ? at + (size_t)w : sizeof m->text - 1;
    m->text[m->len] = '\0';
}

/* Sets the last step of m's path to the index of the current item of its
 * innermost container, an array that path_named. */
static void path_index(struct member_path *m)
{
    char index[24];
    int n = snprintf(index, sizeof index, "[%zu]", m->index[m->depth - 1]);
    path_step(m, "", index, (size_t)n);
}

/* Opens an object (item SIZE_MAX) or an array (item 0) in m. */
static void path_open(struct member_path *m, size_t item)
{
    m->depth++;
    if (!path_named(m))
        return;
    m->base[m->depth - 1] = m->len;
    m->index[m->depth - 1] = item;
    if (item != SIZE_MAX)
        path_index(m);
}

/* Closes m's innermost container: the path is again that of the value it was. */
static void path_close(struct member_path *m)
{
    if (path_named(m)) {
        m->len = m->base[m->depth - 1];
        m->text[m->len] = '\0';
    }
    m->depth--;
}

size_t fgjson_string_end(const char *s, size_t n, size_t at)
{
    for (at++; at < n && s[at] != '"'; at++)
        at += s[at] == '\\';
    return at < n ? at + 1 : n;
}

/* True if the first byte of s[at..n) that is no white space is c. */
static bool next_is(const char *s, size_t n, size_t at, char c)
{
    while (at < n && strchr(" \t\r\n", s[at]) != NULL)
        at++;
    return at < n && s[at] == c;
}

/* Reads into m the path of the value that begins at s[n], the n bytes
 * before it being the start of a JSON text that jansson has read: a string
 * followed by a colon is a member's name. False if the text is no object. */
static bool value_path(const char *s, size_t n, struct member_path *m)
{
    *m = (struct member_path){.len = 0};
    for (size_t at = 0; at < n;) {
        char c = s[at];
        if (c == '"') {
            size_t end = fgjson_string_end(s, n, at);
            if (path_named(m) && next_is(s, n, end, ':'))
                path_step(m, m->base[m->depth - 1] > 0 ? "." : "", s + at + 1, end - at - 2);
            at = end;
            continue;
        }
        if (c == '[' && m->depth == 0)
            return false;
        if (c == '{' || c == '[')
            path_open(m, c == '{' ? SIZE_MAX : 0);
        else if (c == '}' || c == ']')
            path_close(m);
        else if (c == ',' && path_named(m) && m->index[m->depth - 1] != SIZE_MAX) {
            m->index[m->depth - 1]++;
            path_index(m);
        }
        at++;
    }
    return m->depth > 0;
}

/* The offset where the integer that ends at s[end] begins, or SIZE_MAX if
 * the number there is a real (one with a fraction or an exponent). */
static size_t integer_start(const char *s, size_t end)
{
    size_t at = end;
    while (at > 0 && s[at - 1] >= '0' && s[at - 1] <= '9')
        at--;
    at -= at > 0 && s[at - 1] == '-';
    if (at == end || (at > 0 && strchr(".eE+-", s[at - 1]) != NULL))
        return SIZE_MAX;
    return at;
}

/* Fails with FG_ERR_INVALID_FIELD naming the member of body (len bytes)
 * whose number jansson could not hold and stopped after (at offset end),
 * whose path goes into too_big, if that number is an integer; returns 0 with
 * too_big "" for a real. */
static int integer_too_big(const char *body, size_t len, size_t end, char *too_big,
                           struct fg_error *err)
{
    struct member_path m;
    size_t start = end <= len ? integer_start(body, end) : SIZE_MAX;
    if (start == SIZE_MAX || !value_path(body, start, &m))
        return 0;
    utf8_trim_cut(m.text);
    strcpy(too_big, m.text);
    return fg_fail(err, FG_ERR_INVALID_FIELD,
                   "field '%s' is an integer beyond 64 bits (%lld to %lld)", m.text, LLONG_MIN,
                   LLONG_MAX);
}

json_t *fgjson_parse_object(const char *body, size_t len, char *too_big, struct fg_error *err)
{
    too_big[0] = '\0';
    if (len == 0)
        return json_object();
    json_t *flat = fgjson_parse_flat(body, len);
    if (flat != NULL)
        return flat;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL && json_error_code(&jerr) == json_error_numeric_overflow &&
        integer_too_big(body, len, (size_t)jerr.position, too_big, err) != 0)
        return NULL;
    if (root == NULL) {
        /* jansson's word for a NUL names its own flag, which means nothing to a client */
        bool nul = json_error_code(&jerr) == json_error_null_character;
        fg_fail(err, FG_ERR_INVALID_JSON, "body is not valid JSON: %s (line %d, column %d)",
                nul ? "no string of a body may hold \\u0000" : jerr.text, jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        fg_fail(err, FG_ERR_INVALID_JSON, "body must be a JSON object");
        return NULL;
    }
    return root;
}

json_t *fgjson_load_file(const char *path, const char *where, struct fg_error *err)
{
    /* A directory opens and reads as an empty file: say what it is (a mounted
     * secret is often a directory holding the file). */
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fg_fail(err, FG_ERR_CONFIG, "%s %s: is a directory, not a JSON file", where, path);
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (root != NULL)
        return root;
    char *quoted = strstr(jerr.text, " near '");
    if (quoted != NULL)
        *quoted = '\0';
    if (jerr.line < 1) /* not opened or not read: there is no place in the text to name */
        fg_fail(err, FG_ERR_CONFIG, "%s %s: %s", where, path, jerr.text);
    else
        fg_fail(err, FG_ERR_CONFIG, "%s %s: %s (line %d, column %d)", where, path, jerr.text,
                jerr.line, jerr.column);
    return NULL;
}

/* Rewrites text, "%g"'s exponent form of an integer (exponent e from 0 to
 * 20, at least its digits less one: "1e+16", "6.26643345147825e+16"), as its
 * digits followed by zeros, the same decimal value ("10000000000000000",
 * "62664334514782500"). Returns the new length. */
static size_t integer_written_out(char *text, long e)
{
    char out[FGJSON_REAL_MAX];
    size_t n = 0, digits = 0;
    for (const char *p = text; *p != 'e'; p++)
        if (*p != '.')
            digits += (out[n++] = *p) != '-';
    for (long zeros = e - (long)digits + 1; zeros > 0; zeros--)
        out[n++] = '0';
    out[n] = '\0';
    memcpy(text, out, n + 1);
    return n;
}

size_t fgjson_real_text(double value, char *text)
{
    int digits = 1;
    int n = snprintf(text, FGJSON_REAL_MAX, "%.*g", digits, value);
    while (digits < 17 && strtod(text, NULL) != value) /* 17 digits always read back */
        n = snprintf(text, FGJSON_REAL_MAX, "%.*g", ++digits, value);
    FG_ASSERT(n > 0 && n < FGJSON_REAL_MAX);
    /* Few digits of a large number come as an exponent ("1e+02" for 100),
     * which an integer column does not read: below 1e21 (where JSON writers
     * such as JavaScript's switch to exponents too) they are written out. */
    const char *e = strchr(text, 'e');
    long exponent = e != NULL ? strtol(e + 1, NULL, 10) : -1;
    if (exponent >= 0 && exponent < 21)
        return integer_written_out(text, exponent);
    return (size_t)n;
}

void fgjson_out_init(struct fgjson_out *out, char *buf, size_t cap)
{
    *out = (struct fgjson_out){.buf = buf, .cap = cap};
}

void fgjson_out_free(struct fgjson_out *out)
{
    free(out->heap);
    out->heap = NULL;
}

char *fgjson_out_take(struct fgjson_out *out)
{
    char *text = strndup(out->buf, out->len);
    FG_ASSERT(text != NULL);
    fgjson_out_free(out);
    return text;
}

/* Makes room for n more bytes, moving the text to the heap when it outgrows buf. */
static void reserve(struct fgjson_out *out, size_t n)
{
    if (out->len + n <= out->cap)
        return;
    size_t cap = out->cap * 2 > out->len + n ? out->cap * 2 : out->len + n + 256;
    char *grown = out->heap != NULL ? realloc(out->heap, cap) : malloc(cap);
    FG_ASSERT(grown != NULL);
    if (out->heap == NULL)
        memcpy(grown, out->buf, out->len);
    out->heap = out->buf = grown;
    out->cap = cap;
}

void fgjson_out_raw(struct fgjson_out *out, const char *text, size_t n)
{
    reserve(out, n);
    memcpy(out->buf + out->len, text, n);
    out->len += n;
}

static void put_char(struct fgjson_out *out, char c)
{
    reserve(out, 1);
    out->buf[out->len++] = c;
}

void fgjson_out_open(struct fgjson_out *out)
{
    put_char(out, '{');
    out->need_comma = false;
}

void fgjson_out_close(struct fgjson_out *out)
{
    put_char(out, '}');
    out->need_comma = true;
}

/* The length of the UTF-8 sequence at s (n bytes left), or 0 if it is not one
 * (the checks of jansson's utf8.c: no overlong form, no surrogate, nothing
 * above U+10FFFF). */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t size = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (size == 0 || size > n)
        return 0;
    unsigned long cp = c & (0x7F >> size);
    for (size_t i = 1; i < size; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((size == 3 && cp < 0x800) || (size == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return size;
}

/* The bytes of s (n of them) that begin no UTF-8 sequence of utf8_length. */
static size_t not_utf8(const unsigned char *s, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        size_t len = s[i] < 0x80 ? 1 : utf8_length(s + i, n - i);
        bad += len == 0;
        i += len != 0 ? len : 1;
    }
    return bad;
}

json_t *fgjson_string(const char *text)
{
    static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
    const unsigned char *u = (const unsigned char *)text;
    size_t n = strlen(text), bad = not_utf8(u, n);
    if (bad == 0)
        return json_stringn_nocheck(text, n);
    char *copy = malloc(n + 2 * bad + 1);
    FG_ASSERT(copy != NULL);
    size_t len = 0;
    for (size_t i = 0; i < n;) {
        size_t step = u[i] < 0x80 ? 1 : utf8_length(u + i, n - i);
        if (step == 0) {
            memcpy(copy + len, replacement, 3);
            len += 3;
            i++;
        } else {
            memcpy(copy + len, text + i, step);
            len += step;
            i += step;
        }
    }
    json_t *out = json_stringn_nocheck(copy, len);
    free(copy);
    return out;
}

/* Appends s (n bytes) as a JSON string with jansson's escapes. */
static void put_string(struct fgjson_out *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    put_char(out, '"');
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\')
            run++;
        fgjson_out_raw(out, s + i, run - i);
        if (run == n)
            break;
        i = run;
        unsigned char c = u[i];
        if (c >= 0x80) {
            size_t len = utf8_length(u + i, n - i);
            if (len == 0)
                fgjson_out_raw(out, "\\uFFFD", 6);
            else
                fgjson_out_raw(out, s + i, len);
            i += len != 0 ? len : 1;
            continue;
        }
        const char *short_escape = c == '"'    ? "\\\""
                                   : c == '\\' ? "\\\\"
                                   : c == '\b' ? "\\b"
                                   : c == '\f' ? "\\f"
                                   : c == '\n' ? "\\n"
                                   : c == '\r' ? "\\r"
                                   : c == '\t' ? "\\t"
                                               : NULL;
        if (short_escape != NULL) {
            fgjson_out_raw(out, short_escape, 2);
        } else {
            char u_escape[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            fgjson_out_raw(out, u_escape, sizeof u_escape);
        }
        i++;
    }
    put_char(out, '"');
}

/* Appends the separator a member or element needs, and key (NULL: an array
 * element) as "key":. */
static void put_key(struct fgjson_out *out, const char *key, size_t key_len, bool escape)
{
    if (out->need_comma)
        put_char(out, ',');
    out->need_comma = true;
    if (key == NULL)
        return;
    if (escape) {
        put_string(out, key, key_len);
    } else {
        put_char(out, '"');
        fgjson_out_raw(out, key, key_len);
        put_char(out, '"');
    }
    put_char(out, ':');
}

void fgjson_out_open_item(struct fgjson_out *out)
{
    put_key(out, NULL, 0, false);
    fgjson_out_open(out);
}

void fgjson_out_open_array(struct fgjson_out *out, const char *key)
{
    put_key(out, key, strlen(key), false);
    put_char(out, '[');
    out->need_comma = false;
}

void fgjson_out_close_array(struct fgjson_out *out)
{
    put_char(out, ']');
    out->need_comma = true;
}

static void put_int(struct fgjson_out *out, long long value)
{
    char digits[24];
    size_t at = sizeof digits;
    unsigned long long u = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do {
        digits[--at] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (value < 0)
        digits[--at] = '-';
    fgjson_out_raw(out, digits + at, sizeof digits - at);
}

void fgjson_out_strn(struct fgjson_out *out, const char *key, const char *value, size_t len)
{
    put_key(out, key, strlen(key), false);
    put_string(out, value, len);
}

void fgjson_out_str(struct fgjson_out *out, const char *key, const char *value)
{
    fgjson_out_strn(out, key, value, strlen(value));
}

void fgjson_out_int(struct fgjson_out *out, const char *key, long long value)
{
    put_key(out, key, strlen(key), false);
    put_int(out, value);
}

/* Appends value (finite) as jansson writes a real, but in its shortest text:
 * with a '.' or an exponent, so that it reads back as a real, and an exponent
 * without '+' or leading zeros ("1e22", "2.5e-7", "3.0"). */
static void put_real(struct fgjson_out *out, double value)
{
    char text[FGJSON_REAL_MAX];
    size_t n = fgjson_real_text(value, text);
    char *e = strchr(text, 'e');
    if (e == NULL) {
        fgjson_out_raw(out, text, n);
        if (strchr(text, '.') == NULL)
            fgjson_out_raw(out, ".0", 2);
        return;
    }
    fgjson_out_raw(out, text, (size_t)(e - text) + 1);
    const char *exponent = e + 1;
    if (*exponent == '-')
        fgjson_out_raw(out, exponent++, 1);
    exponent += *exponent == '+';
    while (*exponent == '0' && exponent[1] != '\0')
        exponent++;
    fgjson_out_raw(out, exponent, strlen(exponent));
}

static void put_value(struct fgjson_out *out, const json_t *value);

void fgjson_out_members(struct fgjson_out *out, const json_t *object)
{
    const char *key;
    size_t key_len;
    json_t *member;
    json_object_keylen_foreach((json_t *)object, key, key_len, member)
    {
        put_key(out, key, key_len, true);
        put_value(out, member);
    }
}

/* Appends value, which follows whatever separator and key it needs. */
static void put_value(struct fgjson_out *out, const json_t *value)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT:
        fgjson_out_open(out);
        fgjson_out_members(out, value);
        fgjson_out_close(out);
        break;
    case JSON_ARRAY: {
        put_char(out, '[');
        out->need_comma = false;
        size_t i;
        json_t *element;
        json_array_foreach(value, i, element)
        {
            put_key(out, NULL, 0, false);
            put_value(out, element);
        }
        put_char(out, ']');
        break;
    }
    case JSON_STRING: put_string(out, json_string_value(value), json_string_length(value)); break;
    case JSON_INTEGER: put_int(out, json_integer_value(value)); break;
    case JSON_TRUE: fgjson_out_raw(out, "true", 4); break;
    case JSON_FALSE: fgjson_out_raw(out, "false", 5); break;
    case JSON_NULL: fgjson_out_raw(out, "null", 4); break;
    case JSON_REAL: put_real(out, json_real_value(value)); break;
    }
    out->need_comma = true;
}

void fgjson_out_member(struct fgjson_out *out, const char *key, const json_t *value)
{
    put_key(out, key, strlen(key), false);
    put_value(out, value);
}

void fgjson_out_value(struct fgjson_out *out, const json_t *value)
{
    put_value(out, value);
}

void fgjson_out_json(struct fgjson_out *out, const char *key, const char *text)
{
    put_key(out, key, key != NULL ? strlen(key) : 0, false);
    if (text == NULL)
        text = "null";
    fgjson_out_raw(out, text, strlen(text));
    out->need_comma = true;
}

char *fgjson_dump(const json_t *value)
{
    char first[256];
    struct fgjson_out text;
    fgjson_out_init(&text, first, sizeof first);
    put_value(&text, value);
    return fgjson_out_take(&text);
}
