/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_client.h - the few lines of HTTP/1.1 the benchmark clients speak: one
 * keep-alive connection per thread, a request with a JSON body, a reply read
 * to its Content-Length. Header-only so that each bench tool stays one file to
 * compile; no error recovery beyond reporting -1.
 */
#ifndef FG_BENCH_HTTP_CLIENT_H
#define FG_BENCH_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A connected loopback socket to port, or exits. */
static inline int bench_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("bench: connect");
        exit(1);
    }
    return fd;
}

/* Sends method path with headers (each ending in \r\n, may be "") and body;
 * reads the reply into buf (cap bytes). Returns the status, or -1. */
static inline int bench_request(int fd, const char *method, const char *path, const char *headers,
                                const char *body, char *buf, size_t cap)
{
    char req[2048];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, headers, strlen(body), body);
    if (n < 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n)
        return -1;
    size_t got = 0;
    char *end = NULL;
    while (end == NULL) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    const char *cl = strcasestr(buf, "Content-Length:");
    size_t want = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
    while (got < want && got < cap - 1) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
    }
    return atoi(buf + 9);
}

#endif
