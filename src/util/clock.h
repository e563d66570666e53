/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - the process's one monotonic clock, in milliseconds. Every local
 * deadline (waiter timeouts, header and body watches, backend time limits,
 * fencectl's waits) is measured by it; lease expiry never is (that is Redis's
 * clock, inside the scripts).
 */
#ifndef FG_CLOCK_H
#define FG_CLOCK_H

#include <stdint.h>

/* Milliseconds of CLOCK_MONOTONIC: only differences between two calls mean anything. */
int64_t clock_mono_ms(void);

#endif
