/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn_phase.c - the arrows of a request's connection lifecycle (conn_phase.h),
 * as one table read top to bottom in the order a request lives them. Owns no
 * connection and calls no library: server.c applies what it answers.
 */
#include "http/conn_phase.h"

static const struct fsm_arrow arrows[] = {
    /* refused before its handler runs (route, key, strict checks, body size) */
    {CONN_RECEIVING, CONN_EV_ANSWER, CONN_ANSWERED},
    {CONN_RECEIVING, CONN_EV_CALL, CONN_DISPATCHING},
    {CONN_DISPATCHING, CONN_EV_ANSWER, CONN_ANSWERED},
    {CONN_DISPATCHING, CONN_EV_DROP, CONN_CLOSED},
    {CONN_DISPATCHING, CONN_EV_PARK, CONN_PARK_DEFERRED},
    {CONN_DISPATCHING, CONN_EV_WAKE, CONN_WOKEN_EARLY},
    {CONN_WOKEN_EARLY, CONN_EV_PARK, CONN_DISPATCHING}, /* still the round that read it */
    {CONN_PARK_DEFERRED, CONN_EV_CALL, CONN_SUSPENDED},
    {CONN_PARK_DEFERRED, CONN_EV_WAKE, CONN_WOKEN},
    {CONN_SUSPENDED, CONN_EV_WAKE, CONN_RESUMED},
    {CONN_WOKEN, CONN_EV_PARK, CONN_RUNNING}, /* woken while its handler ran again */
    {CONN_WOKEN, CONN_EV_CALL, CONN_RUNNING}, /* woken in the put-off round */
    {CONN_RESUMED, CONN_EV_CALL, CONN_RUNNING},
    {CONN_RUNNING, CONN_EV_ANSWER, CONN_ANSWERED},
    {CONN_RUNNING, CONN_EV_DROP, CONN_CLOSED},
    {CONN_RUNNING, CONN_EV_PARK, CONN_SUSPENDED},
    {CONN_RUNNING, CONN_EV_WAKE, CONN_WOKEN},
};

static const char *const names[] = {CONN_PHASES(FSM_NAME)};

const struct fsm conn_lifecycle = {"request", arrows, FSM_COUNT(arrows), names, FSM_COUNT(names)};
