/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn_phase.h - the lifecycle of a request on its HTTP connection, as one
 * enum and the table of its arrows: what phase follows on which event. Pure:
 * server.c keeps each connection's phase and moves it in conn_step only
 * (through fsm_step), suspending and resuming the connection in
 * libmicrohttpd as the phase it enters asks.
 *
 * A request is received, then its handler runs. A handler that must wait
 * parks: in the event-loop round that read the request the suspension is put
 * off for one round (server.c's dispatch() says why), later it takes effect
 * at once. A wake (http_request_wake, from any thread) that comes before the
 * suspension took effect is kept, and the handler runs again instead of
 * parking; one that finds the connection suspended resumes it, and the
 * handler runs again on libmicrohttpd's next call. Each park is met by one
 * wake at most: a handler parks only after it parked its waiter, whose
 * registry wakes it once.
 */
#ifndef FG_CONN_PHASE_H
#define FG_CONN_PHASE_H

#include <stdbool.h>

#include "util/fsm.h"

/* The phases, in the order a request lives them, with their names. */
#define CONN_PHASES(X)                                                                             \
    /* headers and body arrive */                                                                  \
    X(CONN_RECEIVING, "receiving")                                                                 \
    /* its handler runs, in the event-loop round that read the request */                          \
    X(CONN_DISPATCHING, "dispatching")                                                             \
    /* parked; the suspension waits for the next event-loop round */                               \
    X(CONN_PARK_DEFERRED, "park_deferred")                                                         \
    /* MHD_suspend_connection is in effect */                                                      \
    X(CONN_SUSPENDED, "suspended")                                                                 \
    /* woken while its handler ran in the round that read the request: it runs                     \
     * again, and a park is still put off */                                                       \
    X(CONN_WOKEN_EARLY, "woken_early")                                                             \
    /* woken later, before the suspension took effect: the handler runs again */                   \
    X(CONN_WOKEN, "woken")                                                                         \
    /* woken while suspended: the handler runs again on the next call */                           \
    X(CONN_RESUMED, "resumed")                                                                     \
    /* its handler runs again after a wake */                                                      \
    X(CONN_RUNNING, "running")                                                                     \
    /* a response is queued */                                                                     \
    X(CONN_ANSWERED, "answered")                                                                   \
    /* closed unanswered: the client is gone */                                                    \
    X(CONN_CLOSED, "closed")

enum conn_phase { CONN_PHASES(FSM_ENUM) };

enum conn_event {
    CONN_EV_CALL,   /* libmicrohttpd calls with the whole request in */
    CONN_EV_PARK,   /* the handler asked to wait */
    CONN_EV_WAKE,   /* http_request_wake: the wait has news */
    CONN_EV_ANSWER, /* a response was queued */
    CONN_EV_DROP,   /* the client is gone: no answer is written */
};

/* The phases of a request and their arrows (for fsm_next, fsm_step, fsm_name). */
extern const struct fsm conn_lifecycle;

#endif
