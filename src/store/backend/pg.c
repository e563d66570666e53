/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pg.c - the libpq connection pool, statement execution and migrations.
 *
 * The pool is a fixed array guarded by one mutex; a caller waits on a condition variable for at
 * most the request deadline. A caller takes a slot holding a connection before an empty one, so
 * the pool grows only while all are taken, one connection at a time; a caller that cannot add one
 * (pg_acquire) waits for a connection given back instead. A connection is (re)made when taken if
 * it is missing, broken, or was closed by the server while it rested (a peek at its socket,
 * util/sock.h: no round trip), and its prepared statements are forgotten with it and prepared
 * again on the new one. With a multi-host DSN and target_session_attrs=read-write, libpq picks the
 * primary at each connect, so a promoted standby takes over without a restart; a connection that
 * finds itself read-only (SQLSTATE 25006) is dropped like a lost one. Every statement waits for
 * its answer for at most a deadline of its own (statement_timeout_ms + request_timeout_ms): a
 * Postgres that is frozen (SIGSTOP, a hung host whose kernel still acknowledges) cannot hold a
 * caller longer, since statement_timeout needs a live server. The connection is then dropped. Each
 * session is named after the trace id of the request it serves (application_name "fencegate/<trace
 * id>", util/traceparent.h). Migrations are the files of sql/ (compiled in), applied in name order
 * inside one transaction that holds an advisory lock, so that two gateways starting together apply
 * each exactly once.
 */
#include "store/backend/pg.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "store/backend/migration.h"
#include "store/backend/pg_reading.h"
#include "store/backend/sqlstate.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/redact.h"
#include "util/sock.h"
#include "util/traceparent.h"

#define MIGRATION_LOCK_KEY "7460518230517"

struct pg_conn {
    PGconn *pq;                   /* NULL until connected */
    bool in_use;                  /* taken by a caller */
    char **prepared;              /* names prepared on this connection (owned) */
    size_t nprepared;             /* entries in prepared */
    char sqlstate[6];             /* SQLSTATE of the last failure, "" if none */
    bool plans_stale;             /* the last failure found its prepared statements stale
                                     (sqlstate_plans_stale): the session is dropped */
    int64_t last_used_ms;         /* clock_mono_ms when it was last given back */
    char trace[TRACE_ID_LEN + 1]; /* trace id in its application_name, "" for none */
};

static struct {
    const struct config *cfg;
    struct pg_conn *conns;
    size_t size;
    size_t in_use;  /* connections taken by a caller */
    size_t waiting; /* callers waiting for one */
    size_t opening; /* empty slots being connected: at most one at a time */
    pthread_mutex_t lock;
    pthread_cond_t freed;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .freed = PTHREAD_COND_INITIALIZER};

int pg_init(const struct config *cfg, struct fg_error *err)
{
    pool.cfg = cfg;
    pool.size = (size_t)cfg->pg_pool_size;
    pool.conns = calloc(pool.size, sizeof *pool.conns);
    if (pool.conns == NULL)
        return fg_fail(err, FG_ERR_INTERNAL, "out of memory");
    return 0;
}

static void forget_prepared(struct pg_conn *c)
{
    for (size_t i = 0; i < c->nprepared; i++)
        free(c->prepared[i]);
    free(c->prepared);
    c->prepared = NULL;
    c->nprepared = 0;
}

static void disconnect(struct pg_conn *c)
{
    PQfinish(c->pq);
    c->pq = NULL;
    forget_prepared(c);
}

void pg_shutdown(void)
{
    for (size_t i = 0; i < pool.size; i++)
        disconnect(&pool.conns[i]);
    free(pool.conns);
    pool.conns = NULL;
    pool.size = 0;
}

/* Server notices ("relation already exists, skipping") are not worth a log line. */
static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* Masks the password of dsn wherever libpq's message quotes it, and dsn
 * itself when it holds a password (libpq quotes a malformed URI whole). */
static void scrub_password(char *message, const char *dsn)
{
    char shown[512];
    redact_url(dsn, shown, sizeof shown);
    if (strcmp(shown, dsn) != 0)
        redact_scrub(message, dsn);
    PQconninfoOption *options = PQconninfoParse(dsn, NULL);
    for (PQconninfoOption *o = options; o != NULL && o->keyword != NULL; o++)
        if (strcmp(o->keyword, "password") == 0)
            redact_scrub(message, o->val);
    PQconninfoFree(options);
}

static int connect_conn(struct pg_conn *c, struct fg_error *err)
{
    /* DateStyle ISO: a date key prints as YYYY-MM-DD in its resource, the
     * canonical text the gateway reads it into (store/fenced/key_text.h), whatever the
     * server's default. */
    char timeout[64];
    snprintf(timeout, sizeof timeout, "-c statement_timeout=%lld -c DateStyle=ISO",
             pool.cfg->statement_timeout_ms);
    char user_timeout[24], connect_timeout[24];
    snprintf(user_timeout, sizeof user_timeout, "%lld",
             pool.cfg->statement_timeout_ms + pool.cfg->request_timeout_ms);
    /* libpq counts whole seconds; the configuration keeps the setting a multiple of 1000 */
    snprintf(connect_timeout, sizeof connect_timeout, "%lld",
             pool.cfg->pg_connect_timeout_ms / 1000);
    /* Keepalives and tcp_user_timeout bound how long a Postgres host that silently
     * drops packets can hold a request, where statement_timeout cannot help. */
    const char *keys[] = {"dbname",
                          "connect_timeout",
                          "application_name",
                          "options",
                          "keepalives",
                          "keepalives_idle",
                          "keepalives_interval",
                          "keepalives_count",
                          "tcp_user_timeout",
                          NULL};
    const char *values[] = {pool.cfg->pg_dsn,
                            connect_timeout,
                            "fencegate",
                            timeout,
                            "1",
                            "5",
                            "2",
                            "3",
                            user_timeout,
                            NULL};
    c->pq = PQconnectdbParams(keys, values, 1);
    if (c->pq == NULL || PQstatus(c->pq) != CONNECTION_OK) {
        metrics_backend_error(METRIC_BACKEND_PG);
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "postgres: %s",
                c->pq ? PQerrorMessage(c->pq) : "out of memory");
        char *nl = strchr(err->msg, '\n');
        if (nl != NULL)
            *nl = '\0';
        scrub_password(err->msg, pool.cfg->pg_dsn);
        disconnect(c);
        return -1;
    }
    PQsetNoticeProcessor(c->pq, ignore_notice, NULL);
    c->trace[0] = '\0';
    metrics_backend_connect(METRIC_BACKEND_PG);
    return 0;
}

