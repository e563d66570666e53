/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_redis.h - fenced writes to application keys in Redis. The fence check
 * and the write are one Lua script (lua/rw_*.lua): a write is applied iff its
 * fence is at least the highest fence stored for the key (in
 * KEY_WRITE_FENCE_PREFIX <key>, store/keys.h);
 * a stale write, or one presenting a revoked fence, changes nothing and is
 * appended, by the same script, to the audit stream that audit_stream.c
 * drains into Postgres. This module builds the scripts' arguments and reads their answers; which
 * keys may be written is the caller's business.
 */
#ifndef FG_FENCED_REDIS_H
#define FG_FENCED_REDIS_H

#include <jansson.h>
#include <stdint.h>

#include "util/error.h"

/* One write attempt; every pointer is borrowed for the call. */
struct redis_write {
    const char *key;         /* the application key */
    const char *resource;    /* its resource identity, "redis:<key>" */
    int64_t fence;           /* the verified fence of the writer's token */
    const char *lock_name;   /* the lock or semaphore the token was issued for */
    const char *owner;       /* the writer's Fence-Owner, "" if none */
    const char *client_addr; /* the writer's address */
    const char *method;      /* "PUT", "PATCH" or "DELETE" */
    const char *principal;   /* id of the writer's API key, "" when auth is off */
};

enum rw_outcome {
    RW_APPLIED,   /* the write and the new highest fence are stored */
    RW_STALE,     /* refused: an older fence than the stored one */
    RW_REVOKED,   /* refused: the token's lease was revoked */
    RW_WRONGTYPE, /* refused: the key holds another type than the write needs */
    RW_NOFLOOR,   /* not tried: Redis has no write floor (lost its data); recover first */
    RW_MISSING,   /* DELETE of a key that does not exist: nothing stored, no fence */
    RW_TOO_MANY,  /* PATCH refused: the hash would hold more fields than allowed */
};

struct rw_result {
    enum rw_outcome outcome;
    int64_t fence; /* applied: the fence now stored */
    int64_t
        current_fence;   /* stale, revoked: the stored fence (or the write floor) that refused it */
    char audit_id[64];   /* stale, revoked: the audit stream entry of the refusal */
    int64_t at_ms;       /* stale, revoked: Redis time of the refusal */
    char type[16];       /* wrongtype: what the key holds */
    int64_t hash_fields; /* too many: the fields the hash would have held */
    json_t *after;       /* applied (owned): the value, the fields or "deleted" */
};

/* PUT: sets the key to the string value. */
int fenced_redis_put(const struct redis_write *w, const char *value, struct rw_result *res,
                     struct fg_error *err) FG_WUR;

/* PATCH: sets the hash fields of object fields (string values) and deletes
 * those whose value is null, unless the hash would then hold more than
 * max_fields fields. fields is borrowed and must be validated. res->after gets
 * the fields written (not the whole hash). */
int fenced_redis_patch(const struct redis_write *w, const json_t *fields, long long max_fields,
                       struct rw_result *res, struct fg_error *err) FG_WUR;

/* DELETE: removes the key; its fence stays. A missing key stores nothing. */
int fenced_redis_delete(const struct redis_write *w, struct rw_result *res,
                        struct fg_error *err) FG_WUR;

/* Frees what res owns. */
void rw_result_clear(struct rw_result *res);

/* Reads key and its highest fence: *out gets a new object {type, value | fields
 * | oversize, fence?} as lua/rw_get.lua returns it; a hash of more than
 * max_fields fields or a string of more than max_bytes bytes is not read
 * (oversize: its size). */
int fenced_redis_get(const char *key, long long max_fields, long long max_bytes, json_t **out,
                     struct fg_error *err) FG_WUR;

#endif
