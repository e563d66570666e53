/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.h - whether the lease a token was issued for still holds, for writes to
 * resources that require a live lease (require_live_lease), asked outside the
 * write: one read-only script call (the watch scripts), by the token's kind,
 * name and fence. The stores look the revocation of a lease that ended up in
 * Postgres themselves, and a Redis write's script looks at its lease itself
 * where its keys are on the written key's node (store/fenced/fenced_redis.c).
 */
#ifndef FG_LIVE_H
#define FG_LIVE_H

#include "auth/token.h"
#include "store/fenced/fenced_writer.h"
#include "util/error.h"

/* Sets *lease to whether the lease of claims (a verified token) holds, was
 * revoked, or ended (fenced_lease_check): a lease that ended is
 * FENCED_LEASE_ENDED unless Redis still remembers its revoke. A revoked
 * lease's write goes on to the write itself, which refuses a revoked fence and
 * audits it with reason "revoked", as on a resource without the option. */
int lease_live_look(const struct token_claims *claims, enum fenced_lease *lease,
                    struct fg_error *err) FG_WUR;

#endif
