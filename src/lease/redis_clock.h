/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_clock.h - Redis's clock as this gateway reckons it from the times
 * scripts answer, for figures that are only reported, never decided on: a
 * first try's release answers the grant's time alone, and the hold time in
 * the metrics is reckoned here, so that the release asks Redis no time. On a
 * Redis Cluster the clock is the primary's that answered last (the primaries'
 * clocks agree as far as their hosts' do). Lease expiry never comes from here
 * (that is Redis's clock, inside the scripts).
 */
#ifndef FG_REDIS_CLOCK_H
#define FG_REDIS_CLOCK_H

#include <stdint.h>

/* Notes that Redis's clock read redis_ms (ms since the epoch) in an answer
 * that has just come in: a first try's grant, a renewal. Thread-safe. */
void redis_clock_saw(int64_t redis_ms);

/* Milliseconds from redis_ms, a time on Redis's clock, to now on Redis's
 * clock as last reckoned (this host's wall clock until a first reading);
 * 0 for a time not yet past. Thread-safe. */
int64_t redis_clock_since(int64_t redis_ms);

#endif