/* The free slot a caller takes, under pool.lock: one that holds a connection
 * before an empty one, so that the pool grows only while every connection is
 * taken; an empty one only when may_open and no other is being connected.
 * NULL when there is none. */
static struct pg_conn *free_slot(bool may_open)
{
    struct pg_conn *empty = NULL;
    for (size_t i = 0; i < pool.size; i++) {
        struct pg_conn *c = &pool.conns[i];
        if (c->in_use)
            continue;
        if (c->pq != NULL)
            return c;
        if (empty == NULL)
            empty = c;
    }
    return may_open && pool.opening == 0 ? empty : NULL;
}

/* Takes a free slot, waiting for one until deadline; NULL in time. After a
 * connection could not be added (may_open false) it waits only while some
 * other caller holds a slot it will give back. */
static struct pg_conn *take_slot(bool may_open, const struct timespec *deadline)
{
    struct pg_conn *c = NULL;
    pthread_mutex_lock(&pool.lock);
    while ((c = free_slot(may_open)) == NULL && (may_open || pool.in_use > 0)) {
        pool.waiting++;
        int rc = pthread_cond_clockwait(&pool.freed, &pool.lock, CLOCK_MONOTONIC, deadline);
        pool.waiting--;
        if (rc == ETIMEDOUT)
            break;
    }
    if (c != NULL) {
        c->in_use = true;
        pool.in_use++;
        pool.opening += c->pq == NULL;
    }
    pthread_mutex_unlock(&pool.lock);
    return c;
}

/* Ends the opening of an empty slot: the next caller may open one. */
static void opened(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.opening--;
    pthread_cond_signal(&pool.freed);
    pthread_mutex_unlock(&pool.lock);
}

/* Makes c ready to serve: a connection that died while it rested is dropped;
 * an empty slot is connected when may_open, and fails c otherwise. */
static int ready_slot(struct pg_conn *c, bool may_open, struct fg_error *err)
{
    if (c->pq != NULL && (PQstatus(c->pq) != CONNECTION_OK ||
                          sock_broken_after_idle(PQsocket(c->pq), c->last_used_ms)))
        disconnect(c);
    if (c->pq != NULL)
        return 0;
    return may_open ? connect_conn(c, err) : -1;
}

static struct pg_conn *serving(struct pg_conn *c)
{
    c->sqlstate[0] = '\0';
    c->plans_stale = false;
    return c;
}

