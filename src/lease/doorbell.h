/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doorbell.h - the threads that follow this gateway's doorbell channel
 * (CHANNEL_BELL_PREFIX <instance id>, store/backend/redis_keys.h) and the shared channel of
 * ended leases (CHANNEL_ENDED). The scripts publish "<kind>|<lease>|<name>" when they grant a
 * lease to a waiter; the doorbell wakes that waiter at once. They publish
 * "w|<lease>|<name>" (DOORBELL_WAKE) when a retry of a request_id took over or gave up the place
 * of an attempt waiting here: that only wakes the attempt, which looks again; it grants nothing, so
 * with no such attempt here (a place kept for a retry) it is dropped, never handed back as an
 * orphan (the lease is the retry's now). They publish
 * "<kind>|<fence>|<reason>|<name>" when a lease is released or revoked; the
 * doorbell wakes the watchers of that lease. A grant
 * for a waiter this process no longer has (its client left a moment ago) is
 * handed back after a short grace, so it never sits unclaimed until expiry.
 */
#ifndef FG_DOORBELL_H
#define FG_DOORBELL_H

#include <stdbool.h>

#include "lease/lease_result.h"
#include "util/error.h"

/* The kind of a ring that only wakes a waiter (no grant, never an orphan). */
#define DOORBELL_WAKE 'w'

/* Gives back an unclaimed grant of kind ('l', 's') for lease on name, held by the attempt attach
 * ("": whichever); drop: the lease whatever its state, granted (claimed or not) or queued
 * (doorbell_add_unanswered). */
typedef int (*doorbell_orphan_fn)(const char *name, const char *lease_id, const char *attach,
                                  bool drop, struct fg_error *err);

/* Registers how orphaned grants of a kind are given back. */
void doorbell_on_orphan(char kind, doorbell_orphan_fn fn);

/* Starts the doorbell thread. */
int doorbell_start(struct fg_error *err) FG_WUR;

/* Remembers a grant of kind for lease on name whose waiter was not found when
 * it was handed over in-process; it is given back after the grace period
 * unless its waiter turns up (a retry being re-keyed). attach: the attempt
 * it may be granted to, which alone it is given back from ("": whichever);
 * grant: the grant as the script answered it (copied), handed to the waiter
 * that turns up, or NULL: that waiter looks itself. */
void doorbell_add_orphan(char kind, const char *lease_id, const char *name, const char *attach,
                         const struct lease_grant *grant);

/* Remembers the lease of kind on name that an acquire asked for and got no answer about (its
 * call gave up at its deadline or lost its connection): Redis may grant or queue it all the same.
 * It is given up after the grace period (drop, as the attempt attach's), by the janitor with a
 * deadline of its own, so the acquire's 503 does not wait for it. */
void doorbell_add_unanswered(char kind, const char *lease_id, const char *name, const char *attach);

/* Takes back the orphaned grants of lease_id, if any: its waiter registered
 * just after the grant (it queued before registering). Returns true if there
 * was one: a grant kept with it is delivered to the waiter, as an in-process
 * hand-over would have been; else the waiter looks again at once. */
bool doorbell_adopt(const char *lease_id);

/* Janitor: gives back orphaned grants older than the grace period. One that
 * Redis does not answer is tried again GIVE_BACK_RETRY_MS later, and so are
 * the rest due, so an outage costs a round one deadline. Returns when the next
 * one is due (INT64_MAX: none left). */
int64_t doorbell_reap_orphans(int64_t now_ms);

/* Asks the doorbell's threads to end, without waiting for them. */
void doorbell_stop_ask(void);

/* Stops the doorbell's threads (doorbell_stop_ask) and joins each by until_ms
 * (clock_mono_ms); false if one still waits for Redis then, left behind. */
bool doorbell_stop(int64_t until_ms);

#endif
