/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - libmicrohttpd glue. One daemon with a small pool of polling threads
 * (epoll), fed by the accepting thread of acceptor.c, which spreads new
 * connections over them; handlers run on those threads and may block on Redis
 * or Postgres for at most one backend deadline. A request that must wait is
 * suspended with MHD_suspend_connection and resumed by http_request_wake, so
 * thousands of waiters cost memory, not threads. A request's lifecycle
 * (received, handled, parked, suspended, woken, answered) is one enum,
 * conn_phase.h, which conn_step alone moves. A handler that answers a grant
 * says how to give it back (req->give_back): the grant is given back instead
 * of written when its client is already gone, or when its sending fails.
 * Every request received whole writes one request line and is counted once:
 * as it is answered if its handler never waited and it is no watch, else once
 * libmicrohttpd sent its answer or closed its connection (499 if unsent: its
 * client went first).
 * An answer whose client reset its connection while the handler ran is not
 * sent but closed, 499 too.
 *
 * The probe listener (probe_listen), when configured, is a second daemon of
 * one polling thread that accepts on its own socket and serves the probe
 * routes alone (/healthz, /readyz, /metrics; 404 elsewhere), through the same
 * request path: no API handler ever runs on its thread, so a probe is read
 * and answered while every API thread waits for a stalled backend. It takes
 * new connections through a drain too, until http_server_stop.
 *
 * Paths reach the router undecoded (the unescape callback is a no-op): the
 * router decodes them strictly itself. Query arguments likewise come with
 * only '+' made a space: read_query decodes each once (query_args.h), for
 * every route, before any check or handler reads one. A body over the limit
 * is read and thrown away, then answered 413 with Connection: close: a client
 * still sending when the server closed would get a reset instead of the
 * answer. Only a client that waits for "100 Continue" is answered at once,
 * since it sends no body until told to.
 *
 * Strict requests (docs/api.md): a foreign Host (421), an ambiguous body
 * length (two Content-Lengths, or one beside Transfer-Encoding) and a transfer
 * coding other than chunked (400) are answered as soon as the headers are in,
 * with Connection: close, so that the rest of the bytes is never read as
 * another request (nor waited for until the connection closes). A query
 * argument badly encoded, unknown or given twice, a body that is not
 * application/json (415) and a body member the route does not list are
 * refused before the handler runs. Every answer
 * carries X-Request-Id; the details of 5xx and conflict answers are logged
 * under it and replaced by a generic text, so no backend address, SQL or
 * script text reaches a client.
 *
 * Connections: at most limits.max_connections (derived from RLIMIT_NOFILE when
 * unset) and limits.max_connections_per_ip; a request's headers and body must
 * arrive in full within limits.header_timeout_ms of the connection's start (or
 * of the previous answer on a kept-alive connection), else the janitor closes it;
 * unless bytes of it wait unread in the socket: then its polling thread, busy
 * with a handler, is late, and the connection gets another timeout (and a
 * connection whose client hung up is left to its thread). A connection with
 * nothing unread is closed when it still has nothing a moment later: its
 * thread may have read the request just then. Draining, nothing more is
 * awaited: every connection waiting for a request, or for the rest of one, is
 * looked at at once and then every moment by the same rule, so that a client
 * that stopped sending mid-request (a proxy whose own client went away) does
 * not hold the drain until its cap.
 * libmicrohttpd's own error lines become JSON log lines.
 */
#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/keyset.h"
#include "auth/token.h"
#include "fglimits.h"
#include "http/acceptor.h"
#include "http/conn_phase.h"
#include "http/query_args.h"
#include "http/tls.h"
#include "util/alarm.h"
#include "util/budget.h"
#include "util/clock.h"
#include "util/fgjson.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/utf8.h"

/* An address served and the daemon that serves it. */
struct listener {
    struct MHD_Daemon *daemon;  /* NULL: not serving */
    const struct route *routes; /* what it serves, ended by a NULL pattern (borrowed) */
    char *const *allowed_hosts; /* the Host values it serves (the configuration's) */
    size_t nallowed_hosts;      /* entries in allowed_hosts */
};

/* Private per-request connection state: what handlers must not see. */
struct http_conn {
    struct MHD_Connection *mhd; /* the libmicrohttpd connection */
    struct conn_state *state;   /* what the connection keeps across requests (may be NULL) */
    int route_status;           /* FG_OK, or the code the router failed with (reply set) */
    size_t body_cap;            /* allocated bytes of body */
    bool body_too_large;        /* the body crossed max_body_bytes */
    bool close_after;           /* answer with Connection: close (body framing not trusted) */
    bool http_1_0;              /* an HTTP/1.0 request (kept alive only when it asks) */
    pthread_mutex_t phase_lock; /* guards phase: a wake comes from any thread */
    enum conn_phase phase;      /* where the request is in its lifecycle (conn_phase.h) */
    bool sent_first;            /* its answer is counted once sent: its handler asked to wait,
                                   once or more, or it is a watch (phase_lock) */
    struct http_reply reply;    /* the reply being built */
    /* its method and path, libmicrohttpd's, valid until on_completed: set as its handler is first
     * called (NULL while it is received) */
    const char *method, *url;
    bool recorded;                   /* its request line is written and its answer counted */
    bool probe;                      /* a probe's (probe_routes): the drain does not wait for it */
    const struct listener *listener; /* the listener it came in on */
};

/* What a connection keeps from one request to the next: when its next request
 * (headers and body) is due, the API key it presented last, and its peer's
 * address (written out once, not for every request). */
struct conn_state {
    MHD_socket fd;                      /* the connection's socket */
    char client_addr[INET6_ADDRSTRLEN]; /* the peer's address, text (its requests point to it) */
    int64_t due_ms;                     /* monotonic deadline of the next request (or look) */
    bool watched;                       /* linked in a watch list */
    struct conn_state *prev, *next;     /* watch list links */
    struct auth_memo auth;              /* the key of its previous requests (keyset.h) */
    atomic_bool body_too_large;         /* its request's body crossed max_body_bytes */
};

#define REPLY_BUF            8192 /* bytes of a JSON reply written without allocating */
#define FD_RESERVE           64   /* descriptors kept for logs, epoll sets, listen socket, DNS */
#define TARGET_AUTHORITY_MAX 256  /* bytes of an absolute-form target's host:port, and its NUL */
#define LOOK_AGAIN_MS                                                                              \
    1000 /* longest wait of a connection silent at its deadline for a second look */

/* The connections whose request is due, each list in the order it is due in:
 * every connection in one list waits as long. */
static struct {
    pthread_mutex_t lock;     /* guards both lists */
    struct conn_state head;   /* sentinel: connections before their deadline */
    struct conn_state silent; /* sentinel: connections found silent at it, to look at again */
} watches = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .head = {.next = &watches.head, .prev = &watches.head},
    .silent = {.next = &watches.silent, .prev = &watches.silent},
}; /* empty from the start: the lease janitor reaps before the server starts */

static struct {
    struct listener api;   /* the API's address (listen): the accepting thread feeds its pool */
    struct listener probe; /* probe_listen: one thread, accepting for itself */
    const struct config *cfg;
    atomic_long in_flight;      /* requests in progress */
    atomic_long work_in_flight; /* those of them not on probe_routes */
    atomic_bool quiesced; /* draining: new connections closed at once (set under watches.lock) */
} server;

/* Socket of the connection (to watch a suspended client for hang-up). */
static int http_request_fd(const struct http_request *req)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(req->conn->mhd, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

/* The lasting state of the connection (NULL if none). */
static struct conn_state *state_of(struct MHD_Connection *mhd)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != NULL ? info->socket_context : NULL;
}

static void watch_unlink(struct conn_state *w)
{
    if (!w->watched)
        return;
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->watched = false;
}

