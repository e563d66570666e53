/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router.c - the matcher behind the route table of routes.h. It compares raw
 * path segments with a pattern's literals, then decodes and validates the
 * parameters of the first pattern that fits. It never looks at bodies, headers
 * or backends.
 */
#include "http/router.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fglimits.h"

/* A name may be nothing but slashes: room for the longest key, all of it "/". */
#define MAX_SEGMENTS (SEGMENT_MAX_LEN + 8)

struct segment {
    const char *start;
    size_t len;
};

/* Splits path (which must start with '/') into segments; returns their count or -1. */
static int split_path(const char *path, struct segment *segs, int cap)
{
    if (path[0] != '/')
        return -1;
    int n = 0;
    const char *p = path + 1;
    for (;;) {
        if (n == cap)
            return -1;
        const char *slash = strchr(p, '/');
        segs[n].start = p;
        segs[n].len = slash ? (size_t)(slash - p) : strlen(p);
        n++;
        if (slash == NULL)
            return n;
        p = slash + 1;
    }
}

static bool is_param(const struct segment *s)
{
    return s->len >= 2 && s->start[0] == '{' && s->start[s->len - 1] == '}';
}

static bool is_wildcard(const struct segment *s)
{
    return is_param(s) && s->start[s->len - 2] == '*';
}

static bool segment_equals(const struct segment *a, const struct segment *b)
{
    return a->len == b->len && memcmp(a->start, b->start, a->len) == 0;
}

/* Decodes raw parameter text and checks it against the type named in pattern segment ps. */
static int take_param(const struct segment *ps, const char *raw, size_t raw_len,
                      struct route_match *match, int index, struct fg_error *err)
{
    FG_ASSERT(index < ROUTE_MAX_PARAMS);
    char *out = match->params[index];
    size_t *len = &match->param_lens[index];
    if (name_decode(raw, raw_len, out, SEGMENT_MAX_LEN + 1, len, err) != 0)
        return -1;
    bool is_name = ps->len >= 6 && memcmp(ps->start, "{name", 5) == 0;
    if (is_name && !name_is_valid_lock(out, *len))
        return fg_fail(err, FG_ERR_INVALID_NAME, "names are 1 to %d bytes of A-Z a-z 0-9 . _ : / -",
                       NAME_MAX_LEN);
    if (!is_name && !name_is_valid_key(out, *len))
        return fg_fail(err, FG_ERR_INVALID_NAME,
                       "path parameter must be 1 to %d bytes of printable UTF-8", SEGMENT_MAX_LEN);
    return 0;
}

/* 1 if path segments fit the pattern's shape (literals and counts), else 0. */
static int shape_matches(const struct segment *pat, int np, const struct segment *path, int n,
                         int *wild)
{
    *wild = -1;
    for (int i = 0; i < np; i++)
        if (is_wildcard(&pat[i]))
            *wild = i;
    if (*wild < 0 ? n != np : n < np)
        return 0;
    for (int i = 0; i < np; i++) {
        if (i == *wild)
            continue;
        int j = (*wild >= 0 && i > *wild) ? n - (np - i) : i;
        if (!is_param(&pat[i]) && !segment_equals(&pat[i], &path[j]))
            return 0;
    }
    return 1;
}

static int take_params(const struct segment *pat, int np, const struct segment *path, int n,
                       int wild, struct route_match *match, struct fg_error *err)
{
    int index = 0;
    for (int i = 0; i < np; i++) {
        if (!is_param(&pat[i]))
            continue;
        const char *raw;
        size_t raw_len;
        if (i == wild) {
            const struct segment *last = &path[n - (np - i)];
            raw = path[i].start;
            raw_len = (size_t)(last->start + last->len - raw);
        } else {
            int j = (wild >= 0 && i > wild) ? n - (np - i) : i;
            raw = path[j].start;
            raw_len = path[j].len;
        }
        if (take_param(&pat[i], raw, raw_len, match, index++, err) != 0)
            return -1;
    }
    return 0;
}

/* How each scope's text is made: prefix, the route's first parameter or not, suffix. */
static const struct {
    const char *prefix;
    bool with_param;
    const char *suffix;
} scope_forms[] = {
    [SCOPE_ADMIN] = {"admin", false, ""},
    [SCOPE_OPEN] = {"", false, ""},
    [SCOPE_KEY] = {"", false, ""},
    [SCOPE_LOCK] = {"lock:", true, ""},
    [SCOPE_SEMAPHORE] = {"semaphore:", true, ""},
    [SCOPE_PG_READ] = {"pg:", true, ":read"},
    [SCOPE_PG_WRITE] = {"pg:", true, ":write"},
    [SCOPE_REDIS_READ] = {"redis:", true, ":read"},
    [SCOPE_REDIS_WRITE] = {"redis:", true, ":write"},
    [SCOPE_AUDIT_READ] = {"audit:read", false, ""},
    [SCOPE_METRICS] = {"metrics", false, ""},
};

