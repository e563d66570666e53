/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit_filter.h - the query of GET /v1/audit/rejections (resource, lock,
 * lease_kind, since_ms, limit, after_id) read from its text arguments; since_ms and limit
 * have passed their route's bounds (http/strict.h), after_id is checked here.
 * Pure: strings are borrowed from the caller.
 */
#ifndef FG_AUDIT_FILTER_H
#define FG_AUDIT_FILTER_H

#include <stdint.h>

#include "fglimits.h"
#include "util/error.h"

struct audit_filter {
    const char *resource;   /* only this resource, or NULL */
    const char *lock_name;  /* only writes whose token names this lock or semaphore, or NULL */
    const char *lease_kind; /* only writes whose token is of this kind ("lock", "semaphore"), or
                               NULL */
    const char *owner;      /* only writes whose writer named this owner, or NULL */
    int64_t since_ms;       /* only records at or after this epoch ms (0: all) */
    int64_t until_ms;       /* only records before this epoch ms (0: no end) */
    int64_t after_id;       /* only records with a larger id (keyset cursor, 0: from the start) */
    int limit;              /* at most this many records, 1 .. AUDIT_LIMIT_MAX */
};

/*
 * Fills *out from the decoded query arguments (NULL when absent). after_id
 * must be plain decimal and not negative, lease_kind "lock" or "semaphore";
 * anything else fails with FG_ERR_INVALID_FIELD naming it.
 */
int audit_filter_parse(const char *resource, const char *lock_name, const char *lease_kind,
                       const char *since_ms, const char *limit, const char *after_id,
                       struct audit_filter *out, struct fg_error *err) FG_WUR;

/*
 * Adds the narrower filters of the console to *f (already parsed): owner (NULL
 * for any) and until_ms (an end of the time range, after since_ms).
 * A bad until_ms fails with FG_ERR_INVALID_FIELD.
 */
int audit_filter_narrow(const char *owner, const char *until_ms, struct audit_filter *f,
                        struct fg_error *err) FG_WUR;

/* The time range of an audit summary: [since_ms, until_ms). */
struct audit_window {
    int64_t since_ms;
    int64_t until_ms;
};

/*
 * Reads the range of GET /v1/audit/summary: until_ms defaults to now_ms,
 * since_ms to one hour before until_ms (0 when until_ms is within the epoch's
 * first hour); since_ms must come before until_ms and
 * the range span at most AUDIT_WINDOW_MAX_MS. Else FG_ERR_INVALID_FIELD.
 */
int audit_window_parse(const char *since_ms, const char *until_ms, int64_t now_ms,
                       struct audit_window *out, struct fg_error *err) FG_WUR;

#endif
