/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.h - the HTTP server: the only module that speaks libmicrohttpd. It owns
 * connections and their request state, reads bodies up to the configured limit,
 * dispatches to the route table, writes replies and request logs, and parks
 * waiting requests as suspended connections (no thread per waiter).
 *
 * Handlers see struct http_request: its route parameters, body, headers and
 * query. A handler that must wait returns HANDLER_SUSPEND and arranges for some
 * other thread to call http_request_wake later; the handler then runs again on
 * the same request.
 */
#ifndef FG_SERVER_H
#define FG_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "http/reply.h"
#include "http/router.h"
#include "http/strict.h"
#include "lease/waiter.h"
#include "util/traceparent.h"

/* The header that carries a fenced write's token (http/fenced_write.h). */
#define HTTP_HEADER_FENCE_TOKEN "Fence-Token"

struct http_conn;
struct api_key;
struct query_args;

/* The matched route and its decoded path parameters. */
struct request_match {
    const struct route *route;            /* matched entry, or NULL */
    const char *params[ROUTE_MAX_PARAMS]; /* decoded parameters, in order ("" if absent) */
    unsigned allowed; /* after FG_ERR_METHOD_NOT_ALLOWED: bits 1 << method of the path's methods */
};

/* A request, allocated with its parameters' and request id's text after it: a
 * parked request keeps only what it uses. */
struct http_request {
    struct request_match match;      /* route and decoded path parameters */
    enum http_method method;         /* request method (HEAD is GET) */
    char *body;                      /* request body bytes (owned), NUL-terminated */
    size_t body_len;                 /* bytes in body */
    json_t *json;                    /* parsed body, once http_request_json ran (owned) */
    const char *client_addr;         /* peer address, text (the connection's, or in text) */
    int64_t started_ms;              /* monotonic time the request arrived */
    void *state;                     /* handler's own state across suspensions */
    void (*state_free)(void *state); /* frees state when the request ends */
    /* set by a handler whose answer is a grant: gives it back if the answer cannot reach the
     * client (gone before it was queued, or its sending failed); called once at most, before
     * state_free */
    void (*give_back)(struct http_request *req);
    char *log_subject;               /* lock or resource named in the request log (owned) */
    char *log_owner;                 /* owner named in the request log (owned) */
    const struct api_key *principal; /* the caller's API key (borrowed, lives until exit); NULL
                                        when auth is off */
    const char *request_id;          /* X-Request-Id: the client's or a fresh one (in text) */
    struct query_args *query; /* the query, decoded, once the request is admitted (owned; NULL:
                                 none, or not yet read) */
    char trace_id[TRACE_ID_LEN + 1]; /* trace id of a valid traceparent header, else "" */
    struct http_conn *conn;          /* server-private connection state */
    char text[];                     /* the parameters' and request id's text, NUL after each */
};

/* Starts listening on cfg's address with routes (table ends with a NULL pattern)
 * and, when cfg names probe_listen, the probe listener on its address with the
 * probe routes of routes. cfg and routes are borrowed for the life of the
 * server. */
int http_server_start(const struct config *cfg, const struct route *routes,
                      struct fg_error *err) FG_WUR;

/* Stops accepting connections: each new one is closed at once (SIGTERM drain,
 * first step); the listening socket closes with http_server_stop. The probe
 * listener takes new connections until then. A
 * connection waiting for a request, or for the rest of one, is closed once
 * nothing of it waits unread at two looks a moment apart (the janitor's), the
 * first at once: a request whose client stopped sending does not hold the
 * drain. */
void http_server_quiesce(void);

/* Requests in progress (received, not yet answered), including suspended ones;
 * without probes, those of /healthz, /readyz and /metrics aside: they change
 * nothing, and the drain that waits for the others would be held to its cap
 * by probes that keep coming to the probe listener, each waiting up to
 * probe_timeout_ms for a stalled backend. */
long http_server_in_flight(bool probes);

/* Closes every connection and stops the threads, the probe listener's last.
 * No request may be suspended. */
void http_server_stop(void);

/* Header value by case-insensitive name, or NULL. Valid during the request. */
const char *http_request_header(const struct http_request *req, const char *name);

/* The value of the first line of req's header name (case-insensitive; a
 * header may be sent on several lines, RFC 9110 5.3), in the request's order,
 * that match answers true for, or NULL. Valid during the request. */
const char *http_request_header_first(const struct http_request *req, const char *name,
                                      bool (*match)(const char *value));

/* True if a line of req's header name has a value that match answers true
 * for (http_request_header_first). */
bool http_request_header_any(const struct http_request *req, const char *name,
                             bool (*match)(const char *value));

/* Query argument, decoded once the form way ('+' a space, %XX a byte; the
 * server refuses a query that does not decode to UTF-8 text, or names an
 * argument twice, before the handler runs), or NULL when absent: not named,
 * or named without a value (?waiters) or with an empty one (?waiters=). */
const char *http_request_query(const struct http_request *req, const char *name);

/* The parsed JSON object body (an empty body reads as {}), borrowed; NULL with
 * FG_ERR_INVALID_JSON if the body is not a JSON object, or FG_ERR_INVALID_FIELD
 * for a member whose integer is beyond 64 bits, refused as the route's bound
 * of that member refuses a value past it (strict_too_big). */
json_t *http_request_json(struct http_request *req, struct fg_error *err);

/*
 * For handlers that check finer scopes than their route (a batch naming several
 * tables, a listing filtered by name): 0 if the caller may act with scope
 * needed (always when auth is off), else -1 with FG_ERR_FORBIDDEN naming it.
 */
int http_request_permit(const struct http_request *req, const char *needed,
                        struct fg_error *err) FG_WUR;

/* Sets the lock or resource the request log line names (printf-style; the
 * text is cut at 255 bytes). */
void http_request_log_subject(struct http_request *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sets the owner the request log line names (cut at 127 bytes). */
void http_request_log_owner(struct http_request *req, const char *owner);

/* Frees the body and its parsed JSON: a handler about to park calls it once it
 * has copied what it keeps, so a parked request holds neither. */
void http_request_drop_body(struct http_request *req);

/* The parked request as the waiter registry knows it: req, its socket and its caller's API key. */
struct waiter_client http_request_waiter_client(struct http_request *req);

/* Counts and logs req's answer once libmicrohttpd sent it, 499 if it could
 * not, as an answer after a wait is, although its handler answers at once: a
 * watch's, whose client may hang up as soon as it learns what it watched for
 * from elsewhere, however soon that comes. */
void http_request_count_once_sent(struct http_request *req);

/* Wakes a request whose handler returned HANDLER_SUSPEND; callable from any
 * thread, also before the suspension has taken effect (the wake is kept). */
void http_request_wake(struct http_request *req);

/* Closes connections whose request headers did not arrive in full within
 * limits.header_timeout_ms (janitor). Returns when the next one is due
 * (INT64_MAX: no connection waits for its headers); a connection that starts
 * waiting sets the janitor's alarm (util/alarm.h). */
int64_t http_server_reap_slow(int64_t now_ms);

#endif
