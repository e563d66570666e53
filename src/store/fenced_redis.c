/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_redis.c - one script call per fenced write or read of an application
 * key: lua/rw_put.lua, rw_patch.lua, rw_delete.lua and rw_get.lua. Builds the
 * companion keys ("fg:rf:<key>", "fg:audit", the write floor), runs the
 * script once more after Redis lost its revoked set, and leaves the reading of
 * the answers to rw_answer.c. It never decides which keys are writable and
 * never talks to Postgres.
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

/* The keys and the common arguments of every write script (lua/lib_rw.lua). */
#define RW_NKEYS   5
#define RW_NCOMMON (RW_NKEYS + 7)

/* The key holding key's highest fence, "fg:rf:<key>" (owned). */
static char *fence_key_of(const char *key)
{
    size_t keylen = strlen(key);
    char *fence_key = malloc(keylen + sizeof FENCED_REDIS_FENCE_PREFIX);
    FG_ASSERT(fence_key != NULL);
    memcpy(fence_key, FENCED_REDIS_FENCE_PREFIX, sizeof FENCED_REDIS_FENCE_PREFIX - 1);
    memcpy(fence_key + sizeof FENCED_REDIS_FENCE_PREFIX - 1, key, keylen + 1);
    return fence_key;
}

/* Runs write script `script` with w's common arguments plus nextra more. */
static int run_write(const char *script, const struct redis_write *w, const char *const *extra,
                     size_t nextra, struct rw_result *res, struct fg_error *err)
{
    const struct fenced_writer *who = w->who;
    char *fence_key = fence_key_of(w->key);
    char fence[24];
    snprintf(fence, sizeof fence, "%" PRId64, who->fence);
    const char *argv[RW_NCOMMON + 2] = {w->key,
                                        fence_key,
                                        FENCED_REDIS_AUDIT_STREAM,
                                        FENCED_REDIS_FLOOR_KEY,
                                        REVOCATIONS_SET,
                                        fence,
                                        w->resource,
                                        who->lock_name,
                                        who->owner != NULL ? who->owner : "",
                                        who->client_addr,
                                        w->method,
                                        who->principal != NULL ? who->principal : ""};
    FG_ASSERT(nextra <= 2);
    for (size_t i = 0; i < nextra; i++)
        argv[RW_NCOMMON + i] = extra[i];
    size_t argc = RW_NCOMMON + nextra;
    json_t *out = NULL;
    memset(res, 0, sizeof *res);
    int rc = redis_script(script, RW_NKEYS, argv, argc, &out, err);
    if (rc == 0 && rw_answer_norevoked(out)) { /* Redis lost the revoked set: rebuild, retry */
        json_decref(out);
        out = NULL;
        rc = revocations_restore(err);
        if (rc == 0)
            rc = redis_script(script, RW_NKEYS, argv, argc, &out, err);
    }
    free(fence_key);
    if (rc == 0)
        rc = rw_answer_read(script, out, res, err);
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

int fenced_redis_get(const char *key, long long max_fields, long long max_bytes, json_t **out,
                     struct fg_error *err)
{
    char *fence_key = fence_key_of(key);
    char fields[24], bytes[24];
    snprintf(fields, sizeof fields, "%lld", max_fields);
    snprintf(bytes, sizeof bytes, "%lld", max_bytes);
    const char *argv[] = {key, fence_key, fields, bytes};
    int rc = redis_script("rw_get.lua", 2, argv, 4, out, err);
    free(fence_key);
    return rc;
}
