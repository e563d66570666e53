/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lock.c - the lock transitions: acquire (first try, queueing, re-check, claim),
 * cancel, release, renew and status. Each is exactly one script call; the
 * decision and the action happen inside Redis. This file builds the keys and
 * arguments; lease_result.c reads the answers.
 */
#include "lease/lock.h"

#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "lease/lease_list.h"
#include "store/redis.h"

/* The keys of lock name, in script order (lua/lib_lock.lua), and its base. */
struct lock_keys {
    char base[NAME_MAX_LEN + 12];
    char holder[NAME_MAX_LEN + 16];
    char queue[NAME_MAX_LEN + 16];
    char waiters[NAME_MAX_LEN + 16];
    struct lease_common_keys common;
};

#define LOCK_NKEYS (3 + LEASE_COMMON_NKEYS)

static void lock_keys_init(struct lock_keys *k, const char *name)
{
    snprintf(k->base, sizeof k->base, "fg:lk:{%s}:", name);
    snprintf(k->holder, sizeof k->holder, "%sh", k->base);
    snprintf(k->queue, sizeof k->queue, "%sq", k->base);
    snprintf(k->waiters, sizeof k->waiters, "%sw", k->base);
    lease_common_keys_init(&k->common, k->base, LEASE_LIST_LOCK_INDEX);
}

/* Runs lock script `script` with the keys of k and the arguments args[0..nargs). */
static int lock_run(const char *script, const struct lock_keys *k, const char *const *args,
                    size_t nargs, struct lease_result *res, struct fg_error *err)
{
    const char *argv[LOCK_NKEYS + 16];
    FG_ASSERT(nargs <= 16);
    argv[0] = k->holder;
    argv[1] = k->queue;
    argv[2] = k->waiters;
    lease_common_keys_put(&k->common, argv + 3);
    memcpy(argv + LOCK_NKEYS, args, nargs * sizeof *args);
    return lease_script_run(script, LOCK_NKEYS, argv, LOCK_NKEYS + nargs, res, err);
}

int lock_acquire(const char *name, const struct acquire_params *p, const char *lease_id, bool wait,
                 const char *attach, struct lease_result *res, struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    const struct config *cfg = gw.cfg;
    char ttl[24], hold[24], claim[24], maxw[24], rid_ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", p->ttl_ms);
    snprintf(hold, sizeof hold, "%lld", p->max_hold_ms);
    snprintf(claim, sizeof claim, "%lld", cfg->waiter_lease_ms);
    snprintf(maxw, sizeof maxw, "%lld", cfg->max_waiters_per_lock);
    snprintf(rid_ttl, sizeof rid_ttl, "%lld", acquire_request_id_ttl_ms(p));
    const char *args[] = {name,     lease_id,         p->request_id,  ttl,    hold,
                          p->owner, wait ? "1" : "0", gw.instance_id, attach, claim,
                          maxw,     rid_ttl};
    return lock_run("lock_acquire.lua", &k, args, sizeof args / sizeof args[0], res, err);
}

int lock_cancel(const char *name, const char *lease_id, const char *attach,
                enum lease_cancel_mode mode, struct lease_result *res, struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    char claim[24], marker[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", LEASE_RELEASED_KEPT_MS);
    const char *args[] = {name, lease_id, attach, lease_cancel_mode_name(mode), claim, marker};
    return lock_run("lock_cancel.lua", &k, args, sizeof args / sizeof args[0], res, err);
}

int lock_release(const char *name, const char *lease_id, struct lease_result *res,
                 struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    char claim[24], marker[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", LEASE_RELEASED_KEPT_MS);
    const char *args[] = {name, lease_id, claim, marker};
    return lock_run("lock_release.lua", &k, args, sizeof args / sizeof args[0], res, err);
}

int lock_renew(const char *name, const char *lease_id, long long ttl_ms, struct lease_result *res,
               struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    const char *args[] = {lease_id, ttl};
    return lock_run("lock_renew.lua", &k, args, sizeof args / sizeof args[0], res, err);
}

int lock_revoke(const char *name, long long fence, struct lease_result *res, struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    char fence_text[24], claim[24], marker[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", LEASE_RELEASED_KEPT_MS);
    const char *args[] = {name, fence_text, claim, marker};
    return lock_run("lock_revoke.lua", &k, args, sizeof args / sizeof args[0], res, err);
}

int lock_watch(const char *name, long long fence, struct lease_watch *out, struct fg_error *err)
{
    struct lock_keys k;
    lock_keys_init(&k, name);
    char fence_text[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    const char *argv[] = {k.holder, k.common.ended, fence_text};
    return lease_watch_run("lock_watch.lua", 2, argv, 3, out, err);
}

int lock_holder_fence(const char *name, long long *fence, struct fg_error *err)
{
    json_t *status = NULL;
    if (lock_status(name, &status, err) != 0)
        return -1;
    *fence = lease_json_int(status, "fence", 0);
    json_decref(status);
    return 0;
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
                     held ? json_integer(lease_json_int(raw, "fence", 0)) : json_null(), "owner",
                     held && owner && owner[0] ? json_string(owner) : json_null(), "expires_in_ms",
                     held ? json_integer(lease_json_int(raw, "pttl", 0)) : json_null(), "waiting",
                     (json_int_t)lease_json_int(raw, "waiting", 0));
    json_decref(raw);
    return 0;
}
