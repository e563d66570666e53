/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis.c - hiredis connections, script calls and the doorbell subscription.
 * Every thread's commands go out on one shared connection, pipelined
 * (store/backend/redis_pipe.h keeps the order): a call queues its formatted command
 * and sleeps on its thread's semaphore; a thread that finds the
 * writing free writes every queued command in one system call, and one
 * thread at a time reads the replies, hands each to the call it answers and
 * wakes that call's thread; the thread whose own reply came reads on only
 * until then, and the oldest call still out takes over. So Redis reads the
 * commands of many requests at once and answers them with one write, where a
 * connection per thread cost it a read and a write each. No lock is held
 * across a system call that can block, and threads are woken only after the
 * lock is let go (a thread woken under it would wake only to wait for it).
 * A semaphore, not a condition variable, because a thread back from
 * pthread_cond_wait holds its mutex marked as contended, and so makes a
 * futex system call each time it lets it go. Scripts come ready to
 * run from the build (embedded.h: each a Redis function library with its libraries and key names,
 * named after its text, and the counts of KEYS and ARGV it declares) and are called with FCALL; a
 * "Function not found" reply (a restarted, failed-over or flushed Redis, or one this build never
 * used) loads the library and retries once. Script results are JSON texts, decoded here.
 *
 * Where the primary is: the one server of a redis:// URL, or, for
 * redis-sentinel://, whatever the sentinels name when a connection is made.
 * Every new connection must answer ROLE with "master" (a replica never runs a
 * lease script), and runs the connect hook (its commands go straight to it,
 * before any queued call). With sentinels, a watcher thread follows
 * +switch-master and bumps a generation number; a connection made in an older
 * generation takes no more commands, and is closed once its calls out are
 * answered, so the gateway moves to the new primary at once instead of waiting
 * for the old one to fail. So does a connection whose server said it cannot
 * take writes (READONLY, MASTERDOWN, LOADING: that call answers 503). A
 * connection that rested since its last reply (SOCK_CHECK_IDLE_MS or more) is
 * peeked at (util/sock.h) before use, so one that the server closed meanwhile
 * is remade instead of failing a request. A call waits no longer than its
 * deadline (util/budget.h: what the request it serves has left of
 * request_timeout_ms, or request_timeout_ms of its own), wherever it waits:
 * queued behind a batch, on a connection being made for it (whose set-up
 * commands get what is left), for its reply (read against the deadline as
 * its bytes come, polling the socket, never with a timeout per read: a
 * server that sends a byte at a time holds it no longer); then it is withdrawn
 * (redis_pipe.h) and fails alone (503). Only a call whose thread writes a
 * batch may wait longer: the writing goes on until the last deadline of the
 * batch's calls, so that they are not failed for the writer's lack of time.
 * A batch whose replies have not all come request_timeout_ms after it was
 * written, a failed write or read, or a reply nobody asked for fails every
 * call out on the connection (503) and closes it.
 *
 * redis-cluster://: one such pipelined connection per node, made on first
 * use (AUTH, then ROLE must answer "master"), and a script runs on the primary
 * of its first key's slot through store/backend/redis_route.h, which follows MOVED
 * (a new map) and ASK (ASKING written in the same batch as the call, on the
 * same connection), waits out TRYAGAIN for up to 126 ms, and answers
 * CLUSTERDOWN, and TRYAGAIN that lasts, with 503. A node
 * that does not know a script (a new primary, a restarted node) has its
 * library loaded and the call resent once. Map fetches use a connection of
 * their own. The connect hook does not run on cluster nodes; commands that
 * name no key go to one primary of the map, PING (readiness) to every one.
 * A subscription follows one shard channel per slot (SSUBSCRIBE), each on the
 * slot's primary, and moves a slot's subscription when Redis ends it (the
 * slot left the node) or the node is lost.
 */
#include "store/backend/redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "embedded.h"
#include "store/backend/key_slot.h"
#include "store/backend/redis_cluster.h"
#include "store/backend/redis_keys.h"
#include "store/backend/redis_pipe.h"
#include "store/backend/redis_route.h"
#include "store/backend/redis_url.h"
#include "util/budget.h"
#include "util/clock.h"
#include "util/fgjson.h"
#include "util/join.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/sock.h"
#include "util/wake.h"

#define MAX_ARGS    48
#define COMMAND_BUF 4096 /* bytes of a command formatted without allocating */

/* Replies that mean "this server cannot take writes now": the connection is
 * dropped and the request answers 503, as if the server were gone. */
static const char *const unavailable_replies[] = {"READONLY", "MASTERDOWN", "LOADING"};

/* How long a sentinel may take to connect or answer before the next one is asked. */
#define SENTINEL_TIMEOUT_MS 500

/* How long the doorbell's connection may take to be made and set up before it is tried again. */
#define SUBSCRIBER_SETUP_MS 1000
#define SUBSCRIBE_RETRY_MS  200 /* between tries to subscribe (a stop ends the pause) */

static struct {
    struct redis_url url; /* the parsed redis_url */
    long long timeout_ms;
    int pipeline_from;    /* redis_pipeline_from: calls in flight from which they share */
    atomic_int in_flight; /* calls on the primary, on any connection (when pipeline_from) */
    redis_connect_hook hook;
    atomic_uint generation;    /* bumped at each +switch-master */
    atomic_int sentinel_first; /* the sentinel that answered last */
    pthread_t watcher;         /* follows +switch-master (sentinel URLs) */
    bool watching;             /* watcher runs */
    atomic_bool watcher_stop;  /* asks it to end */
    atomic_bool policy_known;  /* every primary's eviction policy was read once (cluster) */
    atomic_bool cut_off;       /* calls made from now on end at once (redis_cut_off) */
} rds;

/* A pipelined connection and its calls; every field but at under lock. */
struct node {
    pthread_mutex_t lock;
    struct redis_endpoint at;          /* a cluster node; unused for the one primary */
    struct pipe pipe;                  /* calls queued and out, who writes and who reads */
    redisContext *ctx;                 /* owned; set unless pipe.conn is PIPE_CLOSED */
    unsigned generation;               /* rds.generation when connected */
    int64_t last_used_ms;              /* clock_mono_ms of its last reply */
    char *batch;                       /* the batch being written: its commands copied; owned */
    size_t batch_cap;                  /* bytes allocated at batch */
    char run_id[REDIS_RUN_ID_LEN + 1]; /* of the process ctx reached (redis_run_id_here) */
    struct node *next_own;             /* a thread's own: the next in owned's list */
    struct node *next_mine;            /* a thread's own: the next of that thread's */
};

const char redis_run_id_here[REDIS_RUN_ID_LEN + 1] = REDIS_RUN_ID_PLACEHOLDER;
_Static_assert(sizeof REDIS_RUN_ID_PLACEHOLDER == REDIS_RUN_ID_LEN + 1,
               "redis_run_id_here is as long as a run_id");

/* The connection to the primary (redis://, redis-sentinel://). */
static struct node shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Each thread's own connections, to the primary or to each cluster node, made
 * on first use (own_node). A call whose answer may be large (goes_alone) goes
 * there, and a call made while fewer than rds.pipeline_from others are in
 * flight: its thread writes and reads for itself, sleeps once, in poll, and
 * wakes nobody. A call made while as many or more are in flight (every call,
 * with 0) joins the shared connection's batches instead, which Redis reads and
 * answers with one system call each way for many calls. Listed here for
 * redis_shutdown. */
static struct {
    pthread_mutex_t lock; /* over first */
    struct node *first;   /* linked by next_own */
} owned = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local struct node *thread_own; /* linked by next_mine */

/* redis-cluster://: the routing state, and one connection per node commands
 * went to, made on first use and kept until shutdown (a node that stops being
 * a primary answers MOVED, which routes its slots elsewhere). */
static struct {
    struct route *route;
    pthread_mutex_t lock; /* over nodes and count */
    struct node *nodes[CLUSTER_MAX_NODES];
    int count;
} cluster = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* What wakes this thread's call: the thread that finished it, or a role
 * freed. Posted once per wake-up given; thread_wake_ready once initialised. */
static _Thread_local sem_t thread_wake;
static _Thread_local bool thread_wake_ready;

/* Calls whose threads a thread is to wake once it lets its node's lock go. */
#define WAKES_MAX 64
struct wakes {
    struct pipe_entry *calls[WAKES_MAX]; /* each with wakes_given counting this wake */
    int count;
};

/* The new connection this thread runs the connect hook on (its commands go
 * there directly), when they must be answered by (the deadline of the call
 * that made the connection), and whether the hook's commands lost it. */
static _Thread_local redisContext *setting_up;
static _Thread_local int64_t setup_due_ms;
static _Thread_local bool setup_lost;

int redis_init(const struct config *cfg, struct fg_error *err)
{
    if (redis_url_parse(cfg->redis_url, &rds.url, err) != 0)
        return -1;
    rds.timeout_ms = cfg->request_timeout_ms;
    rds.pipeline_from = (int)cfg->redis_pipeline_from;
    if (rds.url.cluster && cluster.route == NULL) {
        cluster.route = route_new(&rds.url);
        if (cluster.route == NULL)
            return fg_fail(err, FG_ERR_INTERNAL, "out of memory");
    }
    return 0;
}

void redis_set_connect_hook(redis_connect_hook hook)
{
    rds.hook = hook;
}

static struct timeval ms_to_timeval(long long ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* Appends the decimal digits of n to at; returns where the next byte goes. */
static char *put_decimal(char *at, size_t n)
{
    char digits[24];
    size_t k = 0;
    do {
        digits[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n != 0);
    while (k > 0)
        *at++ = digits[--k];
    return at;
}

/* True if key (len bytes) is named after the run_id it is read on: a per-slot
 * fence limit (lease_keys.h) ending with the text of redis_run_id_here. Only
 * keys of the gateway's own prefix, which no client writes, qualify. */
static bool run_id_key(const char *key, size_t len)
{
    static const char prefix[] = KEY_FENCE_LIMIT ":{";
    return len >= sizeof prefix - 1 + REDIS_RUN_ID_LEN &&
           memcmp(key, prefix, sizeof prefix - 1) == 0 &&
           memcmp(key + len - REDIS_RUN_ID_LEN, redis_run_id_here, REDIS_RUN_ID_LEN) == 0;
}

/* Writes argv as one RESP command into buf (cap bytes) when it fits; returns
 * its length either way (formatted by hand: hiredis's own formatting prints
 * every length through sdscatfmt and grows its buffer a piece at a time).
 * When run_id_at is given, it receives where the run_id goes (0: nowhere; one
 * per command): the text of redis_run_id_here as an argument of its own, or at
 * the end of a script's key named after its run_id (run_id_key). */
static size_t format_command(char *buf, size_t cap, int argc, const char **argv, const size_t *lens,
                             size_t *run_id_at)
{
    int keys_end = run_id_at != NULL && argc >= 3 && strcmp(argv[0], "FCALL") == 0
                       ? 3 + atoi(argv[2])
                       : 0; /* after the KEYS of a script */
    size_t need = 1 + 20 + 2;
    for (int i = 0; i < argc; i++)
        need += 1 + 20 + 2 + (lens ? lens[i] : strlen(argv[i])) + 2;
    if (need > cap)
        return need;
    char *at = buf;
    *at++ = '*';
    at = put_decimal(at, (size_t)argc);
    *at++ = '\r';
    *at++ = '\n';
    for (int i = 0; i < argc; i++) {
        size_t len = lens ? lens[i] : strlen(argv[i]);
        *at++ = '$';
        at = put_decimal(at, len);
        *at++ = '\r';
        *at++ = '\n';
        if (run_id_at != NULL &&
            (argv[i] == redis_run_id_here || (i >= 3 && i < keys_end && run_id_key(argv[i], len))))
            *run_id_at = (size_t)(at - buf) + len - REDIS_RUN_ID_LEN;
        memcpy(at, argv[i], len);
        at += len;
        *at++ = '\r';
        *at++ = '\n';
    }
    return (size_t)(at - buf);
}

/* Formats argv (lens: their lengths, or NULL for C strings) into local
 * (COMMAND_BUF bytes) or, when it does not fit (a script's source, a large
 * value), into *heap, which the caller frees; returns the command, *len its
 * length, *run_id_at (unless NULL) as format_command. */
static const char *format_argv(char *local, char **heap, int argc, const char **argv,
                               const size_t *lens, size_t *len, size_t *run_id_at)
{
    *heap = NULL;
    *len = format_command(local, COMMAND_BUF, argc, argv, lens, run_id_at);
    if (*len <= COMMAND_BUF)
        return local;
    *heap = malloc(*len);
    FG_ASSERT(*heap != NULL);
    *len = format_command(*heap, *len, argc, argv, lens, run_id_at);
    return *heap;
}

/* Waits until fd is ready for events (POLLIN, POLLOUT), until until_ms at
 * most; false if it was not. */
static bool ready_by(int fd, short events, int64_t until_ms)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    int ready;
    do {
        int64_t left = until_ms - clock_mono_ms();
        if (left <= 0)
            return false;
        ready = poll(&pfd, 1, (int)left);
    } while (ready < 0 && errno == EINTR);
    return ready > 0;
}

/* Writes len bytes of buf to fd by until_ms, a few at a time if the socket
 * takes no more; NULL, or what went wrong. */
static const char *send_by(int fd, const char *buf, size_t len, int64_t until_ms)
{
    for (size_t at = 0; at < len;) {
        ssize_t sent = send(fd, buf + at, len - at, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent > 0)
            at += (size_t)sent;
        else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!ready_by(fd, POLLOUT, until_ms))
                return "timed out writing";
        } else if (sent < 0 && errno != EINTR)
            return strerror(errno);
    }
    return NULL;
}

