/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acceptor.h - the listening socket and the one thread that accepts on it. Each
 * accepted connection is handed to the HTTP daemon with MHD_add_connection, on
 * each of its polling threads in turn, so a burst of new connections (a client
 * pool opening 64 at once) lands evenly instead of on the one or two threads
 * that won the race to accept it. The
 * daemon's own limits (connections in all and per client address) and its
 * accept policy still decide on each connection.
 */
#ifndef FG_ACCEPTOR_H
#define FG_ACCEPTOR_H

#include <microhttpd.h>
#include <sys/socket.h>

#include "util/error.h"

/* A socket bound to addr (addrlen bytes; IPv6 sockets take IPv6 only) and
 * listening, into *fd (owned by the caller): for a daemon that accepts on it
 * itself. name (host:port) is what a failure names. */
int acceptor_socket(const struct sockaddr *addr, socklen_t addrlen, const char *name, int *fd,
                    struct fg_error *err) FG_WUR;

/* Binds and listens on addr (acceptor_socket) for the accepting thread. */
int acceptor_listen(const struct sockaddr *addr, socklen_t addrlen, const char *name,
                    struct fg_error *err) FG_WUR;

/* Starts the thread that hands every accepted connection to daemon, whose
 * pool has threads polling threads: to each of them in turn. */
int acceptor_start(struct MHD_Daemon *daemon, unsigned threads, struct fg_error *err) FG_WUR;

/* Stops the thread (if running) and closes the listening socket. */
void acceptor_stop(void);

#endif
