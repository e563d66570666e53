/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.c - reads CLOCK_MONOTONIC for clock.h, and CLOCK_REALTIME for the
 * deadlines of timed waits on condition variables and the reckoning of
 * Redis's clock only.
 */
#include "util/clock.h"

int64_t clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec clock_timespec_add_ms(struct timespec t, long long ms)
{
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

struct timespec clock_wall_deadline(long long ms)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return clock_timespec_add_ms(now, ms);
}

void clock_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
