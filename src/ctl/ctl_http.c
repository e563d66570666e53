/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_http.c - fencectl's sockets. Resolves the gateway's host, connects
 * without blocking so the deadline also covers the connect, for https runs a
 * TLS handshake (OpenSSL; the certificate must chain to --cacert or the
 * system's CAs and name the host), writes the request and reads to end of
 * stream, all against one monotonic deadline. Framing and parsing are
 * ctl_wire.c's.
 */
#include "ctl/ctl_http.h"
#include "util/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define UNREACHABLE FG_ERR_BACKEND_UNAVAILABLE

/* Waits until fd is ready for events or the deadline passes; 0 when ready. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - clock_mono_ms();
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

/* One connection to the gateway: a socket, and a TLS session over it for https. */
struct ctl_conn {
    int fd;       /* the socket, or -1 */
    SSL_CTX *ctx; /* TLS settings (owned), or NULL for http */
    SSL *ssl;     /* TLS session (owned), or NULL for http */
};

/* Why TLS failed, for the user: the certificate check's verdict or OpenSSL's. */
static int tls_fail(struct ctl_conn *c, const char *what, struct fg_error *err)
{
    long verify = c->ssl ? SSL_get_verify_result(c->ssl) : X509_V_OK;
    char why[256];
    if (verify != X509_V_OK)
        snprintf(why, sizeof why, "certificate: %s", X509_verify_cert_error_string(verify));
    else
        ERR_error_string_n(ERR_get_error(), why, sizeof why);
    return fg_fail(err, UNREACHABLE, "%s: %s", what, why);
}

/* Waits for what SSL wants after a call returned rc; -1 on a real failure. */
static int tls_wait(struct ctl_conn *c, int rc, long long deadline)
{
    int e = SSL_get_error(c->ssl, rc);
    if (e == SSL_ERROR_WANT_READ)
        return wait_fd(c->fd, POLLIN, deadline);
    if (e == SSL_ERROR_WANT_WRITE)
        return wait_fd(c->fd, POLLOUT, deadline);
    return -1;
}

/* TLS handshake on c->fd with the gateway's host; the certificate must verify. */
static int tls_start(struct ctl_conn *c, const struct ctl_url *gateway, long long deadline,
                     struct fg_error *err)
{
    c->ctx = SSL_CTX_new(TLS_client_method());
    FG_ASSERT(c->ctx != NULL);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_options(c->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    int loaded = gateway->cacert ? SSL_CTX_load_verify_locations(c->ctx, gateway->cacert, NULL)
                                 : SSL_CTX_set_default_verify_paths(c->ctx);
    if (loaded != 1)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "--cacert %s: no CA certificate could be read",
                       gateway->cacert ? gateway->cacert : "(system)");
    c->ssl = SSL_new(c->ctx);
    FG_ASSERT(c->ssl != NULL && SSL_set_fd(c->ssl, c->fd) == 1);
    unsigned char ip[16];
    bool is_ip =
        inet_pton(AF_INET, gateway->host, ip) == 1 || inet_pton(AF_INET6, gateway->host, ip) == 1;
    X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
    if (is_ip)
        X509_VERIFY_PARAM_set1_ip_asc(param, gateway->host);
    else {
        SSL_set_tlsext_host_name(c->ssl, gateway->host);
        X509_VERIFY_PARAM_set1_host(param, gateway->host, 0);
    }
    for (;;) {
        int rc = SSL_connect(c->ssl);
        if (rc == 1)
            return 0;
        if (tls_wait(c, rc, deadline) != 0)
            return tls_fail(c, "TLS handshake with the gateway", err);
    }
}

static void conn_close(struct ctl_conn *c)
{
    if (c->ssl != NULL)
        SSL_free(c->ssl);
    if (c->ctx != NULL)
        SSL_CTX_free(c->ctx);
    if (c->fd >= 0)
        close(c->fd);
}

/* Sends what it can of data: bytes sent, or -1 with errno (EAGAIN: try again). */
static ssize_t conn_send(struct ctl_conn *c, const char *data, size_t len, long long deadline)
{
    if (c->ssl == NULL)
        return send(c->fd, data, len, MSG_NOSIGNAL);
    int n = SSL_write(c->ssl, data, len > INT32_MAX ? INT32_MAX : (int)len);
    if (n > 0)
        return n;
    errno = tls_wait(c, n, deadline) == 0 ? EINTR : EPROTO;
    return -1;
}

/* Receives into buf: bytes read, 0 at end of stream, or -1 with errno. */
static ssize_t conn_recv(struct ctl_conn *c, char *buf, size_t cap, long long deadline)
{
    if (c->ssl == NULL)
        return recv(c->fd, buf, cap, 0);
    int n = SSL_read(c->ssl, buf, cap > INT32_MAX ? INT32_MAX : (int)cap);
    if (n > 0)
        return n;
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    errno = tls_wait(c, n, deadline) == 0 ? EINTR : EPROTO;
    return -1;
}

static int send_all(struct ctl_conn *c, const char *data, size_t len, long long deadline,
                    struct fg_error *err)
{
    int fd = c->fd;
    while (len > 0) {
        ssize_t n = conn_send(c, data, len, deadline);
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
static int read_all(struct ctl_conn *c, long long deadline, char **out, size_t *len,
                    struct fg_error *err)
{
    int fd = c->fd;
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    FG_ASSERT(buf != NULL);
    for (;;) {
        if (n + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            FG_ASSERT(buf != NULL);
        }
        ssize_t got = conn_recv(c, buf + n, cap - n - 1, deadline);
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
    long long deadline = clock_mono_ms() + timeout_ms;
    char *json = body ? json_dumps(body, JSON_COMPACT) : NULL;
    size_t len;
    char *request = ctl_request_format(gateway, method, path, json, &len);
    free(json);
    char *raw = NULL;
    size_t raw_len = 0;
    int rc = -1;
    struct ctl_conn c = {.fd = open_connection(gateway, deadline, err)};
    if (c.fd < 0)
        goto out;
    if ((gateway->tls && tls_start(&c, gateway, deadline, err) != 0) ||
        send_all(&c, request, len, deadline, err) != 0 ||
        read_all(&c, deadline, &raw, &raw_len, err) != 0)
        goto out;
    rc = ctl_response_parse(raw, raw_len, out, err);
out:
    conn_close(&c);
    free(request);
    free(raw);
    return rc;
}
