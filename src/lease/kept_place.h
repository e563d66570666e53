/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kept_place.h - places in a queue kept for a retry. An acquire with a
 * request_id whose client hangs up while it waits does not leave its queue:
 * its place stays in Redis, for limits.kept_place_ms and no longer than its
 * wait_ms would have lasted, so that a retry of the request_id (through any
 * gateway) takes it over as it would take over a waiting connection's. A
 * grant that reaches a kept place first finds no waiter and is given back
 * after the doorbell's grace (lease/doorbell.h), the request_id forgotten:
 * nobody waits at its turn, and the waiters behind lose only that grace. A
 * place nobody came back for leaves its queue when its time is up.
 *
 * This module owns the table of kept places of this process; the janitor
 * reaps them, and the slots of their queues keep the gateway's liveness mark
 * on a Redis Cluster as a parked waiter's do.
 */
#ifndef FG_KEPT_PLACE_H
#define FG_KEPT_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lease_ops;

/*
 * Keeps the place of lease_id, queued on kind's name by the attempt attach
 * for the API key key_id (NULL: auth off), until until_ms (monotonic) at the
 * latest. Returns false if this process keeps limits.max_waiters places
 * already, or limits.max_waiters_per_key of that key's (the caller leaves the
 * queue).
 */
bool kept_place_add(const struct lease_ops *kind, const char *name, const char *lease_id,
                    const char *attach, const char *key_id, int slot, int64_t until_ms);

/* Forgets the kept place of lease_id, if any: a retry waits in it now. */
void kept_place_forget(const char *lease_id);

/* Janitor: takes the places whose time is up out of their queues (unless a
 * retry took them over). One that Redis does not answer is tried again
 * GIVE_BACK_RETRY_MS later, and so are the rest due, so an outage costs a round
 * one deadline. Returns when the next one is due (INT64_MAX: none kept). */
int64_t kept_place_reap(int64_t now_ms);

/* Sets seen[s] to 1 for the slot s (< nslots) of every kept place's queue;
 * returns how many entries it set that were 0. */
size_t kept_place_slots(unsigned char *seen, size_t nslots);

#endif
