/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_clock.c - the reckoning of redis_clock.h: the difference between the
 * last time Redis answered and this host's CLOCK_REALTIME when the answer
 * came, in one atomic word. The answer left Redis a round trip's part
 * earlier, so the reckoning runs behind Redis by less than a round trip; a
 * lost update between threads leaves an equally recent one in place.
 */
#include "lease/redis_clock.h"

#include <stdatomic.h>

#include "util/clock.h"

static _Atomic int64_t offset_ms; /* Redis's clock minus this host's wall clock */

void redis_clock_saw(int64_t redis_ms)
{
    atomic_store_explicit(&offset_ms, redis_ms - clock_wall_ms(), memory_order_relaxed);
}

int64_t redis_clock_since(int64_t redis_ms)
{
    int64_t since =
        clock_wall_ms() + atomic_load_explicit(&offset_ms, memory_order_relaxed) - redis_ms;
    return since > 0 ? since : 0;
}