/* The pool grows one connection at a time: callers that arrive while one is
 * opened wait for it or for one given back, so that a burst on an empty pool
 * does not open many at once, each of which Postgres counts against its
 * max_connections or the role's CONNECTION LIMIT while it starts (all of them
 * refused then, though none would be alone). A connection that could not be
 * added while others were taken (such a limit reached, a host too loaded to
 * answer within pg_connect_timeout_ms) leaves its caller waiting for one of
 * those until the request deadline, the failure kept for the answer should
 * none come; a connection found dead while it rested fails its caller at
 * once, since the others are likely gone with it. */
struct pg_conn *pg_acquire(struct fg_error *err)
{
    struct timespec deadline = clock_mono_at(clock_mono_ms() + pool.cfg->request_timeout_ms);
    struct pg_conn *c = take_slot(true, &deadline);
    if (c == NULL) {
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "postgres: no free connection in time");
        return NULL;
    }
    bool grows = c->pq == NULL;
    struct fg_error refused = {0}; /* answered only should no connection come */
    int rc = ready_slot(c, true, &refused);
    if (grows)
        opened();
    if (rc == 0)
        return serving(c);
    pg_release(c);
    if (grows && (c = take_slot(false, &deadline)) != NULL) {
        if (ready_slot(c, false, NULL) == 0)
            return serving(c);
        pg_release(c);
    }
    if (err != NULL)
        *err = refused;
    return NULL;
}

void pg_release(struct pg_conn *c)
{
    if (c->pq != NULL && PQtransactionStatus(c->pq) != PQTRANS_IDLE)
        disconnect(c); /* never hand on a connection inside a transaction */
    c->last_used_ms = clock_mono_ms();
    pthread_mutex_lock(&pool.lock);
    c->in_use = false;
    pool.in_use--;
    /* an empty slot may end the wait of every caller that may not open one */
    if (c->pq != NULL)
        pthread_cond_signal(&pool.freed);
    else
        pthread_cond_broadcast(&pool.freed);
    pthread_mutex_unlock(&pool.lock);
}

void pg_pool_stats(long *size, long *in_use, long *waiting)
{
    pthread_mutex_lock(&pool.lock);
    *size = (long)pool.size;
    *in_use = (long)pool.in_use;
    *waiting = (long)pool.waiting;
    pthread_mutex_unlock(&pool.lock);
}

const char *pg_last_sqlstate(const struct pg_conn *c)
{
    return c->sqlstate;
}

bool pg_last_plans_stale(const struct pg_conn *c)
{
    return c->plans_stale;
}

/* Keeps the SQLSTATE of the failed result res (NULL: none) on c and turns it
 * into err; true when the connection is of no further use (gone, or read-only). */
static bool note_failure(struct pg_conn *c, const PGresult *res, struct fg_error *err)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *function = res ? PQresultErrorField(res, PG_DIAG_SOURCE_FUNCTION) : NULL;
    snprintf(c->sqlstate, sizeof c->sqlstate, "%s", state ? state : "");
    c->plans_stale = sqlstate_plans_stale(c->sqlstate, function);
    bool lost =
        PQstatus(c->pq) != CONNECTION_OK || sqlstate_read_only(c->sqlstate) || c->plans_stale;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    fg_fail(err, sqlstate_code(c->sqlstate, function, lost), "postgres: %s",
            msg ? msg : PQerrorMessage(c->pq));
    return lost;
}

/* Turns a failed result into err; drops the connection if it is gone. */
static int result_failure(struct pg_conn *c, PGresult *res, struct fg_error *err)
{
    bool lost = note_failure(c, res, err);
    PQclear(res);
    if (err->code == FG_ERR_BACKEND_UNAVAILABLE)
        metrics_backend_error(METRIC_BACKEND_PG);
    if (lost)
        disconnect(c);
    return -1;
}

/* Waits until c's socket is readable (or writable, if want_write) or the
 * deadline (CLOCK_MONOTONIC ms) passes. Returns false on timeout or error. */
static bool wait_socket(const struct pg_conn *c, bool want_write, int64_t deadline_ms)
{
    int64_t left = deadline_ms - clock_mono_ms();
    if (left <= 0)
        return false;
    struct pollfd pfd = {.fd = PQsocket(c->pq), .events = want_write ? POLLOUT : POLLIN};
    int n = poll(&pfd, 1, (int)(left > 60000 ? 60000 : left));
    return n > 0 || (n < 0 && errno == EINTR);
}