/* Reads the next reply on ctx, a connection of its own, into *raw, its bytes
 * as they come until due_ms, however few at a time: a server that sends one
 * just in time for each read holds it no longer. -1 (*raw NULL) when the
 * connection failed (ctx->err) or due_ms came first. */
static int reply_by(redisContext *ctx, int64_t due_ms, void **raw)
{
    *raw = NULL;
    for (;;) {
        if (redisGetReplyFromReader(ctx, raw) != REDIS_OK)
            return -1;
        if (*raw != NULL)
            return 0;
        if (!ready_by(ctx->fd, POLLIN, due_ms) || redisBufferRead(ctx) != REDIS_OK)
            return -1;
    }
}

/* Milliseconds from now until due_ms, at most cap_ms; 0 when due_ms has passed. */
static long long time_left(int64_t due_ms, long long cap_ms)
{
    int64_t left = due_ms - clock_mono_ms();
    return left <= 0 ? 0 : left < cap_ms ? left : cap_ms;
}

/* Why a call failed that its caller waited for as long as it may. */
#define NO_REPLY_BY_DEADLINE "redis: no reply by the call's deadline"

/* Fails err: a connection could not be set up, or a command answered, by its deadline. */
static int out_of_time(struct fg_error *err)
{
    metrics_backend_error(METRIC_BACKEND_REDIS);
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, NO_REPLY_BY_DEADLINE);
}

/* Connects to host:port within timeout_ms (at least 1); NULL (err filled) on failure. */
static redisContext *connect_to(const char *host, int port, long long timeout_ms,
                                struct fg_error *err)
{
    if (timeout_ms <= 0) {
        out_of_time(err);
        return NULL;
    }
    redisContext *ctx = redisConnectWithTimeout(host, port, ms_to_timeval(timeout_ms));
    if (ctx == NULL || ctx->err) {
        metrics_backend_error(METRIC_BACKEND_REDIS);
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: cannot connect to %s:%d: %s", host, port,
                ctx ? ctx->errstr : "out of memory");
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

/* Runs one command on ctx, a connection of its own that blocks its thread:
 * writes it and reads its whole reply by due_ms. Returns the reply or NULL. */
static redisReply *command_by(redisContext *ctx, int64_t due_ms, int argc, const char **argv,
                              const size_t *lens, struct fg_error *err)
{
    if (due_ms <= clock_mono_ms()) {
        out_of_time(err);
        return NULL;
    }
    char local[COMMAND_BUF];
    char *heap;
    size_t len;
    const char *command = format_argv(local, &heap, argc, argv, lens, &len, NULL);
    const char *problem = send_by(ctx->fd, command, len, due_ms);
    free(heap);
    void *reply = NULL;
    if (problem == NULL && reply_by(ctx, due_ms, &reply) == 0)
        return reply;
    if (problem == NULL && ctx->err == 0) {
        out_of_time(err);
        return NULL;
    }
    metrics_backend_error(METRIC_BACKEND_REDIS);
    fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s", problem != NULL ? problem : ctx->errstr);
    return NULL;
}

/* Asks one sentinel for the primary's address, by due_ms. */
static int ask_sentinel(const struct redis_endpoint *sentinel, struct redis_endpoint *primary,
                        int64_t due_ms, struct fg_error *err)
{
    redisContext *ctx =
        connect_to(sentinel->host, sentinel->port, time_left(due_ms, SENTINEL_TIMEOUT_MS), err);
    if (ctx == NULL)
        return -1;
    const char *argv[] = {"SENTINEL", "get-master-addr-by-name", rds.url.master};
    redisReply *r = command_by(ctx, clock_mono_ms() + time_left(due_ms, SENTINEL_TIMEOUT_MS), 3,
                               argv, NULL, err);
    int rc = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
        r->element[0]->len < sizeof primary->host) {
        snprintf(primary->host, sizeof primary->host, "%s", r->element[0]->str);
        primary->port = atoi(r->element[1]->str);
        rc = 0;
    } else if (r != NULL) {
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: sentinel %s:%d does not know master %s",
                sentinel->host, sentinel->port, rds.url.master);
    }
    freeReplyObject(r);
    redisFree(ctx);
    return rc;
}

/* The address of the primary: a primary of the cluster's last map, the URL's
 * server (or first seed), or the first answer of the sentinels, asked in turn
 * starting with the one that answered last, by due_ms. */
static int primary_address(struct redis_endpoint *primary, int64_t due_ms, struct fg_error *err)
{
    if (rds.url.cluster && route_primaries(cluster.route, primary, 1) > 0)
        return 0;
    if (!rds.url.sentinel) {
        *primary = rds.url.hosts[0];
        return 0;
    }
    int first = atomic_load(&rds.sentinel_first);
    for (int i = 0; i < rds.url.nhosts; i++) {
        int k = (first + i) % rds.url.nhosts;
        if (ask_sentinel(&rds.url.hosts[k], primary, due_ms, err) == 0) {
            atomic_store(&rds.sentinel_first, k);
            return 0;
        }
    }
    char last[sizeof err->msg];
    snprintf(last, sizeof last, "%s", err->msg);
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                   "redis: no sentinel names the primary of %s (%s)", rds.url.master, last);
}

/*
 * Fills err for r, the error reply (borrowed) of the set-up command what. A
 * refusal of the gateway's credentials (any AUTH error: a wrong password, a
 * user that is off; NOAUTH: a password is needed and the URL names none) says
 * so and which setting to check: it lasts until redis_url or Redis changes.
 */
static int setup_refused(const redisReply *r, const char *what, struct fg_error *err)
{
    if (strcmp(what, "AUTH") == 0 || strncmp(r->str, "NOAUTH", 6) == 0)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                       "redis refuses the gateway's credentials (%s): check the user and password "
                       "of redis_url",
                       r->str);
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s failed: %s", what, r->str);
}

/* Runs one set-up command on a new connection, answered by due_ms; -1 unless
 * it answered without error. */
static int setup_command(redisContext *ctx, int64_t due_ms, int argc, const char **argv,
                         const char *what, struct fg_error *err)
{
    redisReply *r = command_by(ctx, due_ms, argc, argv, NULL, err);
    if (r == NULL)
        return -1;
    int rc = r->type == REDIS_REPLY_ERROR ? setup_refused(r, what, err) : 0;
    freeReplyObject(r);
    return rc;
}

/* Sends AUTH on ctx when the URL has a password, answered by due_ms. */
static int authenticate(redisContext *ctx, int64_t due_ms, struct fg_error *err)
{
    if (rds.url.password[0] == '\0')
        return 0;
    const char *auth_user[] = {"AUTH", rds.url.user, rds.url.password};
    const char *auth[] = {"AUTH", rds.url.password};
    bool has_user = rds.url.user[0] != '\0';
    return setup_command(ctx, due_ms, has_user ? 3 : 2, has_user ? auth_user : auth, "AUTH", err);
}

/* Checks that ctx talks to a primary: ROLE answers "master" first, by due_ms. */
static int check_primary(redisContext *ctx, int64_t due_ms, const struct redis_endpoint *at,
                         struct fg_error *err)
{
    const char *argv[] = {"ROLE"};
    redisReply *r = command_by(ctx, due_ms, 1, argv, NULL, err);
    if (r == NULL)
        return -1;
    int rc = 0;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: ROLE failed: %s", r->str);
    else if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
             r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "master") != 0)
        rc = fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s:%d is not a primary", at->host,
                     at->port);
    freeReplyObject(r);
    return rc;
}

/* Opens an authenticated connection to the primary at (NULL: the primary of
 * the URL, or any primary of a cluster), on the right database, by due_ms;
 * NULL on failure. *generation receives the generation it belongs to. */
static redisContext *connect_new(const struct redis_endpoint *at, int64_t due_ms,
                                 unsigned *generation, struct fg_error *err)
{
    *generation = atomic_load(&rds.generation);
    struct redis_endpoint primary;
    if (at != NULL)
        primary = *at;
    else if (primary_address(&primary, due_ms, err) != 0)
        return NULL;
    redisContext *ctx = connect_to(primary.host, primary.port, time_left(due_ms, 1000), err);
    if (ctx == NULL)
        return NULL;
    redisEnableKeepAlive(ctx);
    char db[16];
    snprintf(db, sizeof db, "%d", rds.url.db);
    const char *select[] = {"SELECT", db};
    if (authenticate(ctx, due_ms, err) != 0 ||
        setup_command(ctx, due_ms, 2, select, "SELECT", err) != 0 ||
        check_primary(ctx, due_ms, &primary, err) != 0) {
        redisFree(ctx);
        return NULL;
    }
    metrics_backend_connect(METRIC_BACKEND_REDIS);
    return ctx;
}

/* True if reply is an error that means the server cannot serve writes now. */
static bool reply_unavailable(const redisReply *reply)
{
    if (reply->type != REDIS_REPLY_ERROR)
        return false;
    for (size_t i = 0; i < sizeof unavailable_replies / sizeof unavailable_replies[0]; i++)
        if (strncmp(reply->str, unavailable_replies[i], strlen(unavailable_replies[i])) == 0)
            return true;
    return false;
}

/* Has e's thread woken once the lock is let go (wake_now), or at once when
 * w is full. Locked. */
static void wake_later(struct wakes *w, struct pipe_entry *e)
{
    if (w->count == WAKES_MAX) {
        sem_post(e->owner);
        return;
    }
    atomic_fetch_add_explicit(&e->wakes_given, 1, memory_order_relaxed);
    w->calls[w->count++] = e;
}

/* Wakes the threads of w's calls. Unlocked: each call's entry stays (its
 * thread waits for wakes_given to drop to 0 before leaving) until its wake is
 * given, and not a moment longer. */
static void wake_now(struct wakes *w)
{
    for (int i = 0; i < w->count; i++) {
        struct pipe_entry *e = w->calls[i];
        sem_post(e->owner);
        atomic_fetch_sub_explicit(&e->wakes_given, 1, memory_order_release);
    }
    w->count = 0;
}

/* Sleeps until this thread is woken (a wake-up given while it was awake ends
 * the sleep at once), or until until_ms (monotonic). Unlocked. Takes every
 * wake-up given so far: the caller looks at its call's state after this,
 * which shows all they stood for. */
static void sleep_until_woken(int64_t until_ms)
{
    struct timespec at = clock_mono_at(until_ms);
    while (sem_clockwait(&thread_wake, CLOCK_MONOTONIC, &at) != 0 && errno != ETIMEDOUT)
        FG_ASSERT(errno == EINTR);
    while (sem_trywait(&thread_wake) == 0)
        continue;
}

/* Has the thread of every call of the list first (linked by next) but self's
 * woken (wake_later). */
static void wake_calls(struct wakes *w, struct pipe_entry *first, const struct pipe_entry *self)
{
    for (struct pipe_entry *e = first, *next; e != NULL; e = next) {
        next = e->next;
        if (e != self)
            wake_later(w, e);
    }
}

