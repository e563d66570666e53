/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_request.h - reading the bodies of acquire, renew and release calls
 * (locks and semaphores), with the configured defaults applied. A body read
 * here has passed its route's member checks (http/strict.h: types, bounds,
 * presence); only the rule between members is checked here. Pure: strings
 * returned are borrowed from the parsed body.
 */
#ifndef FG_LEASE_REQUEST_H
#define FG_LEASE_REQUEST_H

#include <jansson.h>
#include <stdbool.h>

#include "config.h"
#include "fglimits.h"
#include "util/error.h"

struct acquire_params {
    long long ttl_ms;       /* lease length */
    long long wait_ms;      /* how long to queue; 0 = try once */
    long long max_hold_ms;  /* cap on the whole hold, renewals included */
    long long limit;        /* semaphore limit (semaphores only) */
    const char *owner;      /* free-form holder label, "" if none */
    const char *request_id; /* idempotency key, "" if none */
};

struct renew_params {
    const char *token; /* the lease's token */
    long long ttl_ms;  /* new lease length, 0 = the lease's own */
};

/*
 * Reads an acquire body. with_limit: the body is a semaphore's, with its
 * "limit". When ttl_ms exceeds max_hold_ms and max_hold_ms was not given, the
 * cap is raised to ttl_ms; when max_hold_ms was given, that is an invalid
 * field (named as the default's when ttl_ms was not given).
 */
int acquire_params_parse(const json_t *body, const struct config *cfg, bool with_limit,
                         struct acquire_params *out, struct fg_error *err) FG_WUR;

/*
 * How long the gateway remembers an acquire's request_id: until the wait and
 * the lease as granted (ttl_ms) would have ended, plus a grace period for a
 * late retry. Not max_hold_ms: a 100 ms lease that may be held for 7 days must
 * not keep its request_id for 7 days (retries come soon after a lost reply).
 */
long long acquire_request_id_ttl_ms(const struct acquire_params *p);

/* Room for a request id in its API key's namespace (acquire_request_id_scoped). */
#define SCOPED_REQUEST_ID_MAX (REQUEST_ID_MAX_LEN + API_KEY_ID_MAX + 8)

/* The longest request id a lease carries: a lock set's for one of its locks
 * (lease/lockset.h), a scoped request id with the digest of the set's names
 * and the lock's name. */
#define LEASE_REQUEST_ID_MAX (SCOPED_REQUEST_ID_MAX + NAME_MAX_LEN + 32)

/*
 * The request id an acquire is remembered under: with auth on, in the
 * namespace of the API key that sent it (principal, the key's id),
 * "key:<principal>:<request_id>" written into out, so the same id sent by
 * another key is another request and never answers with this key's lease.
 * Returns request_id itself when it is empty or principal is NULL (auth off),
 * else out.
 */
const char *acquire_request_id_scoped(const char *request_id, const char *principal,
                                      char out[SCOPED_REQUEST_ID_MAX]);

/* The token of a renew or release body. */
const char *lease_request_token(const json_t *body);

/* Reads a renew body ({"token", "ttl_ms"?}). */
void renew_params_read(const json_t *body, struct renew_params *out);

#endif
