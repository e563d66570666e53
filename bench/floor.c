/* SPDX-License-Identifier: Apache-2.0 */
/*
 * floor.c - the least a gateway can cost: an HTTP/1.1 server that does nothing
 * but what any gateway in front of Redis or Postgres must do per request, shaped
 * as fencegate is (threads that each poll their keep-alive connections with
 * epoll and make one blocking backend round trip per request). It parses no
 * JSON, checks no token, logs nothing and answers a fixed body, so the CPU it
 * spends per request is the floor under the gateway's own on the same machine:
 * the system calls, sleeps and wake-ups of one hop.
 *   none   answers at once (a hop with no backend)
 *   redis  one PING round trip to Redis on the thread's own connection
 *   pg     the direct guarded UPDATE of bench/pg_writes.sh (fence-column table
 *          bench_rows, prepared) on the thread's own Postgres connection, the
 *          row named by the request path's last segment
 * The reply of every request is {"token":"t","fence":1}, which bench/http_pairs.c
 * takes for a lease and bench/pg_load.c for a write.
 *
 * usage: floor PORT THREADS none|redis|pg [REDIS_PORT | PG_DSN]
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <sys/epoll.h>

#include "http_client.h"

#define CONN_BUF 8192 /* bytes of one connection's unparsed input */

enum backend { BACKEND_NONE, BACKEND_REDIS, BACKEND_PG };

struct conn {
    int fd;
    size_t got;
    char buf[CONN_BUF];
};

struct worker {
    pthread_t thread;
    int epoll_fd;
    int redis_fd;
    PGconn *pg;
};

static enum backend backend;
static const char *backend_target;

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 23\r\n\r\n"
                            "{\"token\":\"t\",\"fence\":1}";

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* One PING and its +PONG, blocking. */
static void redis_round_trip(int fd)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    char in[16];
    if (write(fd, ping, sizeof ping - 1) != (ssize_t)(sizeof ping - 1))
        die("floor: redis write");
    for (size_t got = 0; got < 7;) {
        ssize_t n = read(fd, in + got, sizeof in - got);
        if (n <= 0)
            die("floor: redis read");
        got += (size_t)n;
    }
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

/* The last path segment of the request line at req: the row of a PATCH. */
static const char *row_key(const char *req, size_t *len)
{
    const char *path_end = memchr(req, ' ', CONN_BUF);
    path_end = path_end ? memchr(path_end + 1, ' ', CONN_BUF) : NULL;
    const char *start = path_end;
    while (start != NULL && start > req && start[-1] != '/')
        start--;
    *len = start ? (size_t)(path_end - start) : 0;
    return start ? start : "";
}

/* Length of the complete request at the front of c->buf, or 0. */
static size_t complete_request(struct conn *c)
{
    c->buf[c->got] = '\0';
    char *end = strstr(c->buf, "\r\n\r\n");
    if (end == NULL)
        return 0;
    const char *cl = strcasestr(c->buf, "Content-Length:");
    size_t want = (size_t)(end + 4 - c->buf) + (cl != NULL && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
    return c->got >= want ? want : 0;
}

static void serve(struct worker *w, struct conn *c)
{
    ssize_t n = recv(c->fd, c->buf + c->got, CONN_BUF - 1 - c->got, MSG_DONTWAIT);
    if (n <= 0) {
        close(c->fd);
        free(c);
        return;
    }
    c->got += (size_t)n;
    for (size_t len; (len = complete_request(c)) > 0;) {
        if (backend == BACKEND_REDIS)
            redis_round_trip(w->redis_fd);
        else if (backend == BACKEND_PG) {
            size_t key_len;
            const char *key = row_key(c->buf, &key_len);
            pg_round_trip(w->pg, key, key_len);
        }
        if (send(c->fd, reply, sizeof reply - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof reply - 1))
            break;
        memmove(c->buf, c->buf + len, c->got - len);
        c->got -= len;
    }
}

static void *work(void *arg)
{
    struct worker *w = arg;
    if (backend == BACKEND_REDIS)
        w->redis_fd = bench_connect(atoi(backend_target));
    else if (backend == BACKEND_PG)
        pg_connect(w);
    struct epoll_event events[64];
    for (;;) {
        int n = epoll_wait(w->epoll_fd, events, 64, -1);
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

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: floor PORT THREADS none|redis|pg [REDIS_PORT | PG_DSN]\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    backend = strcmp(argv[3], "redis") == 0 ? BACKEND_REDIS : strcmp(argv[3], "pg") == 0 ? BACKEND_PG : BACKEND_NONE;
    backend_target = argc > 4 ? argv[4] : "";
    struct worker *workers = calloc((size_t)threads, sizeof *workers);
    for (int i = 0; i < threads; i++) {
        workers[i].epoll_fd = epoll_create1(0);
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
