/*
 * audit_filter.h - the query of GET /v1/audit/rejections (resource, lock,
 * since_ms, limit, after_id) read from its text arguments and range-checked.
 * Pure: strings are borrowed from the caller.
 */
#ifndef FG_AUDIT_FILTER_H
#define FG_AUDIT_FILTER_H

#include <stdint.h>

#include "util/error.h"

#define AUDIT_LIMIT_DEFAULT 100
#define AUDIT_LIMIT_MAX     1000

struct audit_filter {
    const char *resource;  /* only this resource, or NULL */
    const char *lock_name; /* only writes under this lock, or NULL */
    int64_t since_ms;      /* only records at or after this epoch ms (0: all) */
    int64_t after_id;      /* only records with a larger id (keyset cursor, 0: from the start) */
    int limit;             /* at most this many records, 1 .. AUDIT_LIMIT_MAX */
};

/*
 * Fills *out from the decoded query arguments (NULL or "" when absent).
 * Integers must be plain decimal and in range; anything else fails with
 * FG_ERR_INVALID_FIELD naming the argument.
 */
int audit_filter_parse(const char *resource, const char *lock_name, const char *since_ms,
                       const char *limit, const char *after_id, struct audit_filter *out,
                       struct fg_error *err) FG_WUR;

#endif