/* Closes the shared connection if it is retired or broken and nobody uses it. Locked. */
static void settle(struct node *n)
{
    if (!pipe_must_close(&n->pipe))
        return;
    redisFree(n->ctx);
    n->ctx = NULL;
    pipe_closed(&n->pipe);
}

/* Has e's thread woken (w) if e is not self and now has something to do that
 * self's thread, about to do mine, will not do itself. Locked. */
static void wake_if_due(struct node *n, struct pipe_entry *e, const struct pipe_entry *self,
                        enum pipe_action mine, struct wakes *w)
{
    if (e == NULL || e == self)
        return;
    enum pipe_action action = pipe_next(&n->pipe, e);
    if (action != PIPE_WAIT && action != mine)
        wake_later(w, e);
}

/* After a role was let go or a call withdrawn: closes what must be, then has
 * the oldest queued call and the oldest call out woken (w) if they now have
 * something to do that self's thread will not do itself. Locked. */
static void wake_next(struct node *n, const struct pipe_entry *self, struct wakes *w)
{
    settle(n);
    enum pipe_action mine = pipe_next(&n->pipe, self);
    wake_if_due(n, n->pipe.queued.head, self, mine, w);
    wake_if_due(n, n->pipe.sent.head, self, mine, w);
}

/* Ends self's call, which its caller waits for no longer (its deadline,
 * until_ms, passed), and has whoever may now do what it did woken (w). The
 * connection is left alone: a reply late for one call is not yet late for
 * the connection (pipe_take). Locked. */
static void give_up_call(struct node *n, struct pipe_entry *self, struct wakes *w)
{
    struct fg_error failure = {0};
    fg_fail(&failure, FG_ERR_BACKEND_UNAVAILABLE, NO_REPLY_BY_DEADLINE);
    pipe_withdraw(&n->pipe, self, &failure);
    wake_next(n, self, w);
}

/* Fails every call out with a transport error (what, and hiredis's errstr
 * when given) and breaks the connection, waking (w) a reader that sleeps on it.
 * Locked. */
static void break_connection(struct node *n, const struct pipe_entry *self, struct wakes *w,
                             const char *what, const char *errstr)
{
    if (n->pipe.conn == PIPE_BROKEN)
        return;
    struct fg_error failure = {0};
    fg_fail(&failure, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s%s%s", what, errstr ? ": " : "",
            errstr ? errstr : "");
    if (n->pipe.reading)
        shutdown(n->ctx->fd, SHUT_RDWR);
    wake_calls(w, pipe_fail_sent(&n->pipe, &failure), self);
}

/* The command that reads the run_id. */
#define INFO_SERVER_ARGV                                                                           \
    {                                                                                              \
        "INFO", "server"                                                                           \
    }

/* Copies the run_id of an INFO server reply (borrowed) into out (cap bytes);
 * false, out unchanged, when it names none. Read as a handover's node is. */
static bool run_id_in(const redisReply *reply, char *out, size_t cap)
{
    struct handover_node node;
    if (reply->type != REDIS_REPLY_STRING || !handover_node_parse(reply->str, &node))
        return false;
    snprintf(out, cap, "%s", node.run_id);
    return true;
}

/* Fails with why Redis refused INFO (reply, an error): without the run_id the
 * gateway cannot tell a restarted Redis from the one whose fences it trusts, and
 * would recover the fences on every new connection. */
static int info_refused(const redisReply *reply, struct fg_error *err)
{
    bool denied = strncmp(reply->str, "NOPERM", 6) == 0;
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                   "redis: INFO failed: %s (the gateway reads Redis's run_id with INFO to tell a "
                   "restarted Redis apart%s)",
                   reply->str, denied ? "; its Redis user needs INFO" : "");
}

/* Reads the run_id of the process on the new connection ctx into out, for the
 * calls that stand for it (redis_run_id_here), by due_ms: the dashes of that
 * placeholder when Redis answers INFO without one; -1 when it refuses INFO or
 * the connection fails. */
static int run_id_of(redisContext *ctx, int64_t due_ms, char out[REDIS_RUN_ID_LEN + 1],
                     struct fg_error *err)
{
    const char *argv[] = INFO_SERVER_ARGV;
    redisReply *reply = command_by(ctx, due_ms, 2, argv, NULL, err);
    if (reply == NULL)
        return -1;
    int rc = reply->type == REDIS_REPLY_ERROR ? info_refused(reply, err) : 0;
    if (!run_id_in(reply, out, REDIS_RUN_ID_LEN + 1) || strlen(out) != REDIS_RUN_ID_LEN)
        memcpy(out, redis_run_id_here, REDIS_RUN_ID_LEN + 1);
    freeReplyObject(reply);
    return rc;
}

/* The command that reads the eviction policy. */
#define POLICY_ARGV                                                                                \
    {                                                                                              \
        "CONFIG", "GET", "maxmemory-policy"                                                        \
    }

/* Copies the policy of a CONFIG GET maxmemory-policy reply (borrowed) into out
 * (cap bytes): "" when it has none (CONFIG not allowed to this user). */
static void policy_of(const redisReply *reply, char *out, size_t cap)
{
    bool named = reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
                 reply->element[1]->type == REDIS_REPLY_STRING;
    snprintf(out, cap, "%s", named ? reply->element[1]->str : "");
}

/* Warns when the node on ctx (a primary of a cluster, connected to after
 * start-up, which checked every primary then: redis_eviction_policy; a
 * promoted replica, a primary added, a connection made anew) may evict keys;
 * asked by due_ms. A node that refuses CONFIG is not checked. -1 when no reply
 * came (the connection failed, or the node did not answer in time: what it
 * sends next may be that reply), and the connection must not be used. */
static int check_node_policy(redisContext *ctx, int64_t due_ms, const struct redis_endpoint *at,
                             struct fg_error *err)
{
    if (!rds.url.cluster || !atomic_load(&rds.policy_known))
        return 0;
    const char *policy_argv[] = POLICY_ARGV;
    redisReply *reply = command_by(ctx, due_ms, 3, policy_argv, NULL, err);
    if (reply == NULL)
        return -1;
    char policy[64];
    policy_of(reply, policy, sizeof policy);
    freeReplyObject(reply);
    if (policy[0] != '\0' && strcmp(policy, "noeviction") != 0)
        log_event(LOG_WARN, "eviction_policy_unsafe",
                  json_pack("{s:s, s:s, s:i, s:s}", "policy", policy, "host", at->host, "port",
                            at->port, "detail", REDIS_EVICTION_RISK));
    return 0;
}

/* Connects for the queued calls (self's among them), by the deadline of
 * self's: reads the run_id, checks a cluster node's eviction policy and runs
 * the hook on the new connection before any of them goes out (the hook not on
 * a cluster node: its scripts check their slot's fence sequence themselves).
 * A connection that cannot be made or set up fails them all, but for one that
 * self's deadline cut short: that fails self's call alone, and the next queued
 * call tries in its own time. Called locked; unlocks meanwhile. */
static void connect_shared(struct node *n, struct pipe_entry *self, struct wakes *w)
{
    pthread_mutex_unlock(&n->lock);
    wake_now(w);
    struct fg_error failure = {0}, hook_failure = {0};
    unsigned generation;
    int64_t due_ms = self->until_ms;
    redisContext *ctx = connect_new(rds.url.cluster ? &n->at : NULL, due_ms, &generation, &failure);
    char run_id[REDIS_RUN_ID_LEN + 1];
    if (ctx != NULL && (run_id_of(ctx, due_ms, run_id, &failure) != 0 ||
                        check_node_policy(ctx, due_ms, &n->at, &failure) != 0)) {
        redisFree(ctx);
        ctx = NULL;
    }
    int hook_rc = 0;
    if (ctx != NULL && rds.hook != NULL && !rds.url.cluster) {
        setting_up = ctx;
        setup_due_ms = due_ms;
        setup_lost = false;
        hook_rc = rds.hook(&hook_failure);
        setting_up = NULL;
        /* A connection on which the hook failed, whatever the reason (an OOM or
         * BUSY reply as well as a lost connection), is not used: the hook runs
         * again on the next one. */
        if (setup_lost || hook_rc != 0) {
            redisFree(ctx);
            ctx = NULL;
            if (hook_rc != 0)
                failure = hook_failure;
            else
                fg_fail(&failure, FG_ERR_BACKEND_UNAVAILABLE,
                        "redis: connection lost while setting it up");
        }
    }
    pthread_mutex_lock(&n->lock);
    if (ctx == NULL && clock_mono_ms() >= due_ms) {
        pipe_withdraw(&n->pipe, self, &failure);
        return;
    }
    if (ctx == NULL) {
        wake_calls(w, pipe_fail_queued(&n->pipe, &failure), self);
        return;
    }
    n->ctx = ctx;
    memcpy(n->run_id, run_id, sizeof run_id);
    n->generation = generation;
    n->last_used_ms = clock_mono_ms();
    pipe_opened(&n->pipe);
}

/* True if the shared connection must take no more commands: made before the
 * last failover, or closed by the server while idle. Locked. */
static bool shared_stale(const struct node *n)
{
    if (n->generation != atomic_load(&rds.generation))
        return true;
    return pipe_oldest_sent(&n->pipe) == NULL &&
           sock_broken_after_idle(n->ctx->fd, n->last_used_ms);
}

/* Writes every queued call's command in one go (self's among them), by the
 * last deadline of the batch's calls, self's however close: after it no call
 * can use its reply, before it one still may, and a batch left half written
 * breaks the connection, failing them all. Self's call, if its deadline
 * passed meanwhile, ends once the batch is written (pipe_finish). Called
 * locked; unlocks while writing, from a copy (a failure or a withdrawal may
 * end the calls meanwhile). */
static void write_batch(struct node *n, const struct pipe_entry *self, struct wakes *w)
{
    size_t count, len = 0;
    struct pipe_entry *first = pipe_take(&n->pipe, clock_mono_ms() + rds.timeout_ms, &count);
    metrics_redis_batch(count);
    int64_t last_ms = self->until_ms;
    for (struct pipe_entry *e = first; count-- > 0; e = e->next) {
        len += e->len;
        if (e->until_ms > last_ms)
            last_ms = e->until_ms;
    }
    if (len > n->batch_cap) {
        free(n->batch);
        n->batch = malloc(len);
        FG_ASSERT(n->batch != NULL);
        n->batch_cap = len;
    }
    size_t at = 0;
    for (struct pipe_entry *e = first; at < len; e = e->next) {
        memcpy(n->batch + at, e->command, e->len);
        if (e->run_id_at != 0)
            memcpy(n->batch + at + e->run_id_at, n->run_id, REDIS_RUN_ID_LEN);
        at += e->len;
    }
    int fd = n->ctx->fd;
    pthread_mutex_unlock(&n->lock);
    wake_now(w);
    const char *problem = send_by(fd, n->batch, len, last_ms);
    pthread_mutex_lock(&n->lock);
    if (problem != NULL)
        break_connection(n, self, w, "cannot write", problem);
}

/* Hands raw, a reply read, to the call it answers, waking its thread (w)
 * unless it is self's, or drops it if that call was withdrawn. A reply with
 * no command out breaks the connection: -1. Locked. */
static int hand_reply(struct node *n, const struct pipe_entry *self, struct wakes *w, void *raw)
{
    struct pipe_entry *e;
    enum pipe_answer to = pipe_reply(&n->pipe, raw, &e);
    if (to == PIPE_ANSWER_UNASKED) {
        freeReplyObject(raw);
        break_connection(n, self, w, "a reply nobody asked for", NULL);
        return -1;
    }
    if (reply_unavailable(raw))
        pipe_retire(&n->pipe);
    n->last_used_ms = clock_mono_ms();
    if (to == PIPE_ANSWER_WITHDRAWN)
        freeReplyObject(raw);
    else if (e != self)
        wake_later(w, e);
    return 0;
}

/* Reads replies and hands each to its call (w: the threads to wake) while
 * self's thread must read (pipe_reads_on): until self's call is done, or,
 * queued, until the batches of withdrawn calls before it are answered.
 * Called locked; unlocks while waiting for the socket, at most until the
 * oldest batch out is due (then the connection is broken) or self's
 * deadline (then self's call alone ends, give_up_call). */
