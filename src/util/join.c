/* SPDX-License-Identifier: Apache-2.0 */
/*
 * join.c - joins a thread by a deadline (join.h), through glibc's
 * pthread_timedjoin_np, which measures it by the wall clock.
 */
#include "util/join.h"

#include "util/clock.h"

bool join_by(pthread_t thread, int64_t until_ms)
{
    if (until_ms == INT64_MAX)
        return pthread_join(thread, NULL) == 0;
    int64_t left = until_ms - clock_mono_ms();
    struct timespec until = clock_wall_deadline(left > 0 ? left : 0);
    return pthread_timedjoin_np(thread, NULL, &until) == 0;
}
