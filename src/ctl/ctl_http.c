/*
 * ctl_http.c - fencectl's sockets. Resolves the gateway's host, connects
 * without blocking so the deadline also covers the connect, writes the request
 * and reads to end of stream, all against one monotonic deadline. Framing and
 * parsing are ctl_wire.c's.
 */
#include "ctl/ctl_http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define UNREACHABLE FG_ERR_BACKEND_UNAVAILABLE

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events or the deadline passes; 0 when ready. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Connects to one resolved address; the socket or -1 (errno says why). */
static int connect_addr(const struct addrinfo *ai, long long deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return fd;
    if (errno != EINPROGRESS)
        goto fail;
    if (wait_fd(fd, POLLOUT, deadline) != 0) {
        errno = ETIMEDOUT;
        goto fail;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0)
        goto fail;
    if (so_error == 0)
        return fd;
    errno = so_error;
fail:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

static int open_connection(const struct ctl_url *gateway, long long deadline, struct fg_error *err)
{
    char port[16];
    snprintf(port, sizeof port, "%d", gateway->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(gateway->host, port, &hints, &res);
    if (rc != 0)
        return fg_fail(err, UNREACHABLE, "cannot resolve %s: %s", gateway->host, gai_strerror(rc));
    int fd = -1, why = 0;
    for (const struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = connect_addr(ai, deadline);
        why = errno;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return fg_fail(err, UNREACHABLE, "cannot connect to %s:%d: %s", gateway->host,
                       gateway->port, strerror(why));
    return fd;
}

static int send_all(int fd, const char *data, size_t len, long long deadline, struct fg_error *err)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
            wait_fd(fd, POLLOUT, deadline) == 0)
            continue;
        return fg_fail(err, UNREACHABLE, "sending to the gateway: %s",
                       n < 0 ? strerror(errno) : "timed out");
    }
    return 0;
}

/* Reads until end of stream into a malloc'd, NUL-terminated *out of *len bytes. */
static int read_all(int fd, long long deadline, char **out, size_t *len, struct fg_error *err)
{
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    FG_ASSERT(buf != NULL);
    for (;;) {
        if (n + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            FG_ASSERT(buf != NULL);
        }
        ssize_t got = recv(fd, buf + n, cap - n - 1, 0);
        if (got > 0) {
            n += (size_t)got;
            continue;
        }
        if (got == 0)
            break;
        if (errno == EINTR)
            continue;
        if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(fd, POLLIN, deadline) == 0)
            continue;
        int why = errno;
        free(buf);
        bool timed_out = why == EAGAIN || why == EWOULDBLOCK;
        return fg_fail(err, UNREACHABLE, "reading the gateway's answer: %s",
                       timed_out ? "timed out" : strerror(why));
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int ctl_http(const struct ctl_url *gateway, const char *method, const char *path,
             const json_t *body, long long timeout_ms, struct ctl_response *out,
             struct fg_error *err)
{
    long long deadline = now_ms() + timeout_ms;
    char *json = body ? json_dumps(body, JSON_COMPACT) : NULL;
    size_t len;
    char *request = ctl_request_format(gateway, method, path, json, &len);
    free(json);
    char *raw = NULL;
    size_t raw_len = 0;
    int rc = -1;
    int fd = open_connection(gateway, deadline, err);
    if (fd < 0)
        goto out;
    if (send_all(fd, request, len, deadline, err) != 0 ||
        read_all(fd, deadline, &raw, &raw_len, err) != 0)
        goto out;
    rc = ctl_response_parse(raw, raw_len, out, err);
out:
    if (fd >= 0)
        close(fd);
    free(request);
    free(raw);
    return rc;
}
