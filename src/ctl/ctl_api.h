/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_api.h - the gateway calls fencectl makes: acquire, renew, release and
 * status of a lock or semaphore, the listings by prefix, and the audit query. Each builds its
 * request from struct ctl_args, sends it through ctl_http, and keeps the answer with its exit
 * status; nothing here prints.
 */
#ifndef FG_CTL_API_H
#define FG_CTL_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "ctl/ctl_args.h"
#include "ctl/ctl_exit.h"
#include "ctl/ctl_wire.h"
#include "util/error.h"

#define CTL_CALL_TIMEOUT_MS 30000 /* a call that does not wait in a queue */

struct ctl_answer {
    struct ctl_response response; /* status 0 when no answer arrived */
    json_t *json;                 /* the parsed body, or NULL (owned) */
    const char *problem;          /* problem code of an error answer, or NULL (in json) */
    enum ctl_exit exit;           /* fencectl's exit status for this answer */
    struct fg_error err;          /* why no answer arrived (status 0), or why a 2xx is not the
                                     gateway's answer */
};

/* Acquires a lease on a->name (a semaphore slot when a->semaphore) for owner.
 * Each call returns 0 on a 2xx answer that is a JSON object with the member
 * every answer of that call carries (a grant's "token", a status's "waiting"),
 * else -1 (a 2xx that is not: exit CTL_EXIT_ERROR); *ans is filled either way
 * and must be freed with ctl_answer_free. */
int ctl_api_acquire(const struct ctl_args *a, const char *owner, struct ctl_answer *ans) FG_WUR;

/* Renews the lease of token (ttl_ms < 0: its own TTL), waiting up to timeout_ms. */
int ctl_api_renew(const struct ctl_args *a, const char *token, long long ttl_ms,
                  long long timeout_ms, struct ctl_answer *ans) FG_WUR;

/* Releases the lease of token, waiting up to timeout_ms. */
int ctl_api_release(const struct ctl_args *a, const char *token, long long timeout_ms,
                    struct ctl_answer *ans) FG_WUR;

/* GET of the lock's or semaphore's status. */
int ctl_api_status(const struct ctl_args *a, struct ctl_answer *ans) FG_WUR;

/* GET /v1/audit/rejections with a's filters. */
int ctl_api_audit(const struct ctl_args *a, struct ctl_answer *ans) FG_WUR;

/* POST .../revoke of a->name: the lock's holder, or (a->semaphore) the holder with a->fence. */
int ctl_api_revoke(const struct ctl_args *a, struct ctl_answer *ans) FG_WUR;

/* GET .../{name}?watch=true&fence=F&wait_ms=W of lock name (semaphore if semaphore). */
int ctl_api_watch(const struct ctl_args *a, const char *name, bool semaphore, long long fence,
                  long long wait_ms, struct ctl_answer *ans) FG_WUR;

/* One page of GET /v1/locks (semaphores: /v1/semaphores) with prefix a->name (NULL:
 * all), at most limit items, after cursor (NULL: the first page). */
int ctl_api_list(const struct ctl_args *a, bool semaphores, const char *cursor, long long limit,
                 struct ctl_answer *ans) FG_WUR;

/* POST /v1/locksets/acquire of a->set_names for owner. */
int ctl_api_lockset_acquire(const struct ctl_args *a, const char *owner,
                            struct ctl_answer *ans) FG_WUR;

/* POST /v1/locksets/renew of the n tokens (ttl_ms < 0: their own TTL), waiting up to timeout_ms. */
int ctl_api_lockset_renew(const struct ctl_args *a, char *const *tokens, size_t n, long long ttl_ms,
                          long long timeout_ms, struct ctl_answer *ans) FG_WUR;

/* POST /v1/locksets/release of the n tokens, waiting up to timeout_ms. */
int ctl_api_lockset_release(const struct ctl_args *a, char *const *tokens, size_t n,
                            long long timeout_ms, struct ctl_answer *ans) FG_WUR;

/* One line on stderr saying why the call failed ("fencectl: lock_busy: ..."). */
void ctl_answer_report(const struct ctl_answer *ans);

void ctl_answer_free(struct ctl_answer *ans);

#endif
