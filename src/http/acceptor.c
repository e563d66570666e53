/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acceptor.c - the listening socket and its accepting thread (acceptor.h).
 * libmicrohttpd's own polling threads would each accept from a shared listening
 * socket, up to ten connections per wake; a burst of connections then went to
 * whichever threads woke first, and a thread serving twice its share answers
 * its connections one Redis round trip after another while the others idle.
 * Here one thread accepts and hands each connection to the daemon with
 * MHD_add_connection, which puts it on the polling thread its descriptor number
 * picks (the number modulo the threads, the next one when that thread is full).
 * Numbers are reused lowest first, so that alone would follow the holes closed
 * connections leave; the acceptor therefore moves each new descriptor to a
 * number that picks the next thread in turn. A failed accept for want of
 * descriptors is logged and retried a little later rather than spun on.
 * acceptor_socket makes the same kind of listening socket for a daemon of one
 * thread that accepts for itself (the probe listener).
 */
#include "http/acceptor.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

#define ACCEPT_RETRY_MS 50 /* pause after an accept failed for want of resources */

static struct {
    int fd;                    /* the listening socket, -1 when closed */
    pthread_t thread;          /* the accepting thread */
    bool running;              /* thread was started */
    atomic_bool stopping;      /* acceptor_stop was called */
    struct MHD_Daemon *daemon; /* where accepted connections go */
    unsigned threads;          /* the daemon's polling threads */
    unsigned turn;             /* the thread the next connection goes to */
} acc = {.fd = -1};

int acceptor_socket(const struct sockaddr *addr, socklen_t addrlen, const char *name, int *fd,
                    struct fg_error *err)
{
    int s = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return fg_fail(err, FG_ERR_CONFIG, "cannot listen on %s: %s", name, strerror(errno));
    int on = 1;
    (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (addr->sa_family == AF_INET6)
        (void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    if (bind(s, addr, addrlen) != 0 || listen(s, SOMAXCONN) != 0) {
        int why = errno;
        close(s);
        return fg_fail(err, FG_ERR_CONFIG, "cannot listen on %s: %s", name, strerror(why));
    }
    *fd = s;
    return 0;
}

int acceptor_listen(const struct sockaddr *addr, socklen_t addrlen, const char *name,
                    struct fg_error *err)
{
    return acceptor_socket(addr, addrlen, name, &acc.fd, err);
}

/* True when an accept failure says the process or system is out of
 * something (descriptors, memory) and a retry should wait. */
static bool out_of_resources(int why)
{
    return why == EMFILE || why == ENFILE || why == ENOBUFS || why == ENOMEM;
}

/* fd, or a duplicate of it (fd then closed) whose number modulo threads is
 * turn: the lowest free such number. fd itself when it already is, or when no
 * such number is free below the descriptor limit. */
static int renumber_for_thread(int fd, unsigned turn, unsigned threads)
{
    int at = fd;
    for (;;) {
        at += (int)((turn + threads - (unsigned)at % threads) % threads);
        if (at == fd)
            return fd;
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, at);
        if (moved < 0)
            return fd;
        if ((unsigned)moved % threads == turn) {
            close(fd);
            return moved;
        }
        close(moved);
        at = moved + 1;
    }
}

static void *accept_loop(void *arg)
{
    (void)arg;
    while (!atomic_load(&acc.stopping)) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof peer;
        int fd = accept4(acc.fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            fd = renumber_for_thread(fd, acc.turn, acc.threads);
            acc.turn = (acc.turn + 1) % acc.threads;
            /* On refusal (a limit, the accept policy) the daemon closes fd. */
            (void)MHD_add_connection(acc.daemon, fd, (struct sockaddr *)&peer, len);
            continue;
        }
        int why = errno;
        if (atomic_load(&acc.stopping))
            break;
        if (out_of_resources(why)) {
            log_message(LOG_WARN, "accept_failed", "%s", strerror(why));
            clock_sleep_ms(ACCEPT_RETRY_MS);
        }
    }
    return NULL;
}

int acceptor_start(struct MHD_Daemon *daemon, unsigned threads, struct fg_error *err)
{
    acc.daemon = daemon;
    acc.threads = threads > 0 ? threads : 1;
    acc.turn = 0;
    atomic_store(&acc.stopping, false);
    if (pthread_create(&acc.thread, NULL, accept_loop, NULL) != 0)
        return fg_fail(err, FG_ERR_INTERNAL, "cannot start the accepting thread");
    acc.running = true;
    return 0;
}

void acceptor_stop(void)
{
    atomic_store(&acc.stopping, true);
    if (acc.fd >= 0)
        shutdown(acc.fd, SHUT_RDWR); /* wakes a blocked accept4 */
    if (acc.running)
        pthread_join(acc.thread, NULL);
    acc.running = false;
    if (acc.fd >= 0)
        close(acc.fd);
    acc.fd = -1;
}
