/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.h - watching a lease (GET /v1/locks/{name}?watch=true&fence=N and the
 * same on semaphores): answered as soon as the lease with fence N no longer
 * holds, with how it ended, or after wait_ms with its time left. A watch is a
 * kind of the park engine (park.h) with no place in any queue: the "fg:ended"
 * doorbell wakes it when the lease is released or revoked, and its own timer
 * at the lease's expiry (Redis publishes nothing then), with poll_ms as the
 * backstop. Only its first look answers a Redis outage (503); later looks
 * that meet one keep it parked until its deadline, whose last look answers.
 * It never changes a lease, and answers with what it saw, never HTTP.
 */
#ifndef FG_WATCH_H
#define FG_WATCH_H

#include "fglimits.h"
#include "lease/lease_ops.h"
#include "lease/park.h"

struct lease_watcher {
    struct park park;             /* registry entry; waiter.watch_* name the watched lease */
    const struct lease_ops *kind; /* lock or semaphore */
    char name[NAME_MAX_LEN + 1];  /* the lock or semaphore */
    long long fence;              /* the watched lease */
    struct lease_watch seen;      /* the answer: what the last look saw */
    bool looked;                  /* a look has seen the lease: outages keep it parked */
};

/*
 * Starts watching the lease with fence on name (kind borrowed for the
 * server's life) for client, for wait_ms. *out (owned by the caller, freed
 * with lease_watcher_free) is NULL if the registry refused it (err set).
 * Returns PARK_STEP_PARK or the answer: *err if set (a 403 forbidden only for
 * the lease's scope, which the key lost while it waited), else (*out)->seen.
 */
enum park_step lease_watcher_begin(const struct lease_ops *kind, const char *name, long long fence,
                                   long long wait_ms, const struct waiter_client *client,
                                   struct lease_watcher **out, struct fg_error *err);

/* Runs w again once its request was resumed (answered: *err if set, else w->seen). */
enum park_step lease_watcher_run(struct lease_watcher *w, struct fg_error *err);

void lease_watcher_free(struct lease_watcher *w);

#endif
