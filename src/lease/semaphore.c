/*
 * semaphore.c - the semaphore transitions: acquire (first try, queueing,
 * re-check, claim), cancel, release, renew and status. Each is exactly one
 * script call; the decision and the action happen inside Redis, with Redis's
 * clock. The only retry here is after a "nofence" answer: the fence sequence is
 * restored from Postgres, then the script runs again.
 */
#include "lease/semaphore.h"

#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "lease/fence.h"
#include "store/redis.h"

#define RELEASED_MARKER_MS 3600000LL
#define SEM_KEEP_MS        600000LL /* how long an idle semaphore's keys outlive its last lease */

/* The keys of semaphore name: base, then KEYS[1..7] of every sem_*.lua script. */
struct sem_keys {
    char base[NAME_MAX_LEN + 12];
    char holders[NAME_MAX_LEN + 16];
    char data[NAME_MAX_LEN + 16];
    char queue[NAME_MAX_LEN + 16];
    char waiters[NAME_MAX_LEN + 16];
    char limit[NAME_MAX_LEN + 16];
    char tickets[NAME_MAX_LEN + 16];
};

#define SEM_NKEYS 7

static void sem_keys_init(struct sem_keys *k, const char *name)
{
    snprintf(k->base, sizeof k->base, "fg:sm:{%s}:", name);
    snprintf(k->holders, sizeof k->holders, "%sh", k->base);
    snprintf(k->data, sizeof k->data, "%sd", k->base);
    snprintf(k->queue, sizeof k->queue, "%sq", k->base);
    snprintf(k->waiters, sizeof k->waiters, "%sw", k->base);
    snprintf(k->limit, sizeof k->limit, "%sl", k->base);
    snprintf(k->tickets, sizeof k->tickets, "%st", k->base);
}

static const struct {
    const char *name;
    enum sem_outcome outcome;
} outcome_names[] = {
    {"granted", SEM_GRANTED},   {"queued", SEM_QUEUED},     {"busy", SEM_BUSY},
    {"full", SEM_FULL},         {"mismatch", SEM_MISMATCH}, {"ended", SEM_ENDED},
    {"released", SEM_RELEASED}, {"canceled", SEM_CANCELED}, {"superseded", SEM_SUPERSEDED},
    {"gone", SEM_GONE},         {"lost", SEM_LOST},         {"max_hold", SEM_MAX_HOLD},
    {"renewed", SEM_RENEWED},
};

static long long int_field(const json_t *obj, const char *field, long long fallback)
{
    const json_t *v = json_object_get(obj, field);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (long long)json_real_value(v);
    return fallback;
}

/* Reads a script answer into res; "nofence" sets *nofence instead. */
static int read_result(const json_t *out, struct sem_result *res, bool *nofence,
                       struct fg_error *err)
{
    const char *r = json_string_value(json_object_get(out, "r"));
    memset(res, 0, sizeof *res);
    *nofence = r != NULL && strcmp(r, "nofence") == 0;
    if (*nofence)
        return 0;
    for (size_t i = 0; r != NULL && i < sizeof outcome_names / sizeof outcome_names[0]; i++) {
        if (strcmp(r, outcome_names[i].name) != 0)
            continue;
        res->outcome = outcome_names[i].outcome;
        const char *lease = json_string_value(json_object_get(out, "lease"));
        if (lease != NULL)
            snprintf(res->lease_id, sizeof res->lease_id, "%s", lease);
        res->fence = int_field(out, "fence", 0);
        res->ttl_ms = int_field(out, "ttl", 0);
        res->expires_at_ms = int_field(out, "expires_at", 0);
        res->hold_until_ms = int_field(out, "hold_until", 0);
        res->position = int_field(out, "position", 0);
        res->holder_pttl_ms = int_field(out, "holder_pttl", -1);
        res->waiting = int_field(out, "waiting", 0);
        res->limit = int_field(out, "limit", 0);
        res->again = json_is_true(json_object_get(out, "again"));
        const json_t *handoff = json_object_get(out, "handoff");
        for (size_t j = 0; j < json_array_size(handoff) && j < SEM_MAX_HANDOFF; j++) {
            const json_t *g = json_array_get(handoff, j);
            const char *glease = json_string_value(json_object_get(g, "lease"));
            if (glease == NULL || strlen(glease) != LEASE_ID_LEN)
                continue;
            struct sem_grant *grant = &res->handoff[res->nhandoff++];
            memcpy(grant->lease_id, glease, LEASE_ID_LEN + 1);
            grant->fence = int_field(g, "fence", 0);
            grant->ttl_ms = int_field(g, "ttl", 0);
            grant->expires_at_ms = int_field(g, "expires_at", 0);
        }
        return 0;
    }
    return fg_fail(err, FG_ERR_INTERNAL, "semaphore script answered '%s'", r ? r : "(nothing)");
}

