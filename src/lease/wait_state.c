/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wait_state.c - the arrows of a wait's lifecycle (wait_state.h), as one
 * table read top to bottom in the order a wait lives them. Owns no wait and
 * does no I/O: the waiter registry applies what it answers.
 */
#include "lease/wait_state.h"

static const struct fsm_arrow arrows[] = {
    {WAIT_REGISTERING, WAIT_EV_PARK, WAIT_PARKED},
    {WAIT_REGISTERING, WAIT_EV_WAKE, WAIT_AWAKE},       /* a wake came before it parked */
    {WAIT_REGISTERING, WAIT_EV_RECHECK, WAIT_CHECKING}, /* its first look (a watch, a lock set) */
    {WAIT_REGISTERING, WAIT_EV_END, WAIT_GONE},         /* the registry refused it */
    {WAIT_PARKED, WAIT_EV_WAKE, WAIT_AWAKE},
    {WAIT_PARKED, WAIT_EV_LEAVE, WAIT_LEAVING},
    {WAIT_PARKED, WAIT_EV_END, WAIT_GONE}, /* its client went while it was parked */
    {WAIT_LEAVING, WAIT_EV_LEFT, WAIT_LEFT},
    {WAIT_LEAVING, WAIT_EV_STAYED, WAIT_AWAKE},
    {WAIT_AWAKE, WAIT_EV_GIVE_UP, WAIT_GIVING_UP},
    {WAIT_AWAKE, WAIT_EV_DELIVERED, WAIT_CLAIMING},
    {WAIT_AWAKE, WAIT_EV_RECHECK, WAIT_CHECKING},
    {WAIT_AWAKE, WAIT_EV_END, WAIT_GONE}, /* woken, its client went before it ran */
    {WAIT_LEFT, WAIT_EV_GIVE_UP, WAIT_GIVING_UP},
    {WAIT_LEFT, WAIT_EV_END, WAIT_GONE},
    {WAIT_CHECKING, WAIT_EV_PARK, WAIT_PARKED},
    {WAIT_CHECKING, WAIT_EV_WAKE, WAIT_AWAKE}, /* a wake came while it looked */
    {WAIT_CHECKING, WAIT_EV_ANSWER, WAIT_ANSWERED},
    {WAIT_CHECKING, WAIT_EV_GIVE_UP, WAIT_GIVING_UP}, /* answered, but its key was revoked */
    {WAIT_CLAIMING, WAIT_EV_RECHECK, WAIT_CHECKING},  /* a lock set: the next lock */
    {WAIT_CLAIMING, WAIT_EV_ANSWER, WAIT_ANSWERED},
    {WAIT_GIVING_UP, WAIT_EV_ANSWER, WAIT_ANSWERED},
    {WAIT_ANSWERED, WAIT_EV_END, WAIT_GONE},
};

static const char *const names[] = {WAIT_STATES(FSM_NAME)};

const struct fsm wait_lifecycle = {"wait", arrows, FSM_COUNT(arrows), names, FSM_COUNT(names)};

bool wait_state_holds_place(enum wait_state s)
{
    return s != WAIT_LEFT && s != WAIT_ANSWERED && s != WAIT_GONE;
}

bool wait_state_suspended(enum wait_state s)
{
    return s == WAIT_PARKED || s == WAIT_LEAVING;
}