/* Sends what libpq holds for c, waiting for the socket until deadline; false
 * on failure or timeout. */
static bool flush_all(const struct pg_conn *c, int64_t deadline)
{
    for (;;) {
        int flushed = PQflush(c->pq);
        if (flushed == 0)
            return true;
        if (flushed < 0 || !wait_socket(c, true, deadline))
            return false;
    }
}

static int64_t deadline_from_now(void)
{
    return clock_mono_ms() + pool.cfg->statement_timeout_ms + pool.cfg->request_timeout_ms;
}

/* Fails err for c, which gave no answer: past deadline, or its connection
 * lost first (a server that crashed or was stopped, whose answer may have
 * been a commit); drops c. */
static void no_answer(struct pg_conn *c, int64_t deadline, struct fg_error *err)
{
    metrics_backend_error(METRIC_BACKEND_PG);
    if (clock_mono_ms() >= deadline) {
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "postgres: no answer within %lld ms",
                pool.cfg->statement_timeout_ms + pool.cfg->request_timeout_ms);
    } else {
        const char *why = PQerrorMessage(c->pq)[0] != '\0' ? PQerrorMessage(c->pq) : "closed";
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                "postgres: the connection was lost before the answer (%.*s)",
                (int)strcspn(why, "\n"), why);
    }
    disconnect(c);
}

/* After a PQsend* call that returned sent: waits for the whole answer until the
 * deadline and returns its last result (the caller clears it), or NULL with err
 * set and the connection dropped (not sent, or no answer in time). */
static PGresult *await_result(struct pg_conn *c, int sent, struct fg_error *err)
{
    if (sent != 1) {
        metrics_backend_error(METRIC_BACKEND_PG);
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "postgres: %s", PQerrorMessage(c->pq));
        disconnect(c);
        return NULL;
    }
    int64_t deadline = deadline_from_now();
    bool ok = flush_all(c, deadline);
    PGresult *last = NULL;
    while (ok) {
        while (ok && PQisBusy(c->pq))
            ok = wait_socket(c, false, deadline) && PQconsumeInput(c->pq) == 1;
        PGresult *res = ok ? PQgetResult(c->pq) : NULL;
        if (res == NULL)
            break;
        PQclear(last);
        last = res;
    }
    if (!ok) {
        PQclear(last);
        no_answer(c, deadline, err);
        return NULL;
    }
    return last;
}

static bool is_prepared(const struct pg_conn *c, const char *name)
{
    for (size_t i = 0; i < c->nprepared; i++)
        if (strcmp(c->prepared[i], name) == 0)
            return true;
    return false;
}

static int prepare(struct pg_conn *c, const char *name, const char *sql, int nparams,
                   struct fg_error *err)
{
    if (is_prepared(c, name))
        return 0;
    PGresult *res = await_result(c, PQsendPrepare(c->pq, name, sql, nparams, NULL), err);
    if (res == NULL)
        return -1;
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return result_failure(c, res, err);
    PQclear(res);
    c->prepared = realloc(c->prepared, (c->nprepared + 1) * sizeof *c->prepared);
    FG_ASSERT(c->prepared != NULL);
    c->prepared[c->nprepared++] = strdup(name);
    return 0;
}

static json_t *rows_of(const PGresult *res)
{
    json_t *rows = json_array();
    int ntuples = PQntuples(res), nfields = PQnfields(res);
    for (int r = 0; r < ntuples; r++) {
        json_t *row = json_object();
        for (int f = 0; f < nfields; f++)
            json_object_set_new(row, PQfname(res, f),
                                PQgetisnull(res, r, f) ? json_null()
                                                       : json_string(PQgetvalue(res, r, f)));
        json_array_append_new(rows, row);
    }
    return rows;
}

/* Names c's session after the trace id this thread works for
 * (trace_current): application_name "fencegate/<trace id>", or "fencegate"
 * for none, so that the database's log and pg_stat_activity name the trace of
 * a statement. One round trip when the name changes, none otherwise; inside
 * a transaction the name stays as it was at its BEGIN. */
static int name_session(struct pg_conn *c, struct fg_error *err)
{
    const char *want = trace_current();
    if (strcmp(c->trace, want) == 0 || PQtransactionStatus(c->pq) != PQTRANS_IDLE)
        return 0;
    char name[16 + TRACE_ID_LEN];
    snprintf(name, sizeof name, "fencegate%s%s", want[0] != '\0' ? "/" : "", want);
    const char *params[] = {name};
    PGresult *res =
        await_result(c,
                     PQsendQueryParams(c->pq, "SELECT set_config('application_name', $1, false)", 1,
                                       NULL, params, NULL, NULL, 0),
                     err);
    if (res == NULL)
        return -1;
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        return result_failure(c, res, err);
    PQclear(res);
    snprintf(c->trace, sizeof c->trace, "%s", want);
    return 0;
}