/* Links w (not linked) last in the watch list whose sentinel is list, due
 * delay_ms from now: the delay of every connection in that list. Called with
 * watches.lock held: the clock is read under it, so the list stays sorted by
 * due_ms. */
static void watch_append_locked(struct conn_state *list, struct conn_state *w, int64_t delay_ms)
{
    w->due_ms = clock_mono_ms() + delay_ms;
    w->prev = list->prev;
    w->next = list;
    list->prev->next = w;
    list->prev = w;
    w->watched = true;
}

/* The wait before a second look at a connection found silent at its deadline. */
static int64_t look_again_ms(void)
{
    return server.cfg->header_timeout_ms < LOOK_AGAIN_MS ? server.cfg->header_timeout_ms
                                                         : LOOK_AGAIN_MS;
}

/* How long a connection may wait for (the rest of) a request before it is
 * looked at: limits.header_timeout_ms, or while draining a moment only
 * (http_server_quiesce makes those waiting then due at once, so the list stays
 * sorted). Called with watches.lock held. */
static int64_t request_delay_locked(void)
{
    return atomic_load(&server.quiesced) ? look_again_ms() : server.cfg->header_timeout_ms;
}

/* Starts (or restarts, after an answer) the deadline of w's next headers. */
static void watch_arm(struct conn_state *w)
{
    pthread_mutex_lock(&watches.lock);
    watch_unlink(w);
    watch_append_locked(&watches.head, w, request_delay_locked());
    int64_t due_ms = w->due_ms;
    pthread_mutex_unlock(&watches.lock);
    alarm_set(due_ms);
}

static void watch_disarm(struct conn_state *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&watches.lock);
    watch_unlink(w);
    pthread_mutex_unlock(&watches.lock);
}

static size_t unescape_nothing(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

static void client_address(struct MHD_Connection *mhd, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, cap, "unknown");
    if (info == NULL || info->client_addr == NULL)
        return;
    const struct sockaddr *sa = info->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
                  (socklen_t)cap);
}

/* Allocates a request and its connection state (one block: the state after
 * the text) with room for its request id, the text of the parameters of match
 * (those of a failed match are left out) and, unless the connection keeps it
 * (own_addr NULL), the client's address own_addr. */
static struct http_request *request_alloc(const struct route_match *match, bool matched,
                                          const char *request_id, const char *own_addr)
{
    size_t lens[ROUTE_MAX_PARAMS], rid_len = strlen(request_id), text = rid_len + 1;
    size_t addr_len = own_addr != NULL ? strlen(own_addr) : 0;
    text += own_addr != NULL ? addr_len + 1 : 0;
    for (size_t i = 0; i < ROUTE_MAX_PARAMS; i++) {
        lens[i] = matched ? match->param_lens[i] : 0;
        text += lens[i] + 1;
    }
    size_t align = _Alignof(struct http_conn);
    size_t conn_at = (offsetof(struct http_request, text) + text + align - 1) / align * align;
    struct http_request *req = calloc(1, conn_at + sizeof(struct http_conn));
    FG_ASSERT(req != NULL);
    req->conn = (struct http_conn *)(void *)((char *)req + conn_at);
    req->match.route = match->route;
    req->match.allowed = match->allowed;
    char *at = req->text;
    for (size_t i = 0; i < ROUTE_MAX_PARAMS; i++) {
        memcpy(at, match->params[i], lens[i]);
        at[lens[i]] = '\0';
        req->match.params[i] = at;
        at += lens[i] + 1;
    }
    req->request_id = memcpy(at, request_id, rid_len + 1);
    if (own_addr != NULL)
        req->client_addr = memcpy(at + rid_len + 1, own_addr, addr_len + 1);
    return req;
}

/* The request's X-Request-Id: the client's if valid, else a fresh one. */
static void request_id_of(struct MHD_Connection *mhd, int64_t now_ms, char *out, size_t cap)
{
    const char *rid = MHD_lookup_connection_value(mhd, MHD_HEADER_KIND, "X-Request-Id");
    struct fg_error ignored;
    if (rid != NULL && strict_request_id_valid(rid))
        snprintf(out, cap, "%s", rid);
    else if (token_new_lease_id(out, &ignored) != 0)
        snprintf(out, cap, "%lld-%ld", (long long)now_ms, (long)atomic_load(&server.in_flight));
}

/* Routes polled by probes and scrapers: their request lines are written at debug
 * level only, so that a health check every second does not drown the log. */
static const char *const probe_routes[] = {"healthz", "readyz", "metrics", NULL};

/* Routes that a request through a proxy is served on while auth is off by
 * default: the liveness and readiness probes, which reveal nothing and which
 * a load balancer in front must reach (docs/api.md, "Authentication"). */
static const char *const proxy_served_routes[] = {"healthz", "readyz", NULL};

/* True if route (NULL: none) is one of labels, a list ended by NULL. */
static bool route_listed(const struct route *route, const char *const *labels)
{
    for (size_t i = 0; route != NULL && labels[i] != NULL; i++)
        if (strcmp(route->label, labels[i]) == 0)
            return true;
    return false;
}

/* A new request that came in on listener: a route of its that does not match
 * is answered (after the body) with the problem set here. */
static struct http_request *request_new(const struct listener *listener, struct MHD_Connection *mhd,
                                        struct conn_state *state, const char *method,
                                        const char *url, const char *version)
{
    enum http_method m = router_method(method);
    struct route_match match; /* 2 KiB of room for the decoding, on the stack */
    match.route = NULL;
    match.allowed = 0;
    memset(match.param_lens, 0, sizeof match.param_lens);
    struct fg_error err = {0};
    bool matched = router_match(listener->routes, m, url, &match, &err) == 0;
    int64_t now = clock_mono_ms();
    char rid[X_REQUEST_ID_MAX_LEN + 1];
    request_id_of(mhd, now, rid, sizeof rid);
    char own_addr[INET6_ADDRSTRLEN] = "";
    if (state == NULL)
        client_address(mhd, own_addr, sizeof own_addr);
    struct http_request *req = request_alloc(&match, matched, rid, state == NULL ? own_addr : NULL);
    struct http_conn *conn = req->conn;
    if (!matched) {
        conn->route_status = err.code;
        reply_problem(&conn->reply, &err);
    }
    req->method = m;
    conn->mhd = mhd;
    conn->listener = listener;
    conn->state = state;
    conn->http_1_0 = strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
    pthread_mutex_init(&conn->phase_lock, NULL);
    req->started_ms = now;
    traceparent_trace_id(MHD_lookup_connection_value(mhd, MHD_HEADER_KIND, "traceparent"),
                         req->trace_id);
    if (state != NULL)
        req->client_addr = state->client_addr;
    conn->probe = route_listed(match.route, probe_routes);
    atomic_fetch_add(&server.in_flight, 1);
    if (!conn->probe)
        atomic_fetch_add(&server.work_in_flight, 1);
    return req;
}

static void request_free(struct http_request *req)
{
    if (req->state_free != NULL)
        req->state_free(req->state);
    json_decref(req->json);
    free(req->body);
    free(req->log_subject);
    free(req->log_owner);
    query_args_free(req->query);
    reply_clear(&req->conn->reply);
    pthread_mutex_destroy(&req->conn->phase_lock);
    if (!req->conn->probe)
        atomic_fetch_sub(&server.work_in_flight, 1);
    free(req); /* and its connection state, in the same block */
    atomic_fetch_sub(&server.in_flight, 1);
}

/*
 * The one transition function of a request's lifecycle: moves conn to the
 * phase that follows ev (conn_phase.h), suspends the connection in
 * libmicrohttpd as it enters CONN_SUSPENDED and resumes it as it leaves it.
 * An event that the phase never meets is a bug. Returns the new phase.
 */
