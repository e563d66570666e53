/* SPDX-License-Identifier: Apache-2.0 */
/*
 * query.h - the query arguments of a GET, decoded the one strict way of path
 * segments (util/names.h: no malformed escape, no NUL) into buffers the caller
 * owns. Which arguments an endpoint reads and what they mean is its handler's
 * business.
 */
#ifndef FG_QUERY_H
#define FG_QUERY_H

#include <stddef.h>

#include "http/server.h"
#include "util/error.h"

/*
 * Decodes the query arguments names[0..n) of req into values, n slots of cap
 * bytes each (caller-owned, e.g. a char[n][cap]): args[i] points at slot i,
 * or is NULL when argument i is absent. An argument that is badly encoded or
 * longer than cap - 1 bytes decoded fails with FG_ERR_INVALID_FIELD naming it.
 */
int http_query_args(const struct http_request *req, const char *const *names, size_t n,
                    char *values, size_t cap, const char **args, struct fg_error *err) FG_WUR;

#endif
