/* SPDX-License-Identifier: Apache-2.0 */
/*
 * list_query.h - the query of GET /v1/locks and GET /v1/semaphores (prefix,
 * limit, cursor) read from its decoded text arguments and checked. Pure: no
 * I/O; strings are borrowed from the caller and copied into the query.
 */
#ifndef FG_LIST_QUERY_H
#define FG_LIST_QUERY_H

#include "fglimits.h"
#include "util/error.h"
#include "util/names.h"

struct list_query {
    char prefix[NAME_MAX_LEN + 1]; /* names start with this ("" for all) */
    char after[NAME_MAX_LEN + 1];  /* continue after this name ("" from the start) */
    char upto[NAME_MAX_LEN + 1];   /* no name after this ("" for no bound; the parse sets "") */
    int limit;                     /* at most this many items, 1 .. LIST_LIMIT_MAX */
};

/*
 * Fills *out from the decoded query arguments (NULL or "" when absent). The
 * prefix is 0 to NAME_MAX_LEN bytes of the name alphabet; the cursor is the
 * next_cursor of a previous page, which names a lock or semaphore; anything
 * else fails with FG_ERR_INVALID_FIELD naming the argument. The limit has
 * passed its route's bounds (http/strict.h).
 */
int list_query_parse(const char *prefix, const char *limit, const char *cursor,
                     struct list_query *out, struct fg_error *err) FG_WUR;

#endif