/* pg_exec, keeping the command's count in *count when count is not NULL. */
static int exec_one(struct pg_conn *c, const char *stmt_name, const char *sql, int nparams,
                    const char *const *params, json_t **rows, long *count, struct fg_error *err)
{
    c->sqlstate[0] = '\0';
    c->plans_stale = false;
    if ((c->pq == NULL && connect_conn(c, err) != 0) || name_session(c, err) != 0)
        return -1;
    int64_t started_us = clock_mono_us();
    int sent;
    if (stmt_name != NULL) {
        if (prepare(c, stmt_name, sql, nparams, err) != 0)
            return -1;
        sent = PQsendQueryPrepared(c->pq, stmt_name, nparams, params, NULL, NULL, 0);
    } else if (nparams > 0) {
        sent = PQsendQueryParams(c->pq, sql, nparams, NULL, params, NULL, NULL, 0);
    } else {
        sent = PQsendQuery(c->pq, sql);
    }
    PGresult *res = await_result(c, sent, err);
    metrics_backend_latency(METRIC_BACKEND_PG, clock_mono_us() - started_us);
    if (res == NULL)
        return -1;
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return result_failure(c, res, err);
    if (rows != NULL)
        *rows = rows_of(res);
    if (count != NULL)
        *count = pg_reading_count(PQcmdTuples(res));
    PQclear(res);
    return 0;
}

int pg_exec(struct pg_conn *c, const char *stmt_name, const char *sql, int nparams,
            const char *const *params, json_t **rows, struct fg_error *err)
{
    return exec_one(c, stmt_name, sql, nparams, params, rows, NULL, err);
}

int pg_exec_stmt(struct pg_conn *c, struct pg_group_stmt *stmt, struct fg_error *err)
{
    stmt->rows = NULL;
    stmt->count = -1;
    return exec_one(c, stmt->name, stmt->sql, stmt->nparams, stmt->params, &stmt->rows,
                    &stmt->count, err);
}

/* Queues one statement of a pipeline; 1 if libpq took it. */
static int send_stmt(struct pg_conn *c, const char *name, const char *sql, int nparams,
                     const char *const *params)
{
    if (name != NULL)
        return PQsendQueryPrepared(c->pq, name, nparams, params, NULL, NULL, 0);
    return PQsendQueryParams(c->pq, sql, nparams, NULL, params, NULL, NULL, 0);
}

/* The next result of a pipeline, waiting for it until deadline; NULL (err set,
 * conn dropped) when the connection fails or the deadline passes. The NULL
 * that libpq puts after each statement's results is skipped. */
static PGresult *next_result(struct pg_conn *c, int64_t deadline, struct fg_error *err)
{
    for (;;) {
        bool ok = true;
        while (ok && PQisBusy(c->pq))
            ok = wait_socket(c, false, deadline) && PQconsumeInput(c->pq) == 1;
        PGresult *res = ok ? PQgetResult(c->pq) : NULL;
        if (res != NULL)
            return res;
        if (!ok || PQstatus(c->pq) != CONNECTION_OK) {
            no_answer(c, deadline, err);
            return NULL;
        }
    }
}

/* Readies c for a pipeline of stmts[0..n): connected, named after the request,
 * every named statement prepared. */
static int pipeline_ready(struct pg_conn *c, const struct pg_group_stmt *stmts, size_t n,
                          struct fg_error *err)
{
    c->sqlstate[0] = '\0';
    c->plans_stale = false;
    if ((c->pq == NULL && connect_conn(c, err) != 0) || name_session(c, err) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (stmts[i].name != NULL &&
            prepare(c, stmts[i].name, stmts[i].sql, stmts[i].nparams, err) != 0)
            return -1;
    return 0;
}

/* Sends head (a statement without parameters, or NULL), the statements, tail
 * (likewise) and a sync in pipeline mode and flushes them; -1 (err set, conn
 * dropped) if libpq or the socket refused. */
static int send_pipeline(struct pg_conn *c, const char *head, const struct pg_group_stmt *stmts,
                         size_t n, const char *tail, int64_t deadline, struct fg_error *err)
{
    int sent = PQenterPipelineMode(c->pq) &&
               (head == NULL || PQsendQueryParams(c->pq, head, 0, NULL, NULL, NULL, NULL, 0));
    for (size_t i = 0; i < n && sent; i++)
        sent = send_stmt(c, stmts[i].name, stmts[i].sql, stmts[i].nparams, stmts[i].params);
    sent = sent && (tail == NULL || PQsendQueryParams(c->pq, tail, 0, NULL, NULL, NULL, NULL, 0)) &&
           PQpipelineSync(c->pq);
    if (sent && flush_all(c, deadline))
        return 0;
    metrics_backend_error(METRIC_BACKEND_PG);
    fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "postgres: %s", PQerrorMessage(c->pq));
    disconnect(c);
    return -1;
}

