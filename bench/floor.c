/* SPDX-License-Identifier: Apache-2.0 */
/*
 * floor.c - the least a gateway can cost: an HTTP/1.1 server that does nothing
 * but what any gateway in front of Redis or Postgres must do per request, shaped
 * as fencegate is (threads that each poll their keep-alive connections with
 * epoll and make one blocking backend round trip per request). It parses no
 * JSON (fcall finds one field), checks no token, logs nothing and answers a
 * fixed body (fcall the function's reply), so the CPU it spends per request is
 * the floor under the gateway's own on the same machine: the system calls,
 * sleeps and wake-ups of one hop.
 *   none   answers at once (a hop with no backend)
 *   redis  one PING round trip to Redis on the thread's own connection
 *   pg     the direct guarded UPDATE of bench/pg_writes.sh (fence-column table
 *          bench_rows, prepared) on the thread's own Postgres connection, the
 *          row named by the request path's last segment
 *   fcall  one FCALL of a lock pair's function of bench/lua_floor.lua (loaded
 *          once at start) on the thread's own Redis connection: ACQUIRE for a
 *          path ending in /acquire, RELEASE for one ending in /release; with
 *          INDEX_KEY the functions take that listing index as their last key
 *   fcall-batch  the same calls, pipelined: at each wake-up a thread sends the
 *          calls of all its connections' complete requests to Redis in one
 *          write and reads their replies together (what a gateway sharing its
 *          Redis connection across requests in flight can do at the most)
 * The reply of every other request is {"token":"t","fence":1}, which
 * bench/http_pairs.c takes for a lease and bench/pg_load.c for a write.
 *
 * An fcall acquire holds a fresh key, "floor-h-" + the lock name + "." + an
 * owner (the process id, the thread and its count): a rung's release leaves
 * its record on the holder, and bench/lua_floor's pairs each take a new name.
 * It answers the holder record "<fence> <owner>" as its token; the release
 * reads the token from its JSON body and passes it to the release function,
 * which compares it with the holder's. 200 when the function answers 1 or a
 * record, 409 when it answers 0.
 *
 * usage: floor PORT THREADS none|redis|pg [REDIS_PORT | PG_DSN]
 *        floor PORT THREADS fcall|fcall-batch REDIS_PORT LIBRARY ACQUIRE RELEASE [INDEX_KEY]
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <sys/epoll.h>

#include "http_client.h"

#define CONN_BUF  8192 /* bytes of one connection's unparsed input */
#define REPLY_BUF 512  /* bytes of one Redis reply or one HTTP answer of fcall */
#define CMD_BUF   512  /* bytes of one FCALL command */
#define BATCH     64   /* fcall-batch: most calls in one write */

enum backend { BACKEND_NONE, BACKEND_REDIS, BACKEND_PG, BACKEND_FCALL, BACKEND_FCALL_BATCH };

struct conn {
    int fd;
    size_t got;
    char buf[CONN_BUF];
};

/* One fcall request's function call: its connection and request length, and
 * what its answer needs. */
struct fcall {
    struct conn *conn;
    size_t len;
    int acquire;
    char owner[32];
};

struct worker {
    pthread_t thread;
    int epoll_fd;
    int redis_fd;
    PGconn *pg;
    unsigned long owners; /* fcall: owners numbered so far */
    int id;
};

static enum backend backend;
static const char *backend_target;
/* fcall: the functions of an acquire and a release, and the listing index key or NULL */
static const char *fcall_acquire, *fcall_release, *fcall_index;

