/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_result.h - what a lease script answers, for locks and semaphores alike:
 * the outcome of the transition and the lease facts that come with it. Every
 * lease script returns one flat reply (lua/lib_lease.lua lease_reply);
 * lease_answer.c reads it, and this module runs a script again once after a "nofence" answer
 * has been dealt with by reserving fences (lease/fence.h), or a "norevoked"
 * answer by rebuilding the revoked set (store/fenced/revocations.h).
 */
#ifndef FG_LEASE_RESULT_H
#define FG_LEASE_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/token.h"
#include "fglimits.h"
#include "lease/contention.h"
#include "lease/lease_keys.h"
#include "lease/lease_kind.h"
#include "lease/lease_request.h"
#include "lua_scripts.h"
#include "util/error.h"
#include "util/names.h"

enum lease_outcome {
    LEASE_GRANTED,    /* the lease holds the lock or a slot */
    LEASE_QUEUED,     /* the lease waits in the queue */
    LEASE_BUSY,       /* held (no free slot), and the caller would not wait */
    LEASE_FULL,       /* the queue is at its cap */
    LEASE_MISMATCH,   /* semaphores: another limit is in force */
    LEASE_ENDED,      /* this request_id's lease is over */
    LEASE_RELEASED,   /* released (again, if result.again) */
    LEASE_CANCELED,   /* the waiter left the queue */
    LEASE_SUPERSEDED, /* a retry of the same request owns the lease now */
    LEASE_GONE,       /* nothing to cancel */
    LEASE_LOST,       /* the lease no longer holds */
    LEASE_MAX_HOLD,   /* a renewal would pass max_hold_ms */
    LEASE_RENEWED,    /* the lease was extended */
    LEASE_REVOKED,    /* an operator ended the lease (revoke) */
    LEASE_HELD,       /* watch: the lease still holds */
    LEASE_EXPIRED,    /* watch: the lease ran out */
    LEASE_LEFT,       /* leave: the waiters are out of the queue, or hold (result.left) */
};

#define LEASE_LEAVE_MAX 128 /* waiters one leave script takes */

/* What a watch found of the lease with a given fence. */
struct lease_watch {
    bool held;         /* the lease still holds */
    long long pttl_ms; /* held: ms until its expiry */
    char reason[16];   /* not held: "released", "expired" or "revoked" */
};

/* How an acquire attempt asks (the scripts' ARGV wait): a first attempt names a
 * lease id no call named before, which is not looked up among holders and
 * waiters; an attempt looking again names one that may be queued. */
enum lease_acquire_wait {
    LEASE_ACQUIRE_ONCE,  /* first attempt: busy if not free */
    LEASE_ACQUIRE_QUEUE, /* first attempt: joins the queue if not free */
    LEASE_ACQUIRE_AGAIN, /* looking again: keeps its place in the queue, or joins it */
    LEASE_ACQUIRE_RUNG,  /* looking again as the doorbell rang: claims a grant another gateway
                            made to it (a lean script), else as LEASE_ACQUIRE_AGAIN */
};

enum lease_cancel_mode {
    LEASE_CANCEL_TAKE,   /* deadline: keep a grant that arrived meanwhile */
    LEASE_CANCEL_DROP,   /* client gone: leave the queue or free the grant */
    LEASE_CANCEL_ORPHAN, /* no waiter here: free the grant if still unclaimed */
    LEASE_CANCEL_PLACE,  /* a lock set's retry drops the place of the attempt it saw (its
                            connection named): a waiter only, never a grant (locks only) */
};

/* A grant, made by whichever script ran, to another waiter of this gateway:
 * the waiter is woken in-process with it (no doorbell, no claim call). */
struct lease_grant {
    char lease_id[LEASE_ID_LEN + 1]; /* the waiter's lease */
    int64_t fence;                   /* its fence */
    int64_t ttl_ms;                  /* its lease length */
    int64_t expires_at_ms;           /* Redis time of expiry */
};

struct lease_result {
    enum lease_outcome outcome;
    char lease_id[LEASE_ID_LEN + 1]; /* the lease the answer is about */
    int64_t fence;                   /* granted or renewed: the lease's fence */
    int64_t ttl_ms;                  /* granted or renewed: lease length */
    int64_t expires_at_ms;           /* granted or renewed: Redis time of expiry */
    int64_t hold_until_ms;           /* max_hold, renewed: when the hold cap ends */
    long long position;              /* queued: place in the queue, 0 = next */
    long long holder_pttl_ms;       /* queued: ms until the (first) holder's lease ends, < 0 none */
    long long waiting;              /* busy, full, canceled, a lock cancel's: queue length */
    char attach[LEASE_ID_LEN + 1];  /* queued, to a first try that will not wait: the connection
                                       waiting in its request_id's place, "" none */
    long long limit;                /* mismatch: the limit in force */
    bool again;                     /* released: this lease had been released before */
    int64_t held_ms;                /* released: how long the lease held, < 0 unknown */
    int64_t granted_at_ms;          /* a first try's grant or release: Redis time of the grant */
    int64_t now_ms;                 /* a renewal: Redis time of it */
    long long pttl_ms;              /* held (watch): ms until the lease's expiry */
    char left[LEASE_LEAVE_MAX + 1]; /* left: per waiter '1' out of the queue, '0' holds */
    struct lease_grant handoff[LEASE_MAX_HANDOFF]; /* grants to other waiters of this gateway */
    size_t nhandoff;                               /* entries in handoff */
    bool full_only; /* a lean try's "repeat" (the request_id names a lease) or "nofence" (no
                       fence may be issued): only the full script answers it (lease_first_try) */
};

