/* SPDX-License-Identifier: Apache-2.0 */
/*
 * semaphore.c - the semaphore transitions: acquire (first try, queueing,
 * re-check, claim), cancel, release, renew and status. Each is exactly one
 * script call; the decision and the action happen inside Redis, with Redis's
 * clock. This file builds the keys and arguments; lease_result.c reads the
 * answers.
 */
#include "lease/semaphore.h"

#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "lease/fence.h"
#include "store/redis.h"
#include "store/revocations.h"

#define SEM_KEEP_MS 600000LL /* how long an idle semaphore's keys outlive its last lease */

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

int sem_acquire(const char *name, const struct acquire_params *p, const char *lease_id, bool wait,
                const char *attach, struct lease_result *res, struct fg_error *err)
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
    snprintf(rid_ttl, sizeof rid_ttl, "%lld", acquire_request_id_ttl_ms(p));
    snprintf(limit, sizeof limit, "%lld", p->limit);
    snprintf(keep, sizeof keep, "%lld", SEM_KEEP_MS);
    const char *argv[] = {k.holders,      k.data,     k.queue, k.waiters, k.limit,
                          k.tickets,      "fg:fence", k.base,  name,      lease_id,
                          p->request_id,  ttl,        hold,    p->owner,  wait ? "1" : "0",
                          gw.instance_id, attach,     claim,   maxw,      rid_ttl,
                          limit,          keep};
    return lease_script_run("sem_acquire.lua", SEM_NKEYS, argv, sizeof argv / sizeof argv[0], res,
                            err);
}

int sem_cancel(const char *name, const char *lease_id, const char *attach,
               enum lease_cancel_mode mode, struct lease_result *res, struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    char claim[24], marker[24], keep[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", LEASE_RELEASED_KEPT_MS);
    snprintf(keep, sizeof keep, "%lld", SEM_KEEP_MS);
    const char *argv[] = {k.holders, k.data,    k.queue,    k.waiters,
                          k.limit,   k.tickets, "fg:fence", k.base,
                          name,      lease_id,  attach,     lease_cancel_mode_name(mode),
                          claim,     marker,    keep,       gw.instance_id};
    return lease_script_run("sem_cancel.lua", SEM_NKEYS, argv, sizeof argv / sizeof argv[0], res,
                            err);
}

int sem_release(const char *name, const char *lease_id, struct lease_result *res,
                struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    char claim[24], marker[24], keep[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", LEASE_RELEASED_KEPT_MS);
    snprintf(keep, sizeof keep, "%lld", SEM_KEEP_MS);
    const char *argv[] = {k.holders, k.data,     k.queue, k.waiters,     k.limit,
                          k.tickets, "fg:fence", k.base,  name,          lease_id,
                          claim,     marker,     keep,    gw.instance_id};
    return lease_script_run("sem_release.lua", SEM_NKEYS, argv, sizeof argv / sizeof argv[0], res,
                            err);
}

int sem_renew(const char *name, const char *lease_id, long long ttl_ms, struct lease_result *res,
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
    return lease_script_run("sem_renew.lua", SEM_NKEYS, argv, sizeof argv / sizeof argv[0], res,
                            err);
}

int sem_revoke(const char *name, long long fence, struct lease_result *res, struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    char fence_text[24], claim[24], marker[24], keep[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(marker, sizeof marker, "%lld", LEASE_RELEASED_KEPT_MS);
    snprintf(keep, sizeof keep, "%lld", SEM_KEEP_MS);
    const char *argv[] = {k.holders,  k.data,     k.queue,         k.waiters, k.limit,
                          k.tickets,  "fg:fence", REVOCATIONS_SET, k.base,    name,
                          fence_text, claim,      marker,          keep,      gw.instance_id};
    return lease_script_run("sem_revoke.lua", SEM_NKEYS + 1, argv, sizeof argv / sizeof argv[0],
                            res, err);
}

int sem_watch(const char *name, long long fence, struct lease_watch *out, struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    char fence_text[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    const char *argv[] = {k.holders, k.data, k.base, fence_text};
    return lease_watch_run("sem_watch.lua", 2, argv, 4, out, err);
}

int sem_status(const char *name, json_t **out, struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    const char *argv[] = {k.holders, k.queue, k.limit};
    json_t *raw = NULL;
    if (redis_script("sem_status.lua", 3, argv, 3, &raw, err) != 0)
        return -1;
    long long limit = lease_json_int(raw, "limit", 0);
    *out = json_pack("{s:s, s:o, s:I, s:I}", "semaphore", name, "limit",
                     limit > 0 ? json_integer(limit) : json_null(), "holders",
                     (json_int_t)lease_json_int(raw, "holders", 0), "waiting",
                     (json_int_t)lease_json_int(raw, "waiting", 0));
    json_decref(raw);
    return 0;
}
