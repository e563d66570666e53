/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_redis.c - one script call per fenced write or read of an application
 * key: lua/rw_put.lua, rw_patch.lua, rw_delete.lua and rw_get.lua. Builds the
 * companion keys (the key's fence, the audit stream, the write floor, the
 * fence limit that stands for the trust in them: names of
 * store/backend/shared_keys.h, one set for the deployment on one Redis, those
 * of the key's slot on a Redis Cluster) and the arguments, runs a script once
 * more after Redis lost its revoked set or its write floor, or after the slot
 * map named a revoked set on another node, and leaves the reading of the
 * answers to fenced_redis_answer.c. It never decides which keys are writable,
 * and reaches Postgres only through the one audit record of a refusal
 * (fenced_refusal.c).
 */
#include "store/fenced/fenced_redis.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "fglimits.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "store/backend/shared_keys.h"
#include "store/fenced/fenced_redis_answer.h"
#include "store/fenced/fenced_refusal.h"
#include "store/fenced/revocations.h"
#include "util/fgjson.h"
#include "util/log.h"

/* Every write script takes the keys of lua/lib_rw.lua and starts its ARGV with lib_rw.lua's. */
#define TAKES_RW_ARGS(S) (S##_KEY_LIB_RW == 0 && S##_NKEYS == LIB_RW_NKEYS && S##_ARGV_LIB_RW == 0)
_Static_assert(TAKES_RW_ARGS(RW_PUT) && TAKES_RW_ARGS(RW_PATCH) && TAKES_RW_ARGS(RW_DELETE),
               "a write script takes other keys or arguments than lua/lib_rw.lua's");

/* Attempts of one write: a lost revoked set, a lost floor, a stale slot map
 * and a lease its script found gone may each need one more. */
#define WRITE_ATTEMPTS 5

/* Room for the holders key of a lease name (redis_write.lease_holders): either kind's prefix. */
#define HOLDERS_KEY_MAX                                                                            \
    (sizeof KEY_LOCK_PREFIX + sizeof KEY_SEM_PREFIX + NAME_MAX_LEN + sizeof KEY_TAG_END +          \
     sizeof KEY_SUFFIX_HOLDERS)

/* Where a write that needs its lease to hold (require_live_lease) stands: the
 * look its script takes (arg, lua/lib_rw.lua ARGV lease), or what the gateway
 * learnt asking outside it. */
struct lease_look {
    char arg[1 + LEASE_ID_LEN + HOLDERS_KEY_MAX]; /* "" or "<kind><lease id><holders key>" */
    bool asked;                                   /* asked outside the script: it looks no more */
    bool ended; /* asked, and the lease is over: the write is refused unrun */
};

/* Asks outside w's script whether its lease holds: the writer's look in Redis
 * (who->lease_check) and, for a lease Redis says ended, the revocations in
 * Postgres (final, where Redis forgets how a lease ended). A revoked lease's
 * write runs on: its script refuses it as revoked. */
static int ask_lease(const struct redis_write *w, struct lease_look *look, struct fg_error *err)
{
    const struct fenced_writer *who = w->who;
    enum fenced_lease lease;
    look->asked = true;
    look->arg[0] = '\0';
    if (who->lease_check(who->claims, &lease, err) != 0)
        return -1;
    bool revoked = lease == FENCED_LEASE_REVOKED;
    if (lease == FENCED_LEASE_ENDED &&
        revocation_find(who->claims->fence, &revoked, NULL, 0, err) != 0)
        return -1;
    look->ended = lease != FENCED_LEASE_HELD && !revoked;
    return 0;
}

/* Before a run of w's script (its key in slot): the look the script takes at
 * the lease where w needs one and was not asked yet, if the slot map puts the
 * lease's keys on the key's node, so that no lease ends between the look and
 * the write; else the lease is asked first (a Redis Cluster). */
static int look_before(const struct redis_write *w, unsigned slot, struct lease_look *look,
                       struct fg_error *err)
{
    if (w->lease_holders == NULL || look->asked)
        return 0;
    unsigned home = 0, lease_home = 0;
    unsigned lease_slot = shared_keys_slot_of(w->lease_holders, strlen(w->lease_holders));
    if (redis_home_slot(slot, &home, err) != 0 ||
        redis_home_slot(lease_slot, &lease_home, err) != 0)
        return -1;
    if (home != lease_home)
        return ask_lease(w, look, err);
    const struct token_claims *claims = w->who->claims;
    snprintf(look->arg, sizeof look->arg, "%c%s%s",
             claims->kind == TOKEN_KIND_SEMAPHORE ? 's' : 'l', claims->lease_id, w->lease_holders);
    return 0;
}

/* What a refusal of w's write names in its audit entry, packed into the one
 * argument lua/lib_rw.lua reads (ARGV audit): each field "<length>:<bytes>",
 * in its order. The caller frees it. */
static char *audit_pack(const struct redis_write *w)
{
    const struct fenced_writer *who = w->who;
    const char *fields[] = {
        w->resource,
        who->claims->name,
        token_kind_noun(who->claims->kind),
        who->owner != NULL ? who->owner : "",
        who->client_addr,
        w->method,
        who->principal != NULL ? who->principal : "",
        who->trace_id != NULL ? who->trace_id : "",
    };
    size_t cap = 1;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        cap += strlen(fields[i]) + 21;
    char *out = malloc(cap);
    FG_ASSERT(out != NULL);
    size_t len = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        len += (size_t)snprintf(out + len, cap - len, "%zu:%s", strlen(fields[i]), fields[i]);
    return out;
}

/* Runs write script `script` for w: argv holds the script's own arguments,
 * after the first LIB_RW_NARGV, which are filled here from w, and more the
 * nmore values of its last ("<name>...", none for NULL); stored (a
 * reference it takes) is what the write stores, whose text is the answer's
 * after once applied (the scripts do not echo it). When Redis
 * answers that it has no revoked set, rebuilds it; no write floor (it lost its
 * data), recovers the slot's fence sequence, which sets the floor; a revoked
 * set on another node (the slot map is stale), fetches the map; a lease gone
 * that the write needs (require_live_lease), or one it could not look at, asks
 * about it; and runs it once more (looking at a lease asked about again after
 * a mend). A write whose lease is over is refused (fenced_redis_refuse). */
static int run_write(enum fg_script script, const struct redis_write *w, const char **argv,
                     const char *const *more, size_t nmore, json_t *stored,
                     struct fenced_result *res, struct fg_error *err)
{
    const struct fenced_writer *who = w->who;
    unsigned slot = shared_keys_slot_of(w->key, strlen(w->key));
    char *fence_key = shared_write_fence_key(w->key);
    char audit[SHARED_KEY_MAX], floor[SHARED_KEY_MAX], limit[SHARED_KEY_MAX],
        revoked[SHARED_KEY_MAX];
    shared_key(audit, KEY_AUDIT, slot);
    shared_key(floor, KEY_FENCE_FLOOR, slot);
    shared_fence_limit_key(limit, slot);
    char fence[24];
    snprintf(fence, sizeof fence, "%" PRId64, who->claims->fence);
    const char *keys[LIB_RW_NKEYS] = {
        [LIB_RW_KEY_KEY] = w->key,        [LIB_RW_KEY_WRITE_FENCE] = fence_key,
        [LIB_RW_KEY_AUDIT] = audit,       [LIB_RW_KEY_FENCE_FLOOR] = floor,
        [LIB_RW_KEY_FENCE_LIMIT] = limit,
    };
    struct lease_look look = {.asked = false};
    char *audit_fields = audit_pack(w);
    argv[LIB_RW_ARGV_FENCE] = fence;
    argv[LIB_RW_ARGV_REVOKED] = revoked;
    argv[LIB_RW_ARGV_AUDIT] = audit_fields;
    argv[LIB_RW_ARGV_LEASE] = look.arg;
    json_t *out = NULL;
    memset(res, 0, sizeof *res);
    int rc = 0;
    for (int attempt = 0; rc == 0 && attempt < WRITE_ATTEMPTS; attempt++) {
        json_decref(out);
        out = NULL;
        rc = revocations_set_of(slot, revoked, err);
        if (rc == 0)
            rc = look_before(w, slot, &look, err);
        if (rc != 0 || look.ended)
            break;
        rc = redis_script_more(script, keys, argv, more, nmore, &out, err);
        if (rc != 0)
            break;
        if (fenced_redis_answer_ended(out) || fenced_redis_answer_nolook(out)) {
            rc = ask_lease(w, &look, err);
            continue;
        }
        if (fenced_redis_answer_norevoked(out))
            rc = revocations_restore(revoked, err);
        else if (fenced_redis_answer_nofloor(out))
            rc = w->recover(slot, err);
        else if (fenced_redis_answer_elsewhere(out))
            rc = redis_map_refresh(err);
        else
            break;
        look.asked = false; /* a mend takes time: a lease asked about is looked at again */
    }
    free(fence_key);
    free(audit_fields);
    if (rc == 0 && look.ended) {
        json_decref(out);
        json_decref(stored);
        return fenced_redis_refuse(w, res, err);
    }
    if (rc == 0)
        rc = fenced_redis_answer_read(lua_scripts[script].name, out, w->resource, res, err);
    if (rc == 0 && res->outcome == FENCED_APPLIED)
        res->after = fgjson_dump(stored);
    json_decref(stored);
    res->audit_slot = slot;
    struct fg_error lifting = {0};
    if (rc == 0 && res->outcome == FENCED_STALE && json_is_true(json_object_get(out, "floor")) &&
        w->lift(who->claims->name, res->fence, &lifting) != 0)
        log_message(LOG_WARN, "fence_lift_failed", "%s: %s", who->claims->name, lifting.msg);
    json_decref(out);
    return rc;
}

int fenced_redis_put(const struct redis_write *w, const char *value, struct fenced_result *res,
                     struct fg_error *err)
{
    const char *argv[RW_PUT_NARGV] = {[RW_PUT_ARGV_VALUE] = value};
    return run_write(SCRIPT_RW_PUT, w, argv, NULL, 0, json_string(value), res, err);
}

/* The names and values of a PATCH's fields as lua/rw_patch.lua takes them
 * (ARGV fields...): the pairs of the fields set, then the names of those
 * deleted (null). Fills out (2 * size of fields entries, borrowed from fields)
 * and returns how many it sets; *n gets the entries filled. */
static size_t patch_args(json_t *fields, const char **out, size_t *n)
{
    size_t sets = 0;
    const char *name;
    json_t *value;
    json_object_foreach(fields, name, value)
    {
        if (!json_is_null(value))
            sets++;
    }
    size_t set_at = 0, gone_at = 2 * sets;
    json_object_foreach(fields, name, value)
    {
        if (json_is_null(value)) {
            out[gone_at++] = name;
        } else {
            out[set_at++] = name;
            out[set_at++] = json_string_value(value);
        }
    }
    *n = gone_at;
    return sets;
}

int fenced_redis_patch(const struct redis_write *w, json_t *fields, long long max_fields,
                       struct fenced_result *res, struct fg_error *err)
{
    const char **more = malloc(2 * json_object_size(fields) * sizeof *more);
    FG_ASSERT(more != NULL);
    size_t nmore;
    char max[24], sets[24];
    snprintf(sets, sizeof sets, "%zu", patch_args(fields, more, &nmore));
    snprintf(max, sizeof max, "%lld", max_fields);
    const char *argv[RW_PATCH_NARGV] = {
        [RW_PATCH_ARGV_MAX_FIELDS] = max, [RW_PATCH_ARGV_SETS] = sets};
    int rc = run_write(SCRIPT_RW_PATCH, w, argv, more, nmore, json_incref(fields), res, err);
    free(more);
    return rc;
}

int fenced_redis_delete(const struct redis_write *w, struct fenced_result *res,
                        struct fg_error *err)
{
    const char *argv[RW_DELETE_NARGV] = {NULL};
    return run_write(SCRIPT_RW_DELETE, w, argv, NULL, 0, json_true(), res, err);
}

_Static_assert(RW_GET_LARGE_NARGV == RW_GET_NARGV, "rw_get_large.lua takes rw_get.lua's arguments");

int fenced_redis_get(const char *key, long long max_fields, long long max_bytes, json_t **out,
                     struct fg_error *err)
{
    char *fence_key = shared_write_fence_key(key);
    char fields[24], bytes[24];
    snprintf(fields, sizeof fields, "%lld", max_fields);
    snprintf(bytes, sizeof bytes, "%lld", max_bytes);
    const char *keys[RW_GET_NKEYS] = {[RW_GET_KEY_KEY] = key, [RW_GET_KEY_WRITE_FENCE] = fence_key};
    const char *argv[RW_GET_NARGV] = {
        [RW_GET_ARGV_MAX_FIELDS] = fields, [RW_GET_ARGV_MAX_BYTES] = bytes};
    int rc = redis_script(SCRIPT_RW_GET, keys, argv, out, err);
    if (rc == 0 && json_object_get(*out, "large") != NULL) {
        json_decref(*out);
        *out = NULL;
        rc = redis_script(SCRIPT_RW_GET_LARGE, keys, argv, out, err);
    }
    free(fence_key);
    return rc;
}

int fenced_redis_refuse(const struct redis_write *w, struct fenced_result *res,
                        struct fg_error *err)
{
    json_t *out = NULL;
    memset(res, 0, sizeof *res);
    if (fenced_redis_get(w->key, 0, 0, &out, err) != 0)
        return -1;
    res->outcome = FENCED_EXPIRED;
    res->resource = strdup(w->resource);
    FG_ASSERT(res->resource != NULL);
    res->fence = fgjson_answer_int(out, "fence", 0);
    json_decref(out);
    if (fenced_refusal_audit(NULL, w->who, res, w->method, err) == 0)
        return 0;
    fenced_result_free(res);
    return -1;
}
