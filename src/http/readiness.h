/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readiness.h - whether the backends answer, as /readyz and /metrics ask it:
 * each backend is asked by a thread of its own, and a probe waits for the
 * answer at most probe_timeout_ms, however long the backend takes (a stopped
 * Redis holds a call for request_timeout_ms). So a probe holds its HTTP
 * thread, the probe listener's one thread among them, no longer than that.
 */
#ifndef FG_READINESS_H
#define FG_READINESS_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

/* What a check found. */
struct readiness {
    bool redis_up;               /* Redis answered PING in time */
    bool pg_up;                  /* Postgres answered SELECT 1 in time */
    int64_t fence_headroom;      /* fences left to issue; -1: not read */
    struct fg_error redis_error; /* why Redis is down */
    struct fg_error pg_error;    /* why Postgres is down */
};

/* Starts the threads that ask the backends; a check waits at most
 * timeout_ms for them. */
int readiness_start(long long timeout_ms, struct fg_error *err) FG_WUR;

/* Asks both backends afresh (an ask already under way when this one comes
 * does not count: the next one does), and with headroom also the fences
 * left to issue, while Redis answers; fills out with what they answered
 * within the timeout, and a backend that did not as down. Any thread. */
void readiness_check(bool headroom, struct readiness *out);

/* Asks the threads to end, without waiting for them. */
void readiness_stop_ask(void);

/* Stops the threads (readiness_stop_ask), waiting for each to finish what it
 * asked until until_ms (clock_mono_ms; INT64_MAX: a backend's own deadline at
 * most); false if one still waits for its backend then, left behind. True
 * when they do not run. */
bool readiness_stop(int64_t until_ms);

#endif
