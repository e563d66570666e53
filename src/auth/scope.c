/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scope.c - scope grammar and matching. A scope is a category ("lock",
 * "semaphore", "pg", "redis") with a pattern and, for the stores, an access
 * ("read" or "write") after the last ':'; or one of the fixed words "audit:read",
 * "metrics" and "admin". Matching compares category and access exactly and the
 * patterns with '*' globbing; it never allocates and never looks anything up.
 * A key's lock: and semaphore: scopes also say which ranges of names a listing
 * reads for it (scope_ranges).
 */
#include "auth/scope.h"

#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

struct scope_category {
    const char *prefix; /* "lock:" */
    size_t prefix_len;  /* bytes of prefix */
    bool with_access;   /* ends in ":read" or ":write" */
    const char *extra;  /* bytes allowed in the pattern besides A-Z a-z 0-9 and '*' */
};

#define CATEGORY(prefix, with_access, extra)                                                       \
    {                                                                                              \
        prefix, sizeof prefix - 1, with_access, extra                                              \
    }

static const struct scope_category categories[] = {
    CATEGORY("lock:", false, "._:/-"),
    CATEGORY("semaphore:", false, "._:/-"),
    CATEGORY("pg:", true, "._-$"),
    CATEGORY("redis:", true, "!\"#$%&'()+,-./:;<=>?@[\\]^_`{|}~"),
};

static const char *const fixed_scopes[] = {"admin", "metrics", "audit:read"};

#define NCATEGORIES (sizeof categories / sizeof categories[0])
#define NFIXED      (sizeof fixed_scopes / sizeof fixed_scopes[0])

/* The parts of a scope: its category (NULL for a fixed word), pattern and access. */
struct scope_parts {
    const struct scope_category *category;
    const char *pattern;
    size_t pattern_len;
    const char *access; /* "read"/"write", or "" */
};

static bool scope_split(const char *scope, struct scope_parts *p)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < NCATEGORIES; i++) {
        size_t n = categories[i].prefix_len;
        if (strncmp(scope, categories[i].prefix, n) != 0)
            continue;
        p->category = &categories[i];
        p->pattern = scope + n;
        p->pattern_len = strlen(p->pattern);
        p->access = "";
        if (!categories[i].with_access)
            return true;
        const char *colon = strrchr(p->pattern, ':');
        if (colon == NULL)
            return false;
        p->pattern_len = (size_t)(colon - p->pattern);
        p->access = colon + 1;
        return true;
    }
    return false;
}

static bool is_fixed(const char *scope)
{
    for (size_t i = 0; i < NFIXED; i++)
        if (strcmp(scope, fixed_scopes[i]) == 0)
            return true;
    return false;
}

static bool pattern_byte_ok(const struct scope_category *c, char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '*' || (ch != '\0' && strchr(c->extra, ch) != NULL);
}

int scope_check(const char *scope, struct fg_error *err)
{
    size_t len = strlen(scope);
    if (len == 0 || len > SCOPE_MAX_LEN)
        return fg_fail(err, FG_ERR_CONFIG, "a scope is 1 to %d bytes", SCOPE_MAX_LEN);
    if (is_fixed(scope))
        return 0;
    struct scope_parts p;
    if (!scope_split(scope, &p))
        return fg_fail(err, FG_ERR_CONFIG,
                       "unknown scope '%.*s' (lock:<pattern>, semaphore:<pattern>, "
                       "pg:<table>:read|write, redis:<pattern>:read|write, audit:read, metrics, "
                       "admin)",
                       utf8_cut_len(scope, 80), scope);
    if (p.pattern_len == 0)
        return fg_fail(err, FG_ERR_CONFIG, "scope '%.*s' has an empty pattern",
                       utf8_cut_len(scope, 80), scope);
    for (size_t i = 0; i < p.pattern_len; i++)
        if (!pattern_byte_ok(p.category, p.pattern[i]))
            return fg_fail(err, FG_ERR_CONFIG,
                           "scope '%.*s' holds a character not allowed here (byte 0x%02x)",
                           utf8_cut_len(scope, 80), scope, (unsigned char)p.pattern[i]);
    if (p.category->with_access && strcmp(p.access, "read") != 0 && strcmp(p.access, "write") != 0)
        return fg_fail(err, FG_ERR_CONFIG, "scope '%.*s' must end in :read or :write",
                       utf8_cut_len(scope, 80), scope);
    return 0;
}

