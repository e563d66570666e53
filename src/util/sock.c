/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sock.c - the idle-connection check of the backend pools: a non-blocking peek
 * at a connection that rested, so a request that arrives after a backend came
 * back never fails on a connection that died while nobody used it. It owns no
 * connection.
 */
#include "util/sock.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "util/clock.h"

bool sock_idle_broken(int fd)
{
    if (fd < 0)
        return true;
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0)
        return true; /* 0: closed; >0: a message nobody asked for (a shutdown notice) */
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

bool sock_broken_after_idle(int fd, int64_t last_used_ms)
{
    return clock_mono_ms() - last_used_ms >= SOCK_CHECK_IDLE_MS && sock_idle_broken(fd);
}
