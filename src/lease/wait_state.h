/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wait_state.h - the lifecycle of a lease wait (an acquire of a lock or a
 * semaphore whose first attempt queued it), as one enum and the table of its
 * arrows: what state follows on which event. Pure: lease_wait.c keeps each
 * wait's state and moves it in wait_set only (through fsm_step).
 *
 * A wait registers its waiter and parks. Woken, it reads why: a retry took it
 * over or it has its answer (answered), a grant was handed over in-process
 * (claiming), its deadline passed, the gateway drains or its client hung up
 * (leaving its queue), else a doorbell or a timer asks it to try again
 * (checking), after which it parks once more or is answered. A client that
 * hangs up while its wait is parked may be taken out of its queue by the
 * janitor with others (left) before it wakes. A request that ends while its
 * wait still holds a place in a queue gives the place up as it is freed.
 */
#ifndef FG_WAIT_STATE_H
#define FG_WAIT_STATE_H

#include <stdbool.h>

#include "util/fsm.h"

/* The states, in the order a wait lives them, with their names. */
#define WAIT_STATES(X)                                                                             \
    /* its first attempt queued it; its waiter is being registered */                              \
    X(WAIT_REGISTERING, "registering")                                                             \
    /* parked until a wake (the request suspended) */                                              \
    X(WAIT_PARKED, "parked")                                                                       \
    /* running again: it reads why it woke */                                                      \
    X(WAIT_AWAKE, "awake")                                                                         \
    /* it tries the acquire again (doorbell, timer, after an outage) */                            \
    X(WAIT_CHECKING, "checking")                                                                   \
    /* it takes a grant handed over in-process */                                                  \
    X(WAIT_CLAIMING, "claiming")                                                                   \
    /* it gives up its place: deadline (keeping a grant), drain, hang-up */                        \
    X(WAIT_LEAVING, "leaving")                                                                     \
    /* its client hung up; the janitor took it out of its queue */                                 \
    X(WAIT_LEFT, "left")                                                                           \
    /* its answer is known: nothing left to give up */                                             \
    X(WAIT_ANSWERED, "answered")                                                                   \
    /* freed */                                                                                    \
    X(WAIT_GONE, "gone")

enum wait_state { WAIT_STATES(FSM_ENUM) };

enum wait_event {
    WAIT_EV_PARK,      /* it parks (it may be woken before the suspension) */
    WAIT_EV_WAKE,      /* it runs again: resumed, or a wake came as it parked */
    WAIT_EV_RECHECK,   /* nothing decided yet: try the acquire again */
    WAIT_EV_DELIVERED, /* a grant was handed over in-process */
    WAIT_EV_GIVE_UP,   /* deadline passed, drain or hang-up: leave the queue */
    WAIT_EV_LEFT,      /* the janitor took it out of its queue */
    WAIT_EV_ANSWER,    /* its answer is known (granted, refused, failed, superseded, hung up) */
    WAIT_EV_END,       /* its request ends: the wait is freed */
};

/* The states of a wait and their arrows (for fsm_next, fsm_step, fsm_name). */
extern const struct fsm wait_lifecycle;

/* True if a wait in state s still holds a place in its queue that nobody
 * else gives up for it (once answered or left, it holds none). */
bool wait_state_holds_place(enum wait_state s);

#endif
