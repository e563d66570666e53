/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_redis.h - fenced writes to application keys in Redis. The fence check
 * and the write are one Lua script (lua/rw_*.lua): a write is applied iff its
 * fence is at least the highest fence stored for the key (in
 * KEY_WRITE_FENCE_PREFIX <key>, store/backend/redis_keys.h);
 * a stale write, or one presenting a revoked fence, changes nothing and is
 * appended, by the same script, to the audit stream that audit_stream.c
 * drains into Postgres. A write refused before its script (its lease is over,
 * require_live_lease) is audited straight into Postgres
 * (fenced_refusal.h), as fenced_pg's are. This module builds the scripts'
 * arguments and runs them (fenced_redis_answer.c reads their answers); which
 * keys may be written is the caller's business.
 */
#ifndef FG_FENCED_REDIS_H
#define FG_FENCED_REDIS_H

#include <jansson.h>
#include <stdint.h>

#include "store/fenced/fenced_result.h"
#include "store/fenced/fenced_writer.h"
#include "util/error.h"

/* One write attempt; every pointer is borrowed for the call. */
struct redis_write {
    const struct fenced_writer *who; /* the verified writer */
    const char *key;                 /* the application key */
    const char *resource;            /* its resource identity, "redis:<key>" */
    const char *method;              /* "PUT", "PATCH" or "DELETE" */
    const char *lease_holders; /* require_live_lease: the key of the token's lease's holders (a
                                  lock's holder record, a semaphore's holders' set; lease_keys.h),
                                  else NULL */
    int (*recover)(unsigned slot, struct fg_error *err); /* restores the write floor of slot (the
                                                            key's, shared_keys.h) that Redis lost
                                                            with its data (lease/fence.h,
                                                            fence_recover_slot) */
    int (*lift)(const char *lock, int64_t floor,
                struct fg_error *err); /* after a refusal by the write floor (not by the key's
                                          fence): makes the token's lock issue above it next
                                          (lease/fence.h, fence_lift) */
};

/* Each write fills *res (APPLIED, STALE or REVOKED; release with
 * fenced_result_free) or fails as fenced_redis_answer_read says. When Redis
 * answers that it has no write floor, the write runs once more after
 * w->recover; res->audit_slot gets the slot of the audit stream a refusal
 * went to. */

/* PUT: sets the key to the string value. */
int fenced_redis_put(const struct redis_write *w, const char *value, struct fenced_result *res,
                     struct fg_error *err) FG_WUR;

/* PATCH: sets the hash fields of object fields (string values) and deletes
 * those whose value is null, unless the hash would then hold more than
 * max_fields fields. fields is borrowed and must be validated. res->after gets
 * the fields written (not the whole hash): the text of fields itself. */
int fenced_redis_patch(const struct redis_write *w, json_t *fields, long long max_fields,
                       struct fenced_result *res, struct fg_error *err) FG_WUR;

/* DELETE: removes the key; its fence stays. A missing key stores nothing. */
int fenced_redis_delete(const struct redis_write *w, struct fenced_result *res,
                        struct fg_error *err) FG_WUR;

/*
 * Refuses w without running its script because the lease it needs is over
 * (require_live_lease): reads the fence stored for the key and keeps one audit
 * row (fenced_refusal_audit, reason "lease_expired"), as a refused Postgres
 * write does for a row. *res gets the refusal (EXPIRED; release with fenced_result_free).
 */
int fenced_redis_refuse(const struct redis_write *w, struct fenced_result *res,
                        struct fg_error *err) FG_WUR;

/* Reads key and its highest fence: *out gets a new object {type, value | fields
 * | oversize, fence?} as lua/lib_rw_get.lua answers it; a hash of more than
 * max_fields fields or a string of more than max_bytes bytes is not read
 * (oversize: its size). Content of more than LARGE_READ_BYTES is read on the
 * thread's own Redis connection (lua/rw_get_large.lua), after a look on the
 * shared one (lua/rw_get.lua). */
int fenced_redis_get(const char *key, long long max_fields, long long max_bytes, json_t **out,
                     struct fg_error *err) FG_WUR;

#endif
