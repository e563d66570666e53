/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn_phase.c - the arrows of a request's connection lifecycle (conn_phase.h),
 * as one table read top to bottom in the order a request lives them. Owns no
 * connection and calls no library: server.c applies what it answers.
 */
#include "http/conn_phase.h"

#include <stddef.h>

static const struct {
    enum conn_phase from;
    enum conn_event ev;
    enum conn_phase to;
} arrows[] = {
    /* refused before its handler runs (route, key, strict checks, body size) */
    {CONN_RECEIVING, CONN_EV_ANSWER, CONN_ANSWERED},
    {CONN_RECEIVING, CONN_EV_CALL, CONN_DISPATCHING},
    {CONN_DISPATCHING, CONN_EV_ANSWER, CONN_ANSWERED},
    {CONN_DISPATCHING, CONN_EV_DROP, CONN_CLOSED},
    {CONN_DISPATCHING, CONN_EV_PARK, CONN_PARK_DEFERRED},
    {CONN_DISPATCHING, CONN_EV_WAKE, CONN_WOKEN},
    {CONN_PARK_DEFERRED, CONN_EV_CALL, CONN_SUSPENDED},
    {CONN_PARK_DEFERRED, CONN_EV_WAKE, CONN_WOKEN},
    {CONN_SUSPENDED, CONN_EV_WAKE, CONN_RESUMED},
    {CONN_WOKEN, CONN_EV_PARK, CONN_RUNNING}, /* woken while its handler ran */
    {CONN_WOKEN, CONN_EV_CALL, CONN_RUNNING}, /* woken in the put-off round */
    {CONN_RESUMED, CONN_EV_CALL, CONN_RUNNING},
    {CONN_RUNNING, CONN_EV_ANSWER, CONN_ANSWERED},
    {CONN_RUNNING, CONN_EV_DROP, CONN_CLOSED},
    {CONN_RUNNING, CONN_EV_PARK, CONN_SUSPENDED},
    {CONN_RUNNING, CONN_EV_WAKE, CONN_WOKEN},
};

bool conn_phase_next(enum conn_phase from, enum conn_event ev, enum conn_phase *to)
{
    for (size_t i = 0; i < sizeof arrows / sizeof arrows[0]; i++)
        if (arrows[i].from == from && arrows[i].ev == ev) {
            *to = arrows[i].to;
            return true;
        }
    return false;
}

const char *conn_phase_name(enum conn_phase phase)
{
    static const char *const names[] = {
        [CONN_RECEIVING] = "receiving",
        [CONN_DISPATCHING] = "dispatching",
        [CONN_PARK_DEFERRED] = "park_deferred",
        [CONN_SUSPENDED] = "suspended",
        [CONN_WOKEN] = "woken",
        [CONN_RESUMED] = "resumed",
        [CONN_RUNNING] = "running",
        [CONN_ANSWERED] = "answered",
        [CONN_CLOSED] = "closed",
    };
    return (size_t)phase < sizeof names / sizeof names[0] ? names[phase] : "unknown";
}
