/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_ops.h - a kind of lease: locks and semaphores differ only in their
 * transitions (lease/lock.h, lease/semaphore.h), their words and whether
 * acquire carries a limit. A struct lease_ops names those; the two kinds are
 * lease_lock_ops and lease_semaphore_ops (lease_ops.c), and the wait of an
 * acquire (lease_wait.h) and the lease handlers (http/handlers_lease.h) do
 * the rest once for both.
 */
#ifndef FG_LEASE_OPS_H
#define FG_LEASE_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "auth/token.h"
#include "lease/lease_kind.h"
#include "lease/lease_request.h"
#include "lease/lease_result.h"
#include "util/metrics.h"

struct lease_ops {
    enum lease_kind token_kind; /* kind written into and checked in tokens */
    const char *noun;           /* "lock" or "semaphore": reply member, log subject */
    const char *busy_detail;    /* detail of 409 lock_busy */
    bool with_limit;            /* acquire requires "limit" */
    enum metric_kind metric;    /* kind label of the hold-time metric */
    int (*acquire)(const char *name, const struct acquire_params *p, const char *lease_id,
                   enum lease_acquire_wait wait, const char *attach, struct lease_result *res,
                   struct fg_error *err);
    int (*cancel)(const char *name, const char *lease_id, const char *attach,
                  enum lease_cancel_mode mode, struct lease_result *res, struct fg_error *err);
    int (*leave)(const char *name, const struct lease_leaver *ws, size_t n, bool *left,
                 struct fg_error *err);
    int (*release)(const char *name, const char *lease_id, long long fence,
                   struct lease_result *res, struct fg_error *err);
    int (*renew)(const char *name, const char *lease_id, long long ttl_ms, struct lease_result *res,
                 struct fg_error *err);
    /* waiters: how many of the first waiters to list (0: no "waiters" member) */
    int (*status)(const char *name, long long waiters, json_t **out, struct fg_error *err);
    int (*revoke)(const char *name, long long fence, struct lease_result *res,
                  struct fg_error *err);
    /* mark: a watcher waits for the lease's end (lock_watch) */
    int (*watch)(const char *name, long long fence, bool mark, struct lease_watch *out,
                 struct fg_error *err);
    /* locks: the current holder's fence (revoke names no fence); NULL for semaphores */
    int (*holder_fence)(const char *name, long long *fence, struct fg_error *err);
};

/* The two kinds of lease. */
extern const struct lease_ops lease_lock_ops;
extern const struct lease_ops lease_semaphore_ops;

/* Give back a grant of a lock or of a semaphore whose waiter is gone, or (drop) the lease of an
 * acquire answered without a reply (the doorbell's orphan callbacks). */
int lock_give_back_orphan(const char *name, const char *lease_id, const char *attach, bool drop,
                          struct fg_error *err) FG_WUR;
int sem_give_back_orphan(const char *name, const char *lease_id, const char *attach, bool drop,
                         struct fg_error *err) FG_WUR;

#endif