/* The kind of a pipeline's result, for pg_reading. */
static enum pg_result_kind kind_of(const PGresult *res)
{
    switch (PQresultStatus(res)) {
    case PGRES_FATAL_ERROR: return PG_RESULT_FAILED;
    case PGRES_PIPELINE_ABORTED: return PG_RESULT_ABORTED;
    case PGRES_PIPELINE_SYNC: return PG_RESULT_SYNC;
    default: return PG_RESULT_OK;
    }
}

/* Reads the answers of a pipeline sent by send_pipeline (head and tail as
 * sent) into stmts, as *r tells (store/pg_reading.h); the first failure is
 * noted on c and in err. 0 when every answer arrived in step, -1 (err set,
 * conn dropped) when not or when c failed. */
static int read_pipeline(struct pg_conn *c, struct pg_group_stmt *stmts, size_t n, bool head,
                         bool tail, int64_t deadline, struct pg_reading *r, struct fg_error *err)
{
    pg_reading_start(r, n, head, tail);
    for (size_t i = 0; i < n; i++) {
        stmts[i].rows = NULL;
        stmts[i].count = -1;
    }
    enum pg_reading_step step;
    do {
        PGresult *res = next_result(c, deadline, err);
        if (res == NULL)
            return -1;
        size_t i;
        step = pg_reading_next(r, kind_of(res), &i);
        if (step == PG_READ_KEEP) {
            stmts[i].rows = rows_of(res);
            stmts[i].count = pg_reading_count(PQcmdTuples(res));
        } else if (step == PG_READ_FAILURE) {
            (void)note_failure(c, res, err); /* a lost connection fails the next read */
        }
        PQclear(res);
    } while (step != PG_READ_END && step != PG_READ_OUT_OF_STEP);
    if (step == PG_READ_END && PQexitPipelineMode(c->pq) == 1)
        return 0;
    fg_fail(err, FG_ERR_INTERNAL, "postgres: a pipeline's answers did not end as sent");
    disconnect(c);
    return -1;
}

static void drop_rows(struct pg_group_stmt *stmts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_decref(stmts[i].rows);
        stmts[i].rows = NULL;
    }
}

int pg_exec_group(struct pg_conn *c, struct pg_group_stmt *stmts, size_t n,
                  enum pg_group_outcome *outcome, size_t *failed, struct fg_error *err)
{
    if (pipeline_ready(c, stmts, n, err) != 0)
        return -1;
    int64_t deadline = deadline_from_now(), started_us = clock_mono_us();
    if (send_pipeline(c, "BEGIN", stmts, n, "COMMIT", deadline, err) != 0)
        return -1;
    struct pg_reading r;
    int rc = read_pipeline(c, stmts, n, true, true, deadline, &r, err);
    metrics_backend_latency(METRIC_BACKEND_PG, clock_mono_us() - started_us);
    if (rc != 0) {
        drop_rows(stmts, n);
        return -1;
    }
    *outcome = PG_GROUP_COMMITTED;
    if (!r.failed)
        return 0;
    *failed = r.failed_at;
    *outcome = r.failed_at < n ? PG_GROUP_STMT_FAILED : PG_GROUP_NOT_COMMITTED;
    drop_rows(stmts, n);
    pg_rollback(c);
    return 0;
}

int pg_exec_begun(struct pg_conn *c, struct pg_group_stmt *stmt, struct fg_error *err)
{
    if (pipeline_ready(c, stmt, 1, err) != 0)
        return -1;
    int64_t deadline = deadline_from_now(), started_us = clock_mono_us();
    if (send_pipeline(c, "BEGIN", stmt, 1, NULL, deadline, err) != 0)
        return -1;
    struct pg_reading r;
    int rc = read_pipeline(c, stmt, 1, true, false, deadline, &r, err);
    metrics_backend_latency(METRIC_BACKEND_PG, clock_mono_us() - started_us);
    if (rc == 0 && !r.failed)
        return 0;
    drop_rows(stmt, 1);
    if (rc == 0)
        pg_rollback(c);
    return -1;
}