static enum conn_phase conn_step(struct http_conn *conn, enum conn_event ev)
{
    pthread_mutex_lock(&conn->phase_lock);
    enum conn_phase from = conn->phase;
    enum conn_phase to = (enum conn_phase)fsm_step(&conn_lifecycle, (int)from, (int)ev);
    conn->phase = to;
    conn->sent_first |= ev == CONN_EV_PARK;
    if (to == CONN_SUSPENDED)
        MHD_suspend_connection(conn->mhd);
    else if (from == CONN_SUSPENDED)
        MHD_resume_connection(conn->mhd);
    pthread_mutex_unlock(&conn->phase_lock);
    return to;
}

/* The phase of conn (a wake may move it on another thread). */
static enum conn_phase conn_phase_of(struct http_conn *conn)
{
    pthread_mutex_lock(&conn->phase_lock);
    enum conn_phase phase = conn->phase;
    pthread_mutex_unlock(&conn->phase_lock);
    return phase;
}

/* True if conn's answer is counted once sent (on_completed), not as it is queued. */
static bool counts_once_sent(struct http_conn *conn)
{
    pthread_mutex_lock(&conn->phase_lock);
    bool sent_first = conn->sent_first;
    pthread_mutex_unlock(&conn->phase_lock);
    return sent_first;
}

/* The level of the request line of a request answered on route (NULL: none). */
static enum log_level request_log_level(const struct route *route)
{
    return route_listed(route, probe_routes) ? LOG_DEBUG : LOG_INFO;
}

/* The request line, written member by member: it is on every request's path. */
static void log_request(const struct http_request *req, const char *method, const char *url)
{
    struct fgjson_out line;
    if (!log_line_begin(&line, request_log_level(req->match.route), "request"))
        return;
    const struct http_conn *conn = req->conn;
    fgjson_out_str(&line, "method", method);
    fgjson_out_str(&line, "route", req->match.route ? req->match.route->label : "none");
    fgjson_out_str(&line, "path", url);
    fgjson_out_int(&line, "status", conn->reply.status);
    fgjson_out_int(&line, "latency_ms", clock_mono_ms() - req->started_ms);
    fgjson_out_str(&line, "client", req->client_addr);
    fgjson_out_str(&line, "request_id", req->request_id);
    if (req->log_subject != NULL && req->log_subject[0] != '\0')
        fgjson_out_str(&line, "subject", req->log_subject);
    if (req->log_owner != NULL && req->log_owner[0] != '\0')
        fgjson_out_str(&line, "owner", req->log_owner);
    if (req->principal != NULL)
        fgjson_out_str(&line, "principal", req->principal->id);
    if (req->trace_id[0] != '\0')
        fgjson_out_str(&line, "trace_id", req->trace_id);
    if (conn->reply.problem != FG_OK)
        fgjson_out_str(&line, "problem", fg_code_name(conn->reply.problem));
    log_line_end(&line);
}

/* The status a request whose client closed the connection first is counted
 * and logged with (nginx's "client closed request"): a normal end of a wait or
 * a watch, never a 5xx. */
#define STATUS_CLIENT_CLOSED 499

/* Counts req's answer in the metrics and writes its request line. */
static void record_reply(const struct http_request *req, const char *method, const char *url)
{
    req->conn->recorded = true;
    metrics_request(req->match.route ? req->match.route->label : NULL, req->conn->reply.status,
                    req->conn->reply.problem, clock_mono_ms() - req->started_ms);
    log_request(req, method, url);
}

/* Gives back the grant req answered, once (its answer could not reach the client). */
static void give_back(struct http_request *req)
{
    void (*fn)(struct http_request *) = req->give_back;
    req->give_back = NULL;
    if (fn != NULL)
        fn(req);
}

/* http_request_header_any's matches of a Connection header's tokens. */
static bool names_close(const char *value)
{
    return strict_header_has_token(value, "close");
}

static bool names_keep_alive(const char *value)
{
    return strict_header_has_token(value, "keep-alive");
}

/* True if libmicrohttpd closes req's connection once its answer is sent: the
 * answer says Connection: close, or the client asked for it (Connection:
 * close, or HTTP/1.0 without keep-alive). Such a connection awaits no next
 * headers, and must not be counted as a slow client when its polling thread,
 * busy with another request, closes it late. */
static bool answer_ends_connection(const struct http_request *req)
{
    const struct http_conn *conn = req->conn;
    if (conn->body_too_large || conn->close_after ||
        http_request_header_any(req, MHD_HTTP_HEADER_CONNECTION, names_close))
        return true;
    return conn->http_1_0 &&
           !http_request_header_any(req, MHD_HTTP_HEADER_CONNECTION, names_keep_alive);
}

static void on_completed(void *cls, struct MHD_Connection *mhd, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    struct http_request *req = *con_cls;
    if (req == NULL)
        return;
    *con_cls = NULL;
    bool ends = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK || answer_ends_connection(req);
    /* An answer after a wait, or none: libmicrohttpd closes a request parked but not yet
     * suspended (or woken, not yet run again) as soon as it sees its client gone. */
    if (!req->conn->recorded && req->conn->url != NULL) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) /* the client hung up first */
            req->conn->reply.status = STATUS_CLIENT_CLOSED;
        record_reply(req, req->conn->method, req->conn->url);
    }
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        give_back(req); /* a grant whose sending failed */
    request_free(req);
    struct conn_state *w = state_of(mhd);
    if (w != NULL && ends)
        watch_disarm(w); /* closing: no next headers (nor these, if answered early) */
    else if (w != NULL)
        watch_arm(w); /* a kept-alive connection: the next headers are due in time */
}

/* The generic detail that replaces a 5xx or conflict detail, by status. */
static const char *generic_detail(int status)
{
    if (status == 503)
        return "a backend is unavailable or the gateway is stopping; retry later";
    if (status == 409)
        return "the request conflicts with what is stored";
    return "the gateway could not complete the request";
}

/* Logs the detail of a 5xx or conflict problem under the request id and
 * answers a generic one: backend addresses, SQL and script text stay here. */
static void hide_internals(const struct http_request *req, struct http_reply *reply)
{
    if (reply->problem == FG_OK || (reply->status < 500 && reply->problem != FG_ERR_CONFLICT))
        return;
    const char *detail = json_string_value(json_object_get(reply->body, "detail"));
    log_event(LOG_WARN, "request_failed",
              json_pack("{s:s, s:s, s:i, s:s}", "request_id", req->request_id, "route",
                        req->match.route ? req->match.route->label : "none", "status",
                        reply->status, "detail", detail ? detail : ""));
    char text[256];
    snprintf(text, sizeof text, "%s (request id %s)", generic_detail(reply->status),
             req->request_id);
    json_object_set_new(reply->body, "detail", fgjson_string(text));
}

/* The headers of an operator console file: the page may load scripts, styles,
 * images and data from the gateway itself only, never inline script, and may
 * not be framed; browsers must not send referrers (nor guess content types,
 * which every answer says: send_reply). */
