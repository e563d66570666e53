/* SPDX-License-Identifier: Apache-2.0 */
/*
 * alarm.h - the lease janitor's alarm clock: the monotonic time it means to
 * wake at, and an event descriptor that wakes it sooner. The janitor plans
 * each sleep: alarm_plan, then a look at everything that falls due (waiters'
 * re-checks, orphaned grants, connections' header deadlines), then
 * alarm_sleep_ms for the earliest. A thread that sets something due before
 * the planned time calls alarm_set, which writes the descriptor only when it
 * brings the wake forward. While the janitor is awake alarm_set does nothing,
 * since its next plan looks at what was set.
 */
#ifndef FG_ALARM_H
#define FG_ALARM_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

/* Creates the event descriptor. */
int alarm_init(struct fg_error *err) FG_WUR;

/* The descriptor to wait on beside others: readable once the alarm rang. */
int alarm_fd(void);

/* Something falls due at at_ms (monotonic): wakes the sleeping janitor if it
 * meant to sleep past that. Any thread; no lock taken. */
void alarm_set(int64_t at_ms);

/* Janitor, before it looks at what falls due: from here on every alarm_set
 * counts, since what it sets may come after the look. */
void alarm_plan(void);

/* Janitor, after the look: the earliest due time was at_ms. Returns how long
 * to sleep from now_ms (0 when due, at most cap_ms). */
int alarm_sleep_ms(int64_t at_ms, int64_t now_ms, int cap_ms);

/* Janitor, after its sleep: awake (alarm_set does nothing until the next
 * plan); rang tells that the descriptor was readable, which it then clears. */
void alarm_woken(bool rang);

#endif
