/*
 * lock.c - the lock transitions: acquire (first try, queueing, re-check, claim),
 * cancel, release, renew and status. Each is exactly one script call; the
 * decision and the action happen inside Redis. The only retry here is after a
 * "nofence" answer: the fence sequence is restored from Postgres, then the
 * acquire runs again.
 */
#include "lease/lock.h"

#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "lease/fence.h"
#include "store/redis.h"

#define RELEASED_MARKER_MS 3600000LL

/* The keys of lock name: base, holder, queue, waiters. */
struct lock_keys {
    char base[NAME_MAX_LEN + 12];
    char holder[NAME_MAX_LEN + 16];
    char queue[NAME_MAX_LEN + 16];
    char waiters[NAME_MAX_LEN + 16];
};

static void lock_keys_init(struct lock_keys *k, const char *name)
{
    snprintf(k->base, sizeof k->base, "fg:lk:{%s}:", name);
    snprintf(k->holder, sizeof k->holder, "%sh", k->base);
    snprintf(k->queue, sizeof k->queue, "%sq", k->base);
    snprintf(k->waiters, sizeof k->waiters, "%sw", k->base);
}

static const struct {
    const char *name;
    enum lock_outcome outcome;
} outcome_names[] = {
    {"granted", LOCK_GRANTED},   {"queued", LOCK_QUEUED},         {"busy", LOCK_BUSY},
    {"full", LOCK_FULL},         {"ended", LOCK_ENDED},           {"released", LOCK_RELEASED},
    {"canceled", LOCK_CANCELED}, {"superseded", LOCK_SUPERSEDED}, {"gone", LOCK_GONE},
    {"lost", LOCK_LOST},         {"max_hold", LOCK_MAX_HOLD},     {"renewed", LOCK_RENEWED},
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
static int read_result(const json_t *out, struct lock_result *res, bool *nofence,
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
        res->holder_pttl_ms = int_field(out, "holder_pttl", -2);
        res->waiting = int_field(out, "waiting", 0);
        res->again = json_is_true(json_object_get(out, "again"));
        res->held_ms = int_field(out, "held_ms", -1);
        return 0;
    }
    return fg_fail(err, FG_ERR_INTERNAL, "lock script answered '%s'", r ? r : "(nothing)");
}

/* Runs a lock script; on "nofence" restores the sequence and runs it once more. */
static int run_lock_script(const char *script, size_t nkeys, const char *const *argv, size_t argc,
                           struct lock_result *res, struct fg_error *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        json_t *out = NULL;
        if (redis_script(script, nkeys, argv, argc, &out, err) != 0)
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

int lock_acquire(const char *name, const struct acquire_params *p, const char *lease_id, bool wait,
                 const char *attach, struct lock_result *res, struct fg_error *err)
{
    if (fence_ensure_verified(err) != 0)
        return -1;
    struct lock_keys k;
    lock_keys_init(&k, name);
    const struct config *cfg = gw.cfg;
    char ttl[24], hold[24], claim[24], maxw[24], rid_ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", p->ttl_ms);
    snprintf(hold, sizeof hold, "%lld", p->max_hold_ms);
    snprintf(claim, sizeof claim, "%lld", cfg->waiter_lease_ms);
    snprintf(maxw, sizeof maxw, "%lld", cfg->max_waiters_per_lock);
    snprintf(rid_ttl, sizeof rid_ttl, "%lld", p->wait_ms + p->max_hold_ms + 60000);
    const char *argv[] = {k.holder, k.queue,          k.waiters,      "fg:fence", k.base,
                          name,     lease_id,         p->request_id,  ttl,        hold,
                          p->owner, wait ? "1" : "0", gw.instance_id, attach,     claim,
                          maxw,     rid_ttl};
    return run_lock_script("lock_acquire.lua", 4, argv, sizeof argv / sizeof argv[0], res, err);
}

int lock_cancel(const char *name, const char *lease_id, const char *attach,
                enum lock_cancel_mode mode, struct lock_result *res, struct fg_error *err)
{
    static const char *const mode_names[] = {"take", "drop", "orphan"};
    struct lock_keys k;
    lock_keys_init(&k, name);
    char claim[24], marker[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", RELEASED_MARKER_MS);
    const char *argv[] = {k.holder, k.queue, k.waiters,        "fg:fence", k.base, name,
                          lease_id, attach,  mode_names[mode], claim,      marker};
    return run_lock_script("lock_cancel.lua", 4, argv, sizeof argv / sizeof argv[0], res, err);
}

int lock_release(const char *name, const char *lease_id, struct lock_result *res,
                 struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    char claim[24], marker[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", RELEASED_MARKER_MS);
    const char *argv[] = {k.holder, k.queue,  k.waiters, "fg:fence", k.base,
                          name,     lease_id, claim,     marker};
    return run_lock_script("lock_release.lua", 4, argv, sizeof argv / sizeof argv[0], res, err);
}

int lock_renew(const char *name, const char *lease_id, long long ttl_ms, struct lock_result *res,
               struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    const char *argv[] = {k.holder, lease_id, ttl};
    return run_lock_script("lock_renew.lua", 1, argv, 3, res, err);
}

int lock_status(const char *name, json_t **out, struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    const char *argv[] = {k.holder, k.queue};
    json_t *raw = NULL;
    if (redis_script("lock_status.lua", 2, argv, 2, &raw, err) != 0)
        return -1;
    bool held = json_is_true(json_object_get(raw, "held"));
    const char *owner = json_string_value(json_object_get(raw, "owner"));
    *out = json_pack("{s:s, s:b, s:o, s:o, s:o, s:I}", "lock", name, "held", held, "fence",
                     held ? json_integer(int_field(raw, "fence", 0)) : json_null(), "owner",
                     held && owner && owner[0] ? json_string(owner) : json_null(), "expires_in_ms",
                     held ? json_integer(int_field(raw, "pttl", 0)) : json_null(), "waiting",
                     (json_int_t)int_field(raw, "waiting", 0));
    json_decref(raw);
    return 0;
}
