/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_writer.h - who writes through either fenced store (fenced_pg for
 * Postgres rows, fenced_redis for Redis keys): the verified token's claims,
 * the request's origin, and how to ask whether the token's lease still holds.
 * Pure: no I/O.
 */
#ifndef FG_FENCED_WRITER_H
#define FG_FENCED_WRITER_H

#include "auth/token.h"
#include "util/error.h"

/* Whether the lease a token was issued for still holds (require_live_lease). */
enum fenced_lease {
    FENCED_LEASE_HELD,    /* it holds */
    FENCED_LEASE_REVOKED, /* it was revoked: the fence rule's revocation refuses its writes */
    FENCED_LEASE_ENDED    /* released or expired: refused with reason lease_expired */
};

/* Asks Redis whether the lease of claims still holds (lease/live.h,
 * lease_live_look): FENCED_LEASE_ENDED may also be a revoked lease whose end
 * Redis no longer remembers, which the revocations in Postgres tell; the
 * caller looks there (a Postgres write on the connection it holds). */
typedef int (*fenced_lease_check)(const struct token_claims *claims, enum fenced_lease *lease,
                                  struct fg_error *err);

/* Who writes: the verified token's claims (its fence, and the lock or semaphore it was issued
 * for) and the request's origin (borrowed). */
struct fenced_writer {
    const char *owner;                 /* Fence-Owner header, or NULL */
    const char *client_addr;           /* the client's address */
    const char *principal;             /* id of the writer's API key, or NULL (auth off) */
    const char *trace_id;              /* trace id of the request's traceparent, or NULL */
    const struct token_claims *claims; /* the verified token's claims */
    fenced_lease_check lease_check;    /* asks whether its lease holds, for a write to a
                                          resource that requires a live lease */
};

#endif
