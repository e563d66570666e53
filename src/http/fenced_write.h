/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_write.h - what the two fenced-write front ends (handlers_pg.c for
 * /v1/pg, handlers_redis.c for /v1/redis) do alike: from the Fence-Token and
 * Fence-Owner headers to a verified writer, the binding of a token to the
 * resource it writes, and the one answer, log line, metric and audit
 * accounting of an applied or refused write.
 */
#ifndef FG_FENCED_WRITE_H
#define FG_FENCED_WRITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth/token.h"
#include "config.h"
#include "http/server.h"
#include "store/fenced/fenced_result.h"
#include "store/fenced/fenced_writer.h"
#include "util/metrics.h"

/*
 * Reads the headers of a fenced write to backend: verifies the Fence-Token into
 * *claims and checks that its fence was issued, checks Fence-Owner, and fills
 * *who (borrowing from claims and req); names the owner in the request log.
 * A missing token or a bad owner fails with FG_ERR_INVALID_FIELD; a token not
 * issued by this gateway with FG_ERR_INVALID_FENCE_TOKEN, counted as an invalid
 * write of backend.
 */
int fenced_write_writer(struct http_request *req, enum metric_backend backend,
                        struct token_claims *claims, struct fenced_writer *who,
                        struct fg_error *err) FG_WUR;

/* 0 if guard binds nothing or claims are of the lease it names for key (of
 * resource); else -1 (FG_ERR_INVALID_FENCE_TOKEN), counted as an invalid write. */
int fenced_write_bound(enum metric_backend backend, const struct resource_guard *guard,
                       const char *key, const struct token_claims *claims, const char *resource,
                       struct fg_error *err) FG_WUR;

/*
 * Answers the refused write of who, whose result is refused (STALE, REVOKED or
 * EXPIRED, from either store) and whose HTTP method is method ("POST" for a
 * batch): 409 stale_fence naming both fences (and logged as stale_write), or
 * 410 lease_lost with reason "revoked" or "lease_expired". Counts it as a
 * stale write of backend and accounts for its audit record.
 */
void fenced_write_refused(struct http_reply *reply, enum metric_backend backend,
                          const struct fenced_writer *who, const struct fenced_result *refused,
                          const char *method);

/* False when the request asks not to have the written row back: its first
 * return preference, over its Prefer lines in order (http/prefer.h), is
 * return=minimal; its answer is then fenced_write_applied_minimal. */
bool fenced_write_wants_row(const struct http_request *req);

/* Answers an applied write of backend that asked for return=minimal: 204 with
 * Preference-Applied: return=minimal; counted. */
void fenced_write_applied_minimal(struct http_reply *reply, enum metric_backend backend);

/* Answers an applied write of backend with status and {"applied": true,
 * "resource": resource (left out when NULL), "fence": fence, member: after
 * (the result's JSON text, borrowed, written as it is; NULL for null)},
 * written without a jansson tree; counted. */
void fenced_write_applied(struct http_reply *reply, enum metric_backend backend, int status,
                          const char *resource, long long fence, const char *member,
                          const char *after);

#endif
