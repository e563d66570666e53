/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_redis.c - one script call per fenced write or read of an application
 * key: lua/rw_put.lua, rw_patch.lua, rw_delete.lua and rw_get.lua. Builds the
 * companion keys ("fg:rf:<key>", "fg:audit", the write floor) and reads the
 * answers. It never
 * decides which keys are writable and never talks to Postgres.
 *
 * Redis Cluster: a script's keys must hash to one slot, and the key, its fence
 * key and the audit stream do not (nor do the lock scripts' keys and the global
 * fence sequence); fencegate expects one Redis primary.
 */
#include "store/fenced_redis.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis.h"
#include "store/revocations.h"

static const char *string_field(const json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));
    return s != NULL ? s : "";
}

static int64_t int_field(const json_t *obj, const char *field)
{
    const json_t *v = json_object_get(obj, field);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (int64_t)json_real_value(v);
    return 0;
}

/* The keys and the common arguments of every write script (lua/lib_rw.lua). */
#define RW_NKEYS   5
#define RW_NCOMMON (RW_NKEYS + 7)

/* Runs write script `script` with w's common arguments plus nextra more. */
static int run_write(const char *script, const struct redis_write *w, const char *const *extra,
                     size_t nextra, struct rw_result *res, struct fg_error *err)
{
    size_t keylen = strlen(w->key);
    char *fence_key = malloc(keylen + sizeof FENCED_REDIS_FENCE_PREFIX);
    FG_ASSERT(fence_key != NULL);
    memcpy(fence_key, FENCED_REDIS_FENCE_PREFIX, sizeof FENCED_REDIS_FENCE_PREFIX - 1);
    memcpy(fence_key + sizeof FENCED_REDIS_FENCE_PREFIX - 1, w->key, keylen + 1);
    char fence[24];
    snprintf(fence, sizeof fence, "%" PRId64, w->fence);
    const char *argv[RW_NCOMMON + 2] = {w->key,
                                        fence_key,
                                        FENCED_REDIS_AUDIT_STREAM,
                                        FENCED_REDIS_FLOOR_KEY,
                                        REVOCATIONS_SET,
                                        fence,
                                        w->resource,
                                        w->lock_name,
                                        w->owner,
                                        w->client_addr,
                                        w->method,
                                        w->principal};
    FG_ASSERT(nextra <= 2);
    for (size_t i = 0; i < nextra; i++)
        argv[RW_NCOMMON + i] = extra[i];
    size_t argc = RW_NCOMMON + nextra;
    json_t *out = NULL;
    memset(res, 0, sizeof *res);
    int rc = redis_script(script, RW_NKEYS, argv, argc, &out, err);
    const char *r = rc == 0 ? string_field(out, "r") : "";
    if (rc == 0 && strcmp(r, "norevoked") == 0) { /* Redis lost the revoked set: rebuild, retry */
        json_decref(out);
        out = NULL;
        rc = revocations_restore(err);
        if (rc == 0)
            rc = redis_script(script, RW_NKEYS, argv, argc, &out, err);
        r = rc == 0 ? string_field(out, "r") : "";
    }
    free(fence_key);
    if (rc != 0)
        return -1;
    if (strcmp(r, "applied") == 0) {
        res->outcome = RW_APPLIED;
        res->fence = int_field(out, "fence");
        json_t *after = json_object_get(out, "value");
        if (after == NULL)
            after = json_object_get(out, "fields");
        if (after == NULL)
            after = json_object_get(out, "deleted");
        res->after = json_incref(after);
    } else if (strcmp(r, "stale") == 0 || strcmp(r, "revoked") == 0) {
        res->outcome = r[0] == 's' ? RW_STALE : RW_REVOKED;
        res->current_fence = int_field(out, "current");
        res->at_ms = int_field(out, "at_ms");
        snprintf(res->audit_id, sizeof res->audit_id, "%s", string_field(out, "audit_id"));
    } else if (strcmp(r, "nofloor") == 0) {
        res->outcome = RW_NOFLOOR;
    } else if (strcmp(r, "missing") == 0) {
        res->outcome = RW_MISSING;
    } else if (strcmp(r, "toomany") == 0) {
        res->outcome = RW_TOO_MANY;
        res->hash_fields = int_field(out, "fields");
    } else if (strcmp(r, "wrongtype") == 0) {
        res->outcome = RW_WRONGTYPE;
        snprintf(res->type, sizeof res->type, "%s", string_field(out, "type"));
    } else {
        rc = fg_fail(err, FG_ERR_INTERNAL, "%s answered '%s'", script, r);
    }
    json_decref(out);
    return rc;
}

int fenced_redis_put(const struct redis_write *w, const char *value, struct rw_result *res,
                     struct fg_error *err)
{
    return run_write("rw_put.lua", w, &value, 1, res, err);
}

int fenced_redis_patch(const struct redis_write *w, const json_t *fields, long long max_fields,
                       struct rw_result *res, struct fg_error *err)
{
    char *text = json_dumps(fields, JSON_COMPACT);
    FG_ASSERT(text != NULL);
    char max[24];
    snprintf(max, sizeof max, "%lld", max_fields);
    const char *extra[] = {text, max};
    int rc = run_write("rw_patch.lua", w, extra, 2, res, err);
    free(text);
    return rc;
}

int fenced_redis_delete(const struct redis_write *w, struct rw_result *res, struct fg_error *err)
{
    return run_write("rw_delete.lua", w, NULL, 0, res, err);
}

void rw_result_clear(struct rw_result *res)
{
    json_decref(res->after);
    res->after = NULL;
}

int fenced_redis_get(const char *key, long long max_fields, long long max_bytes, json_t **out,
                     struct fg_error *err)
{
    size_t keylen = strlen(key);
    char *fence_key = malloc(keylen + sizeof FENCED_REDIS_FENCE_PREFIX);
    FG_ASSERT(fence_key != NULL);
    memcpy(fence_key, FENCED_REDIS_FENCE_PREFIX, sizeof FENCED_REDIS_FENCE_PREFIX - 1);
    memcpy(fence_key + sizeof FENCED_REDIS_FENCE_PREFIX - 1, key, keylen + 1);
    char fields[24], bytes[24];
    snprintf(fields, sizeof fields, "%lld", max_fields);
    snprintf(bytes, sizeof bytes, "%lld", max_bytes);
    const char *argv[] = {key, fence_key, fields, bytes};
    int rc = redis_script("rw_get.lua", 2, argv, 4, out, err);
    free(fence_key);
    return rc;
}
