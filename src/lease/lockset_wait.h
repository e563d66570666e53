/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lockset_wait.h - the acquire of a lock set (POST /v1/locksets/acquire), up
 * to its answer. A set takes its locks one at a time in the global order of
 * lockset.h, each through the ordinary lock transitions (one script per lock,
 * FIFO queue per lock), holding the ones it has while it waits for the next:
 * since every set climbs the same order, no cycle of waits, hence no
 * deadlock, can form. All or none: if the wait ends before the last lock is
 * held, the lock being waited for is given up and every lock taken is
 * released, and the answer names the lock that was not obtained.
 *
 * A set that may wait is a kind of the park engine (park.h): one parked
 * request, registered under the lease id of the lock it waits for, woken by
 * that lock's doorbell or a grant handed over in-process, and taken out of
 * its queue with other hung-up clients by the janitor; it looks again when a
 * single waiter in its place would (lease_wait_next_check), and renews the
 * locks it already holds every third of their TTL. It answers with lease facts and
 * problems; its handler (http/handlers_locksets.c) signs the tokens.
 *
 * A set retried with its request_id finds the leases of the earlier attempt
 * and takes them (lockset.h). An earlier attempt still running in this
 * gateway (its client gone, say) is taken over as the retry begins: from then
 * on it gives nothing back, so that its give-up cannot release the locks the
 * retry now answers, and takes no further lock (it answers 409 conflict); an attempt already giving
 * back finishes first, and the retry is then told its leases ended. An attempt that finds the lease
 * of one of its locks ended (the set was held and answered, then that lock let go) answers so and
 * leaves the locks it found by request id with their holder.
 */
#ifndef FG_LOCKSET_WAIT_H
#define FG_LOCKSET_WAIT_H

#include <stdbool.h>

#include "lease/lease_request.h"
#include "lease/lease_result.h"
#include "lease/lockset.h"
#include "lease/park.h"
#include "util/strmap.h"

struct lockset_wait {
    struct park park;                           /* registered under leases[next] */
    struct acquire_params params;               /* the body's (strings borrowed from it) */
    struct lockset set;                         /* the names, in the global order */
    char rids[LOCKSET_MAX][LOCKSET_RID_MAX];    /* per-lock request ids */
    char leases[LOCKSET_MAX][LEASE_ID_LEN + 1]; /* per-lock lease ids */
    struct lease_grant held[LOCKSET_MAX];       /* grants of locks 0 .. next-1 */
    bool adopted[LOCKSET_MAX];                  /* lock i's lease was found by request id */
    size_t next;                                /* the lock being acquired */
    bool asked_next;                            /* lock next was asked with wait: it may queue */
    char attach[LEASE_ID_LEN + 1];              /* id of this connection's attempt */
    bool waits;                                 /* wait_ms > 0: registered and parks */
    bool waited;             /* it queued for a lock: those taken before may have ended since */
    bool settled;            /* answered or given up: nothing left to release */
    int64_t renew_at;        /* monotonic ms to renew the held locks */
    struct fg_error err;     /* its answer when not granted */
    const char *failed_lock; /* set: err names this lock ("lock"; and "waiting" when known) */
    const char *denied_lock; /* set by the permit hook: the first of the request's names whose
                                scope the key in force lacks (its 403 forbidden) */
    long long waiting;       /* waiters of failed_lock; < 0 not known (410: its lease ended, and no
                                script answer that said so counted its queue) */
    char request[LOCKSET_RID_MAX]; /* "set:R" of its request id R ("": none) */
    struct strmap_node by_request; /* with a request_id: in the table of the sets running here */
    bool taken_over;    /* a retry with its request_id runs in its place: it holds nothing */
    bool lost_to_retry; /* a renewal found a lock taken over by a retry (renew_held) */
    bool giving_back;   /* releasing what it holds: a retry waits until it is done */
};

/*
 * Begins the acquire of ls (calloc'ed by the caller with set, params, rids,
 * leases and attach filled; freed with lockset_wait_free). A set that waits
 * registers for client until wait_ms passes. Returns PARK_STEP_PARK, or the
 * answer: *problem if set, else ls->err when set, else every lock held.
 */
enum park_step lockset_wait_begin(struct lockset_wait *ls, const struct waiter_client *client,
                                  struct fg_error *problem);

/* Runs ls again once its request was resumed (answered: as lockset_wait_begin). */
enum park_step lockset_wait_run(struct lockset_wait *ls, struct fg_error *problem);

/* The answer of ls, every lock held, could not reach its client: each lock is given back at once
 * as this attempt's, or kept for a retry when the set carried a request_id
 * (lease_give_back_unanswered). */
void lockset_wait_give_back(struct lockset_wait *ls);

/* Ends the life of ls: an unanswered set gives up its place and releases what it holds. */
void lockset_wait_free(struct lockset_wait *ls);

#endif
