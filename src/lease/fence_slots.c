/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fence_slots.c - the slots in use as the last full scan found them, and
 * those this gateway raised a sequence in since (fence_slots.h). The scan runs
 * outside the lock: a raise noted meanwhile is kept, and two callers that both
 * found the scan due may both scan.
 */
#include "lease/fence_slots.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "store/backend/redis_keys.h"
#include "store/backend/slot_scan.h"
#include "util/clock.h"

static struct {
    pthread_mutex_t lock;
    bool in_use[CLUSTER_SLOTS]; /* found by the last scan or raised since */
    bool raised[CLUSTER_SLOTS]; /* raised since the running scan began */
    bool any;                   /* some slot is in in_use */
    bool scanned;               /* a scan succeeded, begun at scanned_ms */
    int64_t scanned_ms;
} known = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* True if a scan is due at now_ms; if so, forgets the raises noted so far
 * (the scan finds their sequences). */
static bool scan_begin(int64_t now_ms)
{
    pthread_mutex_lock(&known.lock);
    bool due = !known.scanned || !known.any || now_ms - known.scanned_ms >= FENCE_SLOTS_RESCAN_MS;
    if (due)
        memset(known.raised, 0, sizeof known.raised);
    pthread_mutex_unlock(&known.lock);
    return due;
}

/* Takes found, the answer of a scan begun at began_ms, with the raises noted
 * while it ran (their sequences exist, maybe only since their slot was read). */
static void scan_keep(int64_t began_ms, const bool *found)
{
    pthread_mutex_lock(&known.lock);
    known.any = false;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        known.in_use[s] = found[s] || known.raised[s];
        known.any |= known.in_use[s];
    }
    known.scanned = true;
    known.scanned_ms = began_ms;
    pthread_mutex_unlock(&known.lock);
}

int fence_slots_in_use(bool in_use[CLUSTER_SLOTS], struct fg_error *err)
{
    int64_t now_ms = clock_mono_ms();
    if (scan_begin(now_ms)) {
        if (slot_scan(KEY_FENCE, in_use, err) != 0)
            return -1;
        scan_keep(now_ms, in_use);
    }
    pthread_mutex_lock(&known.lock);
    memcpy(in_use, known.in_use, sizeof known.in_use);
    pthread_mutex_unlock(&known.lock);
    return 0;
}

void fence_slots_add(unsigned slot)
{
    if (slot >= CLUSTER_SLOTS)
        return;
    pthread_mutex_lock(&known.lock);
    known.in_use[slot] = true;
    known.raised[slot] = true;
    known.any = true;
    pthread_mutex_unlock(&known.lock);
}
