/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sock.h - a check on the socket of a pooled backend connection, done before it
 * is used after a pause: a server that restarted or was killed left a closed (or
 * closing) socket behind, which a request must not be the first to find. A
 * connection in steady use is not looked at: its last answer came a moment ago,
 * and a server gone since is met as one that went away mid-request would be.
 */
#ifndef FG_SOCK_H
#define FG_SOCK_H

#include <stdbool.h>
#include <stdint.h>

/* Idle for less than this since its last answer, a connection is used without a look. */
#define SOCK_CHECK_IDLE_MS 10

/*
 * True if the idle connection on fd is unusable: the peer closed it, reset it,
 * or sent something although no request is outstanding (Postgres and Redis only
 * speak unasked to say goodbye). One non-blocking recv with MSG_PEEK; never
 * consumes data and never waits.
 */
bool sock_idle_broken(int fd);

/*
 * True if the connection on fd, which last answered at last_used_ms (clock_mono_ms),
 * must not be used: it has been idle SOCK_CHECK_IDLE_MS or more and sock_idle_broken
 * finds it broken. A busy connection costs no system call.
 */
bool sock_broken_after_idle(int fd, int64_t last_used_ms);

#endif