void pg_rollback(struct pg_conn *c)
{
    char state[sizeof c->sqlstate];
    memcpy(state, c->sqlstate, sizeof state);
    bool stale = c->plans_stale;
    struct fg_error ignored = {0};
    if (c->pq != NULL && (stale || sqlstate_read_only(state) ||
                          (PQtransactionStatus(c->pq) != PQTRANS_IDLE &&
                           pg_exec(c, NULL, "ROLLBACK", 0, NULL, NULL, &ignored) != 0)))
        disconnect(c);
    memcpy(c->sqlstate, state, sizeof state); /* the failure's, not the ROLLBACK's */
    c->plans_stale = stale;
}

int pg_exec_pipeline(struct pg_conn *c, struct pg_group_stmt *stmts, size_t n, size_t *failed,
                     struct fg_error *err)
{
    *failed = n;
    if (pipeline_ready(c, stmts, n, err) != 0)
        return -1;
    int64_t deadline = deadline_from_now(), started_us = clock_mono_us();
    if (send_pipeline(c, NULL, stmts, n, NULL, deadline, err) != 0)
        return -1;
    struct pg_reading r;
    int rc = read_pipeline(c, stmts, n, false, false, deadline, &r, err);
    metrics_backend_latency(METRIC_BACKEND_PG, clock_mono_us() - started_us);
    if (rc == 0 && !r.failed)
        return 0;
    if (rc == 0)
        *failed = r.failed_at;
    drop_rows(stmts, n);
    if (c->plans_stale && c->pq != NULL)
        disconnect(c);
    return -1;
}

int pg_query(const char *stmt_name, const char *sql, int nparams, const char *const *params,
             json_t **rows, struct fg_error *err)
{
    struct pg_conn *c = pg_acquire(err);
    if (c == NULL)
        return -1;
    int rc = pg_exec(c, stmt_name, sql, nparams, params, rows, err);
    pg_release(c);
    return rc;
}

/* Applies every migration of sql/ not applied yet, in name order; conn is inside
 * a transaction. A database that has a version this binary does not know was
 * migrated by a newer gateway: refuse it rather than guess. */
static int apply_migrations(struct pg_conn *c, struct fg_error *err)
{
    json_t *rows = NULL;
    if (pg_exec(c, NULL, "SELECT version FROM fencegate.schema_migrations ORDER BY version", 0,
                NULL, &rows, err) != 0)
        return -1;
    int rc = 0;
    int unknown = 0;
    if (migration_unknown(rows, embedded_sql, &unknown)) {
        rc = fg_fail(err, FG_ERR_CONFIG,
                     "database schema has migration %d, which this gateway does not know "
                     "(a newer gateway migrated it)",
                     unknown);
        goto out;
    }
    for (size_t j = 0; embedded_sql[j].name != NULL && rc == 0; j++) {
        int version = migration_version(embedded_sql[j].name);
        if (migration_applied(rows, version))
            continue;
        char vtext[16];
        snprintf(vtext, sizeof vtext, "%d", version);
        const char *params[] = {vtext, embedded_sql[j].name};
        if (pg_exec(c, NULL, embedded_sql[j].source, 0, NULL, NULL, err) != 0 ||
            pg_exec(c, NULL,
                    "INSERT INTO fencegate.schema_migrations (version, name) VALUES ($1, $2)", 2,
                    params, NULL, err) != 0)
            rc = -1;
        else
            log_message(LOG_INFO, "migration_applied", "%s", embedded_sql[j].name);
    }
out:
    json_decref(rows);
    return rc;
}

int pg_migrate(struct fg_error *err)
{
    struct pg_conn *c = pg_acquire(err);
    if (c == NULL)
        return -1;
    int rc = -1;
    if (pg_exec(c, NULL, "BEGIN", 0, NULL, NULL, err) != 0 ||
        pg_exec(c, NULL, "SELECT pg_advisory_xact_lock(" MIGRATION_LOCK_KEY ")", 0, NULL, NULL,
                err) != 0 ||
        pg_exec(c, NULL,
                "CREATE SCHEMA IF NOT EXISTS fencegate; "
                "CREATE TABLE IF NOT EXISTS fencegate.schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())",
                0, NULL, NULL, err) != 0)
        goto out;
    if (apply_migrations(c, err) != 0)
        goto out;
    rc = pg_exec(c, NULL, "COMMIT", 0, NULL, NULL, err);
out:
    if (rc != 0 && c->pq != NULL) {
        PGresult *res = PQexec(c->pq, "ROLLBACK");
        PQclear(res);
    }
    pg_release(c);
    return rc;
}

