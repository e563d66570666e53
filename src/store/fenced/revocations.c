/* SPDX-License-Identifier: Apache-2.0 */
/*
 * revocations.c - the durable record of revoked leases and its Redis mirror.
 * Owns fencegate.revocations and the set KEY_REVOKED: writing a revocation
 * into Postgres (before any Redis state changes, so that the mirror can always
 * be rebuilt from it), rebuilding the mirror, and telling whether (and why) a
 * fence was revoked. It must not end leases (the
 * revoke scripts do) nor judge writes (the write statements and scripts do).
 */
#include "store/fenced/revocations.h"

#include <inttypes.h>
#include <stdio.h>

#include "store/backend/pg.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"

int revocation_record(int64_t fence, const char *kind, const char *name, const char *reason,
                      struct fg_error *err)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, fence);
    const char *params[] = {text, kind, name, reason};
    return pg_query(NULL,
                    "INSERT INTO fencegate.revocations (fence, kind, name, reason)"
                    " VALUES ($1::bigint, $2, $3, $4) ON CONFLICT (fence) DO NOTHING",
                    4, params, NULL, err);
}

int revocation_find(int64_t fence, bool *revoked, char *reason, size_t cap, struct fg_error *err)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, fence);
    const char *params[] = {text};
    json_t *rows = NULL;
    if (pg_query("revocation_find",
                 "SELECT reason FROM fencegate.revocations WHERE fence = $1::bigint", 1, params,
                 &rows, err) != 0)
        return -1;
    const char *found = json_string_value(json_object_get(json_array_get(rows, 0), "reason"));
    *revoked = json_array_size(rows) > 0;
    snprintf(reason, cap, "%s", found != NULL ? found : "");
    json_decref(rows);
    return 0;
}

int revocations_restore(struct fg_error *err)
{
    json_t *rows = NULL;
    if (pg_query(NULL,
                 "SELECT coalesce(json_agg(fence::text), '[]')::text AS fences"
                 " FROM fencegate.revocations",
                 0, NULL, &rows, err) != 0)
        return -1;
    const char *fences = json_string_value(json_object_get(json_array_get(rows, 0), "fences"));
    const char *keys[REVOKED_LOAD_NKEYS] = {[REVOKED_LOAD_KEY_REVOKED] = KEY_REVOKED};
    const char *argv[REVOKED_LOAD_NARGV] = {[REVOKED_LOAD_ARGV_FENCES] =
                                                fences != NULL ? fences : "[]"};
    json_t *out = NULL;
    int rc = redis_script(SCRIPT_REVOKED_LOAD, keys, argv, &out, err);
    json_decref(out);
    json_decref(rows);
    return rc;
}
