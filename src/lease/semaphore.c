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
#include "lease/lease_list.h"
#include "store/redis.h"

#define SEM_KEEP_MS 600000LL /* how long an idle semaphore's keys outlive its last lease */

/* The keys of semaphore name, in script order (lua/lib_sem.lua), and its base. */
struct sem_keys {
    char base[NAME_MAX_LEN + 12];
    char holders[NAME_MAX_LEN + 16];
    char data[NAME_MAX_LEN + 16];
    char queue[NAME_MAX_LEN + 16];
    char waiters[NAME_MAX_LEN + 16];
    char limit[NAME_MAX_LEN + 16];
    char tickets[NAME_MAX_LEN + 16];
    struct lease_common_keys common;
};

#define SEM_NKEYS (6 + LEASE_COMMON_NKEYS)

static void sem_keys_init(struct sem_keys *k, const char *name)
{
    snprintf(k->base, sizeof k->base, "fg:sm:{%s}:", name);
    snprintf(k->holders, sizeof k->holders, "%sh", k->base);
    snprintf(k->data, sizeof k->data, "%sd", k->base);
    snprintf(k->queue, sizeof k->queue, "%sq", k->base);
    snprintf(k->waiters, sizeof k->waiters, "%sw", k->base);
    snprintf(k->limit, sizeof k->limit, "%sl", k->base);
    snprintf(k->tickets, sizeof k->tickets, "%st", k->base);
    lease_common_keys_init(&k->common, k->base, LEASE_LIST_SEM_INDEX);
}

/* Runs semaphore script `script` with the keys of k and the arguments args[0..nargs). */
static int sem_run(const char *script, const struct sem_keys *k, const char *const *args,
                   size_t nargs, struct lease_result *res, struct fg_error *err)
{
    const char *argv[SEM_NKEYS + 16];
    FG_ASSERT(nargs <= 16);
    const char *own[] = {k->holders, k->data, k->queue, k->waiters, k->limit, k->tickets};
    memcpy(argv, own, sizeof own);
    lease_common_keys_put(&k->common, argv + 6);
    memcpy(argv + SEM_NKEYS, args, nargs * sizeof *args);
    return lease_script_run(script, SEM_NKEYS, argv, SEM_NKEYS + nargs, res, err);
}

int sem_acquire(const char *name, const struct acquire_params *p, const char *lease_id, bool wait,
                const char *attach, struct lease_result *res, struct fg_error *err)
{
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
    const char *args[] = {name,     lease_id,         p->request_id,  ttl,    hold,
                          p->owner, wait ? "1" : "0", gw.instance_id, attach, claim,
                          maxw,     rid_ttl,          limit,          keep};
    return sem_run("sem_acquire.lua", &k, args, sizeof args / sizeof args[0], res, err);
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
    const char *args[] = {name,  lease_id, attach, lease_cancel_mode_name(mode),
                          claim, marker,   keep,   gw.instance_id};
    return sem_run("sem_cancel.lua", &k, args, sizeof args / sizeof args[0], res, err);
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
    const char *args[] = {name, lease_id, claim, marker, keep, gw.instance_id};
    return sem_run("sem_release.lua", &k, args, sizeof args / sizeof args[0], res, err);
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
    const char *args[] = {name, lease_id, ttl, claim, keep, gw.instance_id};
    return sem_run("sem_renew.lua", &k, args, sizeof args / sizeof args[0], res, err);
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
    const char *args[] = {name, fence_text, claim, marker, keep, gw.instance_id};
    return sem_run("sem_revoke.lua", &k, args, sizeof args / sizeof args[0], res, err);
}

int sem_watch(const char *name, long long fence, struct lease_watch *out, struct fg_error *err)
{
    struct sem_keys k;
    sem_keys_init(&k, name);
    char fence_text[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    const char *argv[] = {k.holders, k.data, k.common.ended, fence_text};
    return lease_watch_run("sem_watch.lua", 3, argv, 4, out, err);
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
