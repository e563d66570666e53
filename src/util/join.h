/* SPDX-License-Identifier: Apache-2.0 */
/*
 * join.h - joining a thread by a deadline, for a shutdown that must not wait
 * for a stalled backend: a thread still in a backend call by then is left
 * behind, never joined, and the process exits with it.
 */
#ifndef FG_JOIN_H
#define FG_JOIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Joins thread, waiting until until_ms (clock_mono_ms; INT64_MAX: however
 * long it takes) at most; false if it still runs then (it stays unjoined). */
bool join_by(pthread_t thread, int64_t until_ms);

#endif