/* Runs a semaphore script; on "nofence" restores the sequence and runs it once more. */
static int run_sem_script(const char *script, const char *const *argv, size_t argc,
                          struct sem_result *res, struct fg_error *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        json_t *out = NULL;
        if (redis_script(script, SEM_NKEYS, argv, argc, &out, err) != 0)
            return -1;
        bool nofence = false;
        int rc = read_result(out, res, &nofence, err);
        json_decref(out);
        if (rc != 0 || !nofence)
            return rc;
        if (fence_recover(err) != 0)
            return -1;
    }
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "the fence sequence could not be restored");
}

int sem_acquire(const char *name, const struct acquire_params *p, const char *lease_id, bool wait,
                const char *attach, struct sem_result *res, struct fg_error *err)
{
    if (fence_ensure_verified(err) != 0)
        return -1;
    struct sem_keys k;
    sem_keys_init(&k, name);
    const struct config *cfg = gw.cfg;
    char ttl[24], hold[24], claim[24], maxw[24], rid_ttl[24], limit[24], keep[24];
    snprintf(ttl, sizeof ttl, "%lld", p->ttl_ms);
    snprintf(hold, sizeof hold, "%lld", p->max_hold_ms);
    snprintf(claim, sizeof claim, "%lld", cfg->waiter_lease_ms);
    snprintf(maxw, sizeof maxw, "%lld", cfg->max_waiters_per_lock);
    snprintf(rid_ttl, sizeof rid_ttl, "%lld", p->wait_ms + p->max_hold_ms + 60000);
    snprintf(limit, sizeof limit, "%lld", p->limit);
    snprintf(keep, sizeof keep, "%lld", SEM_KEEP_MS);
    const char *argv[] = {k.holders,      k.data,     k.queue, k.waiters, k.limit,
                          k.tickets,      "fg:fence", k.base,  name,      lease_id,
                          p->request_id,  ttl,        hold,    p->owner,  wait ? "1" : "0",
                          gw.instance_id, attach,     claim,   maxw,      rid_ttl,
                          limit,          keep};
    return run_sem_script("sem_acquire.lua", argv, sizeof argv / sizeof argv[0], res, err);
}

int sem_cancel(const char *name, const char *lease_id, const char *attach,
               enum sem_cancel_mode mode, struct sem_result *res, struct fg_error *err)
{
    static const char *const mode_names[] = {"take", "drop", "orphan"};
    struct sem_keys k;
    sem_keys_init(&k, name);
    char claim[24], marker[24], keep[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", RELEASED_MARKER_MS);
    snprintf(keep, sizeof keep, "%lld", SEM_KEEP_MS);
    const char *argv[] = {k.holders,  k.data, k.queue, k.waiters,     k.limit, k.tickets,
                          "fg:fence", k.base, name,    lease_id,      attach,  mode_names[mode],
                          claim,      marker, keep,    gw.instance_id};
    return run_sem_script("sem_cancel.lua", argv, sizeof argv / sizeof argv[0], res, err);
}

int sem_release(const char *name, const char *lease_id, struct sem_result *res,
                struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    char claim[24], marker[24], keep[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", RELEASED_MARKER_MS);
    snprintf(keep, sizeof keep, "%lld", SEM_KEEP_MS);
    const char *argv[] = {k.holders, k.data,     k.queue, k.waiters,     k.limit,
                          k.tickets, "fg:fence", k.base,  name,          lease_id,
                          claim,     marker,     keep,    gw.instance_id};
    return run_sem_script("sem_release.lua", argv, sizeof argv / sizeof argv[0], res, err);
}

int sem_renew(const char *name, const char *lease_id, long long ttl_ms, struct sem_result *res,
              struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    char ttl[24], claim[24], keep[24];
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(keep, sizeof keep, "%lld", SEM_KEEP_MS);
    const char *argv[] = {k.holders, k.data,     k.queue,       k.waiters, k.limit,
                          k.tickets, "fg:fence", name,          lease_id,  ttl,
                          claim,     keep,       gw.instance_id};
    return run_sem_script("sem_renew.lua", argv, sizeof argv / sizeof argv[0], res, err);
}

int sem_status(const char *name, json_t **out, struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    const char *argv[] = {k.holders, k.queue, k.limit};
    json_t *raw = NULL;
    if (redis_script("sem_status.lua", 3, argv, 3, &raw, err) != 0)
        return -1;
    long long limit = int_field(raw, "limit", 0);
    *out = json_pack("{s:s, s:o, s:I, s:I}", "semaphore", name, "limit",
                     limit > 0 ? json_integer(limit) : json_null(), "holders",
                     (json_int_t)int_field(raw, "holders", 0), "waiting",
                     (json_int_t)int_field(raw, "waiting", 0));
    json_decref(raw);
    return 0;
}