int pg_reserve_fences(int64_t issued, int64_t block, int64_t skip, int slot, const char *owner,
                      bool *first, int64_t *floor, int64_t *limit, struct fg_error *err)
{
    char issued_text[24], block_text[24], skip_text[24], slot_text[16];
    snprintf(issued_text, sizeof issued_text, "%lld", (long long)issued);
    snprintf(block_text, sizeof block_text, "%lld", (long long)block);
    snprintf(skip_text, sizeof skip_text, "%lld", (long long)skip);
    snprintf(slot_text, sizeof slot_text, "%d", slot);
    const char *params[] = {issued_text, block_text, skip_text, slot_text, owner};
    json_t *rows = NULL;
    int rc = slot < 0 ? pg_query("reserve_fences",
                                 "UPDATE fencegate.fence_reservation SET reserved = greatest("
                                 " reserved + CASE WHEN $1::bigint < 0 THEN $3::bigint ELSE 0 END,"
                                 " $1::bigint,"
                                 " (SELECT coalesce(max(fence), 0) FROM fencegate.resource_fences))"
                                 " + $2::bigint"
                                 " RETURNING reserved - $2::bigint AS floor, reserved AS lim,"
                                 " false AS first",
                                 3, params, &rows, err)
                      : pg_query("reserve_fences_slot",
                                 "WITH used AS (INSERT INTO fencegate.fence_slots (slot, owner)"
                                 " VALUES ($4::integer, $5::text) ON CONFLICT (slot) DO NOTHING"
                                 " RETURNING slot),"
                                 " owned AS (UPDATE fencegate.fence_slots SET owner = $5::text"
                                 " WHERE slot = $4::integer)"
                                 " UPDATE fencegate.fence_reservation SET reserved = greatest("
                                 " reserved + CASE WHEN $1::bigint < 0 THEN $3::bigint ELSE 0 END,"
                                 " $1::bigint,"
                                 " (SELECT coalesce(max(fence), 0) FROM fencegate.resource_fences))"
                                 " + $2::bigint"
                                 " RETURNING reserved - $2::bigint AS floor, reserved AS lim,"
                                 " EXISTS (SELECT 1 FROM used) AS first",
                                 5, params, &rows, err);
    if (rc != 0)
        return -1;
    const json_t *row = json_array_get(rows, 0);
    if (row == NULL)
        rc = fg_fail(err, FG_ERR_INTERNAL, "fencegate.fence_reservation has no row");
    else {
        *floor = strtoll(json_string_value(json_object_get(row, "floor")), NULL, 10);
        *limit = strtoll(json_string_value(json_object_get(row, "lim")), NULL, 10);
        const char *f = json_string_value(json_object_get(row, "first"));
        *first = f != NULL && f[0] == 't';
    }
    json_decref(rows);
    return rc;
}

int pg_adopt_slot(int slot, const char *from, const char *to, bool *adopted, struct fg_error *err)
{
    char slot_text[16];
    snprintf(slot_text, sizeof slot_text, "%d", slot);
    const char *params[] = {slot_text, from, to};
    json_t *rows = NULL;
    if (pg_query("adopt_slot",
                 "UPDATE fencegate.fence_slots SET owner = $3::text"
                 " WHERE slot = $1::integer AND owner IN ($2::text, $3::text) RETURNING slot",
                 3, params, &rows, err) != 0)
        return -1;
    *adopted = json_array_size(rows) == 1;
    json_decref(rows);
    return 0;
}

int pg_reserved_fences(int64_t *reserved, struct fg_error *err)
{
    json_t *rows = NULL;
    if (pg_query("reserved_fences", "SELECT reserved FROM fencegate.fence_reservation", 0, NULL,
                 &rows, err) != 0)
        return -1;
    const char *value = json_string_value(json_object_get(json_array_get(rows, 0), "reserved"));
    int rc = value ? 0 : fg_fail(err, FG_ERR_INTERNAL, "fencegate.fence_reservation has no row");
    if (value != NULL)
        *reserved = strtoll(value, NULL, 10);
    json_decref(rows);
    return rc;
}

int pg_ping(struct fg_error *err)
{
    return pg_query("ping", "SELECT 1", 0, NULL, NULL, err);
}
