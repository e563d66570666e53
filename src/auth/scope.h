/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scope.h - the scopes of API keys (docs/api.md, "Authentication and authorization"):
 * what a configured scope may look like, and whether it grants the scope a call
 * needs. A needed scope is concrete ("lock:invoice:42", "pg:invoices:write");
 * a granted one may hold '*' in its pattern part, matching any run of bytes
 * ("lock:invoice:*", "redis:app:*:write"). "admin" grants everything. Pure.
 */
#ifndef FG_SCOPE_H
#define FG_SCOPE_H

#include <stdbool.h>

#include "fglimits.h"
#include "util/error.h"

/* Checks a scope as written in the configuration; a wrong shape or an odd
 * character fails with FG_ERR_CONFIG saying what is wrong (the caller names
 * the entry). */
int scope_check(const char *scope, struct fg_error *err) FG_WUR;

/* True iff the granted scope (checked by scope_check) covers the needed one. */
bool scope_grants(const char *granted, const char *needed);

/* True iff pattern, where '*' matches any run of bytes, matches all of text
 * (pattern_len and text_len bytes). */
bool scope_glob(const char *pattern, size_t pattern_len, const char *text, size_t text_len);

/* A part of the names a listing reads: the names that start with start, or
 * (exact) the name start alone; whole when the scope matches every one of
 * them (a name alone, or a pattern whose only '*'s end it), so that a range
 * that is not whole holds names the caller may not see. */
struct scope_range {
    char start[NAME_MAX_LEN + 1];
    bool exact;
    bool whole;
};

/*
 * The parts of the names after `after` ("" from the start) that start with
 * prefix and that the nscopes granted scopes (checked by scope_check) may
 * match in category kind ("lock:" or "semaphore:"): disjoint, in name order,
 * so that a listing reads only where the caller may look. A pattern covers the
 * names that start with its text up to its first '*' (exactly its names when
 * the '*' ends it: whole, a few more otherwise), or its one name when it has
 * no '*'; "admin" covers every name under prefix. Of two ranges with one
 * start, a whole one is kept. Writes at most max ranges into out
 * (nscopes suffice) and returns how many it wrote.
 */
size_t scope_ranges(const char *const *granted, size_t nscopes, const char *kind,
                    const char *prefix, const char *after, struct scope_range *out, size_t max);

#endif
