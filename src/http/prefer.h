/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prefer.h - the return preference of a request's Prefer header (RFC 7240,
 * as PostgREST reads it): whether a fenced write answers its row or 204.
 * Pure: no I/O; the texts are borrowed.
 */
#ifndef FG_PREFER_H
#define FG_PREFER_H

/* What the first return preference of a Prefer value asks for. */
enum prefer_return {
    PREFER_RETURN_NONE,    /* the value names no return preference */
    PREFER_RETURN_MINIMAL, /* return=minimal: no row in the answer */
    PREFER_RETURN_OTHER    /* return=representation, or a value the gateway does not know */
};

/*
 * The first return preference of value, one Prefer header line (NULL: none):
 * "If any preference is specified more than once, only the first instance is
 * to be considered" (RFC 7240 2). Names and values compare case-insensitively,
 * a value may be quoted; parameters after ';' and other preferences are
 * skipped.
 */
enum prefer_return prefer_return_of(const char *value);

#endif
