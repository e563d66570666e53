/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fence_slots.h - which slots of a Redis Cluster have a fence sequence (the
 * slots in use), as the fence headroom reads them at every scrape of /metrics:
 * a full scan of the 16,384 slots (slot_scan) at most once a
 * FENCE_SLOTS_RESCAN_MS, and in between the slots it found and those whose
 * sequence this gateway raised since. A slot that another gateway starts
 * using is found by the next scan; until a scan found a slot in use, every
 * call scans. Must not: read or change a sequence.
 */
#ifndef FG_FENCE_SLOTS_H
#define FG_FENCE_SLOTS_H

#include <stdbool.h>

#include "store/backend/key_slot.h"
#include "util/error.h"

/* How old the last full scan may be before the next call scans again. */
#define FENCE_SLOTS_RESCAN_MS 60000

/* Sets in_use[s] (CLUSTER_SLOTS entries) for every slot known in use,
 * scanning first where the last scan is older than FENCE_SLOTS_RESCAN_MS or
 * found none. 0, or -1 with err when the scan failed (what was known stays). */
int fence_slots_in_use(bool in_use[CLUSTER_SLOTS], struct fg_error *err) FG_WUR;

/* Notes slot in use: this gateway raised its sequence. */
void fence_slots_add(unsigned slot);

#endif
