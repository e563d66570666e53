/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced.h - the vocabulary shared by the two fenced stores (fenced_pg for
 * Postgres rows, fenced_redis for Redis keys): who writes, what came of a
 * write (its whole result: fenced_result.h), and the checks of a writer's
 * headers that do not depend on the store. Pure: no I/O.
 */
#ifndef FG_FENCED_H
#define FG_FENCED_H

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
    FENCED_APPLIED, /* the write and the new highest fence are stored */
    FENCED_STALE,   /* refused: a higher fence is stored; nothing changed */
    FENCED_REVOKED, /* refused: the token's lease was revoked; nothing changed */
    FENCED_EXPIRED  /* refused before writing: the lease a live_lease guard needs is over */
};

/* The reason a refusal is audited and answered with ("stale_fence", "revoked",
 * "lease_expired"), or NULL for FENCED_APPLIED. */
const char *fenced_outcome_reason(enum fenced_outcome outcome);

/* Checks a Fence-Owner header value (NULL = absent): 1..OWNER_NAME_MAX_LEN
 * printable bytes, else FG_ERR_INVALID_FIELD naming the header. */
int fenced_owner_check(const char *owner, struct fg_error *err) FG_WUR;

#endif