static const char reply[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 23\r\n\r\n"
    "{\"token\":\"t\",\"fence\":1}";

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* The length of the whole RESP reply that is not an array (+, -, :, or $) at
 * in, of got bytes, or 0 when it is not all there. */
static size_t reply_length(const char *in, size_t got)
{
    const char *line_end = memmem(in, got, "\r\n", 2);
    if (line_end == NULL)
        return 0;
    size_t want = (size_t)(line_end + 2 - in);
    if (in[0] == '$' && in[1] != '-')
        want += strtoul(in + 1, NULL, 10) + 2;
    return got >= want ? want : 0;
}

/* Reads n whole replies into in (cap bytes); sets replies[i] to the start of
 * each. Exits on an error reply. */
static void redis_read_replies(int fd, char *in, size_t cap, int n, const char **replies)
{
    size_t got = 0, at = 0, len;
    for (int done = 0; done < n;) {
        while (done < n && (len = reply_length(in + at, got - at)) > 0) {
            if (in[at] == '-') {
                fprintf(stderr, "floor: redis: %.*s", (int)len, in + at);
                exit(1);
            }
            replies[done++] = in + at;
            at += len;
        }
        if (done == n)
            break;
        ssize_t r = got < cap - 1 ? read(fd, in + got, cap - 1 - got) : 0;
        if (r <= 0)
            die("floor: redis read");
        got += (size_t)r;
        in[got] = '\0';
    }
}

/* Writes the len bytes of cmd to Redis and reads its reply into in (cap bytes). */
static void redis_round_trip(int fd, const char *cmd, size_t len, char *in, size_t cap)
{
    const char *reply;
    if (write(fd, cmd, len) != (ssize_t)len)
        die("floor: redis write");
    redis_read_replies(fd, in, cap, 1, &reply);
}

/* The RESP array of the argc strings of argv into out (cap bytes); returns its
 * length, or 0 when it does not fit. */
static size_t resp_command(char *out, size_t cap, int argc, const char *const *argv)
{
    int n = snprintf(out, cap, "*%d\r\n", argc);
    for (int i = 0; i < argc && n > 0 && (size_t)n < cap; i++)
        n += snprintf(out + n, cap - (size_t)n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* FUNCTION LOAD REPLACE of the library in file path, on a connection of its own. */
static void fcall_load(int port, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        die(path);
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    rewind(f);
    char *library = calloc(1, size + 1), *cmd = malloc(size + 128), in[REPLY_BUF];
    if (fread(library, 1, size, f) != size)
        die(path);
    fclose(f);
    const char *argv[] = {"FUNCTION", "LOAD", "REPLACE", library};
    int fd = bench_connect(port);
    redis_round_trip(fd, cmd, resp_command(cmd, size + 128, 4, argv), in, sizeof in);
    close(fd);
    free(cmd);
    free(library);
}

static void pg_connect(struct worker *w)
{
    w->pg = PQconnectdb(backend_target);
    if (PQstatus(w->pg) != CONNECTION_OK) {
        fprintf(stderr, "floor: %s", PQerrorMessage(w->pg));
        exit(1);
    }
    PGresult *r = PQprepare(w->pg, "w",
                            "UPDATE bench_rows SET n = $1::bigint, note = 'w', lock_fence = 1 "
                            "WHERE id = $2::text AND lock_fence <= 1",
                            2, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        fprintf(stderr, "floor: %s", PQerrorMessage(w->pg));
        exit(1);
    }
    PQclear(r);
}

/* The guarded UPDATE of row key (its text up to the first space). */
static void pg_round_trip(PGconn *pg, const char *key, size_t len)
{
    char id[64];
    snprintf(id, sizeof id, "%.*s", (int)(len < sizeof id ? len : sizeof id - 1), key);
    const char *params[2] = {"1", id};
    PGresult *r = PQexecPrepared(pg, "w", 2, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        fprintf(stderr, "floor: %s", PQerrorMessage(pg));
        exit(1);
    }
    PQclear(r);
}

/* The end of the request target of the request line at req (its second space). */
static const char *path_end_of(const char *req)
{
    const char *end = strchr(req, ' ');
    return end ? strchr(end + 1, ' ') : NULL;
}

/* The last path segment of the request line at req: the row of a PATCH. */
static const char *row_key(const char *req, size_t *len)
{
    const char *path_end = path_end_of(req);
    const char *start = path_end;
    while (start != NULL && start > req && start[-1] != '/')
        start--;
    *len = start ? (size_t)(path_end - start) : 0;
    return start ? start : "";
}

/* The string value of "field" in the JSON body at body, copied into out (cap
 * bytes; "" when absent). */
static void json_string(const char *body, const char *field, char *out, size_t cap)
{
    const char *v = strstr(body, field);
    v = v ? strchr(v + strlen(field), '"') : NULL;
    const char *end = v ? strchr(v + 1, '"') : NULL;
    size_t len = end ? (size_t)(end - v - 1) : 0;
    snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), v ? v + 1 : "");
}

/* The FCALL of an acquire (arg the owner, then ttl) or a release (arg the
 * token) of the holder key into cmd (cap bytes); returns its length. */
static size_t fcall_command(char *cmd, size_t cap, int acquire, const char *key, const char *arg,
                            const char *ttl)
{
    const char *argv[8] = {"FCALL", acquire ? fcall_acquire : fcall_release, NULL, key};
    int argc = 4;
    if (acquire)
        argv[argc++] = "floor-fence";
    if (fcall_index != NULL)
        argv[argc++] = fcall_index;
    argv[2] = argc == 4 ? "1" : argc == 5 ? "2" : "3";
    argv[argc++] = arg;
    if (acquire)
        argv[argc++] = ttl;
    return resp_command(cmd, cap, argc, argv);
}

/* The HTTP answer to an fcall request into answer (cap bytes) from the
 * function's reply in (owner: the acquire's); returns its length. */
static size_t fcall_answer(char *answer, size_t cap, int acquire, const char *in, const char *owner)
{
    char json[256];
    int refused = in[0] == ':' && in[1] == '0';
    if (refused)
        snprintf(json, sizeof json, "{\"error\":\"conflict\"}");
    else if (acquire) {
        /* The acquire's reply: "<fence> <Redis time>" (rungs 2 and up) or "<fence>". */
        const char *record = strstr(in, "\r\n") + 2;
        int fence_len = (int)strcspn(record, " \r");
        const char *time = record[fence_len] == ' ' ? record + fence_len + 1 : "";
        snprintf(json, sizeof json,
                 "{\"token\":\"%.*s %s\",\"fence\":%.*s,\"redis_time\":\"%.*s\"}", fence_len,
                 record, owner, fence_len, record, (int)strcspn(time, "\r"), time);
    } else
        snprintf(json, sizeof json, "{\"released\":true}");
    return (size_t)snprintf(
        answer, cap,
        "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
        refused ? "409 Conflict" : "200 OK", strlen(json), json);
}

/* The function call of the fcall request at req, whose target ends in
 * /acquire or /release at path_end: its FCALL into cmd (CMD_BUF bytes), and
 * f's acquire and owner; returns the command's length. */
static size_t fcall_prepare(struct worker *w, const char *req, const char *path_end,
                            struct fcall *f, char *cmd)
{
    f->acquire = memcmp(path_end - 8, "/acquire", 8) == 0;
    const char *name = path_end - 8; /* "/acquire" and "/release" */
    while (name > req && name[-1] != '/')
        name--;
    const char *body = strstr(req, "\r\n\r\n") + 4;
    char token[96], ttl[24] = "10000", key[256];
    if (f->acquire) {
        snprintf(f->owner, sizeof f->owner, "%d.%d-%lu", (int)getpid(), w->id, ++w->owners);
        const char *t = strstr(body, "\"ttl_ms\"");
        if (t != NULL && strchr(t, ':') != NULL)
            snprintf(ttl, sizeof ttl, "%ld", strtol(strchr(t, ':') + 1, NULL, 10));
    } else {
        json_string(body, "\"token\"", token, sizeof token);
        const char *space = strchr(token, ' ');
        snprintf(f->owner, sizeof f->owner, "%s", space ? space + 1 : "");
    }
    snprintf(key, sizeof key, "floor-h-%.*s.%s",
             (int)(path_end - 8 - name < 200 ? path_end - 8 - name : 200), name, f->owner);
    return fcall_command(cmd, CMD_BUF, f->acquire, key, f->acquire ? f->owner : token, ttl);
}

/* One fcall request (as fcall_prepare's): its function call and its answer
 * into answer (cap bytes); returns the answer's length. */
static size_t fcall_request(struct worker *w, const char *req, const char *path_end, char *answer,
                            size_t cap)
{
    struct fcall f;
    char cmd[CMD_BUF], in[REPLY_BUF];
    redis_round_trip(w->redis_fd, cmd, fcall_prepare(w, req, path_end, &f, cmd), in, sizeof in);
    return fcall_answer(answer, cap, f.acquire, in, f.owner);
}

/* Whether the request at req is one the fcall backend serves (its target
 * ends in /acquire or /release); sets *path_end. */
static int fcall_serves(const char *req, const char **path_end)
{
    *path_end = path_end_of(req);
    return *path_end != NULL && *path_end - req > 9 &&
           (memcmp(*path_end - 8, "/acquire", 8) == 0 || memcmp(*path_end - 8, "/release", 8) == 0);
}

/* Length of the complete request at the front of c->buf, or 0. */
static size_t complete_request(struct conn *c)
{
    c->buf[c->got] = '\0';
    char *end = strstr(c->buf, "\r\n\r\n");
    if (end == NULL)
        return 0;
    const char *cl = strcasestr(c->buf, "Content-Length:");
    size_t want =
        (size_t)(end + 4 - c->buf) + (cl != NULL && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
    return c->got >= want ? want : 0;
}

/* Answers the complete request at the front of c->buf; 0 when the answer could not be sent. */
static int answer(struct worker *w, struct conn *c)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    char in[REPLY_BUF], fcall_reply[REPLY_BUF];
    const char *out = reply, *path_end;
    size_t out_len = sizeof reply - 1;
    if (backend == BACKEND_REDIS)
        redis_round_trip(w->redis_fd, ping, sizeof ping - 1, in, sizeof in);
    else if (backend == BACKEND_PG) {
        size_t key_len;
        const char *key = row_key(c->buf, &key_len);
        pg_round_trip(w->pg, key, key_len);
    } else if (backend == BACKEND_FCALL && fcall_serves(c->buf, &path_end)) {
        out_len = fcall_request(w, c->buf, path_end, fcall_reply, sizeof fcall_reply);
        out = fcall_reply;
    }
    return send(c->fd, out, out_len, MSG_NOSIGNAL) == (ssize_t)out_len;
}

/* Reads what c's client sent into c->buf; 0 when it closed (c is freed). */
static int receive(struct conn *c)
{
    ssize_t n = recv(c->fd, c->buf + c->got, CONN_BUF - 1 - c->got, MSG_DONTWAIT);
    if (n <= 0) {
        close(c->fd);
        free(c);
        return 0;
    }
    c->got += (size_t)n;
    return 1;
}

/* Drops the first len bytes of c->buf: a request answered. */
static void consume(struct conn *c, size_t len)
{
    memmove(c->buf, c->buf + len, c->got - len);
    c->got -= len;
}

static void serve(struct worker *w, struct conn *c)
{
    if (!receive(c))
        return;
    for (size_t len; (len = complete_request(c)) > 0;) {
        if (!answer(w, c))
            break;
        consume(c, len);
    }
}

/* Sends the FCALLs of calls[0..n) (the used bytes of cmds) in one write, reads
 * their replies and answers each request. */
static void batch_round_trip(struct worker *w, struct fcall *calls, int n, const char *cmds,
                             size_t used)
{
    static _Thread_local char in[BATCH * REPLY_BUF];
    const char *replies[BATCH];
    char out[REPLY_BUF];
    if (write(w->redis_fd, cmds, used) != (ssize_t)used)
        die("floor: redis write");
    redis_read_replies(w->redis_fd, in, sizeof in, n, replies);
    for (int i = 0; i < n; i++) {
        size_t len = fcall_answer(out, sizeof out, calls[i].acquire, replies[i], calls[i].owner);
        send(calls[i].conn->fd, out, len, MSG_NOSIGNAL);
        consume(calls[i].conn, calls[i].len);
    }
}

/* fcall-batch: the n ready connections of one wake-up, their complete fcall
 * requests' calls sent to Redis together, one request of each connection a
 * round; any other request is answered at once. */
static void serve_batch(struct worker *w, struct epoll_event *events, int n)
{
    static _Thread_local char cmds[BATCH * CMD_BUF];
    struct fcall calls[BATCH];
    for (int i = 0; i < n; i++)
        if (!receive(events[i].data.ptr))
            events[i].data.ptr = NULL;
    for (int more = 1; more;) {
        int k = 0;
        size_t used = 0;
        more = 0;
        for (int i = 0; i < n && k < BATCH; i++) {
            struct conn *c = events[i].data.ptr;
            const char *path_end;
            size_t len = c ? complete_request(c) : 0;
            if (len == 0)
                continue;
            if (fcall_serves(c->buf, &path_end)) {
                calls[k] = (struct fcall){.conn = c, .len = len};
                used += fcall_prepare(w, c->buf, path_end, &calls[k++], cmds + used);
            } else {
                send(c->fd, reply, sizeof reply - 1, MSG_NOSIGNAL);
                consume(c, len);
                more = 1;
            }
        }
        if (k > 0)
            batch_round_trip(w, calls, k, cmds, used);
        more = more || k > 0;
    }
}

static void *work(void *arg)
{
    struct worker *w = arg;
    if (backend == BACKEND_REDIS || backend == BACKEND_FCALL || backend == BACKEND_FCALL_BATCH)
        w->redis_fd = bench_connect(atoi(backend_target));
    else if (backend == BACKEND_PG)
        pg_connect(w);
    struct epoll_event events[64];
    for (;;) {
        int n = epoll_wait(w->epoll_fd, events, 64, -1);
        if (backend == BACKEND_FCALL_BATCH)
            serve_batch(w, events, n);
        else
            for (int i = 0; i < n; i++)
                serve(w, events[i].data.ptr);
    }
    return NULL;
}

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 512) != 0)
        die("floor: listen");
    return fd;
}