bool scope_glob(const char *pattern, size_t pattern_len, const char *text, size_t text_len)
{
    size_t p = 0, t = 0, star = (size_t)-1, resume = 0;
    while (t < text_len) {
        if (p < pattern_len && pattern[p] == '*') {
            star = p++;
            resume = t;
        } else if (p < pattern_len && pattern[p] == text[t]) {
            p++;
            t++;
        } else if (star != (size_t)-1) {
            p = star + 1;
            t = ++resume;
        } else {
            return false;
        }
    }
    while (p < pattern_len && pattern[p] == '*')
        p++;
    return p == pattern_len;
}

bool scope_grants(const char *granted, const char *needed)
{
    struct scope_parts g, n;
    if (scope_split(granted, &g) && scope_split(needed, &n))
        return g.category == n.category && strcmp(g.access, n.access) == 0 &&
               scope_glob(g.pattern, g.pattern_len, n.pattern, n.pattern_len);
    /* A fixed word on either side: only "admin" or the same word grants it. */
    return strcmp(granted, "admin") == 0 || strcmp(granted, needed) == 0;
}

static bool starts_with(const char *text, const char *start)
{
    return strncmp(text, start, strlen(start)) == 0;
}

/* The names under prefix that the granted scope covers in category kind, into
 * *r; false when it covers none there. */
static bool range_of(const char *granted, const char *kind, const char *prefix,
                     struct scope_range *r)
{
    const char *pattern = "*";
    if (strcmp(granted, "admin") != 0) {
        struct scope_parts p;
        if (!scope_split(granted, &p) || strcmp(p.category->prefix, kind) != 0)
            return false;
        pattern = p.pattern;
    }
    size_t literal = strcspn(pattern, "*");
    if (literal > NAME_MAX_LEN)
        return false;
    r->exact = pattern[literal] == '\0';
    r->whole = pattern[literal + strspn(pattern + literal, "*")] == '\0';
    memcpy(r->start, pattern, literal);
    r->start[literal] = '\0';
    if (starts_with(r->start, prefix))
        return true;
    if (r->exact || !starts_with(prefix, r->start) || strlen(prefix) > NAME_MAX_LEN)
        return false;
    strcpy(r->start, prefix);
    return true;
}

/* True iff no name of r comes after `after`. */
static bool range_passed(const struct scope_range *r, const char *after)
{
    if (after[0] == '\0')
        return false;
    if (r->exact)
        return strcmp(r->start, after) <= 0;
    return strcmp(r->start, after) < 0 && !starts_with(after, r->start);
}

/* Name order of the ranges' starts; of two with one start, the names that
 * start with it come before the name alone (which they hold), and of those a
 * whole range first (it holds the other and sees all of it). */
static int by_start(const void *a, const void *b)
{
    const struct scope_range *x = a, *y = b;
    int order = strcmp(x->start, y->start);
    if (order != 0)
        return order;
    if (x->exact != y->exact)
        return (int)x->exact - (int)y->exact;
    return (int)y->whole - (int)x->whole;
}

/* True iff every name of r is one of kept's. */
static bool range_within(const struct scope_range *r, const struct scope_range *kept)
{
    return kept->exact ? r->exact && strcmp(r->start, kept->start) == 0
                       : starts_with(r->start, kept->start);
}

size_t scope_ranges(const char *const *granted, size_t nscopes, const char *kind,
                    const char *prefix, const char *after, struct scope_range *out, size_t max)
{
    size_t found = 0;
    for (size_t i = 0; i < nscopes && found < max; i++)
        if (range_of(granted[i], kind, prefix, &out[found]) && !range_passed(&out[found], after))
            found++;
    qsort(out, found, sizeof *out, by_start);
    /* In name order, a range that another holds comes right after it or after
     * another range it holds too: comparing with the last kept suffices. */
    size_t kept = 0;
    for (size_t i = 0; i < found; i++)
        if (kept == 0 || !range_within(&out[i], &out[kept - 1]))
            out[kept++] = out[i];
    return kept;
}
