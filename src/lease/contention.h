/* SPDX-License-Identifier: Apache-2.0 */
/*
 * contention.h - the process's hint of which lock and semaphore names were
 * found contended lately, and how. An acquire or release tries the lean
 * first-try script (lease_first_try) unless the hint says the name was
 * contended within CONTENTION_HINT_MS; then it runs a script for what the hint
 * says at once, saving the call that would only have answered "contended": a
 * semaphore found in use, the lean scripts beside other holders
 * (lua/sem_acquire_more.lua, lua/sem_release_more.lua); one with a queue, the
 * lean hand-over of a release (lua/sem_release_handover.lua), and there and on
 * a lock seen either way, the lean queue join for an acquire that waits
 * (lua/sem_acquire_queue.lua, lua/lock_acquire_queue.lua); else the full
 * script.
 * The hint only chooses which script runs first: each decides from Redis
 * state, so a wrong hint (a collision, a name that has gone quiet, another
 * gateway's traffic) costs a call or two at most and never changes an outcome.
 */
#ifndef FG_CONTENTION_H
#define FG_CONTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/lease_kind.h"

#define CONTENTION_HINT_MS 1000 /* how long a name counts as contended after a sign of it */
#define CONTENTION_SLOTS   1024 /* names remembered at once (a power of two) */

/* How a name was last seen contended. */
enum contention {
    CONTENTION_NONE,   /* not within CONTENTION_HINT_MS */
    CONTENTION_IN_USE, /* a first try found it taken or in use */
    CONTENTION_QUEUE,  /* a waiter queued, a release handed over, or a lean
                        * script of a name in use answered "contended" */
};

/* What kind's name was last seen as, if less than CONTENTION_HINT_MS ago;
 * else CONTENTION_NONE. Reads the clock only when the name has a hint.
 * Thread-safe. */
enum contention contention_hint(enum lease_kind kind, const char *name);

/* Notes that kind's name was seen contended now, as seen (not
 * CONTENTION_NONE). Thread-safe, allocation-free. */
void contention_seen(enum lease_kind kind, const char *name, enum contention seen);

/* Replaces the monotonic millisecond clock (clock_mono_ms) the hint reads. */
void contention_set_clock(int64_t (*clock_ms)(void));

#endif