static void add_console_headers(struct MHD_Response *resp)
{
    static const struct {
        const char *name, *value;
    } headers[] = {
        {"Content-Security-Policy",
         "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
         "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
        {"X-Frame-Options", "DENY"},
        {"Referrer-Policy", "no-referrer"},
        {"Cache-Control", "no-cache"},
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++)
        MHD_add_response_header(resp, headers[i].name, headers[i].value);
}

/* Queues conn's reply on the connection. */
static enum MHD_Result send_reply(struct http_request *req, const char *method, const char *url)
{
    struct http_conn *conn = req->conn;
    struct http_reply *reply = &conn->reply;
    hide_internals(req, reply);
    struct MHD_Response *resp;
    const char *content_type;
    if (reply->body != NULL) {
        static _Thread_local char local[REPLY_BUF];
        struct fgjson_out out;
        fgjson_out_init(&out, local, sizeof local);
        fgjson_out_value(&out, reply->body);
        resp = MHD_create_response_from_buffer(out.len, out.buf, MHD_RESPMEM_MUST_COPY);
        fgjson_out_free(&out);
        content_type = reply->problem != FG_OK ? "application/problem+json" : "application/json";
    } else {
        char *text = reply->text ? reply->text : strdup("");
        FG_ASSERT(text != NULL);
        reply->text = NULL;
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        content_type = reply->content_type ? reply->content_type : "text/plain";
    }
    FG_ASSERT(resp != NULL);
    if (reply->status != 204) /* no content, no type */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (reply->retry_after_s > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", reply->retry_after_s);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    MHD_add_response_header(resp, "X-Request-Id", req->request_id);
    /* Answers carry what writers stored (a Redis value, an owner) from the origin
     * whose session storage holds the console's key: never read as another type. */
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (reply->preference != NULL)
        MHD_add_response_header(resp, "Preference-Applied", reply->preference);
    if (reply->console)
        add_console_headers(resp);
    if (conn->body_too_large || conn->close_after)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (reply->problem == FG_ERR_UNAUTHORIZED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"fencegate\"");
    if (conn->route_status == FG_ERR_METHOD_NOT_ALLOWED) {
        char allow[64];
        router_allow_header(req->match.allowed, allow, sizeof allow);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    }
    /* An answer after a wait, also one woken in the round that read it, and a watch's: its client
     * may hang up meanwhile (a watch's, once it saw the release), so it is counted once sent
     * (on_completed). */
    bool after_wait = counts_once_sent(conn);
    enum MHD_Result rc = MHD_queue_response(conn->mhd, (unsigned int)reply->status, resp);
    MHD_destroy_response(resp);
    conn_step(conn, CONN_EV_ANSWER);
    if (!after_wait)
        record_reply(req, method, url);
    return rc;
}

/* Set while this thread closes the connection of a client that is gone:
 * libmicrohttpd then reports an "internal error", which is not one. */
static _Thread_local bool closing_gone_client;

/* Counts and logs the reply of a client that is gone, and closes its
 * connection without writing to it. */
static enum MHD_Result drop_reply(struct http_request *req, const char *method, const char *url)
{
    struct http_conn *conn = req->conn;
    conn_step(conn, CONN_EV_DROP);
    closing_gone_client = true;
    conn->reply.status = STATUS_CLIENT_CLOSED;
    record_reply(req, method, url);
    return MHD_NO;
}

static enum MHD_Result send_problem(struct http_request *req, enum fg_code code, const char *detail,
                                    const char *method, const char *url)
{
    struct fg_error err;
    fg_fail(&err, code, "%s", detail);
    reply_problem(&req->conn->reply, &err);
    return send_reply(req, method, url);
}

/* What the sizing of a query counts. */
struct query_size {
    size_t args;  /* arguments */
    size_t bytes; /* bytes of their names and values, each with its NUL */
};

/* MHD_KeyValueIterator: sizes the query (cls: struct query_size). */
static enum MHD_Result size_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    (void)kind;
    struct query_size *size = cls;
    size->args++;
    size->bytes += strlen(key) + 1 + (value != NULL ? strlen(value) + 1 : 0);
    return MHD_YES;
}

/* The reading of a query into its table. */
struct query_read {
    struct query_args *query; /* the table being filled */
    struct fg_error *err;     /* the first argument's fault */
    bool failed;              /* an argument did not decode */
};

/* MHD_KeyValueIterator: decodes one argument into the table (cls: struct
 * query_read), stopping at the first that does not decode. */
static enum MHD_Result read_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    (void)kind;
    struct query_read *read = cls;
    read->failed = query_args_add(read->query, key, value, read->err) != 0;
    return read->failed ? MHD_NO : MHD_YES;
}

/*
 * Reads the query of req into req->query, decoded once for every reader
 * (the checks below and the handler alike), and checks it against the
 * route's parameters (query_args_check). The library gives the arguments in
 * the order sent, with '+' already a space and the escapes left as they are
 * (the unescape callback is a no-op). Returns 0, or -1 with the 400 in err.
 */
static int read_query(struct http_request *req, struct fg_error *err)
{
    struct query_size size = {0, 0};
    MHD_get_connection_values(req->conn->mhd, MHD_GET_ARGUMENT_KIND, size_arg, &size);
    if (size.args == 0)
        return 0;
    struct query_read read = {query_args_new(size.args, size.bytes), err, false};
    req->query = read.query;
    MHD_get_connection_values(req->conn->mhd, MHD_GET_ARGUMENT_KIND, read_arg, &read);
    if (read.failed)
        return -1;
    return query_args_check(req->query, req->match.route->query_params, err);
}

/* The bounds of the route's members that the gateway checks (body: the parsed
 * body, or NULL without one, whose members are all absent: a required one is
 * refused as in {}), in the order the route's description lists them. */
static int check_bounds(struct http_request *req, const json_t *body, struct fg_error *err)
{
    for (const struct member_bound *b = req->match.route->bounds; b != NULL && b->name != NULL;
         b++) {
        if (b->by_handler)
            continue;
        if (b->check == CHECK_QUERY_INTEGER) {
            if (strict_query_check(b, http_request_query(req, b->name), err) != 0)
                return -1;
        } else if (strict_member_check(b, body, err) != 0) {
            return -1;
        }
    }
    return 0;
}

/* The checks of strict requests that need the route and the whole body:
 * the query (read_query), the body's media type, its members and their
 * bounds. */
static int check_strict(struct http_request *req, struct fg_error *err)
{
    const struct route *route = req->match.route;
    if (read_query(req, err) != 0)
        return -1;
    if (req->body_len == 0)
        return check_bounds(req, NULL, err);
    if (!strict_content_type_is_json(http_request_header(req, MHD_HTTP_HEADER_CONTENT_TYPE)))
        return fg_fail(err, FG_ERR_UNSUPPORTED_MEDIA_TYPE,
                       "a request body must be sent as Content-Type: application/json");
    json_t *body = http_request_json(req, err);
    if (body == NULL || fgjson_only(body, route->body_fields, "", err) != 0)
        return -1;
    return check_bounds(req, body, err);
}

/* auth_proxy_refused's look-up of a header of the request ctx. */
static const char *request_header_of(const char *name, void *ctx)
{
    return http_request_header(ctx, name);
}

/*
 * The checks of a request while auth is off (ks NULL or not required), when
 * nothing tells its caller apart: a request through a proxy while auth is off
 * by default is refused with 401 (auth_proxy_refused) but on the probes; a
 * request that may change something (any method but GET and HEAD) from a web
 * page of another origin is refused with 403, since any page the user visits
 * could send it (strict_cross_origin). Returns 0, or -1 with err set.
 */
static int check_auth_off(struct http_request *req, const struct keyset *ks, struct fg_error *err)
{
    const char *via = route_listed(req->match.route, proxy_served_routes)
                          ? NULL
                          : auth_proxy_refused(ks, request_header_of, req);
    if (via != NULL)
        return fg_fail(err, FG_ERR_UNAUTHORIZED,
                       "auth is off only for direct loopback clients and this request came "
                       "through a proxy (%s): set auth.mode",
                       via);
    if (req->method == HTTP_GET)
        return 0;
    const char *why = strict_cross_origin(http_request_header(req, "Origin"),
                                          http_request_header(req, "Sec-Fetch-Site"),
                                          http_request_header(req, MHD_HTTP_HEADER_HOST));
    if (why != NULL)
        return fg_fail(err, FG_ERR_FORBIDDEN,
                       "a request that changes something may not come from a web page of "
                       "another origin while auth is off (%s): any page the user visits could "
                       "send it; turn auth on (auth.mode) to call from other origins",
                       why);
    return 0;
}