/* The script argument naming an acquire's wait ("0", "1", "again"). */
const char *lease_acquire_wait_name(enum lease_acquire_wait wait);

/* The script argument naming a cancel mode ("take", "drop", "orphan", "place"). */
const char *lease_cancel_mode_name(enum lease_cancel_mode mode);

/*
 * Runs transition script `script` (lua/lock_*.lua for kind LEASE_KIND_LOCK,
 * sem_*.lua for LEASE_KIND_SEMAPHORE) on the lock or semaphore called name,
 * with its keys (lease/lease_keys.h) and argv (as redis_script takes it), and
 * reads its answer into *res. On "nofence" reserves fences, on "norevoked"
 * rebuilds the revoked set, and runs it once more. The grants the answer hands
 * to other waiters of this gateway are put into their waits before it returns
 * (lease_hand_over). An answer that queued, refused for want of a slot or
 * handed a grant over notes the name in the contention hint. An answer it does
 * not know fails with FG_ERR_INTERNAL. A failure after a "nofence" or
 * "norevoked" (the recovery failed; the second answer was one too: "no fence
 * could be reserved") is marked not run (fg_not_run): a script answers those
 * before it changes anything.
 */
int lease_script_run(enum fg_script script, enum lease_kind kind, const char *name,
                     const char *const *argv, struct lease_result *res,
                     struct fg_error *err) FG_WUR;

/*
 * lease_script_run with the keys k of name, made by the caller, and moved
 * after them unless NULL: the key a first try moves a record to, which a full
 * acquire and release name last (lease_keys_rid_moved, lease_keys_moved_end).
 */
int lease_script_run_moved(enum fg_script script, enum lease_kind kind, const char *name,
                           const struct lease_keys *k, const char *moved, const char *const *argv,
                           struct lease_result *res, struct fg_error *err) FG_WUR;

/*
 * Runs renewal script `script` (lua/lock_renew.lua, sem_renew.lua), which
 * names only the keys it touches (keys, picked from lease/lease_keys.h by the
 * caller) and asks for no retry, with argv, and reads its answer into *res. A
 * renewal answers the time it renewed at and the new ttl, of which this makes
 * res->expires_at_ms. An answer it does not know, or one that asks for a
 * retry, fails with FG_ERR_INTERNAL.
 */
int lease_renewal_run(enum fg_script script, const char *const *keys, const char *const *argv,
                      struct lease_result *res, struct fg_error *err) FG_WUR;

/*
 * How the lease with fence of kind's name, which a renewal found gone, ended,
 * where Redis still tells it (lua/lease_gone.lua): *res is LEASE_RELEASED when
 * it was released, LEASE_MAX_HOLD with hold_until_ms when a renewal that the
 * deadline cut marked it so and the deadline has passed, else LEASE_LOST.
 */
int lease_gone(enum lease_kind kind, const char *name, long long fence, struct lease_result *res,
               struct fg_error *err) FG_WUR;

/*
 * Runs a lean try of a transition (lua/lock_acquire_fast.lua and the like),
 * which names only the keys the case it takes touches (the first nkeys of
 * keys, picked from lease/lease_keys.h by the caller: an acquire without a
 * request_id names none of the request ids', lease_keys_of_request) and
 * either does it or answers "contended" without a write: then *contended is
 * set, kind's name is noted in the contention hint as seen
 * (lease/contention.h; CONTENTION_NONE: such an answer shows nothing the
 * hint does not say already), and the caller runs the next script. An answer
 * "nofence" (the block of fences reserved in Postgres ran out) has the next
 * block reserved (lease/fence.h; a reservation that fails is marked not run,
 * fg_not_run: the try changed nothing) and runs the try once more; a second
 * "nofence", or "repeat" (the request_id names a lease: a retry, which the
 * full script answers), sets *contended and res->full_only alone: no other
 * lean try can answer it, and it says nothing of the name's use, which noted
 * as contention would send the name's calls for CONTENTION_HINT_MS to the
 * scripts of a name in use, a call or two more each. Else its answer is read into
 * *res: a grant's time notes Redis's clock, a release's held_ms is reckoned
 * on it from the grant's (lease/redis_clock.h), the grants it hands to other
 * waiters of this gateway are put into their waits (lease_hand_over), and a
 * caller queued, or a hand-over, keeps the hint at "queue". Callers choose
 * the first script by contention_hint.
 */
