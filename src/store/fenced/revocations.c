/* SPDX-License-Identifier: Apache-2.0 */
/*
 * revocations.c - the durable record of revoked leases and its Redis mirror.
 * Owns fencegate.revocations and the revoked sets: KEY_REVOKED on one Redis;
 * on a Redis Cluster one set per slot name, KEY_REVOKED ":{T(s)}"
 * (store/backend/shared_keys.h), of which a write script reads the one of the
 * highest slot of its node (lua/lib_rw.lua). Writing a revocation into
 * Postgres (before any Redis state changes, so that a set can always be
 * rebuilt from it) and, on a cluster, into every set that exists before the
 * revoke answers; rebuilding a set; telling whether (and why) a fence was
 * revoked. It must not end leases (the revoke scripts do) nor judge writes
 * (the write statements and scripts do).
 *
 * Why a cluster's revocation goes to every slot's set that exists, not to one
 * per primary: a set is named after a slot, and moves with it in a reshard; a
 * set left on a node by an older map, or brought back by a later reshard, must
 * not have missed one. The sets that exist are found with one EXISTS per slot
 * (store/backend/slot_scan.h). A set that does not exist gets nothing and is
 * rebuilt from Postgres when a write needs it: created first, then filled from
 * a read of Postgres, so that a revocation committed between the two reaches
 * it either way (lua/revoked_load.lua, lua/revoked_add.lua).
 */
#include "store/fenced/revocations.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend/pg.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "store/backend/shared_keys.h"
#include "store/backend/slot_scan.h"
#include "util/clock.h"
#include "util/log.h"

/* Adds fence to every slot's revoked set that exists (a Redis Cluster): finds
 * them (slot_scan), then adds it to each, if it still exists, with one script
 * call per set. A set created after the scan looked was created after the
 * revocation was committed, so the Postgres read that fills it holds it. */
static int spread(const char *fence, struct fg_error *err)
{
    bool *has = malloc(CLUSTER_SLOTS * sizeof *has);
    FG_ASSERT(has != NULL);
    int rc = slot_scan(KEY_REVOKED, has, err);
    size_t n = 0;
    for (unsigned s = 0; rc == 0 && s < CLUSTER_SLOTS; s++)
        n += has[s];
    struct redis_batch_call *calls = calloc(n > 0 ? n : 1, sizeof *calls);
    char(*sets)[SHARED_KEY_MAX] = malloc((n > 0 ? n : 1) * sizeof *sets);
    const char **keys = malloc((n > 0 ? n : 1) * sizeof *keys);
    FG_ASSERT(calls != NULL && sets != NULL && keys != NULL);
    const char *argv[REVOKED_ADD_NARGV] = {[REVOKED_ADD_ARGV_FENCE] = fence};
    size_t i = 0;
    for (unsigned s = 0; rc == 0 && s < CLUSTER_SLOTS; s++) {
        if (!has[s])
            continue;
        shared_key(sets[i], KEY_REVOKED, s);
        keys[i] = sets[i];
        calls[i] =
            (struct redis_batch_call){.script = SCRIPT_REVOKED_ADD, .keys = &keys[i], .argv = argv};
        i++;
    }
    if (rc == 0 && n > 0)
        rc = redis_batch(calls, n, err);
    for (i = 0; i < n; i++)
        json_decref(calls[i].reply);
    free(keys);
    free(sets);
    free(calls);
    free(has);
    return rc;
}

int revocation_record(int64_t fence, const char *kind, const char *name, const char *reason,
                      struct fg_error *err)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, fence);
    const char *params[] = {text, kind, name, reason};
    if (pg_query(NULL,
                 "INSERT INTO fencegate.revocations (fence, kind, name, reason)"
                 " VALUES ($1::bigint, $2, $3, $4) ON CONFLICT (fence) DO NOTHING",
                 4, params, NULL, err) != 0)
        return -1;
    return shared_keys_per_slot() ? spread(text, err) : 0;
}

/* How often a revoke looks whether the writes in flight at its revocation
 * have ended. */
#define REVOCATION_DRAIN_POLL_MS 2

/* The transactions of gateway connections (application_name "fencegate" or
 * "fencegate/<trace id>", store/backend/pg.h; all gateways connect as the
 * role that owns the schema fencegate, so their sessions' states show) other
 * than this one that have not ended, as a JSON array of [pid, start] (start:
 * the transaction's start in microseconds), and of those only the ones in $1
 * when it is not null: the transactions open at the first look, still open.
 * A transaction is known by its process and its start, compared for equality
 * only, so that no clock's step can hide one. A session with track_activities
 * off shows neither state nor start ("disabled"), and is not waited for. */