/*
 * The API key check, before any handler runs: with auth off, check_auth_off;
 * with auth required, every route but SCOPE_OPEN needs a known bearer key
 * (else 401), holding the scope the route declares for its parameters (else
 * 403 naming the scope). Fills req->principal; a connection presenting the
 * key of its previous request is not hashed again (keyset_find_memo).
 * Returns 0, or -1 with the problem set on the reply.
 */
static int authorize(struct http_request *req)
{
    const struct keyset *ks = auth_current();
    struct fg_error err = {0};
    if (ks == NULL || !ks->required) {
        if (check_auth_off(req, ks, &err) == 0)
            return 0;
        reply_problem(&req->conn->reply, &err);
        return -1;
    }
    if (req->match.route->scope == SCOPE_OPEN)
        return 0;
    const char *key;
    size_t len;
    if (auth_bearer(http_request_header(req, MHD_HTTP_HEADER_AUTHORIZATION), &key, &len, &err) !=
        0) {
        reply_problem(&req->conn->reply, &err);
        return -1;
    }
    struct conn_state *state = req->conn->state;
    req->principal =
        state != NULL ? keyset_find_memo(ks, key, len, &state->auth) : keyset_find(ks, key, len);
    if (req->principal == NULL) {
        fg_fail(&err, FG_ERR_UNAUTHORIZED, "unknown API key");
        reply_problem(&req->conn->reply, &err);
        return -1;
    }
    char needed[ROUTE_SCOPE_MAX];
    if (!router_needed_scope(req->match.route, req->match.params[0], needed, sizeof needed) ||
        api_key_permit(req->principal, needed, &err) == 0)
        return 0;
    reply_problem_scope(&req->conn->reply, &err, needed);
    return -1;
}

int http_request_permit(const struct http_request *req, const char *needed, struct fg_error *err)
{
    return api_key_permit(req->principal, needed, err);
}

/* The checks that run once, before a request's handler: the route matched,
 * the API key, the strict rules. Returns 0, or -1 with the problem set on the
 * reply. */
static int admit(struct http_request *req)
{
    struct http_conn *conn = req->conn;
    if (conn->route_status != FG_OK || authorize(req) != 0)
        return -1;
    struct fg_error err = {0};
    if (check_strict(req, &err) != 0) {
        reply_problem(&conn->reply, &err);
        return -1;
    }
    return 0;
}

/* True if req's answer is not to be sent, its client gone: a grant's whose
 * client closed or reset its connection (waiter_client_gone, which probes a
 * half-closed one), or an answer of the round that read the request (phase
 * CONN_DISPATCHING: counted as it is queued, send_reply) whose client reset
 * it while the handler ran. One poll that does not wait. A client that only
 * half-closed may still read; an answer after a wait is counted once sent or
 * not (on_completed). An answer of the round that read the request within
 * CLIENT_GONE_CHECK_MS of its arrival is not probed: no client gives up so
 * soon, and the probe would cost nearly every lock acquire and release a
 * system call. */
static bool client_gone(const struct http_request *req, enum conn_phase phase)
{
    int fd = http_request_fd(req);
    bool first_round = phase == CONN_DISPATCHING;
    if (first_round && clock_mono_ms() - req->started_ms < CLIENT_GONE_CHECK_MS)
        return false;
    if (req->give_back != NULL)
        return waiter_client_gone(fd);
    if (!first_round)
        return false;
    struct pollfd p = {.fd = fd, .events = 0};
    return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

/*
 * Runs the handler until it answers or parks. libmicrohttpd calls again after
 * each event-loop round until an answer is queued, and after a resume. A park
 * in the round that read the request only returns to libmicrohttpd for one
 * round (CONN_PARK_DEFERRED), and the next call suspends: in the round that
 * read the request, libmicrohttpd still means to read the socket, and a
 * connection suspended then reads it first when resumed, so the end of stream
 * of a client that half-closed after sending would close the connection
 * unanswered. One idle round later libmicrohttpd only waits for the answer.
 * A wake that came first runs the handler again instead; if it came while
 * the handler first ran (CONN_WOKEN_EARLY), the next park is still put off.
 * Each run of the handler may wait request_timeout_ms for Redis in all
 * (util/budget.h).
 */
static enum MHD_Result dispatch(struct http_request *req, const char *method, const char *url)
{
    struct http_conn *conn = req->conn;
    conn->method = method;
    conn->url = url;
    if (conn_phase_of(conn) == CONN_RECEIVING && admit(req) != 0)
        return send_reply(req, method, url);
    enum conn_phase phase = conn_step(conn, CONN_EV_CALL);
    trace_current_set(req->trace_id);
    while (phase == CONN_DISPATCHING || phase == CONN_RUNNING) {
        budget_start(server.cfg->request_timeout_ms);
        enum handler_result result = req->match.route->handler(req, &conn->reply);
        budget_end();
        if (result == HANDLER_DONE && client_gone(req, phase)) {
            give_back(req); /* a grant for a client that is gone: never written */
            result = HANDLER_CLOSE;
        }
        if (result == HANDLER_DONE)
            return send_reply(req, method, url);
        if (result == HANDLER_CLOSE)
            return drop_reply(req, method, url);
        phase = conn_step(conn, CONN_EV_PARK);
    }
    return MHD_YES;
}

static bool content_length_too_large(struct MHD_Connection *mhd)
{
    const char *cl =
        MHD_lookup_connection_value(mhd, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl == NULL)
        return false;
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    return n > (unsigned long long)server.cfg->max_body_bytes;
}

/* True if the client waits for "100 Continue" before it sends the body. */
static bool expects_continue(struct MHD_Connection *mhd)
{
    const char *expect = MHD_lookup_connection_value(mhd, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    return expect != NULL && strcasecmp(expect, "100-continue") == 0;
}

/* Marks conn's request as one whose body crossed max_body_bytes: it is answered
 * 413 and closed, and its deadline gives it no further period (watch_expire_locked). */
static void refuse_body(struct http_conn *conn)
{
    conn->body_too_large = true;
    if (conn->state != NULL)
        atomic_store(&conn->state->body_too_large, true);
}

static void append_body(struct http_request *req, const char *data, size_t len)
{
    struct http_conn *conn = req->conn;
    if (conn->body_too_large)
        return;
    if (req->body_len + len > (size_t)server.cfg->max_body_bytes) {
        refuse_body(conn);
        free(req->body);
        req->body = NULL;
        req->body_len = 0;
        return;
    }
    if (req->body_len + len + 1 > conn->body_cap) {
        size_t cap = conn->body_cap ? conn->body_cap : len + 1; /* mostly one chunk */
        while (cap < req->body_len + len + 1)
            cap *= 2;
        req->body = realloc(req->body, cap);
        FG_ASSERT(req->body != NULL);
        conn->body_cap = cap;
    }
    memcpy(req->body + req->body_len, data, len);
    req->body_len += len;
    req->body[req->body_len] = '\0';
}

/* The headers of a request that strict framing counts (check_headers). */
struct header_counts {
    int content_lengths, transfer_encodings, hosts; /* the body's framing and its Host */
    int authorizations, fence_tokens;               /* the credentials a request may name once */
    int content_types;                              /* the body's media type, named once too */
    int bad_names;                                  /* names that are not a token */
};

/* MHD_KeyValueIterator: counts into cls, a struct header_counts. */
static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    (void)value;
    struct header_counts *counts = cls;
    if (!strict_header_name_ok(key))
        counts->bad_names++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        counts->content_lengths++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
        counts->transfer_encodings++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        counts->hosts++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
        counts->authorizations++;
    else if (strcasecmp(key, HTTP_HEADER_FENCE_TOKEN) == 0)
        counts->fence_tokens++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_TYPE) == 0)
        counts->content_types++;
    return MHD_YES;
}

