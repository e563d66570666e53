/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.h - whether the lease a token was issued for still holds, for writes to
 * resources that require a live lease (require_live_lease). One read-only
 * script call (the watch scripts), by the token's kind, name and fence; for a
 * lease that ended, one look at the revocations in Postgres.
 */
#ifndef FG_LIVE_H
#define FG_LIVE_H

#include "auth/token.h"
#include "store/fenced/fenced_writer.h"
#include "util/error.h"

/* Sets *lease to whether the lease of claims (a verified token) holds, was
 * revoked, or ended without a revoke: released or expired. A revoked lease's
 * write goes on to the write itself, which refuses a revoked fence and audits
 * it with reason "revoked", as on a resource without the option. Takes a
 * Postgres connection of the pool for a lease that ended. */
int lease_live_check(const struct token_claims *claims, enum fenced_lease *lease,
                     struct fg_error *err) FG_WUR;

/* lease_live_check asking Redis alone (fenced_lease_check): a lease that
 * ended is FENCED_LEASE_ENDED unless Redis still remembers its revoke, for a
 * caller that holds a Postgres connection and looks the revocation up on it. */
int lease_live_look(const struct token_claims *claims, enum fenced_lease *lease,
                    struct fg_error *err) FG_WUR;

#endif
