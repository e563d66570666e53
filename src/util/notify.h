/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.h - readiness and stopping notices to the service manager, in the
 * sd_notify protocol (one datagram to the AF_UNIX socket named by NOTIFY_SOCKET),
 * written directly: no libsystemd. Without NOTIFY_SOCKET every call does nothing.
 */
#ifndef FG_NOTIFY_H
#define FG_NOTIFY_H

/* Sends state (e.g. "READY=1\nMAINPID=123") as one datagram to $NOTIFY_SOCKET.
 * Returns 1 when sent, 0 when there is no socket to tell, -1 when sending failed
 * (the service manager then times the start-up out; the caller logs it). */
int notify_send(const char *state);

#endif