/* The first of Authorization, Fence-Token and Content-Type that counts
 * shows named more than once, or NULL: a proxy in front may check the
 * credential, or inspect the body, by one of the two where the gateway
 * reads the other. */
static const char *named_twice(const struct header_counts *counts)
{
    if (counts->authorizations > 1)
        return MHD_HTTP_HEADER_AUTHORIZATION;
    if (counts->fence_tokens > 1)
        return HTTP_HEADER_FENCE_TOKEN;
    if (counts->content_types > 1)
        return MHD_HTTP_HEADER_CONTENT_TYPE;
    return NULL;
}

/* The checks of strict requests that need only the headers and the target:
 * the headers' names, the body's framing (its transfer coding too), the
 * credentials and the media type named once, a target in absolute form that
 * names a host and the port's scheme, and the Host (authority, the target's,
 * in its place when the target names one). A failure closes the connection
 * after the answer. */
static int check_headers(struct http_request *req, const char *target, const char *authority,
                         struct fg_error *err)
{
    struct header_counts counts = {0};
    MHD_get_connection_values(req->conn->mhd, MHD_HEADER_KIND, count_framing, &counts);
    if (counts.bad_names > 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "a header name is not a token: no space or tab may stand in a name or "
                       "before its colon");
    if (!strict_framing_ok(counts.content_lengths, counts.transfer_encodings))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "the body length is ambiguous: send one Content-Length or "
                       "Transfer-Encoding, not both and not twice");
    if (!strict_transfer_coding_ok(http_request_header(req, MHD_HTTP_HEADER_TRANSFER_ENCODING)))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "the only Transfer-Encoding served is 'chunked': send the body with it or "
                       "with Content-Length");
    if (counts.hosts > 1)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "the request names its Host more than once");
    if (counts.hosts == 0 && !req->conn->http_1_0)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "an HTTP/1.1 request must name its Host");
    const char *twice = named_twice(&counts);
    if (twice != NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "the request names its %s more than once", twice);
    const char *fault = strict_target_fault(target);
    if (fault != NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "%s", fault);
    bool tls = tls_enabled();
    if (!strict_target_scheme_ok(target, tls))
        return fg_fail(err, FG_ERR_MISDIRECTED_REQUEST,
                       "this port serves %s, not the scheme the target names",
                       tls ? "https" : "plain http");
    const char *host =
        authority[0] != '\0' ? authority : http_request_header(req, MHD_HTTP_HEADER_HOST);
    const struct listener *listener = req->conn->listener;
    if (!strict_host_allowed(host, listener->allowed_hosts, listener->nallowed_hosts))
        return fg_fail(err, FG_ERR_MISDIRECTED_REQUEST,
                       "this gateway does not serve that Host (see allowed_hosts)");
    return 0;
}

/* MHD_NotifyConnectionCallback: a connection's watch lives as long as it does. */
static void on_connection(void *cls, struct MHD_Connection *mhd, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    struct conn_state *w = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_CONNECTION_FD);
        w = calloc(1, sizeof *w);
        FG_ASSERT(w != NULL);
        w->fd = info != NULL ? info->connect_fd : MHD_INVALID_SOCKET;
        client_address(mhd, w->client_addr, sizeof w->client_addr);
        *socket_context = w;
        watch_arm(w);
        return;
    }
    if (w == NULL)
        return;
    watch_disarm(w);
    auth_memo_clear(&w->auth);
    free(w);
    *socket_context = NULL;
}

/* What the socket of a connection past its deadline holds, as the reaper
 * finds it. */
enum peer_state {
    PEER_SILENT,  /* nothing unread, still connected: the client is slow, or its thread has
                     just read its request and not yet said so */
    PEER_WAITING, /* bytes unread: its polling thread is late, not the client */
    PEER_GONE,    /* the client closed or reset it: its thread closes it when it polls */
};

/*
 * Peeks at the socket fd of a connection past its deadline. A polling thread
 * that is free reads a slow client's trickle, and sees its hang-up, as they
 * come; so bytes or an end waiting unread mean that the thread is late:
 * handlers block it on a stalled backend (up to request_timeout_ms each)
 * while the connections queued behind them wait, their requests complete or
 * their clients gone.
 */
static enum peer_state peer_state_of(MHD_socket fd)
{
    char byte;
    if (fd == MHD_INVALID_SOCKET)
        return PEER_SILENT;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno == EINTR))
        return PEER_WAITING;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
        return PEER_GONE;
    return PEER_SILENT;
}

/* Unlinks and returns the first connection of the watch list whose sentinel
 * is list if it is due at now_ms, else returns NULL. Called with
 * watches.lock held. */
static struct conn_state *watch_pop_due(struct conn_state *list, int64_t now_ms)
{
    struct conn_state *w = list->next;
    if (w == list || w->due_ms > now_ms)
        return NULL;
    watch_unlink(w);
    return w;
}

/*
 * Decides on w, unlinked past its deadline (again: a moment after it was
 * found silent there). Bytes waiting unread: another period, unless its body
 * already crossed max_body_bytes (a client still sending a refused body gets
 * none: it is closed). Its client gone: left to its thread. Silent (a refused
 * body too: its 413 may be on its way): looked at again a moment later, for
 * its thread may have read its whole request just now and wait for
 * watches.lock to say so; silent again, it is closed. Called with
 * watches.lock held.
 */
static void watch_expire_locked(struct conn_state *w, bool again)
{
    enum peer_state peer = peer_state_of(w->fd);
    bool refused = atomic_load(&w->body_too_large);
    if (peer == PEER_WAITING && !refused) {
        watch_append_locked(&watches.head, w, request_delay_locked());
    } else if (peer == PEER_SILENT && !again) {
        watch_append_locked(&watches.silent, w, look_again_ms());
    } else if (peer != PEER_GONE) {
        /* Counted before the shutdown: a client that sees its connection end
         * may read the metric at once. A drain's closings are no slow client's. */
        if (!atomic_load(&server.quiesced))
            metrics_slow_headers_closed(1);
        if (w->fd != MHD_INVALID_SOCKET)
            shutdown(w->fd, SHUT_RDWR); /* libmicrohttpd then closes it as a hang-up */
    }
}

/* When the first connection of the watch list whose sentinel is list is due
 * (INT64_MAX: none). Called with watches.lock held. */
static int64_t watch_next_due(const struct conn_state *list)
{
    return list->next != list ? list->next->due_ms : INT64_MAX;
}

int64_t http_server_reap_slow(int64_t now_ms)
{
    pthread_mutex_lock(&watches.lock);
    struct conn_state *w;
    while ((w = watch_pop_due(&watches.head, now_ms)) != NULL)
        watch_expire_locked(w, false);
    while ((w = watch_pop_due(&watches.silent, now_ms)) != NULL)
        watch_expire_locked(w, true);
    int64_t head_ms = watch_next_due(&watches.head), silent_ms = watch_next_due(&watches.silent);
    pthread_mutex_unlock(&watches.lock);
    return head_ms < silent_ms ? head_ms : silent_ms;
}