static void read_replies(struct node *n, struct pipe_entry *self, struct wakes *w)
{
    redisContext *ctx = n->ctx;
    while (pipe_reads_on(&n->pipe, self)) {
        void *raw = NULL;
        if (redisReaderGetReply(ctx->reader, &raw) != REDIS_OK) {
            break_connection(n, self, w, "bad reply", ctx->reader->errstr);
            return;
        }
        if (raw != NULL) {
            if (hand_reply(n, self, w, raw) != 0)
                return;
            continue;
        }
        int64_t due = pipe_due_ms(&n->pipe);
        int64_t left = (due < self->until_ms ? due : self->until_ms) - clock_mono_ms();
        pthread_mutex_unlock(&n->lock);
        wake_now(w); /* before sleeping: they may be the replies of a whole batch */
        struct pollfd pfd = {.fd = ctx->fd, .events = POLLIN};
        int ready = left > 0 ? poll(&pfd, 1, (int)left) : 0;
        int rc = ready > 0 ? redisBufferRead(ctx) : REDIS_OK;
        pthread_mutex_lock(&n->lock);
        if (ready > 0 && rc != REDIS_OK) {
            break_connection(n, self, w, "connection lost", ctx->errstr);
            return;
        }
        if (ready == 0 && clock_mono_ms() >= due) {
            break_connection(n, self, w, "no reply in time", NULL);
            return;
        }
        if (ready == 0 && clock_mono_ms() >= self->until_ms) {
            give_up_call(n, self, w);
            return;
        }
    }
}

/* This thread's semaphore (thread_wake), made on first use: what its calls
 * are woken by. */
static sem_t *thread_wake_sem(void)
{
    if (!thread_wake_ready) {
        FG_ASSERT(sem_init(&thread_wake, 0, 0) == 0);
        thread_wake_ready = true;
    }
    return &thread_wake;
}

/* Waits until no other thread still gives e a wake-up it took on under the
 * lock (wake_later): until then e, on this thread's stack or heap, must stay.
 * Unlocked. */
static void wakes_given_out(struct pipe_entry *e)
{
    while (atomic_load_explicit(&e->wakes_given, memory_order_acquire) != 0)
        sched_yield();
}

/* Does what the queued call self (of this thread) needs until its outcome is
 * in: connects, writes the queued batch or reads replies when it is its turn,
 * sleeps otherwise; gives up waiting at its deadline (self->until_ms,
 * give_up_call). The threads it is to wake go to w (wake_now after the lock
 * is let go). Called locked; unlocks to sleep. */
static void pipe_finish(struct node *n, struct pipe_entry *self, struct wakes *w)
{
    for (;;) {
        settle(n);
        enum pipe_action action = pipe_next(&n->pipe, self);
        if (action == PIPE_FINISHED)
            return;
        if (clock_mono_ms() >= self->until_ms) {
            give_up_call(n, self, w);
            return;
        }
        if (action == PIPE_WAIT) {
            pthread_mutex_unlock(&n->lock);
            wake_now(w);
            sleep_until_woken(self->until_ms);
            pthread_mutex_lock(&n->lock);
            continue;
        }
        if (action == PIPE_WRITE && shared_stale(n)) {
            pipe_retire(&n->pipe);
            continue;
        }
        pipe_begin(&n->pipe, action);
        if (action == PIPE_CONNECT)
            connect_shared(n, self, w);
        else if (action == PIPE_WRITE)
            write_batch(n, self, w);
        else
            read_replies(n, self, w);
        pipe_end(&n->pipe, action);
        wake_next(n, self, w);
    }
}

/* When a pipelined call made at started_ms must be answered by: what its
 * request has left (util/budget.h), or at once after redis_cut_off. */
static int64_t call_until_ms(int64_t started_ms)
{
    if (atomic_load(&rds.cut_off))
        return started_ms;
    return budget_until_ms(started_ms, rds.timeout_ms);
}

void redis_cut_off(void)
{
    atomic_store(&rds.cut_off, true);
}

/* Sends the formatted command (len bytes, borrowed) on n's connection and
 * returns its reply, or NULL with err, by the call's deadline (util/budget.h,
 * which is charged the time it took). With asking (an ASK redirect), ASKING
 * goes out right before it, in the same batch: queued together, they are
 * written together, and withdrawn together. */
static redisReply *pipe_call(struct node *n, bool asking, const char *command, size_t len,
                             size_t run_id_at, struct fg_error *err)
{
    static const char asking_command[] = "*1\r\n$6\r\nASKING\r\n";
    int64_t started_ms = clock_mono_ms();
    int64_t until_ms = call_until_ms(started_ms);
    struct pipe_entry ask = {
        .command = asking_command, .len = sizeof asking_command - 1, .until_ms = until_ms};
    struct pipe_entry self = {
        .command = command, .len = len, .run_id_at = run_id_at, .until_ms = until_ms};
    struct wakes wakes = {.count = 0};
    sem_t *wake = thread_wake_sem();
    pthread_mutex_lock(&n->lock);
    if (asking)
        pipe_push(&n->pipe, &ask, wake);
    pipe_push(&n->pipe, &self, wake);
    pipe_finish(n, &self, &wakes);
    if (asking && ask.state != PIPE_DONE) { /* self gave up: its ASKING is no use to another */
        pipe_withdraw(&n->pipe, &ask, &self.failure);
        wake_next(n, &self, &wakes);
    }
    pthread_mutex_unlock(&n->lock);
    wake_now(&wakes);
    wakes_given_out(&ask);
    wakes_given_out(&self);
    budget_spend(clock_mono_ms() - started_ms);
    freeReplyObject(ask.reply);
    if (self.reply == NULL) {
        metrics_backend_error(METRIC_BACKEND_REDIS);
        *err = self.failure;
    }
    return self.reply;
}

/* Runs argv on the new connection the connect hook runs on; a transport error
 * or a server that cannot take writes loses it for the rest of the hook. */
static redisReply *setup_call(int argc, const char **argv, const size_t *lens, struct fg_error *err)
{
    if (setup_lost) {
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: connection lost while setting it up");
        return NULL;
    }
    int64_t started_us = clock_mono_us();
    redisReply *reply = command_by(setting_up, setup_due_ms, argc, argv, lens, err);
    metrics_backend_latency(METRIC_BACKEND_REDIS, clock_mono_us() - started_us);
    if (reply != NULL && reply_unavailable(reply)) {
        metrics_backend_error(METRIC_BACKEND_REDIS);
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s", reply->str);
        freeReplyObject(reply);
        reply = NULL;
    }
    setup_lost = reply == NULL;
    return reply;
}

/* Runs argv (lens: their lengths, or NULL for C strings) on n's connection,
 * after ASKING when asking; a reply saying the server is no writable primary
 * fails, marked not run (fg_not_run: Redis gives it before running a command). */
static redisReply *node_command(struct node *n, bool asking, int argc, const char **argv,
                                const size_t *lens, struct fg_error *err)
{
    char local[COMMAND_BUF];
    char *heap;
    size_t len, run_id_at = 0;
    const char *command = format_argv(local, &heap, argc, argv, lens, &len, &run_id_at);
    int64_t started_us = clock_mono_us();
    redisReply *reply = pipe_call(n, asking, command, len, run_id_at, err);
    metrics_backend_latency(METRIC_BACKEND_REDIS, clock_mono_us() - started_us);
    free(heap);
    if (reply != NULL && reply_unavailable(reply)) {
        metrics_backend_error(METRIC_BACKEND_REDIS);
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s", reply->str);
        fg_not_run(err);
        freeReplyObject(reply);
        reply = NULL;
    }
    return reply;
}

/* This thread's own connection to at (a cluster node), or to the primary
 * (NULL), listed in owned when made; NULL past CLUSTER_MAX_NODES of them. */
static struct node *own_node(const struct redis_endpoint *at)
{
    int mine = 0;
    for (struct node *n = thread_own; n != NULL; n = n->next_mine, mine++)
        if (at == NULL || cluster_endpoint_equal(&n->at, at))
            return n;
    if (mine == CLUSTER_MAX_NODES)
        return NULL;
    struct node *n = calloc(1, sizeof *n);
    FG_ASSERT(n != NULL);
    FG_ASSERT(pthread_mutex_init(&n->lock, NULL) == 0);
    if (at != NULL)
        n->at = *at;
    pthread_mutex_lock(&owned.lock);
    n->next_own = owned.first;
    owned.first = n;
    pthread_mutex_unlock(&owned.lock);
    n->next_mine = thread_own;
    thread_own = n;
    return n;
}

/* Whether a call of script (NULL: a plain command) goes on its thread's own
 * connection whatever is in flight: a script whose answer may be large
 * (lua_script own_connection), which on the shared connection would hold every
 * call queued behind it while its bytes go through. */
static bool goes_alone(const struct lua_script *script)
{
    return script != NULL && script->own_connection;
}

/* Runs argv, a call of script (NULL: a plain command), on the primary: on this
 * thread's own connection when it goes alone or while fewer than
 * rds.pipeline_from other calls are in flight, else on the shared one (on the
 * new one while the connect hook runs). With pipeline_from 0 nothing is
 * counted. */
static redisReply *thread_command(const struct lua_script *script, int argc, const char **argv,
                                  const size_t *lens, struct fg_error *err)
{
    if (setting_up != NULL)
        return setup_call(argc, argv, lens, err);
    bool alone = goes_alone(script);
    if (rds.pipeline_from == 0)
        return node_command(alone ? own_node(NULL) : &shared, false, argc, argv, lens, err);
    int others = atomic_fetch_add_explicit(&rds.in_flight, 1, memory_order_relaxed);
    struct node *n = alone || others < rds.pipeline_from ? own_node(NULL) : &shared;
    redisReply *reply = node_command(n, false, argc, argv, lens, err);
    atomic_fetch_sub_explicit(&rds.in_flight, 1, memory_order_relaxed);
    return reply;
}

/* The connection to cluster node at, made on first use; NULL with err past
 * CLUSTER_MAX_NODES nodes. */
static struct node *cluster_node(const struct redis_endpoint *at, struct fg_error *err)
{
    pthread_mutex_lock(&cluster.lock);
    struct node *found = NULL;
    for (int i = 0; i < cluster.count && found == NULL; i++)
        if (cluster_endpoint_equal(&cluster.nodes[i]->at, at))
            found = cluster.nodes[i];
    if (found == NULL && cluster.count < CLUSTER_MAX_NODES) {
        found = calloc(1, sizeof *found);
        FG_ASSERT(found != NULL);
        pthread_mutex_init(&found->lock, NULL);
        found->at = *at;
        cluster.nodes[cluster.count++] = found;
    }
    pthread_mutex_unlock(&cluster.lock);
    if (found == NULL)
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: more than %d cluster nodes seen",
                CLUSTER_MAX_NODES);
    return found;
}

/* Runs argv once on a connection of its own to at (any role), closed after,
 * by the call's deadline (util/budget.h, which is charged the time it took). */
static redisReply *one_off_command(const struct redis_endpoint *at, int argc, const char **argv,
                                   const size_t *lens, struct fg_error *err)
{
    int64_t started_ms = clock_mono_ms();
    int64_t due_ms = budget_until_ms(started_ms, rds.timeout_ms);
    redisContext *ctx = connect_to(at->host, at->port, time_left(due_ms, 1000), err);
    redisReply *reply = NULL;
    if (ctx != NULL && authenticate(ctx, due_ms, err) == 0)
        reply = command_by(ctx, due_ms, argc, argv, lens, err);
    redisFree(ctx);
    budget_spend(clock_mono_ms() - started_ms);
    return reply;
}

static int load_function(struct node *n, const struct lua_script *s, struct fg_error *err);
static bool function_missing(const redisReply *reply);

/* route_send_fn of the gateway; ctx is the script a call runs, or NULL. A map
 * fetch (any role) goes on a connection of its own; every other command on
 * the node's pipelined connection (a primary: ROLE checked when it is made).
 * A script the node does not know (a new primary, a restarted node) has its
 * library loaded there and is resent once. */
