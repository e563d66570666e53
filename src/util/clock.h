/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - the process's one monotonic clock, in milliseconds. Every local
 * deadline (waiter timeouts, header and body watches, backend time limits,
 * fencectl's waits) is measured by it; lease expiry never is (that is Redis's
 * clock, inside the scripts). Timed waits on condition variables, semaphores
 * and threads take it too (clock_mono_at, with glibc's clockwait calls), so a
 * wall clock stepped back or forth moves none of them. The wall clock is read
 * for one thing only: the reckoning of Redis's clock from the times scripts
 * answer (clock_wall_ms, lease/redis_clock.c).
 */
#ifndef FG_CLOCK_H
#define FG_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC: only differences between two calls mean anything. */
int64_t clock_mono_ms(void);

/* Microseconds of CLOCK_MONOTONIC, for durations below a millisecond (backend calls). */
int64_t clock_mono_us(void);

/* Milliseconds of CLOCK_REALTIME since the epoch. */
int64_t clock_wall_ms(void);

/* until_ms of clock_mono_ms as a CLOCK_MONOTONIC time: the deadline that
 * pthread_cond_clockwait, sem_clockwait and pthread_clockjoin_np take with
 * CLOCK_MONOTONIC. */
struct timespec clock_mono_at(int64_t until_ms);

/* Sleeps the calling thread for ms milliseconds (a signal may cut it short). */
void clock_sleep_ms(long ms);

#endif
