/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router.h - matching a request path against a static route table. Patterns are
 * literal segments plus typed parameters: {name} (lock or semaphore name),
 * {table}, {key}; a trailing '*' ({name*}, {key*}) lets a parameter span several
 * segments, since names may contain '/'. Parameters are percent-decoded here,
 * strictly, and checked against the rules of their type. Pure: no I/O.
 */
#ifndef FG_ROUTER_H
#define FG_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"
#include "util/names.h"

#define ROUTE_MAX_PARAMS 2

enum http_method {
    HTTP_GET,
    HTTP_POST,
    HTTP_PUT,
    HTTP_PATCH,
    HTTP_DELETE,
    HTTP_OTHER,
};

enum handler_result {
    HANDLER_DONE,    /* the reply is ready */
    HANDLER_SUSPEND, /* park the connection; the handler runs again when woken */
    HANDLER_CLOSE,   /* the client reset its connection: close it; the reply is logged, not sent */
};

/*
 * The scope a route needs (docs/api.md, "Authentication and authorization"), built
 * from the route's first parameter where it names a resource. The zero value is
 * SCOPE_ADMIN, so a route whose entry forgets its scope is closed, not open.
 */
enum route_scope {
    SCOPE_ADMIN = 0,   /* "admin" */
    SCOPE_OPEN,        /* no key at all (/healthz, /readyz) */
    SCOPE_KEY,         /* any known key; the handler checks finer scopes itself */
    SCOPE_LOCK,        /* "lock:<name>" */
    SCOPE_SEMAPHORE,   /* "semaphore:<name>" */
    SCOPE_PG_READ,     /* "pg:<table>:read" */
    SCOPE_PG_WRITE,    /* "pg:<table>:write" */
    SCOPE_REDIS_READ,  /* "redis:<key>:read" */
    SCOPE_REDIS_WRITE, /* "redis:<key>:write" */
    SCOPE_AUDIT_READ,  /* "audit:read" */
    SCOPE_METRICS,     /* "metrics" */
};

#define ROUTE_SCOPE_MAX (SEGMENT_MAX_LEN + 32) /* longest needed scope text, with NUL */

struct http_request;
struct http_reply;
struct member_bound;
typedef enum handler_result (*route_handler)(struct http_request *req, struct http_reply *reply);

/*
 * A route: method and path pattern, its handler, and what it accepts. The
 * server refuses, before the handler runs, a body member or a query parameter
 * that the route does not list (400 invalid_field naming it): a typo must never
 * silently change behaviour. The lists end with NULL; a NULL list accepts none.
 * It also refuses a member out of the bounds the route's description gives
 * (http/strict.h), the first fault in the description's order.
 */
struct route {
    enum http_method method;
    const char *pattern; /* e.g. "/v1/locks/{name*}/acquire" */
    route_handler handler;
    const char *label;                 /* bounded name for logs and metrics, e.g. "lock_acquire" */
    enum route_scope scope;            /* what an API key needs to call it */
    const char *const *body_fields;    /* top-level members a JSON body may have */
    const char *const *query_params;   /* query parameters the route reads */
    const struct member_bound *bounds; /* checked members, in the description's order; or NULL */
};

struct route_match {
    const struct route *route;                          /* matched entry */
    char params[ROUTE_MAX_PARAMS][SEGMENT_MAX_LEN + 1]; /* decoded parameters, in order */
    size_t param_lens[ROUTE_MAX_PARAMS];                /* their lengths */
    unsigned allowed; /* after FG_ERR_METHOD_NOT_ALLOWED: bits 1 << method of the path's methods */
};

/*
 * Writes the scope route needs for its first parameter param (decoded) into
 * out (cap bytes, at least ROUTE_SCOPE_MAX) and returns true; returns false
 * (out empty) for SCOPE_OPEN and SCOPE_KEY, which need no particular scope.
 */
bool router_needed_scope(const struct route *route, const char *param, char *out, size_t cap);

/* Maps a method string ("GET", "HEAD" counts as GET) to enum http_method. */
enum http_method router_method(const char *method);

/* Writes the Allow header value for a bit set of methods (e.g. "GET, HEAD") into out. */
void router_allow_header(unsigned allowed, char *out, size_t cap);

/*
 * Finds the route of table (ended by an entry whose pattern is NULL) matching
 * method and path (raw, still percent-encoded, without query). Fills *match and
 * returns 0. Fails with FG_ERR_NOT_FOUND (no pattern matches),
 * FG_ERR_METHOD_NOT_ALLOWED (a pattern matches, another method) or
 * FG_ERR_INVALID_NAME (a parameter is malformed).
 */
int router_match(const struct route *table, enum http_method method, const char *path,
                 struct route_match *match, struct fg_error *err) FG_WUR;

#endif