static redisReply *cluster_send(void *ctx, const struct redis_endpoint *at, unsigned flags,
                                int argc, const char **argv, const size_t *lens,
                                struct fg_error *err)
{
    if (flags & ROUTE_ANY_ROLE)
        return one_off_command(at, argc, argv, lens, err);
    const struct lua_script *script = ctx;
    struct node *n = goes_alone(script) ? own_node(at) : NULL;
    if (n == NULL && (n = cluster_node(at, err)) == NULL)
        return NULL;
    bool asking = (flags & ROUTE_ASKING) != 0;
    redisReply *reply = node_command(n, asking, argc, argv, lens, err);
    if (reply == NULL || script == NULL || !function_missing(reply))
        return reply;
    freeReplyObject(reply);
    if (load_function(n, script, err) != 0) {
        fg_not_run(err); /* the call found no function to run, and is not sent again */
        return NULL;
    }
    return node_command(n, asking, argc, argv, lens, err);
}

/* The primaries of the cluster's map (fetched first when there is none) into
 * out (cap); how many, or -1 with err. */
static int cluster_primaries(struct redis_endpoint *out, int cap, struct fg_error *err)
{
    int count = route_primaries(cluster.route, out, cap);
    if (count > 0)
        return count < cap ? count : cap;
    if (route_refresh(cluster.route, cluster_send, NULL, err) != 0)
        return -1;
    count = route_primaries(cluster.route, out, cap);
    if (count == 0)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: no primary serves slots");
    return count < cap ? count : cap;
}

/* Runs a command that names no key: on the primary, or on one primary of a
 * cluster. */
static redisReply *keyless_command(int argc, const char **argv, struct fg_error *err)
{
    if (!rds.url.cluster)
        return thread_command(NULL, argc, argv, NULL, err);
    struct redis_endpoint primary;
    struct node *n = NULL;
    if (cluster_primaries(&primary, 1, err) < 0 || (n = cluster_node(&primary, err)) == NULL)
        return NULL;
    return node_command(n, false, argc, argv, NULL, err);
}

/* Closes n's connection when nobody uses it, and frees its batch. */
static void node_close(struct node *n)
{
    pthread_mutex_lock(&n->lock);
    if (n->ctx != NULL && !n->pipe.reading && !n->pipe.writing) {
        redisFree(n->ctx);
        n->ctx = NULL;
        pipe_closed(&n->pipe);
    }
    free(n->batch);
    n->batch = NULL;
    n->batch_cap = 0;
    pthread_mutex_unlock(&n->lock);
}

/* Closes and frees n, a thread's own connection no thread uses any more. */
static void own_free(struct node *n)
{
    node_close(n);
    pthread_mutex_destroy(&n->lock);
    free(n);
}

void redis_shutdown(void)
{
    node_close(&shared);
    pthread_mutex_lock(&owned.lock);
    for (struct node *n = owned.first, *next; n != NULL; n = next) {
        next = n->next_own;
        own_free(n);
    }
    owned.first = NULL;
    pthread_mutex_unlock(&owned.lock);
    thread_own = NULL;
    pthread_mutex_lock(&cluster.lock);
    for (int i = 0; i < cluster.count; i++) {
        node_close(cluster.nodes[i]);
        if (cluster.nodes[i]->ctx == NULL) {
            pthread_mutex_destroy(&cluster.nodes[i]->lock);
            free(cluster.nodes[i]);
            cluster.nodes[i] = NULL;
        }
    }
    cluster.count = 0;
    route_free(cluster.route);
    cluster.route = NULL;
    pthread_mutex_unlock(&cluster.lock);
}

void redis_thread_done(void)
{
    while (thread_own != NULL) {
        struct node *mine = thread_own;
        pthread_mutex_lock(&owned.lock);
        struct node **at = &owned.first;
        while (*at != mine)
            at = &(*at)->next_own;
        *at = mine->next_own;
        pthread_mutex_unlock(&owned.lock);
        thread_own = mine->next_mine;
        own_free(mine);
    }
}

/* True if the error reply says that Redis refuses writes for lack of memory
 * (maxmemory with noeviction). */
static bool is_oom(const redisReply *reply)
{
    return strncmp(reply->str, "OOM ", 4) == 0 || strstr(reply->str, " OOM ") != NULL;
}

#define OOM_LOG_EVERY_MS 60000

/* Counts a refusal for memory and logs it once a minute at most, so that a
 * full Redis does not flood the log with one line per request. */
static void note_oom(void)
{
    static atomic_llong next_log_ms;
    metrics_redis_oom();
    long long now = clock_mono_ms();
    long long due = atomic_load(&next_log_ms);
    if (now < due || !atomic_compare_exchange_strong(&next_log_ms, &due, now + OOM_LOG_EVERY_MS))
        return;
    log_message(LOG_ERROR, "redis_out_of_memory",
                "redis refuses writes: used memory is over maxmemory; writes answer 503 until "
                "memory is freed or maxmemory raised");
}

/* Fails unless reply is the answer text of script name: a string. A refusal
 * for memory is marked not run (fg_not_run) when Redis gave it in place of
 * the call ("OOM ..."): a function that may write is refused before it runs. */
static int answer_text(const redisReply *reply, const char *name, struct fg_error *err)
{
    if (reply->type == REDIS_REPLY_ERROR && is_oom(reply)) {
        note_oom();
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis is out of memory");
        return strncmp(reply->str, "OOM ", 4) == 0 ? fg_not_run(err) : -1;
    }
    if (reply->type == REDIS_REPLY_ERROR)
        return fg_fail(err, FG_ERR_INTERNAL, "redis script %s: %s", name, reply->str);
    if (reply->type != REDIS_REPLY_STRING)
        return fg_fail(err, FG_ERR_INTERNAL, "redis script %s: reply is not a JSON text", name);
    return 0;
}

static int decode_result(const redisReply *reply, const char *name, json_t **out,
                         struct fg_error *err)
{
    if (answer_text(reply, name, err) != 0)
        return -1;
    *out = fgjson_parse_flat(reply->str, reply->len);
    if (*out != NULL)
        return 0;
    json_error_t jerr;
    *out = json_loadb(reply->str, reply->len, JSON_DECODE_ANY, &jerr);
    if (*out != NULL)
        return 0;
    if (json_error_code(&jerr) == json_error_invalid_utf8)
        return fg_fail(err, FG_ERR_CONFLICT, "the stored value is not UTF-8 text");
    /* A NUL in a value or a hash field's name, written around the gateway: no
     * write of the API stores one (a body's string with \u0000 is refused), so
     * no read answers one. */
    if (json_error_code(&jerr) == json_error_null_character ||
        json_error_code(&jerr) == json_error_null_byte_in_key)
        return fg_fail(err, FG_ERR_CONFLICT, "the stored value holds a NUL byte");
    return fg_fail(err, FG_ERR_INTERNAL, "redis script %s: bad JSON: %s", name, jerr.text);
}

/* Copies args[0..n) into cmd from at on; returns where the next goes. A NULL
 * is an argument the script declares and the caller left out: a bug. */
static size_t put_args(const char **cmd, size_t at, const char *const *args, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        FG_ASSERT(args[i] != NULL);
        cmd[at + i] = args[i];
    }
    return at + n;
}

/* Loads the function library of script s into Redis (on cluster node n, or
 * NULL: the primary). A library of that name
 * that another gateway loaded meanwhile is the same text, as good as ours. */
static int load_function(struct node *n, const struct lua_script *s, struct fg_error *err)
{
    const char *cmd[] = {"FUNCTION", "LOAD", s->source};
    redisReply *reply = n != NULL ? node_command(n, false, 3, cmd, NULL, err)
                                  : thread_command(NULL, 3, cmd, NULL, err);
    if (reply == NULL)
        return -1;
    int rc = 0;
    if (reply->type == REDIS_REPLY_ERROR && is_oom(reply)) {
        note_oom();
        rc = fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis is out of memory");
    } else if (reply->type == REDIS_REPLY_ERROR && strstr(reply->str, "already exists") == NULL) {
        rc = fg_fail(err, FG_ERR_INTERNAL, "redis: cannot load %s: %s", s->name, reply->str);
    }
    freeReplyObject(reply);
    return rc;
}

/* True if reply says that Redis does not know the function called. */
static bool function_missing(const redisReply *reply)
{
    return reply->type == REDIS_REPLY_ERROR && strcmp(reply->str, "ERR Function not found") == 0;
}

/* The arguments of an FCALL of s with nkeys keys and nmore values after its
 * ARGV. */
static size_t script_argc(const struct lua_script *s, size_t nkeys, size_t nmore)
{
    return 3 + nkeys + s->nargv + nmore;
}

/* Fills cmd (script_argc entries) with the FCALL of s with the first nkeys
 * of keys (at most the script's), argv and the nmore values of more (numkeys:
 * room for the count of keys); returns how many arguments it has. */
static size_t script_argv(const struct lua_script *s, size_t nkeys, const char *const *keys,
                          const char *const *argv, const char *const *more, size_t nmore,
                          const char **cmd, char numkeys[16])
{
    FG_ASSERT(nmore == 0 || s->variadic);
    FG_ASSERT(nkeys <= s->nkeys);
    snprintf(numkeys, 16, "%zu", nkeys);
    cmd[0] = "FCALL";
    cmd[1] = s->function;
    cmd[2] = numkeys;
    size_t argc = put_args(cmd, 3, keys, nkeys);
    argc = put_args(cmd, argc, argv, s->nargv);
    return put_args(cmd, argc, more, nmore);
}

/* Runs the FCALL cmd (argc arguments, nkeys of them keys) of s, loading its
 * library first when Redis does not know it; the reply, or NULL. In a cluster
 * it runs on the primary of its first key's slot (keys[0]). */
static redisReply *script_send(const struct lua_script *s, size_t nkeys, const char *const *keys,
                               const char **cmd, size_t argc, struct fg_error *err)
{
    if (rds.url.cluster) {
        FG_ASSERT(nkeys > 0);
        unsigned slot = key_slot(keys[0], strlen(keys[0]));
        return route_command(cluster.route, slot, cluster_send, (void *)s, (int)argc, cmd, NULL,
                             err);
    }
    redisReply *reply = thread_command(s, (int)argc, cmd, NULL, err);
    if (reply == NULL || !function_missing(reply))
        return reply;
    freeReplyObject(reply);
    if (load_function(NULL, s, err) != 0) {
        fg_not_run(err); /* the call found no function to run, and is not sent again */
        return NULL;
    }
    return thread_command(s, (int)argc, cmd, NULL, err);
}

/* Calls script with the first nkeys of keys, argv and the nmore values of
 * more (a PATCH's fields may be thousands); the reply, or NULL. */
static redisReply *script_call(enum fg_script script, size_t nkeys, const char *const *keys,
                               const char *const *argv, const char *const *more, size_t nmore,
                               struct fg_error *err)
{
    const struct lua_script *s = &lua_scripts[script];
    const char *fixed[MAX_ARGS];
    size_t need = script_argc(s, nkeys, nmore);
    const char **cmd = need <= MAX_ARGS ? fixed : malloc(need * sizeof *cmd);
    FG_ASSERT(cmd != NULL);
    char numkeys[16];
    size_t argc = script_argv(s, nkeys, keys, argv, more, nmore, cmd, numkeys);
    redisReply *reply = script_send(s, nkeys, keys, cmd, argc, err);
    if (cmd != fixed)
        free(cmd);
    return reply;
}

int redis_script_more(enum fg_script script, const char *const *keys, const char *const *argv,
                      const char *const *more, size_t nmore, json_t **out, struct fg_error *err)
{
    redisReply *reply =
        script_call(script, lua_scripts[script].nkeys, keys, argv, more, nmore, err);
    if (reply == NULL)
        return -1;
    int rc = decode_result(reply, lua_scripts[script].name, out, err);
    freeReplyObject(reply);
    return rc;
}

int redis_script_text(enum fg_script script, size_t nkeys, const char *const *keys,
                      const char *const *argv, redis_answer_fn *read, void *ctx,
                      struct fg_error *err)
{
    redisReply *reply = script_call(script, nkeys, keys, argv, NULL, 0, err);
    if (reply == NULL)
        return -1;
    const char *name = lua_scripts[script].name;
    int rc = answer_text(reply, name, err);
    if (rc == 0)
        rc = read(name, reply->str, reply->len, ctx, err);
    freeReplyObject(reply);
    return rc;
}

