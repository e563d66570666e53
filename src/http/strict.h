/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strict.h - the header rules of "Strict requests" (docs/api.md) that need no
 * I/O: which Content-Type a body may have, which Host a request may name,
 * which X-Request-Id a client may choose, how the body length is framed, which
 * requests come from a web page of another origin, and the bounds of a
 * route's members as its description (openapi/routes/) gives them. Pure
 * functions over strings and parsed bodies; the server applies them.
 */
#ifndef FG_STRICT_H
#define FG_STRICT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "fglimits.h"
#include "util/error.h"

/* True if value is "application/json", any case, optionally followed by
 * parameters (";charset=utf-8"). NULL is false. */
bool strict_content_type_is_json(const char *value);

/* True if host (the Host header, NULL when absent) is one of allowed[0..n),
 * compared without regard to case, or if allowed holds "*". A request without
 * Host (HTTP/1.0) passes: no browser sends one. */
bool strict_host_allowed(const char *host, char *const *allowed, size_t n);

/* The path of url, a request's target, and its authority into authority
 * (capacity cap, "" for none). In absolute form ("http://host:port/path",
 * RFC 9112 3.2.2) the authority is the request's host, in place of its Host
 * header; one that does not fit in cap is cut, and so names no allowed host.
 * In origin form ("/path") the path is url itself. */
const char *strict_target_path(const char *url, char *authority, size_t cap);

/* Why url, a request's target, is malformed: in absolute form, an authority
 * that names no host ("http:///path", "http://:8480/path"), which must be
 * refused rather than read as the Host header's (RFC 9110 4.2.1). NULL for a
 * target without that fault, and for one in origin form. */
const char *strict_target_fault(const char *url);

/* True if url, a request's target, may be answered on a port that serves
 * https when tls is true, plain http otherwise: one in origin form, or one in
 * absolute form that names the port's scheme. A target of the other scheme
 * does not match the connection it came on (RFC 9110 7.4), and is not this
 * server's to answer. */
bool strict_target_scheme_ok(const char *url, bool tls);

/* The length of header value value without the spaces and tabs that end it,
 * which are not part of it (RFC 9110 5.5). */
size_t strict_value_len(const char *value);

/* True if id may be echoed as the request id: 1 to X_REQUEST_ID_MAX_LEN bytes
 * of A-Z a-z 0-9 and - _ . : / + = @. */
bool strict_request_id_valid(const char *id);

/* True if a request with content_lengths Content-Length headers and
 * transfer_encodings Transfer-Encoding headers is framed unambiguously: at
 * most one of each, and never a Content-Length beside a Transfer-Encoding. */
bool strict_framing_ok(int content_lengths, int transfer_encodings);

/* True if name, a header's name as received, is a token (RFC 9110 5.1): a
 * name with a space or tab before its colon ("Content-Length :") is one that
 * a proxy in front may read as the header and the gateway not, so that the
 * two frame the body differently. */
bool strict_header_name_ok(const char *name);

/* True if value, the request's Transfer-Encoding (NULL when absent), is one
 * the gateway reads: absent, or "chunked" in any case. libmicrohttpd reads
 * the body of any other ("gzip, chunked", "identity") until the connection
 * closes, so such a request would never be answered. */
bool strict_transfer_coding_ok(const char *value);

/* True if value, a header's comma-separated list of tokens (NULL: none),
 * holds token, compared without regard to case ("Connection: Close"). */
bool strict_header_has_token(const char *value, const char *token);

/*
 * Why a request comes from a web page of another origin than the gateway's
 * own, as its browser says: Sec-Fetch-Site (fetch_site) "cross-site" or
 * "same-site", an Origin of "null" (a sandboxed or local page), or an Origin
 * whose host[:port] is not host (the Host the request names; none counts as
 * another). A short reason, or NULL for a request of the same origin or
 * without Origin and Sec-Fetch-Site (a client that is not a browser page).
 * origin, fetch_site and host may be NULL (absent).
 */
const char *strict_cross_origin(const char *origin, const char *fetch_site, const char *host);

/* How a bounded member is read, as its handler reads it (so a refusal is the
 * handler's own answer, only earlier). */
enum member_check {
    CHECK_INTEGER,       /* a body integer: absent, or an integer in [min, max] (not null) */
    CHECK_STRING,        /* a body string: absent, or min to max bytes, no NUL (not null) */
    CHECK_TEXT,          /* a body string whose every fault answers the refusal: min to max bytes */
    CHECK_ARRAY,         /* a body array of min to max items */
    CHECK_QUERY_INTEGER, /* a query parameter: absent, or a decimal integer in [min, max] */
};

/*
 * A bound of one body member or query parameter of a route, generated from the
 * route's description (scripts/gen_routes.py): the one place the bound is
 * written. A list of them ends with an entry whose name is NULL.
 */
struct member_bound {
    const char *name;
    enum member_check check;
    long long min, max;    /* the value, the length in bytes or the number of items */
    bool required;         /* absent is refused ("field 'x' is required", an array's refusal) */
    const char *refusal;   /* the detail of the 400 for a value out of bounds */
    bool by_handler;       /* read only in some cases: its handler checks it with these bounds */
    const char *printable; /* a CHECK_STRING that must be printable text (util/names.h): the
                              detail of the 400 for one that is not; NULL: any bytes but NUL */
    int (*items)(const json_t *array, struct fg_error *err); /* a CHECK_ARRAY's rule of its
                                                                items, or NULL: any */
};

/* Rewords err, the refusal of body member member (its path, as
 * fgjson_parse_object names it) whose integer is beyond 64 bits, as the
 * route's check of that member (bounds: the route's) answers a 64-bit
 * integer past its bound (an integer member's refusal) or of the wrong type
 * (a string's): such a value is answered as any other it refuses. err stays
 * for a member the route does not check. */
void strict_too_big(const struct member_bound *bounds, const char *member, struct fg_error *err);

/* The bound named name of list (a route's bounds), which must have it. */
const struct member_bound *strict_bound(const struct member_bound *list, const char *name);

/* Checks the value body (a JSON object, or NULL for a request without a
 * body: every member absent) has for member b (a body check):
 * presence, type, bounds and, when b says so, printable text, and returns 0,
 * or -1 with the 400 invalid_field in err. A route's members are checked in
 * the order its description lists them, so a request with two faults is
 * answered for the first of them in that order. */
int strict_member_check(const struct member_bound *b, const json_t *body, struct fg_error *err);

/* Checks text, the value of query parameter b (NULL: absent, as
 * http_request_query gives it), likewise: anything but a decimal integer in
 * bounds is refused. */
int strict_query_check(const struct member_bound *b, const char *text, struct fg_error *err);

#endif
