/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.c - reads CLOCK_MONOTONIC for clock.h, and CLOCK_REALTIME for the
 * reckoning of Redis's clock only.
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

struct timespec clock_mono_at(int64_t until_ms)
{
    return (struct timespec){.tv_sec = (time_t)(until_ms / 1000),
                             .tv_nsec = (long)(until_ms % 1000) * 1000000L};
}

void clock_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
