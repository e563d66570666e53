/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_wait.h - the acquire of a lock or a semaphore, up to its answer: the
 * first attempt, and for one that may wait its waiter, parked between
 * attempts and woken by a grant handed over in-process, the doorbell, a
 * timer, a hang-up, a retry that supersedes it or a drain (wait_state.h names
 * its states). It answers with lease facts and problems, never HTTP: its
 * handler (http/handlers_lease.c) signs the token and writes the reply, and
 * parks the request when told to.
 *
 * Grants that a script hands to other waiters of this gateway are put into
 * their waits here (lease_hand_over), by the script runner (lease_result.c)
 * of whichever request ran the script.
 */
#ifndef FG_LEASE_WAIT_H
#define FG_LEASE_WAIT_H

#include "lease/lease_ops.h"
#include "lease/park.h"
#include "lease/waiter.h"
#include "util/error.h"

struct lease_wait;

/* How an acquire ended. */
struct lease_wait_end {
    struct lease_result res; /* the acquire's answer, when err is unset */
    struct fg_error err;     /* a problem to answer instead (err.code != FG_OK); a 403
                                forbidden only for the lease's scope, which its key lost */
    const char *busy_detail; /* set: 409 lock_busy with this detail and res.waiting */
};

/*
 * The first attempt to acquire name (kind borrowed for the server's life,
 * name borrowed until lease_wait_free). An attempt that may wait (p->wait_ms
 * > 0, the gateway not draining) queues at once when it is not granted, and
 * its wait registers the waiter of client (its request resumed through the
 * registry's callback), then parks. *wait is that
 * wait (owned by the caller, who frees it with lease_wait_free when the
 * request ends; it keeps copies of p's strings), or NULL if none began.
 * Returns PARK_STEP_PARK, or PARK_STEP_ANSWER with *end filled.
 */
enum park_step lease_wait_begin(const struct lease_ops *kind, const char *name,
                                const struct acquire_params *p, const struct waiter_client *client,
                                struct lease_wait **wait, struct lease_wait_end *end);

/* Runs wait again once its request was resumed: it reads why it woke and
 * tries again, until it is answered (*end filled) or parks. */
enum park_step lease_wait_run(struct lease_wait *wait, struct lease_wait_end *end);

/* Ends the life of a wait (NULL: no-op). A wait whose request ends unanswered
 * (its client went while it was parked) first leaves its queue, so no ghost
 * waiter holds anything up. */
void lease_wait_free(struct lease_wait *wait);

/* After a call about lease_id on name (the attempt attach's) that failed with err: one that got no
 * reply (503: its deadline passed, its connection broke), which Redis may run all the same or
 * not, has the janitor drop the lease once Redis answers (doorbell_add_unanswered), so it is not
 * left granted or queued for nobody until its TTL. The lease of a request_id ("" none) is left to
 * its retry, which finds it (granted, queued, or given up by a call that did reach Redis). */
void lease_drop_if_unanswered(const struct lease_ops *kind, const char *name, const char *lease_id,
                              const char *attach, const char *request_id,
                              const struct fg_error *err);

/* lease_drop_if_unanswered after the first call of an acquire of lease_id failed with err, but
 * for a call Redis did not run (fg_error.not_run: a cluster down, a server loading, read-only or
 * out of memory; a call never sent, its connection not made): that made no lease, and leaves
 * none to drop. */
void lease_acquire_failed(const struct lease_ops *kind, const char *name, const char *lease_id,
                          const char *attach, const char *request_id, const struct fg_error *err);

/* Drops lease_id on name as the attempt attach's, whatever its state (queued, granted, claimed;
 * a retry that took it over keeps it), *res the cancel's answer. A cancel that got no reply (503)
 * is left to the janitor, which drops the lease once Redis answers (doorbell_add_unanswered):
 * Redis may have run it or not; the lease of a request_id ("" none) is left to its retry. */
int lease_drop(const struct lease_ops *kind, const char *name, const char *lease_id,
               const char *attach, const char *request_id, struct lease_result *res,
               struct fg_error *err) FG_WUR;

/*
 * A grant of name (lease lease_id, fence) whose answer could not reach its client (the client
 * was gone before the answer was queued, or sending it failed): given back at once, so the next
 * waiter gets it without waiting for its TTL. It is given back as the attempt attach's (attach
 * "": the acquire did not wait), so a retry that took it over keeps it. One log line and the
 * metric fencegate_grants_given_back_total per grant given back. keep: the acquire carried a
 * request_id, and its grant is kept: its retry finds it, with the same token and fence.
 */
void lease_give_back_unanswered(const struct lease_ops *kind, const char *name,
                                const char *lease_id, const char *attach, int64_t fence, bool keep);

/* lease_give_back_unanswered for the grant wait was answered (lease_wait_run). */
void lease_wait_give_back(struct lease_wait *wait);

/* When a waiter that the acquire answer res found queued should look again, now being monotonic ms
 * (the park engine's clock): the one reckoning of every wait in a lease's queue, a single lock's or
 * semaphore's and a lock set's alike (which may look sooner still, to renew the locks it holds). */
int64_t lease_wait_next_check(const struct lease_result *res, int64_t now);

/* Where a wait waits: the queue of a lock or semaphore and its place there. */
struct lease_queue {
    const struct lease_ops *kind; /* lock or semaphore */
    const char *name;             /* its name */
    struct lease_leaver leaver;   /* the wait's lease and attach id */
};

/* The queue the wait of park p waits in. */
typedef struct lease_queue (*lease_queue_of_fn)(struct park *p);

/* The leave-many hook of waits in lock or semaphore queues (park.h): takes the
 * waits ps[0..n) out of their queues, one script call per lock or semaphore
 * and LEASE_LEAVE_MAX of them, and sets left[i] for each that left (janitor
 * thread). */
void lease_leave_queues(struct park *const *ps, size_t n, lease_queue_of_fn queue_of, bool *left);

/* Puts each grant that the script answering res handed to a waiter of this
 * gateway (a lease of name) into its wait and wakes it; a grant without its
 * waiter becomes an orphan, given back later. Only the script runner
 * (lease_script_run) calls it. */
void lease_hand_over(enum lease_kind kind, const char *name, const struct lease_result *res);

/* Gives back a grant whose waiter is gone (doorbell orphan callback), if it is still unclaimed and
 * held by the attempt attach ("": whichever); drop: the lease of an acquire answered without a
 * reply, granted or queued (doorbell_add_unanswered). */
int lease_give_back_orphan(const struct lease_ops *kind, const char *name, const char *lease_id,
                           const char *attach, bool drop, struct fg_error *err) FG_WUR;

#endif
