/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_result.c - reading lease script answers and the one retry after a
 * "nofence" answer. The outcome table here is the vocabulary of every
 * lua/lock_*.lua and lua/sem_*.lua script.
 */
#include "lease/lease_result.h"

#include <stdio.h>
#include <string.h>

#include "embedded.h"
#include "lease/fence.h"
#include "store/redis.h"
#include "store/revocations.h"

static const struct {
    const char *name;
    enum lease_outcome outcome;
} outcome_names[] = {
    {"granted", LEASE_GRANTED},   {"queued", LEASE_QUEUED},         {"busy", LEASE_BUSY},
    {"full", LEASE_FULL},         {"mismatch", LEASE_MISMATCH},     {"ended", LEASE_ENDED},
    {"released", LEASE_RELEASED}, {"canceled", LEASE_CANCELED},     {"gone", LEASE_GONE},
    {"lost", LEASE_LOST},         {"superseded", LEASE_SUPERSEDED}, {"max_hold", LEASE_MAX_HOLD},
    {"renewed", LEASE_RENEWED},   {"revoked", LEASE_REVOKED},
};

/* Answers after which a script runs once more, once the gateway has dealt with them. */
enum lease_retry {
    RETRY_NONE,
    RETRY_NOFENCE,   /* reserve fences (lease/fence.h) */
    RETRY_NOREVOKED, /* rebuild the revoked set (store/revocations.h) */
};

const char *lease_cancel_mode_name(enum lease_cancel_mode mode)
{
    static const char *const names[] = {
        [LEASE_CANCEL_TAKE] = "take",
        [LEASE_CANCEL_DROP] = "drop",
        [LEASE_CANCEL_ORPHAN] = "orphan",
    };
    return names[mode];
}

long long lease_json_int(const json_t *obj, const char *field, long long fallback)
{
    const json_t *v = json_object_get(obj, field);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (long long)json_real_value(v);
    return fallback;
}

static void read_handoff(const json_t *handoff, struct lease_result *res)
{
    for (size_t j = 0; j < json_array_size(handoff) && res->nhandoff < LEASE_MAX_HANDOFF; j++) {
        const json_t *g = json_array_get(handoff, j);
        const char *lease = json_string_value(json_object_get(g, "lease"));
        if (lease == NULL || strlen(lease) != LEASE_ID_LEN)
            continue;
        struct lease_grant *grant = &res->handoff[res->nhandoff++];
        memcpy(grant->lease_id, lease, LEASE_ID_LEN + 1);
        grant->fence = lease_json_int(g, "fence", 0);
        grant->ttl_ms = lease_json_int(g, "ttl", 0);
        grant->expires_at_ms = lease_json_int(g, "expires_at", 0);
    }
}

/* Reads a script answer into res; "nofence" and "norevoked" set *retry instead. */
static int read_result(enum fg_script script, const json_t *out, struct lease_result *res,
                       enum lease_retry *retry, struct fg_error *err)
{
    const char *r = json_string_value(json_object_get(out, "r"));
    memset(res, 0, sizeof *res);
    *retry = RETRY_NONE;
    if (r != NULL && strcmp(r, "nofence") == 0)
        *retry = RETRY_NOFENCE;
    if (r != NULL && strcmp(r, "norevoked") == 0)
        *retry = RETRY_NOREVOKED;
    if (*retry != RETRY_NONE)
        return 0;
    for (size_t i = 0; r != NULL && i < sizeof outcome_names / sizeof outcome_names[0]; i++) {
        if (strcmp(r, outcome_names[i].name) != 0)
            continue;
        res->outcome = outcome_names[i].outcome;
        const char *lease = json_string_value(json_object_get(out, "lease"));
        if (lease != NULL)
            snprintf(res->lease_id, sizeof res->lease_id, "%s", lease);
        res->fence = lease_json_int(out, "fence", 0);
        res->ttl_ms = lease_json_int(out, "ttl", 0);
        res->expires_at_ms = lease_json_int(out, "expires_at", 0);
        res->hold_until_ms = lease_json_int(out, "hold_until", 0);
        res->position = lease_json_int(out, "position", 0);
        res->holder_pttl_ms = lease_json_int(out, "holder_pttl", -1);
        res->waiting = lease_json_int(out, "waiting", 0);
        res->limit = lease_json_int(out, "limit", 0);
        res->again = json_is_true(json_object_get(out, "again"));
        res->held_ms = lease_json_int(out, "held_ms", -1);
        read_handoff(json_object_get(out, "handoff"), res);
        return 0;
    }
    return fg_fail(err, FG_ERR_INTERNAL, "%s answered '%s'", lua_scripts[script].name,
                   r ? r : "(nothing)");
}

int lease_script_run(enum fg_script script, const char *const *keys, const char *const *argv,
                     struct lease_result *res, struct fg_error *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        json_t *out = NULL;
        if (redis_script(script, keys, argv, &out, err) != 0)
            return -1;
        enum lease_retry retry = RETRY_NONE;
        int rc = read_result(script, out, res, &retry, err);
        json_decref(out);
        if (rc != 0 || retry == RETRY_NONE)
            return rc;
        if ((retry == RETRY_NOFENCE ? fence_recover(err) : revocations_restore(err)) != 0)
            return -1;
    }
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "no fence could be reserved");
}

int lease_watch_run(enum fg_script script, const char *const *keys, const char *const *argv,
                    struct lease_watch *out, struct fg_error *err)
{
    json_t *raw = NULL;
    if (redis_script(script, keys, argv, &raw, err) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->held = json_is_true(json_object_get(raw, "held"));
    out->pttl_ms = lease_json_int(raw, "pttl", 0);
    const char *reason = json_string_value(json_object_get(raw, "reason"));
    snprintf(out->reason, sizeof out->reason, "%s", reason != NULL ? reason : "expired");
    json_decref(raw);
    return 0;
}
