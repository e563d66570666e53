/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sock.h - a check on the socket of a pooled backend connection, done before it
 * is used: a server that restarted or was killed left a closed (or closing)
 * socket behind, which a request must not be the first to find.
 */
#ifndef FG_SOCK_H
#define FG_SOCK_H

#include <stdbool.h>

/*
 * True if the idle connection on fd is unusable: the peer closed it, reset it,
 * or sent something although no request is outstanding (Postgres and Redis only
 * speak unasked to say goodbye). One non-blocking recv with MSG_PEEK; never
 * consumes data and never waits.
 */
bool sock_idle_broken(int fd);

#endif