static const char open_writes_sql[] =
    "SELECT coalesce(jsonb_agg(t.tx), '[]')::text AS open FROM ("
    " SELECT jsonb_build_array(pid, (extract(epoch FROM xact_start) * 1000000)::bigint) AS tx"
    " FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
    " AND usename = current_user"
    " AND (application_name = 'fencegate' OR application_name LIKE 'fencegate/%')"
    " AND state <> 'idle' AND xact_start IS NOT NULL) t"
    " WHERE $1::jsonb IS NULL OR $1::jsonb @> jsonb_build_array(t.tx)";

/* Sets *open (owned) to the text of what open_writes_sql answers for before
 * (NULL at the first look). */
static int open_writes(const char *before, char **open, struct fg_error *err)
{
    const char *params[] = {before};
    json_t *rows = NULL;
    if (pg_query("revocation_drain", open_writes_sql, 1, params, &rows, err) != 0)
        return -1;
    *open = strdup(json_string_value(json_object_get(json_array_get(rows, 0), "open")));
    FG_ASSERT(*open != NULL);
    json_decref(rows);
    return 0;
}

int revocation_drain(int64_t wait_ms, struct fg_error *err)
{
    int64_t deadline = clock_mono_ms() + wait_ms;
    char *open = NULL;
    int rc = open_writes(NULL, &open, err);
    while (rc == 0 && strcmp(open, "[]") != 0) {
        if (clock_mono_ms() > deadline) {
            rc = fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                         "postgres: writes in flight at the revocation did not end");
            break;
        }
        clock_sleep_ms(REVOCATION_DRAIN_POLL_MS);
        char *still = NULL;
        rc = open_writes(open, &still, err);
        free(open);
        open = still;
    }
    free(open);
    return rc;
}

int revocation_find_on(struct pg_conn *conn, int64_t fence, bool *revoked, char *reason, size_t cap,
                       struct fg_error *err)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, fence);
    const char *params[] = {text};
    json_t *rows = NULL;
    if (pg_exec(conn, "revocation_find",
                "SELECT reason FROM fencegate.revocations WHERE fence = $1::bigint", 1, params,
                &rows, err) != 0)
        return -1;
    const char *found = json_string_value(json_object_get(json_array_get(rows, 0), "reason"));
    *revoked = json_array_size(rows) > 0;
    snprintf(reason, cap, "%s", found != NULL ? found : "");
    json_decref(rows);
    return 0;
}

int revocation_find(int64_t fence, bool *revoked, char *reason, size_t cap, struct fg_error *err)
{
    struct pg_conn *c = pg_acquire(err);
    if (c == NULL)
        return -1;
    int rc = revocation_find_on(c, fence, revoked, reason, cap, err);
    pg_release(c);
    return rc;
}

int revocations_set_of(unsigned slot, char out[SHARED_KEY_MAX], struct fg_error *err)
{
    unsigned home = 0;
    if (shared_keys_per_slot() && redis_home_slot(slot, &home, err) != 0)
        return -1;
    shared_key(out, KEY_REVOKED, home);
    return 0;
}

/* Runs lua/revoked_load.lua on set with fences (a JSON array) and run_id. */
static int load(const char *set, const char *fences, const char *run_id, struct fg_error *err)
{
    const char *keys[REVOKED_LOAD_NKEYS] = {[REVOKED_LOAD_KEY_REVOKED] = set};
    const char *argv[REVOKED_LOAD_NARGV] = {
        [REVOKED_LOAD_ARGV_FENCES] = fences, [REVOKED_LOAD_ARGV_RUN_ID] = run_id};
    json_t *out = NULL;
    int rc = redis_script(SCRIPT_REVOKED_LOAD, keys, argv, &out, err);
    json_decref(out);
    return rc;
}

int revocations_restore(const char *set, struct fg_error *err)
{
    bool per_slot = shared_keys_per_slot();
    if (per_slot && load(set, "[]", "", err) != 0) /* exists before Postgres is read */
        return -1;
    json_t *rows = NULL;
    if (pg_query(NULL,
                 "SELECT coalesce(json_agg(fence::text), '[]')::text AS fences"
                 " FROM fencegate.revocations",
                 0, NULL, &rows, err) != 0)
        return -1;
    const char *fences = json_string_value(json_object_get(json_array_get(rows, 0), "fences"));
    int rc = load(set, fences != NULL ? fences : "[]", per_slot ? redis_run_id_here : "", err);
    json_decref(rows);
    if (rc == 0 && per_slot)
        log_event(LOG_INFO, "revoked_set_rebuilt", json_pack("{s:s}", "set", set));
    return rc;
}
