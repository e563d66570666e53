/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - the process's one monotonic clock, in milliseconds. Every local
 * deadline (waiter timeouts, header and body watches, backend time limits,
 * fencectl's waits) is measured by it; lease expiry never is (that is Redis's
 * clock, inside the scripts). The wall clock is read for two things only: the
 * deadline of a timed wait on a condition variable or a semaphore, which POSIX
 * measures by it (clock_wall_deadline), and the reckoning of Redis's clock from the times
 * scripts answer (clock_wall_ms, lease/redis_clock.c).
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

/* t plus ms (>= 0) milliseconds, with tv_nsec below a second. Pure. */
struct timespec clock_timespec_add_ms(struct timespec t, long long ms);

/* CLOCK_REALTIME ms milliseconds from now: the deadline pthread_cond_timedwait
 * and sem_timedwait take. */
struct timespec clock_wall_deadline(long long ms);

/* Sleeps the calling thread for ms milliseconds (a signal may cut it short). */
void clock_sleep_ms(long ms);

#endif
