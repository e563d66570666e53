/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.c - reads CLOCK_MONOTONIC for clock.h.
 */
#include "util/clock.h"

#include <time.h>

int64_t clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