int lease_first_try(enum fg_script script, enum lease_kind kind, const char *name, size_t nkeys,
                    const char *const *keys, const char *const *argv, enum contention seen,
                    struct lease_result *res, bool *contended, struct fg_error *err) FG_WUR;

/* The fields from the lease on of the holder record the first try of an
 * acquire writes (lua/lib_holder.lua: a lock's holder, a semaphore's first
 * holder): lease_id, the ttl and max_hold (decimal text) asked, claimed, this
 * gateway's instance, the asking connection attach, the request_id's length
 * and text ("" for none) and the owner. */
#define LEASE_HOLDER_TAIL_MAX                                                                      \
    (3 * LEASE_ID_LEN + 3 * 24 + 10 + LEASE_REQUEST_ID_MAX + OWNER_NAME_MAX_LEN)
void lease_holder_tail(const char *lease_id, const char *ttl, const char *hold, const char *attach,
                       const char *request_id, const char *owner, char out[LEASE_HOLDER_TAIL_MAX]);

/* The arguments a lean queue join (lua/lock_acquire_queue.lua,
 * lua/sem_acquire_queue.lua) takes beside the lease id and, for a semaphore,
 * its limit: the waiter's record up to its "since" value (lua/lib_lease.lua
 * waiter_json), whose owner's and request_id's every byte escapes to at most
 * six; the queue's limit (limits.max_waiters_per_lock); how long the waiter's
 * gateway is marked alive in the lease's slot, "" where the keys are one
 * Redis's (as the full acquire scripts take them); and how long its
 * request_id is kept (acquire_request_id_ttl_ms). */
#define LEASE_WAITER_HEAD_MAX                                                                      \
    (2 * LEASE_ID_LEN + 2 * 24 + 96 + 6 * OWNER_NAME_MAX_LEN + 6 * LEASE_REQUEST_ID_MAX)
struct lease_queue_join {
    char record[LEASE_WAITER_HEAD_MAX];
    char max_waiters[24];
    char mark_ms[24];
    char request_id_ttl_ms[24];
};

/* Fills *q for a waiter on connection attach asking p's ttl and max_hold
 * (decimal text ttl and hold) for p's owner, under p's request_id. */
void lease_queue_join_init(struct lease_queue_join *q, const char *attach, const char *ttl,
                           const char *hold, const struct acquire_params *p);

/* Completes *res of a first try of an acquire that granted lease_id for
 * ttl_ms: its answer names neither (they are the gateway's own), only the
 * fence and the time of the grant, of which the expiry follows. */
void lease_first_grant(struct lease_result *res, const char *lease_id, long long ttl_ms);

#define LEASE_LEAVE_PACKED (LEASE_LEAVE_MAX * 2 * LEASE_ID_LEN + 1)

/* A waiter leaving a queue: its lease and the attach id of its connection. */
struct lease_leaver {
    const char *lease_id; /* LEASE_ID_LEN characters */
    const char *attach;   /* LEASE_ID_LEN characters */
};

/* Packs waiters ws[0..n) (at most LEASE_LEAVE_MAX) into out (LEASE_LEAVE_PACKED
 * bytes), as a leave script's "waiters" argument: each one's lease id and
 * attach id, with no separator. */
void lease_leave_pack(const struct lease_leaver *ws, size_t n, char *out);

/*
 * Runs leave script (SCRIPT_LOCK_LEAVE, SCRIPT_SEM_LEAVE) with keys and argv,
 * whose "waiters" argument lease_leave_pack made of n waiters. Sets left[i]
 * when waiter i is out of the queue; a false one holds its lease now and must
 * be given up on its own.
 */
int lease_leave_run(enum fg_script script, const char *const *keys, const char *const *argv,
                    size_t n, bool *left, struct fg_error *err) FG_WUR;

/* Writes into buf (of size bytes) as decimal text how long a watch script marks
 * its lock or semaphore watched: WATCH_MARK_MIN_MS, or three of the watchers'
 * re-check intervals (poll_ms) when that is longer; "0" (no mark) unless mark. */
void lease_watch_mark_ms(bool mark, char *buf, size_t size);

/* Runs a watch script (SCRIPT_LOCK_WATCH, SCRIPT_SEM_WATCH) and reads its answer. */
int lease_watch_run(enum fg_script script, const char *const *keys, const char *const *argv,
                    struct lease_watch *out, struct fg_error *err) FG_WUR;

#endif
