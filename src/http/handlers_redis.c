/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_redis.c - the fenced Redis key endpoints. Owns the rules of the
 * requests: which keys are served (under a configured prefix, never "fg:") and
 * the body shapes ({"value": string} for PUT; {"fields": {name: string | null}}
 * for PATCH, null deleting the field). The headers, the token's binding and the
 * answers of applied and refused writes (204 for Prefer: return=minimal) are
 * fenced_write.c's, as for /v1/pg. The check-and-write itself is one script in
 * fenced_redis.c; a stale write is answered 409 at once, without waiting for
 * Postgres: the script appended its audit record to the Redis stream, and the
 * audit drain (store/audit/audit_stream.c) copies it to Postgres on its own
 * thread. Only a Redis that lost its write floor (lease/fence.h) makes a write
 * wait for a fence recovery, which needs Postgres.
 */
#include "http/handlers_redis.h"

#include <string.h>

#include "gateway.h"
#include "http/fenced_write.h"
#include "lease/fence.h"
#include "lease/lease_keys.h"
#include "store/backend/redis_keys.h"
#include "store/fenced/fenced_redis.h"
#include "util/utf8.h"

/* A checked write request: everything the store call needs. */
struct write_request {
    struct token_claims claims;         /* of the verified Fence-Token */
    struct fenced_writer who;           /* the writer (borrows from claims and the request) */
    char resource[SEGMENT_MAX_LEN + 8]; /* "redis:<key>" */
    struct redis_write write;           /* the store call's arguments */
    struct lease_keys lease_keys;       /* require_live_lease: the keys of the token's lease */
};

static const char *redis_key(const struct http_request *req)
{
    return req->match.params[0];
}

static enum handler_result fail(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem(reply, err);
    return HANDLER_DONE;
}

const struct redis_prefix_config *redis_key_prefix(const struct config *cfg, const char *key)
{
    if (strncmp(key, KEY_PREFIX, sizeof KEY_PREFIX - 1) == 0)
        return NULL;
    const struct redis_prefix_config *best = NULL;
    for (size_t i = 0; i < cfg->nredis_prefixes; i++) {
        const char *prefix = cfg->redis_prefixes[i].prefix;
        size_t len = strlen(prefix);
        if (strncmp(key, prefix, len) == 0 && (best == NULL || len > strlen(best->prefix)))
            best = &cfg->redis_prefixes[i];
    }
    return best;
}

bool redis_key_writable(const struct config *cfg, const char *key)
{
    return redis_key_prefix(cfg, key) != NULL;
}

static int check_key(const struct http_request *req, struct fg_error *err)
{
    if (!redis_key_writable(gw.cfg, redis_key(req)))
        return fg_fail(err, FG_ERR_FORBIDDEN,
                       "the key is not under a configured redis_prefixes entry");
    return 0;
}

/* Checks the key and the headers of a write and fills *wr (method: "PUT"...). */
static int write_request_init(struct http_request *req, const char *method,
                              struct write_request *wr, struct fg_error *err)
{
    http_request_log_subject(req, "redis:%.*s", utf8_cut_len(redis_key(req), 240), redis_key(req));
    if (check_key(req, err) != 0)
        return -1;
    snprintf(wr->resource, sizeof wr->resource, "redis:%s", redis_key(req));
    if (fenced_write_writer(req, METRIC_BACKEND_REDIS, &wr->claims, &wr->who, err) != 0 ||
        fenced_write_bound(METRIC_BACKEND_REDIS, &redis_key_prefix(gw.cfg, redis_key(req))->guard,
                           redis_key(req), &wr->claims, wr->resource, err) != 0)
        return -1;
    wr->write = (struct redis_write){
        .who = &wr->who,
        .key = redis_key(req),
        .resource = wr->resource,
        .method = method,
        .recover = fence_recover_slot,
        .lift = fence_lift,
    };
    if (redis_key_prefix(gw.cfg, redis_key(req))->guard.live_lease) {
        bool sem = wr->claims.kind == TOKEN_KIND_SEMAPHORE;
        lease_keys_init(&wr->lease_keys, sem ? LEASE_KIND_SEMAPHORE : LEASE_KIND_LOCK,
                        wr->claims.name);
        wr->write.lease_holders =
            wr->lease_keys.key[sem ? LIB_SEM_KEY_HOLDERS : LIB_LOCK_KEY_HOLDER];
    }
    return 0;
}

/* Answers the result of req's write; member names the "after" part, left out
 * with the whole body (204) when req prefers return=minimal, as for /v1/pg. A
 * stale or revoked write was audited by the script into the Redis stream. */
static enum handler_result reply_written(const struct http_request *req, struct http_reply *reply,
                                         const struct write_request *wr, struct fenced_result *res,
                                         const char *member)
{
    if (res->outcome != FENCED_APPLIED)
        fenced_write_refused(reply, METRIC_BACKEND_REDIS, &wr->who, res, wr->write.method);
    else if (!fenced_write_wants_row(req))
        fenced_write_applied_minimal(reply, METRIC_BACKEND_REDIS);
    else
        fenced_write_applied(reply, METRIC_BACKEND_REDIS, 200, res->resource, res->fence, member,
                             res->after);
    fenced_result_free(res);
    return HANDLER_DONE;
}