int redis_script(enum fg_script script, const char *const *keys, const char *const *argv,
                 json_t **out, struct fg_error *err)
{
    return redis_script_more(script, keys, argv, NULL, 0, out, err);
}

/* Libraries one pass of a batch loads, at most (one per node and script). */
#define BATCH_LOADS_MAX 64

/* redis_batch: one call on its way, its command formatted into the batch's
 * text. */
struct batch_call {
    struct pipe_entry entry;  /* its place on its node's connection */
    size_t at, len;           /* its command: len bytes from at in the text */
    size_t run_id_at;         /* where the run_id goes in it (format_command) */
    unsigned slot;            /* of its first key */
    struct node *node;        /* where it goes; NULL: sent alone */
    struct redis_endpoint to; /* that node's address (cluster) */
};

/* Fills cmd (MAX_ARGS entries) with the arguments of c (numkeys: room for a
 * script's count of keys); returns how many. */
static size_t batch_argv(const struct redis_batch_call *c, const char **cmd, char numkeys[16])
{
    if (c->argc == 0) {
        const struct lua_script *s = &lua_scripts[c->script];
        FG_ASSERT(script_argc(s, s->nkeys, 0) <= MAX_ARGS);
        return script_argv(s, s->nkeys, c->keys, c->argv, NULL, 0, cmd, numkeys);
    }
    FG_ASSERT(c->argc >= 2 && c->argc <= MAX_ARGS);
    return put_args(cmd, 0, c->args, (size_t)c->argc);
}

/* Runs c alone, as redis_script runs a script: following redirects, loading
 * a library the node lacks. */
static redisReply *batch_alone(const struct redis_batch_call *c, unsigned slot,
                               struct fg_error *err)
{
    if (c->argc == 0)
        return script_call(c->script, lua_scripts[c->script].nkeys, c->keys, c->argv, NULL, 0, err);
    const char *cmd[MAX_ARGS];
    put_args(cmd, 0, c->args, (size_t)c->argc);
    if (rds.url.cluster)
        return route_command(cluster.route, slot, cluster_send, NULL, c->argc, cmd, NULL, err);
    return thread_command(NULL, c->argc, cmd, NULL, err);
}

/* A command's reply (borrowed) as JSON: strings and statuses as strings,
 * integers, arrays, nil as null; NULL for an error reply, or a string that is
 * not UTF-8. */
static json_t *reply_json(const redisReply *r)
{
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS: return json_stringn(r->str, r->len);
    case REDIS_REPLY_INTEGER: return json_integer(r->integer);
    case REDIS_REPLY_NIL: return json_null();
    case REDIS_REPLY_ARRAY: break;
    default: return NULL;
    }
    json_t *array = json_array();
    for (size_t i = 0; i < r->elements; i++) {
        json_t *v = reply_json(r->element[i]);
        if (v == NULL) {
            json_decref(array);
            return NULL;
        }
        json_array_append_new(array, v);
    }
    return array;
}

/* Sets the outcome of c from its reply (taken; NULL: failure says why). */
static void batch_outcome(struct redis_batch_call *c, redisReply *reply,
                          const struct fg_error *failure)
{
    if (reply == NULL) {
        c->err = *failure;
        return;
    }
    if (c->argc == 0 && c->text) {
        if (answer_text(reply, lua_scripts[c->script].name, &c->err) == 0)
            c->reply = json_stringn_nocheck(reply->str, reply->len);
    } else if (c->argc == 0) {
        if (decode_result(reply, lua_scripts[c->script].name, &c->reply, &c->err) != 0)
            c->reply = NULL;
    } else if (reply->type == REDIS_REPLY_ERROR && is_oom(reply)) {
        note_oom();
        fg_fail(&c->err, FG_ERR_BACKEND_UNAVAILABLE, "redis is out of memory");
    } else if (reply->type == REDIS_REPLY_ERROR) {
        fg_fail(&c->err, FG_ERR_INTERNAL, "redis: %s: %s", c->args[0], reply->str);
    } else if ((c->reply = reply_json(reply)) == NULL) {
        fg_fail(&c->err, FG_ERR_INTERNAL, "redis: %s: the reply is not UTF-8 text", c->args[0]);
    }
    freeReplyObject(reply);
}

/* True if the reply (borrowed) to c, which went to at with the batch, asks for
 * c to be sent again alone: a redirect, a cluster that cannot serve the slot
 * now, a node without the script's library. */
static bool batch_again(const struct redis_batch_call *c, const redisReply *reply,
                        const struct redis_endpoint *at)
{
    if (c->argc == 0 && function_missing(reply))
        return true;
    if (!rds.url.cluster)
        return false;
    struct cluster_redirect to;
    enum cluster_answer answer = cluster_answer_of(reply, at, &to);
    if (answer == CLUSTER_ANSWER_MOVED)
        route_stale(cluster.route);
    return answer != CLUSTER_ANSWER_FINAL;
}

/* The slot of c's key (its first KEY for a script). */
static unsigned batch_slot(const struct redis_batch_call *c)
{
    const char *key = c->argc == 0 ? c->keys[0] : c->args[1];
    FG_ASSERT(key != NULL);
    return key_slot(key, strlen(key));
}

/* Formats the calls of calls named by which[0..m) into run[0..m) and *text
 * (grown as needed; owned), and picks the connection each goes to (NULL: the
 * map names no owner, the call goes alone). */
static void batch_prepare(const struct redis_batch_call *calls, const size_t *which, size_t m,
                          struct batch_call *run, char **text)
{
    size_t used = 0, cap = 4096;
    *text = malloc(cap);
    FG_ASSERT(*text != NULL);
    for (size_t i = 0; i < m; i++) {
        const struct redis_batch_call *c = &calls[which[i]];
        const char *cmd[MAX_ARGS];
        char numkeys[16];
        size_t argc = batch_argv(c, cmd, numkeys);
        run[i].slot = batch_slot(c);
        for (;;) {
            size_t len =
                format_command(*text + used, cap - used, (int)argc, cmd, NULL, &run[i].run_id_at);
            if (len <= cap - used) {
                run[i].at = used;
                run[i].len = len;
                used += len;
                break;
            }
            cap = 2 * (used + len);
            *text = realloc(*text, cap);
            FG_ASSERT(*text != NULL);
        }
        struct fg_error ignored = {0};
        run[i].node = &shared;
        if (rds.url.cluster)
            run[i].node = route_owner(cluster.route, run[i].slot, cluster_send, NULL, &run[i].to,
                                      &ignored) == 0
                              ? cluster_node(&run[i].to, &ignored)
                              : NULL;
    }
}

/* Queues the calls of run that go to node (text: their commands) together
 * and runs them to their outcome, oldest first, by their deadline
 * (util/budget.h, which is charged the time they took). */
static void batch_on_node(struct node *node, struct batch_call *run, size_t n, const char *text)
{
    int64_t started_us = clock_mono_us(), started_ms = clock_mono_ms();
    int64_t until_ms = call_until_ms(started_ms);
    struct wakes wakes = {.count = 0};
    sem_t *wake = thread_wake_sem();
    pthread_mutex_lock(&node->lock);
    for (size_t i = 0; i < n; i++)
        if (run[i].node == node) {
            run[i].entry.command = text + run[i].at;
            run[i].entry.len = run[i].len;
            run[i].entry.run_id_at = run[i].run_id_at;
            run[i].entry.until_ms = until_ms;
            pipe_push(&node->pipe, &run[i].entry, wake);
        }
    for (size_t i = 0; i < n; i++)
        if (run[i].node == node)
            pipe_finish(node, &run[i].entry, &wakes);
    pthread_mutex_unlock(&node->lock);
    wake_now(&wakes);
    for (size_t i = 0; i < n; i++)
        if (run[i].node == node)
            wakes_given_out(&run[i].entry);
    budget_spend(clock_mono_ms() - started_ms);
    metrics_backend_latency(METRIC_BACKEND_REDIS, clock_mono_us() - started_us);
}

/* A library one pass of a batch loaded, on a node. */
struct batch_loaded {
    const struct node *node;
    enum fg_script script;
};

/* Loads the library of c's script on node (on the one Redis when not a
 * cluster) unless this pass did already: loaded[0..*nloaded) are the ones it
 * did (room for BATCH_LOADS_MAX). 0, or -1 with err. */
static int batch_load(struct node *node, const struct redis_batch_call *c,
                      struct batch_loaded *loaded, size_t *nloaded, struct fg_error *err)
{
    for (size_t i = 0; i < *nloaded; i++)
        if (loaded[i].node == node && loaded[i].script == c->script)
            return 0;
    if (load_function(rds.url.cluster ? node : NULL, &lua_scripts[c->script], err) != 0)
        return -1;
    if (*nloaded < BATCH_LOADS_MAX)
        loaded[(*nloaded)++] = (struct batch_loaded){node, c->script};
    return 0;
}

/* One pass over the calls which[0..m) of calls, pipelined per connection:
 * sets the outcome of each call that got its answer, and lists in again
 * (returns how many) those to send again: redirected, refused for now
 * (TRYAGAIN, CLUSTERDOWN), with no owner in the map, or sent to a node that
 * lacked the script's library (loaded now, once per node and script). */