/* MHD_AccessHandlerCallback; cls is the listener of the daemon. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *mhd, const char *target,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    const struct listener *listener = cls;
    closing_gone_client = false;
    char authority[TARGET_AUTHORITY_MAX];
    const char *url = strict_target_path(target, authority, sizeof authority);
    struct http_request *req = *con_cls;
    if (req == NULL) {
        req = request_new(listener, mhd, state_of(mhd), method, url, version);
        *con_cls = req;
        struct fg_error err = {0};
        if (check_headers(req, target, authority, &err) != 0) {
            req->conn->close_after = true;
            reply_problem(&req->conn->reply, &err);
            return send_reply(req, method, url);
        }
        if (content_length_too_large(mhd)) {
            refuse_body(req->conn);
            if (expects_continue(mhd))
                return send_problem(req, FG_ERR_BODY_TOO_LARGE, "request body over the limit",
                                    method, url);
        }
        return MHD_YES;
    }
    enum conn_phase phase = conn_phase_of(req->conn);
    if (phase == CONN_ANSWERED || phase == CONN_CLOSED) {
        *upload_data_size = 0; /* discard the rest of a refused body */
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        append_body(req, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    watch_disarm(req->conn->state); /* the whole request arrived in time */
    if (req->conn->body_too_large)
        return send_problem(req, FG_ERR_BODY_TOO_LARGE, "request body over the limit", method, url);
    return dispatch(req, method, url);
}

/* libmicrohttpd's words for a peer that went away while it sent or read:
 * normal client behaviour (the request is counted 499), not a fault. */
static const char *const peer_gone_errors[] = {
    "The connection was forcibly closed by remote peer",
    "The socket is not connected",
    "The socket is no longer available for sending",
    "Socket has been disconnected when reading request",
};

/* The level of a library line: debug where it says the peer went away. */
static enum log_level library_line_level(const char *line)
{
    for (size_t i = 0; i < sizeof peer_gone_errors / sizeof peer_gone_errors[0]; i++)
        if (strstr(line, peer_gone_errors[i]) != NULL)
            return LOG_DEBUG;
    return LOG_WARN;
}

/* MHD_LogCallback: libmicrohttpd's own error lines, as JSON log lines (but the
 * one that follows drop_reply on the same thread). */
static void log_library(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    if (closing_gone_client) {
        closing_gone_client = false;
        return;
    }
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    utf8_trim_cut(line);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    enum log_level level = library_line_level(line);
    if (log_enabled(level))
        log_event(level, "http_library", json_pack("{s:o}", "detail", fgjson_string(line)));
}

/* Raises the soft descriptor limit to the hard one and returns how many
 * connections fit beside what the backends and the process need. */
static unsigned derived_max_connections(const struct config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit raised = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            rl = raised;
    }
    /* Postgres pool, a Redis connection per HTTP thread plus janitor and subscriber, and the
     * probe listener's socket and connections. */
    rlim_t reserve = (rlim_t)(cfg->pg_pool_size + cfg->http_threads + 4 + FD_RESERVE);
    if (cfg->probe_host != NULL)
        reserve += PROBE_MAX_CONNECTIONS + 1;
    rlim_t fit = rl.rlim_cur > reserve + 16 ? rl.rlim_cur - reserve : 16;
    return fit > 1000000 ? 1000000u : (unsigned)fit;
}

/*
 * Logs the connection limits in force (connection_limits) beside max_conn and
 * returns the per-address one: half of max_conn unless configured. A
 * configured one above max_conn meets a derived max_conn only (config.c
 * refuses it above a configured one): the descriptor limit leaves fewer
 * connections, a fact of the host rather than a fault of the configuration,
 * so it is capped at max_conn and the line is a warn that says so.
 */
static unsigned per_ip_limit(const struct config *cfg, unsigned max_conn)
{
    unsigned per_ip = cfg->max_connections_per_ip > 0 ? (unsigned)cfg->max_connections_per_ip
                                                      : (max_conn + 1) / 2;
    bool capped = per_ip > max_conn;
    json_t *fields = json_pack("{s:I, s:I, s:I}", "max_connections", (json_int_t)max_conn,
                               "max_connections_per_ip", (json_int_t)(capped ? max_conn : per_ip),
                               "header_timeout_ms", (json_int_t)cfg->header_timeout_ms);
    if (capped) {
        char detail[200];
        snprintf(detail, sizeof detail,
                 "limits.max_connections_per_ip (%u) is more than the %u connections the "
                 "descriptor limit leaves: capped at %u",
                 per_ip, max_conn, max_conn);
        json_object_set_new(fields, "detail", json_string(detail));
    }
    log_event(capped ? LOG_WARN : LOG_INFO, "connection_limits", fields);
    return capped ? max_conn : per_ip;
}

/* MHD_AcceptPolicyCallback, run on the accepting thread for each connection it
 * hands over: draining refuses new connections here, so that they are closed
 * at once instead of waiting in the listen queue. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)cls;
    (void)addr;
    (void)addrlen;
    return atomic_load(&server.quiesced) ? MHD_NO : MHD_YES;
}

/* An address to listen on: host (an IP address, which setting names in a
 * failure) and port, into *addr and *addrlen; adds MHD_USE_IPv6 to *flags for
 * an IPv6 one. */
static int listen_address(const char *host, int port, const char *setting,
                          struct sockaddr_storage *addr, socklen_t *addrlen, unsigned *flags,
                          struct fg_error *err)
{
    memset(addr, 0, sizeof *addr);
    struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *addrlen = sizeof *v4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *addrlen = sizeof *v6;
        *flags |= MHD_USE_IPv6;
        return 0;
    }
    return fg_fail(err, FG_ERR_CONFIG, "%s: '%s' is not an IP address", setting, host);
}

/* The flags both daemons share: internal polling threads (epoll), woken by
 * a pipe, suspended connections, error lines, and HTTPS when configured. */
static unsigned daemon_flags(void)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    return tls_enabled() ? flags | MHD_USE_TLS : flags;
}

/*
 * Starts the API's daemon on cfg's listen address: a pool of http_threads
 * polling threads fed by the accepting thread (acceptor.h), within the
 * connection limits. tls_options: the options HTTPS needs (none for plain
 * HTTP), read at start only.
 */