/* The backend of the usage's name (none for any other). */
static enum backend backend_named(const char *name)
{
    return strcmp(name, "redis") == 0         ? BACKEND_REDIS
           : strcmp(name, "pg") == 0          ? BACKEND_PG
           : strcmp(name, "fcall") == 0       ? BACKEND_FCALL
           : strcmp(name, "fcall-batch") == 0 ? BACKEND_FCALL_BATCH
                                              : BACKEND_NONE;
}

int main(int argc, char **argv)
{
    enum backend named = argc < 4 ? BACKEND_NONE : backend_named(argv[3]);
    if (argc < 4 || ((named == BACKEND_FCALL || named == BACKEND_FCALL_BATCH) && argc < 8)) {
        fprintf(stderr,
                "usage: floor PORT THREADS none|redis|pg [REDIS_PORT | PG_DSN]\n"
                "       floor PORT THREADS fcall|fcall-batch REDIS_PORT LIBRARY ACQUIRE RELEASE "
                "[INDEX_KEY]\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    backend = named;
    backend_target = argc > 4 ? argv[4] : "";
    if (backend == BACKEND_FCALL || backend == BACKEND_FCALL_BATCH) {
        fcall_load(atoi(backend_target), argv[5]);
        fcall_acquire = argv[6];
        fcall_release = argv[7];
        fcall_index = argc > 8 ? argv[8] : NULL;
    }
    struct worker *workers = calloc((size_t)threads, sizeof *workers);
    for (int i = 0; i < threads; i++) {
        workers[i].epoll_fd = epoll_create1(0);
        workers[i].id = i;
        pthread_create(&workers[i].thread, NULL, work, &workers[i]);
    }
    int listener = listen_on(atoi(argv[1]));
    for (long accepted = 0;; accepted++) {
        int fd = accept(listener, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        c->fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(workers[accepted % threads].epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    }
}