static size_t batch_pass(struct redis_batch_call *calls, const size_t *which, size_t m,
                         size_t *again)
{
    struct batch_call *run = calloc(m > 0 ? m : 1, sizeof *run);
    FG_ASSERT(run != NULL);
    char *text = NULL;
    batch_prepare(calls, which, m, run, &text);
    for (size_t i = 0; i < m; i++) /* each connection's calls together, one after another */
        if (run[i].node != NULL && run[i].entry.owner == NULL)
            batch_on_node(run[i].node, run + i, m - i, text);
    struct batch_loaded loaded[BATCH_LOADS_MAX];
    size_t nloaded = 0, nagain = 0;
    for (size_t i = 0; i < m; i++) {
        struct redis_batch_call *c = &calls[which[i]];
        redisReply *reply = run[i].entry.reply;
        struct fg_error failure = run[i].entry.failure;
        if (reply != NULL && reply_unavailable(reply)) {
            metrics_backend_error(METRIC_BACKEND_REDIS);
            fg_fail(&failure, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s", reply->str);
            freeReplyObject(reply);
            reply = NULL;
        } else if (reply == NULL && run[i].node != NULL) {
            metrics_backend_error(METRIC_BACKEND_REDIS);
            if (rds.url.cluster)
                route_stale(cluster.route); /* a failover may have moved the slot */
        }
        bool missing = reply != NULL && c->argc == 0 && function_missing(reply);
        if (run[i].node == NULL || (reply != NULL && batch_again(c, reply, &run[i].to))) {
            freeReplyObject(reply);
            reply = NULL;
            if (!missing || batch_load(run[i].node, c, loaded, &nloaded, &failure) == 0) {
                again[nagain++] = which[i];
                continue;
            }
        }
        batch_outcome(c, reply, &failure);
    }
    free(text);
    free(run);
    return nagain;
}

int redis_batch(struct redis_batch_call *calls, size_t n, struct fg_error *err)
{
    size_t *which = calloc(n > 0 ? n : 1, sizeof *which);
    size_t *again = calloc(n > 0 ? n : 1, sizeof *again);
    FG_ASSERT(which != NULL && again != NULL);
    for (size_t i = 0; i < n; i++) {
        which[i] = i;
        calls[i].reply = NULL;
        calls[i].err = (struct fg_error){0};
    }
    size_t m = batch_pass(calls, which, n, again);
    if (m > 0) /* once more, pipelined: on the new map, with the libraries loaded */
        m = batch_pass(calls, again, m, which);
    for (size_t i = 0; i < m; i++) { /* still redirected or refused: alone, as redis_script */
        struct redis_batch_call *c = &calls[which[i]];
        struct fg_error failure = {0};
        batch_outcome(c, batch_alone(c, batch_slot(c), &failure), &failure);
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (calls[i].reply == NULL) {
            *err = calls[i].err;
            rc = -1;
        }
    free(again);
    free(which);
    return rc;
}

int64_t redis_timeout_ms(void)
{
    return rds.timeout_ms;
}

int redis_home_slot(unsigned slot, unsigned *home, struct fg_error *err)
{
    *home = 0;
    if (!rds.url.cluster)
        return 0;
    return route_home_slot(cluster.route, slot, cluster_send, NULL, home, err);
}

int redis_map_refresh(struct fg_error *err)
{
    if (!rds.url.cluster)
        return 0;
    return route_refresh(cluster.route, cluster_send, NULL, err);
}

/* Runs a command whose reply must be a status or string, copying it into out. */
static int simple_command(int argc, const char **argv, char *out, size_t cap, struct fg_error *err)
{
    redisReply *reply = keyless_command(argc, argv, err);
    if (reply == NULL)
        return -1;
    int rc = 0;
    if (reply->type == REDIS_REPLY_ERROR)
        rc = fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s", reply->str);
    else if (out != NULL &&
             (reply->type == REDIS_REPLY_STATUS || reply->type == REDIS_REPLY_STRING))
        snprintf(out, cap, "%s", reply->str);
    else if (out != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
             reply->element[1]->type == REDIS_REPLY_STRING)
        snprintf(out, cap, "%s", reply->element[1]->str);
    else if (out != NULL)
        snprintf(out, cap, "%s", "");
    freeReplyObject(reply);
    return rc;
}

int redis_run_id(char *out, size_t cap, struct fg_error *err)
{
    const char *argv[] = INFO_SERVER_ARGV;
    redisReply *reply = keyless_command(2, argv, err);
    if (reply == NULL)
        return -1;
    int rc = reply->type == REDIS_REPLY_ERROR ? info_refused(reply, err) : 0;
    if (!run_id_in(reply, out, cap))
        snprintf(out, cap, "%s", "");
    freeReplyObject(reply);
    return rc;
}

/* INFO text of the node at (any role) into *node; false when it did not
 * answer one naming its run_id. */
static bool node_info(const struct redis_endpoint *at, struct handover_node *node)
{
    const char *argv[] = {"INFO", "server", "replication"};
    struct fg_error err = {0};
    redisReply *reply = one_off_command(at, 3, argv, NULL, &err);
    bool ok =
        reply != NULL && reply->type == REDIS_REPLY_STRING && handover_node_parse(reply->str, node);
    freeReplyObject(reply);
    return ok;
}

/* Copies the text reply of argv (two arguments) at the node at into out (cap
 * bytes, cut there); false when it gave none. */
static bool node_text(const struct redis_endpoint *at, const char *a, const char *b, char *out,
                      size_t cap)
{
    const char *argv[] = {a, b};
    struct fg_error err = {0};
    redisReply *reply = one_off_command(at, 2, argv, NULL, &err);
    bool ok =
        reply != NULL && (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS);
    if (ok)
        snprintf(out, cap, "%s", reply->str);
    freeReplyObject(reply);
    return ok;
}

/* What the node at says of slot in its own CLUSTER NODES, next to the node
 * id to (handover_view_parse); none when it gave no answer. */
static enum handover_view node_view(const struct redis_endpoint *at, unsigned slot, const char *to)
{
    const char *argv[] = {"CLUSTER", "NODES"};
    struct fg_error err = {0};
    redisReply *reply = one_off_command(at, 2, argv, NULL, &err);
    enum handover_view view = reply != NULL && reply->type == REDIS_REPLY_STRING
                                  ? handover_view_parse(reply->str, slot, to)
                                  : HANDOVER_VIEW_NONE;
    freeReplyObject(reply);
    return view;
}

int redis_slot_handover(unsigned slot, const char *from, const char *here,
                        enum handover_verdict *verdict, const char **why, struct fg_error *err)
{
    *verdict = HANDOVER_LOST;
    *why = "not a cluster";
    if (!rds.url.cluster)
        return 0;
    struct redis_endpoint owner;
    struct handover_node now, old;
    char owner_id[HANDOVER_ID_SIZE];
    if (route_owner(cluster.route, slot, cluster_send, NULL, &owner, err) != 0)
        return -1;
    if (!node_info(&owner, &now) || strcmp(now.run_id, here) != 0 ||
        !node_text(&owner, "CLUSTER", "MYID", owner_id, sizeof owner_id)) {
        route_stale(cluster.route); /* the map may name a node the slot has left */
        *verdict = HANDOVER_MIGRATING;
        *why = "the slot's owner by the map is not the process that holds its keys";
        return 0;
    }
    struct redis_endpoint *nodes = malloc(CLUSTER_MAX_NODES * sizeof *nodes);
    FG_ASSERT(nodes != NULL);
    int count = route_nodes(cluster.route, nodes, CLUSTER_MAX_NODES);
    const struct redis_endpoint *old_at = NULL;
    for (int i = 0; i < count && old_at == NULL; i++)
        if (!cluster_endpoint_equal(&nodes[i], &owner) && node_info(&nodes[i], &old) &&
            strcmp(old.run_id, from) == 0)
            old_at = &nodes[i];
    enum handover_view view =
        old_at != NULL ? node_view(old_at, slot, owner_id) : HANDOVER_VIEW_NONE;
    *verdict = handover_judge(old_at != NULL ? &old : NULL, view, &now, why);
    free(nodes);
    return 0;
}

int redis_ping(struct fg_error *err)
{
    const char *argv[] = {"PING"};
    if (!rds.url.cluster)
        return simple_command(1, argv, NULL, 0, err);
    struct redis_endpoint *primaries = malloc(CLUSTER_MAX_NODES * sizeof *primaries);
    FG_ASSERT(primaries != NULL);
    int count = cluster_primaries(primaries, CLUSTER_MAX_NODES, err);
    for (int i = 0; i < count; i++) {
        struct node *n = cluster_node(&primaries[i], err);
        redisReply *reply = n != NULL ? node_command(n, false, 1, argv, NULL, err) : NULL;
        bool ok = reply != NULL && reply->type != REDIS_REPLY_ERROR;
        if (reply != NULL && !ok)
            fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s:%d: %s", primaries[i].host,
                    primaries[i].port, reply->str);
        freeReplyObject(reply);
        if (!ok)
            count = -1;
    }
    free(primaries);
    return count < 0 ? -1 : 0;
}

int redis_eviction_policy(char *out, size_t cap, struct fg_error *err)
{
    const char *policy_argv[] = POLICY_ARGV;
    if (!rds.url.cluster)
        return simple_command(3, policy_argv, out, cap, err);
    struct redis_endpoint *primaries = malloc(CLUSTER_MAX_NODES * sizeof *primaries);
    FG_ASSERT(primaries != NULL);
    int count = cluster_primaries(primaries, CLUSTER_MAX_NODES, err), rc = count < 0 ? -1 : 0;
    snprintf(out, cap, "%s", "noeviction");
    for (int i = 0; i < count && rc == 0; i++) {
        struct node *n = cluster_node(&primaries[i], err);
        redisReply *reply = n != NULL ? node_command(n, false, 3, policy_argv, NULL, err) : NULL;
        char policy[64];
        policy_of(reply, policy, sizeof policy);
        if (reply == NULL)
            rc = -1;
        else if (reply->type == REDIS_REPLY_ERROR)
            rc = fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s:%d: %s", primaries[i].host,
                         primaries[i].port, reply->str);
        else if (strcmp(policy, "noeviction") != 0 && strcmp(out, "noeviction") == 0)
            snprintf(out, cap, "%s (%s:%d)", policy, primaries[i].host, primaries[i].port);
        freeReplyObject(reply);
    }
    free(primaries);
    atomic_store(&rds.policy_known, true);
    return rc;
}

/* Reads messages from a subscribed connection until an error, a failover to
 * another primary (when generation is not NULL) or *stop. Between messages it
 * sleeps on the socket alone: a stop (redis_subscribe_stop) or a failover
 * (on_switch_master) wakes it to look again. */
static void follow_messages(redisContext *ctx, const struct redis_subscriber *sub,
                            const unsigned *generation, atomic_bool *stop)
{
    struct wake_slot slot;
    wake_join(&slot);
    while (!atomic_load(stop) &&
           (generation == NULL || *generation == atomic_load(&rds.generation))) {
        void *raw = NULL;
        if (redisReaderGetReply(ctx->reader, &raw) != REDIS_OK)
            break;
        if (raw == NULL) {
            if (wake_wait(&slot, ctx->fd) && redisBufferRead(ctx) != REDIS_OK)
                break;
            continue;
        }
        redisReply *r = raw;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[2]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "message") == 0)
            sub->on_message(r->element[2]->str, r->element[2]->len, sub->ctx);
        freeReplyObject(r);
    }
    wake_leave(&slot);
}

void redis_subscribe_stop(atomic_bool *stop)
{
    atomic_store(stop, true);
    wake_all();
}

/* redis-cluster://: following a channel means following its shard channels
 * "<channel>:{T(s)}", one per slot s (store/backend/key_slot.h), each on the primary
 * that owns s (SSUBSCRIBE). A shard subscription ends when its slot leaves
 * the node (Redis sends sunsubscribe) or the connection is lost; the slot is
 * then subscribed again wherever the map, fetched again, says it lives. */

#define SHARD_RETRY_MS    200 /* between rounds while slots wait for a subscription */
#define SHARD_CHANNEL_MAX 160 /* bytes of a shard channel name */
/* Bytes format_command may need for one SSUBSCRIBE of a shard channel. */
#define SHARD_COMMAND_MAX (3 * (1 + 20 + 2) + 2 * 2 + sizeof "SSUBSCRIBE" + SHARD_CHANNEL_MAX)

/* A follower's connection to one primary. */
struct shard_conn {
    struct redis_endpoint at; /* the primary */
    redisContext *ctx;        /* owned; NULL once lost or closed */
};

/* The state of one redis_subscribe on a cluster. */
struct shard_follow {
    const struct redis_subscriber *sub;
    int16_t on[CLUSTER_SLOTS]; /* index in conns each slot is subscribed on; -1: not (yet) */
    int pending;               /* slots with no subscription */
    struct shard_conn conns[CLUSTER_MAX_NODES];
    int nconns;   /* entries of conns used (some may be closed) */
    bool warned;  /* a failure was logged since every slot was last followed */
    bool renewed; /* slots were subscribed again since on_subscribed last ran */
};

/* Ends conns[k]: its slots wait for a subscription where the map says. */
static void shard_lost(struct shard_follow *f, int k)
{
    redisFree(f->conns[k].ctx);
    f->conns[k].ctx = NULL;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
        if (f->on[s] == k) {
            f->on[s] = -1;
            f->pending++;
        }
    route_stale(cluster.route);
}

/* Handles a reply nobody asked for on conns[k]: a message, or the end of a
 * subscription (its slot moved away). */
static void shard_push(struct shard_follow *f, int k, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    if (strcmp(r->element[0]->str, "smessage") == 0 && r->element[2]->type == REDIS_REPLY_STRING) {
        f->sub->on_message(r->element[2]->str, r->element[2]->len, f->sub->ctx);
        return;
    }
    unsigned slot = key_slot(r->element[1]->str, r->element[1]->len);
    if (strcmp(r->element[0]->str, "sunsubscribe") == 0 && f->on[slot] == k) {
        f->on[slot] = -1;
        f->pending++;
        route_stale(cluster.route);
    }
}

/* The index of the open connection to at, made by due_ms when there is none;
 * -1 with err. */
static int shard_conn_to(struct shard_follow *f, const struct redis_endpoint *at, int64_t due_ms,
                         struct fg_error *err)
{
    int k = 0, free_k = -1;
    for (; k < f->nconns; k++) {
        if (f->conns[k].ctx == NULL && free_k < 0)
            free_k = k;
        if (f->conns[k].ctx != NULL && cluster_endpoint_equal(&f->conns[k].at, at))
            return k;
    }
    unsigned generation;
    redisContext *ctx = connect_new(at, due_ms, &generation, err);
    if (ctx == NULL)
        return -1;
    k = free_k >= 0 ? free_k : f->nconns++;
    f->conns[k].at = *at;
    f->conns[k].ctx = ctx;
    return k;
}

/* Writes one SSUBSCRIBE per slot of the n of slots (Redis takes the channels
 * of one slot per command), all at once, by due_ms; NULL, or what went wrong. */
