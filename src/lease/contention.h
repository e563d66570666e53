/* SPDX-License-Identifier: Apache-2.0 */
/*
 * contention.h - the process's hint of which lock and semaphore names were
 * found contended lately. An acquire or release tries the lean first-try
 * script (lease_first_try) unless the hint says the name was contended within
 * CONTENTION_HINT_MS; then it runs the full script at once, saving the call
 * that would only have answered "contended". The hint only chooses which
 * script runs first: both decide from Redis state, so a wrong hint (a
 * collision, a name that has gone quiet, another gateway's traffic) costs one
 * call at most and never changes an outcome.
 */
#ifndef FG_CONTENTION_H
#define FG_CONTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/lease_kind.h"

#define CONTENTION_HINT_MS 1000 /* how long a name counts as contended after a sign of it */
#define CONTENTION_SLOTS   1024 /* names remembered at once (a power of two) */

/* True while kind's name was last seen contended less than CONTENTION_HINT_MS
 * ago. Reads the clock only when the name has a hint. Thread-safe. */
bool contention_hinted(enum lease_kind kind, const char *name);

/* Notes that kind's name was seen contended now: a first try answered
 * "contended", a waiter queued, or a release handed the lease over.
 * Thread-safe, allocation-free. */
void contention_seen(enum lease_kind kind, const char *name);

/* Replaces the monotonic millisecond clock (clock_mono_ms) the hint reads. */
void contention_set_clock(int64_t (*clock_ms)(void));

#endif