static int api_start(const struct config *cfg, struct MHD_OptionItem *tls_options,
                     struct fg_error *err)
{
    unsigned max_conn =
        cfg->max_connections > 0 ? (unsigned)cfg->max_connections : derived_max_connections(cfg);
    unsigned per_ip = per_ip_limit(cfg, max_conn);
    struct sockaddr_storage addr;
    socklen_t addrlen = 0;
    unsigned flags = daemon_flags() | MHD_USE_NO_LISTEN_SOCKET;
    if (listen_address(cfg->listen_host, cfg->listen_port, "listen", &addr, &addrlen, &flags,
                       err) != 0)
        return -1;
    char name[300];
    snprintf(name, sizeof name, "%s:%d", cfg->listen_host, cfg->listen_port);
    if (acceptor_listen((const struct sockaddr *)&addr, addrlen, name, err) != 0)
        return -1;
    /* One thread is the library's single polling thread: a pool of one (or none) draws a warning.
     */
    struct MHD_OptionItem pool_options[] = {
        {MHD_OPTION_THREAD_POOL_SIZE, cfg->http_threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    if (cfg->http_threads < 2)
        pool_options[0].option = MHD_OPTION_END;
    server.api.daemon = MHD_start_daemon(
        flags, 0, accept_policy, NULL, on_request, &server.api,
        /* First, so that libmicrohttpd's complaints about the options below are JSON too. */
        MHD_OPTION_EXTERNAL_LOGGER, log_library, NULL, MHD_OPTION_ARRAY, pool_options,
        MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)cfg->connection_buffer_bytes, MHD_OPTION_CONNECTION_LIMIT, max_conn,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_UNESCAPE_CALLBACK, unescape_nothing,
        NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, NULL, MHD_OPTION_ARRAY, tls_options, MHD_OPTION_END);
    if (server.api.daemon == NULL) {
        acceptor_stop();
        return fg_fail(err, FG_ERR_CONFIG, "cannot serve on %s:%d", cfg->listen_host,
                       cfg->listen_port);
    }
    return acceptor_start(server.api.daemon, (unsigned)cfg->http_threads, err);
}

/* The routes of the probe listener: those probe_routes names, copied from the
 * API's table, and the NULL pattern that ends them. */
static struct route probe_table[sizeof probe_routes / sizeof probe_routes[0]];

/* Fills probe_table from routes (the API's table). */
static void probe_table_fill(const struct route *routes)
{
    size_t n = 0;
    for (const struct route *r = routes; r->pattern != NULL; r++) {
        if (!route_listed(r, probe_routes))
            continue;
        FG_ASSERT(n + 1 < sizeof probe_table / sizeof probe_table[0]);
        probe_table[n++] = *r;
    }
    memset(&probe_table[n], 0, sizeof probe_table[n]);
}

/*
 * Starts the probe listener's daemon on cfg's probe_listen address, when it
 * names one: one polling thread of its own, accepting on its own socket, that
 * serves the probe routes of routes alone, so that no handler of the API's
 * threads (a backend call up to its deadline) holds its answers. It keeps
 * serving while the gateway drains (/readyz then answers 503), until
 * http_server_stop. tls_options as for api_start.
 */
static int probe_start(const struct config *cfg, const struct route *routes,
                       struct MHD_OptionItem *tls_options, struct fg_error *err)
{
    if (cfg->probe_host == NULL)
        return 0;
    probe_table_fill(routes);
    server.probe.routes = probe_table;
    server.probe.allowed_hosts = cfg->probe_allowed_hosts;
    server.probe.nallowed_hosts = cfg->nprobe_allowed_hosts;
    struct sockaddr_storage addr;
    socklen_t addrlen = 0;
    unsigned flags = daemon_flags();
    if (listen_address(cfg->probe_host, cfg->probe_port, "probe_listen", &addr, &addrlen, &flags,
                       err) != 0)
        return -1;
    char name[320];
    snprintf(name, sizeof name, "%s:%d (probe_listen)", cfg->probe_host, cfg->probe_port);
    int fd = -1;
    if (acceptor_socket((const struct sockaddr *)&addr, addrlen, name, &fd, err) != 0)
        return -1;
    server.probe.daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &server.probe, MHD_OPTION_EXTERNAL_LOGGER, log_library,
        NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)cfg->connection_buffer_bytes,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)PROBE_MAX_CONNECTIONS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PROBE_MAX_CONNECTIONS,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape_nothing, NULL, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL, MHD_OPTION_ARRAY,
        tls_options, MHD_OPTION_END);
    if (server.probe.daemon == NULL) /* fd not closed here: libmicrohttpd may have closed it */
        return fg_fail(err, FG_ERR_CONFIG, "cannot serve on %s", name);
    return 0;
}

int http_server_start(const struct config *cfg, const struct route *routes, struct fg_error *err)
{
    server.cfg = cfg;
    server.api.routes = routes;
    server.api.allowed_hosts = cfg->allowed_hosts;
    server.api.nallowed_hosts = cfg->nallowed_hosts;
    char *priorities = NULL; /* read by libmicrohttpd at start only */
    if (tls_enabled() && tls_priorities_build(cfg->tls_priorities, &priorities, err) != 0) {
        free(priorities);
        return -1;
    }
    struct MHD_OptionItem tls_options[] = {
        {MHD_OPTION_HTTPS_CERT_CALLBACK, 0, tls_cert_callback()},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, priorities},
        {MHD_OPTION_END, 0, NULL},
    };
    if (!tls_enabled())
        tls_options[0].option = MHD_OPTION_END;
    int rc =
        api_start(cfg, tls_options, err) == 0 && probe_start(cfg, routes, tls_options, err) == 0
            ? 0
            : -1;
    free(priorities);
    if (rc != 0)
        http_server_stop();
    return rc;
}

void http_server_quiesce(void)
{
    pthread_mutex_lock(&watches.lock);
    atomic_store(&server.quiesced, true);
    int64_t now_ms = clock_mono_ms();
    for (struct conn_state *w = watches.head.next; w != &watches.head; w = w->next)
        w->due_ms = now_ms; /* all alike, and before any appended from now on: still sorted */
    pthread_mutex_unlock(&watches.lock);
    alarm_set(now_ms);
}

long http_server_in_flight(bool probes)
{
    return atomic_load(probes ? &server.in_flight : &server.work_in_flight);
}

void http_server_stop(void)
{
    acceptor_stop();
    struct listener *listeners[] = {&server.api, &server.probe}; /* the probes answer to the last */
    for (size_t i = 0; i < sizeof listeners / sizeof listeners[0]; i++) {
        if (listeners[i]->daemon != NULL)
            MHD_stop_daemon(listeners[i]->daemon);
        listeners[i]->daemon = NULL;
    }
}

const char *http_request_header(const struct http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn->mhd, MHD_HEADER_KIND, name);
}

/* What http_request_header_first looks for, and the value it found. */
struct header_search {
    const char *name;
    bool (*match)(const char *value);
    const char *found;
};

/* microhttpd hands the lines over in the order the request sent them. */
static enum MHD_Result header_matches(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    (void)kind;
    struct header_search *search = cls;
    if (strcasecmp(key, search->name) == 0 && value != NULL && search->match(value))
        search->found = value;
    return search->found != NULL ? MHD_NO : MHD_YES;
}

const char *http_request_header_first(const struct http_request *req, const char *name,
                                      bool (*match)(const char *value))
{
    struct header_search search = {name, match, NULL};
    MHD_get_connection_values(req->conn->mhd, MHD_HEADER_KIND, header_matches, &search);
    return search.found;
}

bool http_request_header_any(const struct http_request *req, const char *name,
                             bool (*match)(const char *value))
{
    return http_request_header_first(req, name, match) != NULL;
}

const char *http_request_query(const struct http_request *req, const char *name)
{
    const struct query_arg *arg = query_args_find(req->query, name);
    return arg != NULL ? arg->value : NULL;
}

json_t *http_request_json(struct http_request *req, struct fg_error *err)
{
    char too_big[FGJSON_MEMBER_MAX];
    if (req->json != NULL)
        return req->json;
    req->json = fgjson_parse_object(req->body, req->body_len, too_big, err);
    if (req->json == NULL && too_big[0] != '\0')
        strict_too_big(req->match.route->bounds, too_big, err);
    return req->json;
}

/* Replaces *field with a copy of text cut at cap - 1 bytes, before a
 * character that would not fit whole. */
static void set_log_field(char **field, const char *text, size_t cap)
{
    free(*field);
    *field = strndup(text, (size_t)utf8_cut_len(text, cap - 1));
    FG_ASSERT(*field != NULL);
}

void http_request_log_subject(struct http_request *req, const char *fmt, ...)
{
    char subject[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(subject, sizeof subject, fmt, ap);
    va_end(ap);
    set_log_field(&req->log_subject, subject, sizeof subject);
}

void http_request_log_owner(struct http_request *req, const char *owner)
{
    if (owner[0] != '\0') {
        set_log_field(&req->log_owner, owner, 128);
        return;
    }
    free(req->log_owner); /* none: nothing kept for the request's life */
    req->log_owner = NULL;
}

void http_request_drop_body(struct http_request *req)
{
    json_decref(req->json);
    req->json = NULL;
    free(req->body);
    req->body = NULL;
    req->body_len = 0;
    req->conn->body_cap = 0;
}

struct waiter_client http_request_waiter_client(struct http_request *req)
{
    return (struct waiter_client){req, http_request_fd(req), req->principal};
}

void http_request_count_once_sent(struct http_request *req)
{
    pthread_mutex_lock(&req->conn->phase_lock);
    req->conn->sent_first = true;
    pthread_mutex_unlock(&req->conn->phase_lock);
}

void http_request_wake(struct http_request *req)
{
    conn_step(req->conn, CONN_EV_WAKE);
}