static const char *shard_send(const struct shard_follow *f, int k, const unsigned *slots, int n,
                              int64_t due_ms)
{
    size_t cap = (size_t)n * SHARD_COMMAND_MAX;
    char *buf = malloc(cap);
    FG_ASSERT(buf != NULL);
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        char channel[SHARD_CHANNEL_MAX];
        slot_tag_key(channel, sizeof channel, f->sub->channel, slots[i]);
        const char *argv[] = {"SSUBSCRIBE", channel};
        len += format_command(buf + len, cap - len, 2, argv, NULL, NULL);
    }
    FG_ASSERT(len <= cap);
    const char *problem = send_by(f->conns[k].ctx->fd, buf, len, due_ms);
    free(buf);
    return problem;
}

/* Subscribes the n slots of slots on conns[k]: writes their SSUBSCRIBEs and
 * reads their confirmations by due_ms, however slowly the node answers;
 * messages that come meanwhile are handed on. A refusal (MOVED: the map was
 * old) leaves the slot waiting; a failure or a missed deadline closes the
 * connection, its slots waiting for the next round. */
static void shard_subscribe(struct shard_follow *f, int k, const unsigned *slots, int n,
                            int64_t due_ms)
{
    redisContext *ctx = f->conns[k].ctx;
    if (shard_send(f, k, slots, n, due_ms) != NULL) {
        shard_lost(f, k);
        return;
    }
    for (int answered = 0; answered < n;) {
        void *raw = NULL;
        if (reply_by(ctx, due_ms, &raw) != 0) {
            shard_lost(f, k);
            return;
        }
        redisReply *r = raw;
        bool confirms = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                        r->element[0]->type == REDIS_REPLY_STRING &&
                        strcmp(r->element[0]->str, "ssubscribe") == 0;
        if (confirms && f->on[slots[answered]] < 0) {
            f->on[slots[answered]] = (int16_t)k;
            f->pending--;
            f->renewed = true;
        }
        if (r->type == REDIS_REPLY_ERROR)
            route_stale(cluster.route);
        if (confirms || r->type == REDIS_REPLY_ERROR)
            answered++;
        else
            shard_push(f, k, r);
        freeReplyObject(r);
    }
}

/* Hands on every reply already read on conns[k] (closing it if it broke). */
static void shard_drain(struct shard_follow *f, int k)
{
    for (;;) {
        void *raw = NULL;
        if (redisReaderGetReply(f->conns[k].ctx->reader, &raw) != REDIS_OK) {
            shard_lost(f, k);
            return;
        }
        if (raw == NULL)
            return;
        shard_push(f, k, raw);
        freeReplyObject(raw);
    }
}

/* One round: every slot without a subscription is subscribed on its owner
 * (the map fetched again first when stale, within SUBSCRIBER_SETUP_MS for
 * all the nodes asked: the thread's budget, util/budget.h, not a
 * request_timeout_ms each), each owner given SUBSCRIBER_SETUP_MS to be
 * connected to and confirm them, until stop is set; connections left with
 * no slot are closed. Failures are logged once until every slot is followed
 * again. */
static void shard_round(struct shard_follow *f, const atomic_bool *stop)
{
    struct redis_endpoint *owners = malloc(CLUSTER_MAX_NODES * sizeof *owners);
    int16_t *to = malloc(CLUSTER_SLOTS * sizeof *to);
    unsigned *slots = malloc(CLUSTER_SLOTS * sizeof *slots);
    FG_ASSERT(owners != NULL && to != NULL && slots != NULL);
    struct fg_error err = {0};
    int nowners = 0;
    bool failed = false;
    memset(to, 0xff, CLUSTER_SLOTS * sizeof *to); /* -1: no owner to subscribe on */
    budget_start(SUBSCRIBER_SETUP_MS);
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        struct redis_endpoint at;
        if (f->on[s] >= 0)
            continue;
        if (route_owner(cluster.route, s, cluster_send, NULL, &at, &err) != 0) {
            failed = true;
            if (route_primaries(cluster.route, NULL, 0) == 0)
                break; /* no map at all: try again next round */
            continue;
        }
        int e = 0;
        while (e < nowners && !cluster_endpoint_equal(&owners[e], &at))
            e++;
        if (e == nowners && nowners < CLUSTER_MAX_NODES)
            owners[nowners++] = at;
        to[s] = e < nowners ? (int16_t)e : -1;
    }
    budget_end();
    for (int e = 0; e < nowners && !atomic_load(stop); e++) {
        int64_t due_ms = clock_mono_ms() + SUBSCRIBER_SETUP_MS;
        int k = shard_conn_to(f, &owners[e], due_ms, &err), n = 0;
        if (k < 0) { /* gone: a failover may be under way */
            failed = true;
            route_stale(cluster.route);
        }
        for (unsigned s = 0; s < CLUSTER_SLOTS && k >= 0; s++)
            if (to[s] == e)
                slots[n++] = s;
        if (k >= 0)
            shard_subscribe(f, k, slots, n, due_ms);
        if (k >= 0 && f->conns[k].ctx != NULL)
            shard_drain(f, k); /* pushes read along with the confirmations */
    }
    for (int k = 0; k < f->nconns; k++) {
        bool used = false;
        for (unsigned s = 0; s < CLUSTER_SLOTS && !used && f->conns[k].ctx != NULL; s++)
            used = f->on[s] == k;
        if (f->conns[k].ctx != NULL && !used) {
            redisFree(f->conns[k].ctx);
            f->conns[k].ctx = NULL;
        }
    }
    if (failed && !f->warned)
        log_message(LOG_WARN, "doorbell_down", "%s: %d slots not followed: %s", f->sub->channel,
                    f->pending, err.msg[0] ? err.msg : "a subscription was refused");
    f->warned |= failed;
    if (f->pending == 0 && f->warned)
        log_message(LOG_INFO, "doorbell_up", "following %s on every slot", f->sub->channel);
    f->warned &= f->pending != 0;
    free(slots);
    free(to);
    free(owners);
}

/* redis_subscribe on a cluster. */
static void subscribe_slots(const struct redis_subscriber *sub, atomic_bool *stop)
{
    struct shard_follow *f = calloc(1, sizeof *f);
    FG_ASSERT(f != NULL);
    f->sub = sub;
    f->pending = CLUSTER_SLOTS;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
        f->on[s] = -1;
    struct wake_slot slot;
    wake_join(&slot);
    struct pollfd *fds = malloc((CLUSTER_MAX_NODES + 1) * sizeof *fds);
    int *which = malloc(CLUSTER_MAX_NODES * sizeof *which);
    FG_ASSERT(fds != NULL && which != NULL);
    int64_t next_round_ms = 0;
    while (!atomic_load(stop)) {
        if (f->pending > 0 && clock_mono_ms() >= next_round_ms) {
            shard_round(f, stop);
            next_round_ms = clock_mono_ms() + SHARD_RETRY_MS;
        }
        if (f->renewed) { /* messages sent before a subscription were not heard */
            f->renewed = false;
            sub->on_subscribed(sub->ctx);
        }
        int nfds = 0;
        for (int k = 0; k < f->nconns; k++)
            if (f->conns[k].ctx != NULL) {
                which[nfds] = k;
                fds[nfds++] = (struct pollfd){.fd = f->conns[k].ctx->fd, .events = POLLIN};
            }
        fds[nfds] = (struct pollfd){.fd = slot.fd, .events = POLLIN};
        int timeout = f->pending > 0 || slot.fd < 0 ? SHARD_RETRY_MS : -1;
        if (poll(fds, (nfds_t)nfds + (slot.fd >= 0), timeout) <= 0)
            continue;
        if (slot.fd >= 0 && fds[nfds].revents != 0) {
            uint64_t count;
            (void)!read(slot.fd, &count, sizeof count);
        }
        for (int i = 0; i < nfds; i++) {
            int k = which[i];
            if (fds[i].revents == 0)
                continue;
            if (redisBufferRead(f->conns[k].ctx) != REDIS_OK)
                shard_lost(f, k);
            else
                shard_drain(f, k);
        }
    }
    for (int k = 0; k < f->nconns; k++)
        redisFree(f->conns[k].ctx);
    wake_leave(&slot);
    free(which);
    free(fds);
    free(f);
}

void redis_subscribe(const struct redis_subscriber *sub, atomic_bool *stop)
{
    if (rds.url.cluster) {
        subscribe_slots(sub, stop);
        return;
    }
    bool warned = false;
    struct wake_slot pause;
    wake_join(&pause);
    while (!atomic_load(stop)) {
        struct fg_error err = {0};
        unsigned generation;
        int64_t due_ms = clock_mono_ms() + SUBSCRIBER_SETUP_MS;
        redisContext *ctx = connect_new(NULL, due_ms, &generation, &err);
        redisReply *r = NULL;
        if (ctx != NULL) {
            const char *argv[] = {"SUBSCRIBE", sub->channel};
            r = command_by(ctx, due_ms, 2, argv, NULL, &err);
        }
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            if (!warned)
                log_message(LOG_WARN, "doorbell_down", "%s", err.msg);
            warned = true;
            freeReplyObject(r);
            redisFree(ctx);
            wake_nap(&pause, SUBSCRIBE_RETRY_MS);
            continue;
        }
        freeReplyObject(r);
        if (warned)
            log_message(LOG_INFO, "doorbell_up", "subscribed to %s", sub->channel);
        warned = false;
        sub->on_subscribed(sub->ctx);
        follow_messages(ctx, sub, &generation, stop);
        redisFree(ctx);
    }
    wake_leave(&pause);
}

/* A +switch-master message ("<name> <old ip> <old port> <new ip> <new port>"):
 * for our master, every connection made before it is dropped before its next
 * command. */
static void on_switch_master(const char *payload, size_t len, void *ctx)
{
    (void)ctx;
    size_t name_len = strlen(rds.url.master);
    if (len <= name_len || strncmp(payload, rds.url.master, name_len) != 0 ||
        payload[name_len] != ' ')
        return;
    atomic_fetch_add(&rds.generation, 1);
    wake_all(); /* the doorbell's followers move to the new primary */
    log_message(LOG_WARN, "redis_failover", "sentinels moved the primary: %.*s", (int)len, payload);
}

/* Connects to a sentinel (in turn) and subscribes to +switch-master, both
 * within SENTINEL_TIMEOUT_MS. */
static redisContext *subscribe_sentinel(int k, struct fg_error *err)
{
    const struct redis_endpoint *s = &rds.url.hosts[k];
    int64_t due_ms = clock_mono_ms() + SENTINEL_TIMEOUT_MS;
    redisContext *ctx = connect_to(s->host, s->port, SENTINEL_TIMEOUT_MS, err);
    if (ctx == NULL)
        return NULL;
    const char *argv[] = {"SUBSCRIBE", "+switch-master"};
    redisReply *r = command_by(ctx, due_ms, 2, argv, NULL, err);
    bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    freeReplyObject(r);
    if (!ok) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

/* The watcher thread: follows +switch-master on one sentinel after another. A
 * failover missed while no sentinel was followed is caught by the role check
 * and the idle-connection check instead. */
static void *watch_main(void *arg)
{
    (void)arg;
    const struct redis_subscriber sub = {"+switch-master", on_switch_master, NULL, NULL};
    struct wake_slot pause;
    wake_join(&pause);
    for (int k = 0; !atomic_load(&rds.watcher_stop); k = (k + 1) % rds.url.nhosts) {
        struct fg_error err = {0};
        redisContext *ctx = subscribe_sentinel(k, &err);
        if (ctx != NULL)
            follow_messages(ctx, &sub, NULL, &rds.watcher_stop);
        redisFree(ctx);
        wake_nap(&pause, SUBSCRIBE_RETRY_MS);
    }
    wake_leave(&pause);
    return NULL;
}

int redis_watch_start(struct fg_error *err)
{
    if (!rds.url.sentinel || rds.watching)
        return 0;
    atomic_store(&rds.watcher_stop, false);
    if (pthread_create(&rds.watcher, NULL, watch_main, NULL) != 0)
        return fg_fail(err, FG_ERR_INTERNAL, "cannot start the sentinel watcher thread");
    rds.watching = true;
    return 0;
}

void redis_watch_stop_ask(void)
{
    if (rds.watching)
        redis_subscribe_stop(&rds.watcher_stop);
}

bool redis_watch_stop(int64_t until_ms)
{
    if (!rds.watching)
        return true;
    redis_watch_stop_ask();
    if (!join_by(rds.watcher, until_ms))
        return false;
    rds.watching = false;
    return true;
}