enum handler_result handle_redis_put(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    struct write_request wr;
    if (write_request_init(req, "PUT", &wr, &err) != 0)
        return fail(reply, &err);
    json_t *body = http_request_json(req, &err);
    if (body == NULL)
        return fail(reply, &err);
    const json_t *value = json_object_get(body, "value");
    if (!json_is_string(value) || strlen(json_string_value(value)) != json_string_length(value)) {
        fg_fail(&err, FG_ERR_INVALID_FIELD, "field 'value' must be a string (without NUL)");
        return fail(reply, &err);
    }
    if ((long long)json_string_length(value) > gw.cfg->max_value_bytes) {
        fg_fail(&err, FG_ERR_INVALID_FIELD,
                "field 'value' is over limits.max_value_bytes (%lld bytes)",
                gw.cfg->max_value_bytes);
        return fail(reply, &err);
    }
    struct fenced_result res;
    if (fenced_redis_put(&wr.write, json_string_value(value), &res, &err) != 0)
        return fail(reply, &err);
    return reply_written(req, reply, &wr, &res, "value");
}

/* Checks a PATCH's "fields": a non-empty object of strings (set) or nulls
 * (delete), names and values within limits.max_value_bytes, no more names than
 * limits.max_hash_fields. */
static int check_fields(const json_t *fields, struct fg_error *err)
{
    long long max = gw.cfg->max_value_bytes;
    if (!json_is_object(fields) || json_object_size(fields) == 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'fields' must be a non-empty object of strings or nulls");
    const char *name;
    const json_t *value;
    json_object_foreach((json_t *)fields, name, value)
    {
        if (name[0] == '\0')
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'fields' has an empty field name");
        if (!json_is_null(value) && (!json_is_string(value) ||
                                     strlen(json_string_value(value)) != json_string_length(value)))
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "field 'fields.%.*s' must be a string or null", utf8_cut_len(name, 100),
                           name);
        if ((long long)strlen(name) > max || (long long)json_string_length(value) > max)
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "field 'fields.%.*s' is over limits.max_value_bytes (%lld bytes)",
                           utf8_cut_len(name, 100), name, max);
    }
    if ((long long)json_object_size(fields) > gw.cfg->max_hash_fields)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'fields' names over limits.max_hash_fields (%lld) fields",
                       gw.cfg->max_hash_fields);
    return 0;
}

enum handler_result handle_redis_patch(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    struct write_request wr;
    if (write_request_init(req, "PATCH", &wr, &err) != 0)
        return fail(reply, &err);
    json_t *body = http_request_json(req, &err);
    if (body == NULL)
        return fail(reply, &err);
    json_t *fields = json_object_get(body, "fields");
    struct fenced_result res;
    if (check_fields(fields, &err) != 0 ||
        fenced_redis_patch(&wr.write, fields, gw.cfg->max_hash_fields, &res, &err) != 0)
        return fail(reply, &err);
    return reply_written(req, reply, &wr, &res, "fields");
}

enum handler_result handle_redis_delete(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    struct write_request wr;
    struct fenced_result res;
    if (write_request_init(req, "DELETE", &wr, &err) != 0 ||
        fenced_redis_delete(&wr.write, &res, &err) != 0)
        return fail(reply, &err);
    return reply_written(req, reply, &wr, &res, "deleted");
}

enum handler_result handle_redis_get(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    http_request_log_subject(req, "redis:%.*s", utf8_cut_len(redis_key(req), 240), redis_key(req));
    json_t *out = NULL;
    if (check_key(req, &err) != 0 || fenced_redis_get(redis_key(req), gw.cfg->max_hash_fields,
                                                      gw.cfg->max_value_bytes, &out, &err) != 0)
        return fail(reply, &err);
    json_t *oversize = json_object_get(out, "oversize");
    if (oversize != NULL) {
        const char *type = json_string_value(json_object_get(out, "type"));
        bool hash = type != NULL && strcmp(type, "hash") == 0;
        fg_fail(&err, FG_ERR_CONFLICT, "the key is over %s and is not read",
                hash ? "limits.max_hash_fields" : "limits.max_value_bytes");
        reply_problem_extra(reply, &err,
                            json_pack("{s:s, s:O}", "limit",
                                      hash ? "limits.max_hash_fields" : "limits.max_value_bytes",
                                      "size", oversize));
        json_decref(out);
        return HANDLER_DONE;
    }
    const char *type = json_string_value(json_object_get(out, "type"));
    json_t *fence = json_object_get(out, "fence");
    json_t *fence_or_null = fence != NULL ? json_incref(fence) : json_null();
    if (type != NULL && strcmp(type, "string") == 0) {
        reply_json(reply, 200,
                   json_pack("{s:O, s:o}", "value", json_object_get(out, "value"), "fence",
                             fence_or_null));
    } else if (type != NULL && strcmp(type, "hash") == 0) {
        reply_json(reply, 200,
                   json_pack("{s:O, s:o}", "fields", json_object_get(out, "fields"), "fence",
                             fence_or_null));
    } else if (type != NULL && strcmp(type, "none") == 0) {
        fg_fail(&err, FG_ERR_NOT_FOUND, "no such key");
        reply_problem_extra(reply, &err, json_pack("{s:o}", "fence", fence_or_null));
    } else {
        json_decref(fence_or_null);
        fg_fail(&err, FG_ERR_CONFLICT, "the key holds a %s; only strings and hashes are served",
                type ? type : "value of unknown type");
        reply_problem(reply, &err);
    }
    json_decref(out);
    return HANDLER_DONE;
}
