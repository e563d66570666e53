/* SPDX-License-Identifier: Apache-2.0 */
/*
 * join.c - joins a thread by a deadline (join.h), through glibc's
 * pthread_clockjoin_np on the monotonic clock.
 */
#include "util/join.h"

#include "util/clock.h"

bool join_by(pthread_t thread, int64_t until_ms)
{
    if (until_ms == INT64_MAX)
        return pthread_join(thread, NULL) == 0;
    struct timespec until = clock_mono_at(until_ms);
    return pthread_clockjoin_np(thread, NULL, CLOCK_MONOTONIC, &until) == 0;
}
