/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced.h - the vocabulary shared by the two fenced stores (fenced_pg for
 * Postgres rows, fenced_redis for Redis keys): who writes, what came of a
 * write, what a refusal names, and the checks of a writer's headers that do
 * not depend on the store. Pure: no I/O.
 */
#ifndef FG_FENCED_H
#define FG_FENCED_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

/* Who writes: the verified token's claims and the request's origin (borrowed). */
struct fenced_writer {
    int64_t fence;           /* the token's fence */
    const char *lock_name;   /* the lock (or semaphore) the token was issued for */
    const char *owner;       /* Fence-Owner header, or NULL */
    const char *client_addr; /* the client's address */
    const char *principal;   /* id of the writer's API key, or NULL (auth off) */
    const char *trace_id;    /* trace id of the request's traceparent, or NULL */
};

/* What came of a fenced write, in either store. */
enum fenced_outcome {
    FENCED_APPLIED,   /* the write and the new highest fence are stored */
    FENCED_STALE,     /* refused: a higher fence is stored; nothing changed */
    FENCED_REVOKED,   /* refused: the token's lease was revoked; nothing changed */
    FENCED_EXPIRED,   /* refused before writing: the lease a live_lease guard needs is over */
    FENCED_WRONGTYPE, /* refused (Redis): the key holds another type than the write needs */
    FENCED_NOFLOOR,   /* not tried (Redis): no write floor (it lost its data); recover first */
    FENCED_MISSING,   /* DELETE (Redis) of a key that does not exist: nothing stored, no fence */
    FENCED_TOO_MANY,  /* PATCH (Redis) refused: the hash would hold more fields than allowed */
    FENCED_OUTCOME_COUNT
};

/* A write that was refused, with everything its answer and its audit record
 * name (borrowed): the same for both stores (fenced_refusal.h). */
struct fenced_refusal {
    enum fenced_outcome outcome; /* FENCED_STALE, FENCED_REVOKED or FENCED_EXPIRED */
    const char *resource;        /* the (first) resource that refused it */
    int64_t current_fence;       /* the highest fence stored for resource (0: none) */
    const json_t *stale;         /* stale batch: every stale resource ({resource,
                                    current_fence}), or NULL */
    const char *method;          /* the write's HTTP method ("POST" for a batch) */
    bool audit_streamed;         /* its audit record went to the Redis stream, whose drain
                                    is woken; otherwise it is in Postgres already */
};

/* The outcome a write script answers as name (its "r": "applied", "stale",
 * "toomany", ...), or FENCED_OUTCOME_COUNT if name is none of them. */
enum fenced_outcome fenced_outcome_named(const char *name);

/* The reason a refusal is audited and answered with ("stale_fence", "revoked",
 * "lease_expired"), or NULL for an outcome that is no refusal of a fence. */
const char *fenced_outcome_reason(enum fenced_outcome outcome);

/* Checks a Fence-Owner header value (NULL = absent): 1..OWNER_NAME_MAX_LEN
 * printable bytes, else FG_ERR_INVALID_FIELD naming the header. */
int fenced_owner_check(const char *owner, struct fg_error *err) FG_WUR;

#endif
