/*
 * semaphore.h - counting semaphores on Redis: up to `limit` holders, each with
 * its own lease and fence, waiters served strictly in arrival order. One call
 * per state transition, each one Lua script (lua/sem_*.lua). This module builds
 * the keys and arguments and reads the scripts' answers; it knows nothing of
 * HTTP or of waiting connections.
 */
#ifndef FG_SEMAPHORE_H
#define FG_SEMAPHORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lease/lease_request.h"
#include "lease/token.h"
#include "util/error.h"

enum sem_outcome {
    SEM_GRANTED,    /* the lease holds a slot */
    SEM_QUEUED,     /* the lease waits in the queue */
    SEM_BUSY,       /* no free slot, and the caller would not wait */
    SEM_FULL,       /* the queue is at its cap */
    SEM_MISMATCH,   /* another limit is in force */
    SEM_ENDED,      /* this request_id's lease is over */
    SEM_RELEASED,   /* released (again, if result.again) */
    SEM_CANCELED,   /* the waiter left the queue */
    SEM_SUPERSEDED, /* a retry of the same request owns the lease now */
    SEM_GONE,       /* nothing to cancel */
    SEM_LOST,       /* the lease no longer holds a slot */
    SEM_MAX_HOLD,   /* a renewal would pass max_hold_ms */
    SEM_RENEWED,    /* the lease was extended */
};

enum sem_cancel_mode {
    SEM_CANCEL_TAKE,   /* deadline: keep a grant that arrived meanwhile */
    SEM_CANCEL_DROP,   /* client gone: leave the queue or free the grant */
    SEM_CANCEL_ORPHAN, /* no waiter here: free the grant if still unclaimed */
};

#define SEM_MAX_HANDOFF 16 /* in-process grants one script may answer (lua MAX_HANDOFF) */

/* A slot granted, by whichever script ran, to another waiter of this gateway:
 * the waiter is woken in-process with it (no doorbell, no claim call). */
struct sem_grant {
    char lease_id[LEASE_ID_LEN + 1]; /* the waiter's lease */
    int64_t fence;                   /* its fence */
    int64_t ttl_ms;                  /* its lease length */
    int64_t expires_at_ms;           /* Redis time of expiry */
};

struct sem_result {
    enum sem_outcome outcome;
    char lease_id[LEASE_ID_LEN + 1]; /* the lease the answer is about */
    int64_t fence;                   /* granted or renewed: the lease's fence */
    int64_t ttl_ms;                  /* granted or renewed: lease length */
    int64_t expires_at_ms;           /* granted or renewed: Redis time of expiry */
    int64_t hold_until_ms;           /* max_hold: when the hold cap ends */
    long long position;              /* queued: place in the queue, 0 = next */
    long long holder_pttl_ms;        /* queued: ms until the first holder lease ends, < 0 if none */
    long long waiting;               /* busy, full, canceled: queue length */
    long long limit;                 /* mismatch: the limit in force */
    bool again;                      /* released: this lease had been released before */
    struct sem_grant handoff[SEM_MAX_HANDOFF]; /* grants to other waiters of this gateway */
    size_t nhandoff;                           /* entries in handoff */
};

/*
 * One acquire attempt on semaphore name for lease_id (a fresh id, or the id of
 * a queued attempt being repeated), with p->limit as the caller's limit. wait:
 * join the queue if no slot is free. attach identifies the connection asking.
 * Retries once on a lost fence sequence after restoring it from Postgres.
 */
int sem_acquire(const char *name, const struct acquire_params *p, const char *lease_id, bool wait,
                const char *attach, struct sem_result *res, struct fg_error *err) FG_WUR;

/* Gives up a queued or granted lease (see enum sem_cancel_mode). */
int sem_cancel(const char *name, const char *lease_id, const char *attach,
               enum sem_cancel_mode mode, struct sem_result *res, struct fg_error *err) FG_WUR;

/* Releases the lease's slot and hands it to the oldest live waiter. */
int sem_release(const char *name, const char *lease_id, struct sem_result *res,
                struct fg_error *err) FG_WUR;

/* Extends the lease by ttl_ms (0: its own ttl), within max_hold_ms. */
int sem_renew(const char *name, const char *lease_id, long long ttl_ms, struct sem_result *res,
              struct fg_error *err) FG_WUR;

/* The public status of semaphore name as a new JSON object (API.md's fields). */
int sem_status(const char *name, json_t **out, struct fg_error *err) FG_WUR;

#endif
