/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn_phase.h - the lifecycle of a request on its HTTP connection, as one
 * enum and the table of its arrows: what phase follows on which event. Pure:
 * server.c keeps each connection's phase and moves it through
 * conn_phase_next only, suspending and resuming the connection in
 * libmicrohttpd as the phase it enters asks.
 *
 * A request is received, then its handler runs. A handler that must wait
 * parks: in the event-loop round that read the request the suspension is put
 * off for one round (server.c's park() says why), later it takes effect at
 * once. A wake (http_request_wake, from any thread) that comes before the
 * suspension took effect is kept, and the handler runs again instead of
 * parking; one that finds the connection suspended resumes it, and the
 * handler runs again on libmicrohttpd's next call. Each park is met by one
 * wake at most: a handler parks only after it parked its waiter, whose
 * registry wakes it once.
 */
#ifndef FG_CONN_PHASE_H
#define FG_CONN_PHASE_H

#include <stdbool.h>

enum conn_phase {
    CONN_RECEIVING,     /* headers and body arrive */
    CONN_DISPATCHING,   /* its handler runs, in the event-loop round that read the request */
    CONN_PARK_DEFERRED, /* parked; the suspension waits for the next event-loop round */
    CONN_SUSPENDED,     /* MHD_suspend_connection is in effect */
    CONN_WOKEN,         /* woken before the suspension took effect: the handler runs again */
    CONN_RESUMED,       /* woken while suspended: the handler runs again on the next call */
    CONN_RUNNING,       /* its handler runs again after a wake */
    CONN_ANSWERED,      /* a response is queued */
    CONN_CLOSED,        /* closed unanswered: the client is gone */
};

enum conn_event {
    CONN_EV_CALL,   /* libmicrohttpd calls with the whole request in */
    CONN_EV_PARK,   /* the handler asked to wait */
    CONN_EV_WAKE,   /* http_request_wake: the wait has news */
    CONN_EV_ANSWER, /* a response was queued */
    CONN_EV_DROP,   /* the client is gone: no answer is written */
};

/* Sets *to to the phase that follows event ev in phase from. Returns false
 * (*to untouched) for an event the phase never meets: a bug in the caller. */
bool conn_phase_next(enum conn_phase from, enum conn_event ev, enum conn_phase *to);

/* The phase's name for logs and tests ("suspended"). */
const char *conn_phase_name(enum conn_phase phase);

#endif