bool router_needed_scope(const struct route *route, const char *param, char *out, size_t cap)
{
    enum route_scope scope = route->scope;
    FG_ASSERT((size_t)scope < sizeof scope_forms / sizeof scope_forms[0] && cap > 0);
    out[0] = '\0';
    if (scope == SCOPE_OPEN || scope == SCOPE_KEY)
        return false;
    /* Copied, not printed: this runs on every request with auth required. */
    const char *const parts[] = {scope_forms[scope].prefix,
                                 scope_forms[scope].with_param ? param : "",
                                 scope_forms[scope].suffix};
    size_t n = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t len = strlen(parts[i]);
        if (len > cap - 1 - n)
            len = cap - 1 - n;
        memcpy(out + n, parts[i], len);
        n += len;
    }
    out[n] = '\0';
    return true;
}

enum http_method router_method(const char *method)
{
    static const struct {
        const char *name;
        enum http_method method;
    } methods[] = {{"GET", HTTP_GET}, {"HEAD", HTTP_GET},    {"POST", HTTP_POST},
                   {"PUT", HTTP_PUT}, {"PATCH", HTTP_PATCH}, {"DELETE", HTTP_DELETE}};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(method, methods[i].name) == 0)
            return methods[i].method;
    return HTTP_OTHER;
}

void router_allow_header(unsigned allowed, char *out, size_t cap)
{
    static const char *const names[] = {
        [HTTP_GET] = "GET, HEAD", [HTTP_POST] = "POST",     [HTTP_PUT] = "PUT",
        [HTTP_PATCH] = "PATCH",   [HTTP_DELETE] = "DELETE",
    };
    size_t n = 0;
    out[0] = '\0';
    for (int m = HTTP_GET; m < HTTP_OTHER; m++) {
        if ((allowed & (1u << m)) == 0 || n >= cap)
            continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", names[m]);
        n += w > 0 ? (size_t)w : 0;
    }
}

/* False when path (path_len bytes) cannot fit pattern: their texts differ
 * before the pattern's first parameter, or path does not end with the
 * pattern's text after its last one. Most patterns of a table fail this, so
 * the matcher splits only the few that pass (every request is matched against
 * the whole table). */
static bool literal_ends_fit(const char *pattern, const char *path, size_t path_len)
{
    const char *at = path;
    for (const char *p = pattern; *p != '{'; p++, at++) {
        if (*p != *at)
            return false;
        if (*p == '\0')
            return true; /* no parameter: the whole pattern compared */
    }
    const char *last = strrchr(pattern, '}');
    const char *tail = last != NULL ? last + 1 : "";
    size_t tail_len = strlen(tail);
    return tail_len <= path_len && memcmp(path + path_len - tail_len, tail, tail_len) == 0;
}

int router_match(const struct route *table, enum http_method method, const char *path,
                 struct route_match *match, struct fg_error *err)
{
    struct segment segs[MAX_SEGMENTS], pat[MAX_SEGMENTS];
    int n = split_path(path, segs, MAX_SEGMENTS);
    if (n < 0)
        return fg_fail(err, FG_ERR_NOT_FOUND, "no such route");
    size_t path_len = strlen(path);
    bool other_method = false;
    match->allowed = 0;
    for (const struct route *r = table; r->pattern != NULL; r++) {
        if (!literal_ends_fit(r->pattern, path, path_len))
            continue;
        int np = split_path(r->pattern, pat, MAX_SEGMENTS), wild;
        if (!shape_matches(pat, np, segs, n, &wild))
            continue;
        if (r->method != method) {
            other_method = true;
            match->allowed |= 1u << r->method;
            continue;
        }
        memset(match->param_lens, 0, sizeof match->param_lens);
        match->route = r;
        return take_params(pat, np, segs, n, wild, match, err);
    }
    if (other_method)
        return fg_fail(err, FG_ERR_METHOD_NOT_ALLOWED, "method not allowed on this route");
    return fg_fail(err, FG_ERR_NOT_FOUND, "no such route");
}
