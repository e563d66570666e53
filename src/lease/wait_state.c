/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wait_state.c - the arrows of a lease wait's lifecycle (wait_state.h), as one
 * table read top to bottom in the order a wait lives them. Owns no wait and
 * does no I/O: lease_wait.c applies what it answers.
 */
#include "lease/wait_state.h"

#include <stddef.h>

static const struct {
    enum wait_state from;
    enum wait_event ev;
    enum wait_state to;
} arrows[] = {
    {WAIT_REGISTERING, WAIT_EV_PARK, WAIT_PARKED},
    {WAIT_REGISTERING, WAIT_EV_END, WAIT_GONE}, /* the registry refused it */
    {WAIT_PARKED, WAIT_EV_WAKE, WAIT_AWAKE},
    {WAIT_PARKED, WAIT_EV_LEFT, WAIT_LEFT},
    {WAIT_PARKED, WAIT_EV_END, WAIT_GONE}, /* its client went while it was parked */
    {WAIT_AWAKE, WAIT_EV_ANSWER, WAIT_ANSWERED},
    {WAIT_AWAKE, WAIT_EV_DELIVERED, WAIT_CLAIMING},
    {WAIT_AWAKE, WAIT_EV_GIVE_UP, WAIT_LEAVING},
    {WAIT_AWAKE, WAIT_EV_RECHECK, WAIT_CHECKING},
    {WAIT_CHECKING, WAIT_EV_PARK, WAIT_PARKED},
    {WAIT_CHECKING, WAIT_EV_ANSWER, WAIT_ANSWERED},
    {WAIT_CLAIMING, WAIT_EV_ANSWER, WAIT_ANSWERED},
    {WAIT_LEAVING, WAIT_EV_ANSWER, WAIT_ANSWERED},
    {WAIT_LEFT, WAIT_EV_ANSWER, WAIT_ANSWERED}, /* woken by its hang-up (or superseded) */
    {WAIT_LEFT, WAIT_EV_GIVE_UP, WAIT_LEAVING}, /* woken by a drain as well */
    {WAIT_LEFT, WAIT_EV_END, WAIT_GONE},
    {WAIT_ANSWERED, WAIT_EV_END, WAIT_GONE},
};

bool wait_state_next(enum wait_state from, enum wait_event ev, enum wait_state *to)
{
    for (size_t i = 0; i < sizeof arrows / sizeof arrows[0]; i++)
        if (arrows[i].from == from && arrows[i].ev == ev) {
            *to = arrows[i].to;
            return true;
        }
    return false;
}

bool wait_state_holds_place(enum wait_state s)
{
    return s != WAIT_LEFT && s != WAIT_ANSWERED && s != WAIT_GONE;
}

const char *wait_state_name(enum wait_state s)
{
    static const char *const names[] = {
        [WAIT_REGISTERING] = "registering",
        [WAIT_PARKED] = "parked",
        [WAIT_AWAKE] = "awake",
        [WAIT_CHECKING] = "checking",
        [WAIT_CLAIMING] = "claiming",
        [WAIT_LEAVING] = "leaving",
        [WAIT_LEFT] = "left",
        [WAIT_ANSWERED] = "answered",
        [WAIT_GONE] = "gone",
    };
    return (size_t)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}
