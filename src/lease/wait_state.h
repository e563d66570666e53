/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wait_state.h - the lifecycle of a wait (an acquire of a lock, a semaphore
 * or a lock set that queued, or a watch of a lease), as one enum and the
 * table of its arrows: what state follows on which event. It is the only
 * lifecycle of a parked request besides its connection's (http/conn_phase.h):
 * the waiter registry keeps each wait's state and moves it in one function,
 * under its lock, through fsm_step (lease/waiter.c), whichever thread the
 * event comes from. Pure.
 *
 * A wait registers and parks. Woken (a doorbell, a timer, a grant handed
 * over, a retry that supersedes it, a drain, a hang-up, a reload of the API
 * keys), it reads why: it gives up (answered by the engine's table,
 * lease/park.c, or refused as its API key no longer allows it), takes a grant
 * handed over in-process (claiming), or tries again (checking), after which
 * it parks once more or is answered. A client that hangs up while its wait is
 * parked may be taken out of its queue by the janitor with others (leaving,
 * then left) before it wakes. A request that ends while its wait still holds
 * a place in a queue gives the place up as it is freed.
 */
#ifndef FG_WAIT_STATE_H
#define FG_WAIT_STATE_H

#include <stdbool.h>

#include "util/fsm.h"

/* The states, in the order a wait lives them, with their names. */
#define WAIT_STATES(X)                                                                             \
    /* its first attempt queued it (or it is a watch): being registered, then its first look */    \
    X(WAIT_REGISTERING, "registering")                                                             \
    /* parked until a wake (the request suspended; in the registry's timer heap) */                \
    X(WAIT_PARKED, "parked")                                                                       \
    /* its client hung up: still suspended while the janitor takes it out of its queue */          \
    X(WAIT_LEAVING, "leaving")                                                                     \
    /* running again: it reads why it woke */                                                      \
    X(WAIT_AWAKE, "awake")                                                                         \
    /* running again after the janitor took it out of its queue */                                 \
    X(WAIT_LEFT, "left")                                                                           \
    /* it tries again (doorbell, timer, after an outage) */                                        \
    X(WAIT_CHECKING, "checking")                                                                   \
    /* it takes a grant handed over in-process */                                                  \
    X(WAIT_CLAIMING, "claiming")                                                                   \
    /* it gives up its place: superseded, drain, hang-up, deadline, its key revoked */             \
    X(WAIT_GIVING_UP, "giving up")                                                                 \
    /* its answer is known: unregistered, nothing left to give up */                               \
    X(WAIT_ANSWERED, "answered")                                                                   \
    /* freed */                                                                                    \
    X(WAIT_GONE, "gone")

enum wait_state { WAIT_STATES(FSM_ENUM) };

enum wait_event {
    WAIT_EV_PARK,      /* it parks until a wake or its re-check time */
    WAIT_EV_WAKE,      /* a wake came: it runs again (resumed, or it never parked) */
    WAIT_EV_LEAVE,     /* the janitor takes its hung-up client out of its queue */
    WAIT_EV_LEFT,      /* the janitor took it out: it runs again */
    WAIT_EV_STAYED,    /* the janitor could not take it out: it runs again and leaves itself */
    WAIT_EV_RECHECK,   /* nothing decided yet: try again */
    WAIT_EV_DELIVERED, /* a grant was handed over in-process */
    WAIT_EV_GIVE_UP,   /* superseded, drain, hang-up, deadline or key revoked: give it up */
    WAIT_EV_ANSWER,    /* its answer is known */
    WAIT_EV_END,       /* its request ends: the wait is freed */
};

/* The states of a wait and their arrows (for fsm_next, fsm_step, fsm_name). */
extern const struct fsm wait_lifecycle;

/* True if a wait in state s still holds a place in its queue that nobody
 * else gives up for it (once answered or left, it holds none). */
bool wait_state_holds_place(enum wait_state s);

/* True if a wait in state s is suspended (its request waits for a resume). */
bool wait_state_suspended(enum wait_state s);

#endif
