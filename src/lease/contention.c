/* SPDX-License-Identifier: Apache-2.0 */
/*
 * contention.c - the contention hint (contention.h): a fixed table of
 * CONTENTION_SLOTS atomic words, indexed by a hash of kind and name, each
 * holding a 15-bit tag of the name's hash, a bit that says whether it was seen
 * with a queue, and the 48 low bits of the monotonic millisecond time it was
 * last seen contended. HTTP threads read and write it
 * at once with relaxed atomics: a lost or torn-by-collision update only makes
 * one call run the other script first, and both scripts decide from Redis
 * state, so no outcome ever depends on this table.
 */
#include "lease/contention.h"

#include <stdatomic.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/fnv.h"

#define TIME_BITS 48
#define TIME_MASK ((UINT64_C(1) << TIME_BITS) - 1)
#define QUEUE_BIT (UINT64_C(1) << TIME_BITS)
#define TAG_SHIFT (TIME_BITS + 1)

static _Atomic uint64_t slots[CONTENTION_SLOTS];
static int64_t (*_Atomic now_ms)(void) = clock_mono_ms;

/* FNV-1a over the kind and the name. */
static uint64_t name_hash(enum lease_kind kind, const char *name)
{
    return fnv1a_text(fnv1a_byte(FNV1A_START, (unsigned char)kind), name);
}

/* The tag kept with the time: never 0, so an empty slot matches no name. */
static uint64_t tag_of(uint64_t h)
{
    return (h >> TAG_SHIFT) | 1;
}

enum contention contention_hint(enum lease_kind kind, const char *name)
{
    uint64_t h = name_hash(kind, name);
    uint64_t v = atomic_load_explicit(&slots[h & (CONTENTION_SLOTS - 1)], memory_order_relaxed);
    if (v >> TAG_SHIFT != tag_of(h))
        return CONTENTION_NONE;
    uint64_t now = (uint64_t)atomic_load_explicit(&now_ms, memory_order_relaxed)();
    if (((now - v) & TIME_MASK) >= CONTENTION_HINT_MS)
        return CONTENTION_NONE;
    return v & QUEUE_BIT ? CONTENTION_QUEUE : CONTENTION_IN_USE;
}

void contention_seen(enum lease_kind kind, const char *name, enum contention seen)
{
    FG_ASSERT(seen != CONTENTION_NONE);
    uint64_t h = name_hash(kind, name);
    uint64_t now = (uint64_t)atomic_load_explicit(&now_ms, memory_order_relaxed)();
    uint64_t queue = seen == CONTENTION_QUEUE ? QUEUE_BIT : 0;
    atomic_store_explicit(&slots[h & (CONTENTION_SLOTS - 1)],
                          tag_of(h) << TAG_SHIFT | queue | (now & TIME_MASK), memory_order_relaxed);
}

void contention_set_clock(int64_t (*clock_ms)(void))
{
    atomic_store_explicit(&now_ms, clock_ms, memory_order_relaxed);
}
