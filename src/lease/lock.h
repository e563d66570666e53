/*
 * lock.h - mutex locks on Redis: one call per state transition, each one Lua
 * script (lua/lock_*.lua). This module builds the keys and arguments and reads
 * the scripts' answers; it knows nothing of HTTP or of waiting connections.
 */
#ifndef FG_LOCK_H
#define FG_LOCK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lease/lease_request.h"
#include "lease/token.h"
#include "util/error.h"

enum lock_outcome {
    LOCK_GRANTED,    /* the lease holds the lock */
    LOCK_QUEUED,     /* the lease waits in the queue */
    LOCK_BUSY,       /* held, and the caller would not wait */
    LOCK_FULL,       /* the queue is at its cap */
    LOCK_ENDED,      /* this request_id's lease is over */
    LOCK_RELEASED,   /* released (again, if result.again) */
    LOCK_CANCELED,   /* the waiter left the queue */
    LOCK_SUPERSEDED, /* a retry of the same request owns the lease now */
    LOCK_GONE,       /* nothing to cancel */
    LOCK_LOST,       /* the lease no longer holds the lock */
    LOCK_MAX_HOLD,   /* a renewal would pass max_hold_ms */
    LOCK_RENEWED,    /* the lease was extended */
};

enum lock_cancel_mode {
    LOCK_CANCEL_TAKE,   /* deadline: keep a grant that arrived meanwhile */
    LOCK_CANCEL_DROP,   /* client gone: leave the queue or free the grant */
    LOCK_CANCEL_ORPHAN, /* no waiter here: free the grant if still unclaimed */
};

struct lock_result {
    enum lock_outcome outcome;
    char lease_id[LEASE_ID_LEN + 1]; /* the lease the answer is about */
    int64_t fence;                   /* granted or renewed: the lease's fence */
    int64_t ttl_ms;                  /* granted or renewed: lease length */
    int64_t expires_at_ms;           /* granted or renewed: Redis time of expiry */
    int64_t hold_until_ms;           /* max_hold: when the hold cap ends */
    long long position;              /* queued: place in the queue, 0 = next */
    long long holder_pttl_ms;        /* queued: holder's remaining lease, < 0 if none */
    long long waiting;               /* busy, full, canceled: queue length */
    bool again;                      /* released: this lease had been released before */
    int64_t held_ms;                 /* released: how long the lease held the lock, < 0 unknown */
};

/*
 * One acquire attempt on lock name for lease_id (a fresh id, or the id of a
 * queued attempt being repeated). wait: join the queue if not free. attach
 * identifies the connection asking. Retries on a lost fence sequence after
 * restoring it from Postgres.
 */
int lock_acquire(const char *name, const struct acquire_params *p, const char *lease_id, bool wait,
                 const char *attach, struct lock_result *res, struct fg_error *err) FG_WUR;

/* Gives up a queued or granted lease (see enum lock_cancel_mode). */
int lock_cancel(const char *name, const char *lease_id, const char *attach,
                enum lock_cancel_mode mode, struct lock_result *res, struct fg_error *err) FG_WUR;

/* Releases the lease and hands the lock to the next live waiter. */
int lock_release(const char *name, const char *lease_id, struct lock_result *res,
                 struct fg_error *err) FG_WUR;

/* Extends the lease by ttl_ms (0: its own ttl), within max_hold_ms. */
int lock_renew(const char *name, const char *lease_id, long long ttl_ms, struct lock_result *res,
               struct fg_error *err) FG_WUR;

/* The public status of lock name as a new JSON object (API.md's fields). */
int lock_status(const char *name, json_t **out, struct fg_error *err) FG_WUR;

#endif
