/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lock.c - the lock transitions: acquire (first try, queueing, re-check, claim),
 * cancel, release, renew and status. Each is exactly one script call; the
 * decision and the action happen inside Redis. This file fills each script's
 * ARGV by name (lua_scripts.h); lease_keys.c makes the keys, lease_result.c
 * reads the answers.
 */
#include "lease/lock.h"

#include <stdio.h>

#include "gateway.h"
#include "lease/contention.h"
#include "lease/lease_answer.h"
#include "lease/lease_keys.h"
#include "store/backend/redis.h"
#include "util/fgjson.h"

/* The first try of an acquire (lua/lock_acquire_fast.lua): takes the free
 * lock nobody waits for, else sets *contended. */
static int acquire_first_try(const char *name, const struct acquire_params *p, const char *lease_id,
                             const char *attach, const char *ttl, const char *hold,
                             struct lease_result *res, bool *contended, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved_of_request(&k, p->request_id, rid_moved);
    const char *keys[LOCK_ACQUIRE_FAST_NKEYS];
    lease_keys_lock_acquire_fast(&k, rid_moved, keys);
    char tail[LEASE_HOLDER_TAIL_MAX];
    lease_holder_tail(lease_id, ttl, hold, attach, p->request_id, p->owner, tail);
    const char *argv[LOCK_ACQUIRE_FAST_NARGV] = {
        [LOCK_ACQUIRE_FAST_ARGV_NAME] = name,
        [LOCK_ACQUIRE_FAST_ARGV_TTL_MS] = ttl,
        [LOCK_ACQUIRE_FAST_ARGV_TAIL] = tail,
        [LOCK_ACQUIRE_FAST_ARGV_REQUEST_ID] = p->request_id,
    };
    size_t nkeys = lease_keys_of_request(LOCK_ACQUIRE_FAST_NKEYS, LOCK_ACQUIRE_FAST_KEY_RID_UNTIL,
                                         p->request_id);
    if (lease_first_try(SCRIPT_LOCK_ACQUIRE_FAST, LEASE_KIND_LOCK, name, nkeys, keys, argv,
                        CONTENTION_IN_USE, res, contended, err) != 0)
        return -1;
    lease_first_grant(res, lease_id, p->ttl_ms);
    return 0;
}

/* What the keys of a lock's queue need once an acquire of p joins it (lua/lib_lease.lua
 * queue_keep), as decimal text: need, how long from now they live at least, until its deadline
 * (wait_ms, from before the join) has passed by a waiter lease, the time its gateway has to give up
 * or take a grant up after it; keep, what they are given when they have less, a waiter lease more,
 * so that the joins after this one seldom set them again. A queue whose waiters all died with
 * their gateway then goes by itself. */
static void queue_life(const struct acquire_params *p, char need[24], char keep[24])
{
    long long lease = gw.cfg->waiter_lease_ms;
    snprintf(need, 24, "%lld", p->wait_ms + lease);
    snprintf(keep, 24, "%lld", p->wait_ms + 2 * lease);
}

/* The lean try of an acquire that waits, on a lock held by a live lease
 * (lua/lock_acquire_queue.lua): joins the queue, else sets *contended. */
static int acquire_queue_try(const char *name, const struct acquire_params *p, const char *lease_id,
                             const char *attach, const char *ttl, const char *hold,
                             struct lease_result *res, bool *contended, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved_of_request(&k, p->request_id, rid_moved);
    const char *keys[LOCK_ACQUIRE_QUEUE_NKEYS] = {
        [LOCK_ACQUIRE_QUEUE_KEY_HOLDER] = k.key[LIB_LOCK_KEY_HOLDER],
        [LOCK_ACQUIRE_QUEUE_KEY_QUEUE] = k.key[LIB_LOCK_KEY_QUEUE],
        [LOCK_ACQUIRE_QUEUE_KEY_WAITERS] = k.key[LIB_LOCK_KEY_WAITERS],
        [LOCK_ACQUIRE_QUEUE_KEY_TICKETS] = k.key[LIB_LOCK_KEY_TICKETS],
        [LOCK_ACQUIRE_QUEUE_KEY_GATEWAYS] = k.key[LIB_LOCK_KEY_GATEWAYS],
        [LOCK_ACQUIRE_QUEUE_KEY_RIDS] = k.key[LIB_LOCK_KEY_RIDS],
        [LOCK_ACQUIRE_QUEUE_KEY_RID_UNTIL] = k.key[LIB_LOCK_KEY_RID_UNTIL],
        [LOCK_ACQUIRE_QUEUE_KEY_RID_ONE] = k.key[LIB_LOCK_KEY_RID_ONE],
        [LOCK_ACQUIRE_QUEUE_KEY_RID_MOVED] = rid_moved,
    };
    struct lease_queue_join q;
    lease_queue_join_init(&q, attach, ttl, hold, p);
    char need[24], keep[24];
    queue_life(p, need, keep);
    const char *argv[LOCK_ACQUIRE_QUEUE_NARGV] = {
        [LOCK_ACQUIRE_QUEUE_ARGV_LEASE] = lease_id,
        [LOCK_ACQUIRE_QUEUE_ARGV_MAX_WAITERS] = q.max_waiters,
        [LOCK_ACQUIRE_QUEUE_ARGV_INSTANCE] = gw.instance_id,
        [LOCK_ACQUIRE_QUEUE_ARGV_MARK_MS] = q.mark_ms,
        [LOCK_ACQUIRE_QUEUE_ARGV_RECORD] = q.record,
        [LOCK_ACQUIRE_QUEUE_ARGV_QUEUE_MS] = need,
        [LOCK_ACQUIRE_QUEUE_ARGV_QUEUE_KEEP_MS] = keep,
        [LOCK_ACQUIRE_QUEUE_ARGV_REQUEST_ID] = p->request_id,
        [LOCK_ACQUIRE_QUEUE_ARGV_REQUEST_ID_TTL_MS] = q.request_id_ttl_ms,
    };
    size_t nkeys =
        lease_keys_of_request(LOCK_ACQUIRE_QUEUE_NKEYS, LOCK_ACQUIRE_QUEUE_KEY_RIDS, p->request_id);
    return lease_first_try(SCRIPT_LOCK_ACQUIRE_QUEUE, LEASE_KIND_LOCK, name, nkeys, keys, argv,
                           CONTENTION_NONE, res, contended, err);
}

/* The claim of a grant another gateway made to the waiter lease_id of attach, which the doorbell
 * rang for (lua/lock_claim.lua), else sets *contended. */
static int claim_try(const char *name, const struct acquire_params *p, const char *lease_id,
                     const char *attach, struct lease_result *res, bool *contended,
                     struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    const char *keys[LOCK_CLAIM_NKEYS] = {
        [LOCK_CLAIM_KEY_HOLDER] = k.key[LIB_LOCK_KEY_HOLDER],
        [LOCK_CLAIM_KEY_RIDS] = k.key[LIB_LOCK_KEY_RIDS],
        [LOCK_CLAIM_KEY_RID_UNTIL] = k.key[LIB_LOCK_KEY_RID_UNTIL],
    };
    const char *argv[LOCK_CLAIM_NARGV] = {
        [LOCK_CLAIM_ARGV_LEASE] = lease_id,
        [LOCK_CLAIM_ARGV_ATTACH] = attach,
    };
    size_t nkeys = lease_keys_of_request(LOCK_CLAIM_NKEYS, LOCK_CLAIM_KEY_RIDS, p->request_id);
    return lease_first_try(SCRIPT_LOCK_CLAIM, LEASE_KIND_LOCK, name, nkeys, keys, argv,
                           CONTENTION_NONE, res, contended, err);
}

int lock_acquire(const char *name, const struct acquire_params *p, const char *lease_id,
                 enum lease_acquire_wait wait, const char *attach, struct lease_result *res,
                 struct fg_error *err)
{
    const struct config *cfg = gw.cfg;
    char ttl[24], hold[24], claim[24], maxw[24], rid_ttl[24], need[24], keep[24];
    snprintf(ttl, sizeof ttl, "%lld", p->ttl_ms);
    snprintf(hold, sizeof hold, "%lld", p->max_hold_ms);
    /* The lean tries come first: a waiter the doorbell rang claims its grant;
     * else, as the hint says, the first try on a name not seen contended, the
     * queue's on one seen held or queued for when the caller waits; then the
     * full script. */
    enum contention hint = contention_hint(LEASE_KIND_LOCK, name);
    bool contended = true;
    if (wait == LEASE_ACQUIRE_RUNG &&
        claim_try(name, p, lease_id, attach, res, &contended, err) != 0)
        return -1;
    if (contended && hint == CONTENTION_NONE &&
        acquire_first_try(name, p, lease_id, attach, ttl, hold, res, &contended, err) != 0)
        return -1;
    if (contended && hint != CONTENTION_NONE && wait == LEASE_ACQUIRE_QUEUE &&
        acquire_queue_try(name, p, lease_id, attach, ttl, hold, res, &contended, err) != 0)
        return -1;
    if (!contended)
        return 0;
    snprintf(claim, sizeof claim, "%lld", cfg->waiter_lease_ms);
    snprintf(maxw, sizeof maxw, "%lld", cfg->max_waiters_per_lock);
    snprintf(rid_ttl, sizeof rid_ttl, "%lld", acquire_request_id_ttl_ms(p));
    queue_life(p, need, keep);
    const char *argv[LOCK_ACQUIRE_NARGV] = {
        [LOCK_ACQUIRE_ARGV_NAME] = name,
        [LOCK_ACQUIRE_ARGV_LEASE] = lease_id,
        [LOCK_ACQUIRE_ARGV_REQUEST_ID] = p->request_id,
        [LOCK_ACQUIRE_ARGV_TTL_MS] = ttl,
        [LOCK_ACQUIRE_ARGV_MAX_HOLD_MS] = hold,
        [LOCK_ACQUIRE_ARGV_OWNER] = p->owner,
        [LOCK_ACQUIRE_ARGV_WAIT] = lease_acquire_wait_name(wait),
        [LOCK_ACQUIRE_ARGV_INSTANCE] = gw.instance_id,
        [LOCK_ACQUIRE_ARGV_ATTACH] = attach,
        [LOCK_ACQUIRE_ARGV_CLAIM_MS] = claim,
        [LOCK_ACQUIRE_ARGV_MAX_WAITERS] = maxw,
        [LOCK_ACQUIRE_ARGV_REQUEST_ID_TTL_MS] = rid_ttl,
        [LOCK_ACQUIRE_ARGV_MARK_MS] = lease_keys_layout() == LEASE_KEYS_PER_SLOT ? claim : "",
        [LOCK_ACQUIRE_ARGV_QUEUE_MS] = need,
        [LOCK_ACQUIRE_ARGV_QUEUE_KEEP_MS] = keep,
    };
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved(&k, p->request_id, rid_moved);
    return lease_script_run_moved(SCRIPT_LOCK_ACQUIRE, LEASE_KIND_LOCK, name, &k, rid_moved, argv,
                                  res, err);
}

int lock_cancel(const char *name, const char *lease_id, const char *attach,
                enum lease_cancel_mode mode, struct lease_result *res, struct fg_error *err)
{
    char claim[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    const char *argv[LOCK_CANCEL_NARGV] = {
        [LOCK_CANCEL_ARGV_NAME] = name,
        [LOCK_CANCEL_ARGV_LEASE] = lease_id,
        [LOCK_CANCEL_ARGV_ATTACH] = attach,
        [LOCK_CANCEL_ARGV_MODE] = lease_cancel_mode_name(mode),
        [LOCK_CANCEL_ARGV_CLAIM_MS] = claim,
        [LOCK_CANCEL_ARGV_MARKER_MS] = FG_STR(LEASE_RELEASED_KEPT_MS),
        [LOCK_CANCEL_ARGV_INSTANCE] = gw.instance_id,
    };
    return lease_script_run(SCRIPT_LOCK_CANCEL, LEASE_KIND_LOCK, name, argv, res, err);
}

int lock_leave(const char *name, const struct lease_leaver *ws, size_t n, bool *left,
               struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    char waiters[LEASE_LEAVE_PACKED];
    lease_leave_pack(ws, n, waiters);
    const char *argv[LOCK_LEAVE_NARGV] = {
        [LOCK_LEAVE_ARGV_WAITERS] = waiters,
    };
    return lease_leave_run(SCRIPT_LOCK_LEAVE, k.key, argv, n, left, err);
}

/* The first try of a release (lua/lock_release_fast.lua): the holder's
 * release with nobody waiting, else sets *contended. */
static int release_first_try(const char *name, const char *lease_id, struct lease_result *res,
                             bool *contended, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    const char *keys[LOCK_RELEASE_FAST_NKEYS];
    lease_keys_lock_release_fast(&k, keys);
    const char *argv[LOCK_RELEASE_FAST_NARGV] = {
        [LOCK_RELEASE_FAST_ARGV_NAME] = name,
        [LOCK_RELEASE_FAST_ARGV_LEASE] = lease_id,
    };
    return lease_first_try(SCRIPT_LOCK_RELEASE_FAST, LEASE_KIND_LOCK, name, LOCK_RELEASE_FAST_NKEYS,
                           keys, argv, CONTENTION_IN_USE, res, contended, err);
}

int lock_release(const char *name, const char *lease_id, long long fence, struct lease_result *res,
                 struct fg_error *err)
{
    bool contended = true;
    if (contention_hint(LEASE_KIND_LOCK, name) == CONTENTION_NONE &&
        release_first_try(name, lease_id, res, &contended, err) != 0)
        return -1;
    if (!contended)
        return 0;
    char claim[24], fence_text[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    const char *argv[LOCK_RELEASE_NARGV] = {
        [LOCK_RELEASE_ARGV_NAME] = name,
        [LOCK_RELEASE_ARGV_LEASE] = lease_id,
        [LOCK_RELEASE_ARGV_FENCE] = fence_text,
        [LOCK_RELEASE_ARGV_CLAIM_MS] = claim,
        [LOCK_RELEASE_ARGV_MARKER_MS] = FG_STR(LEASE_RELEASED_KEPT_MS),
        [LOCK_RELEASE_ARGV_INSTANCE] = gw.instance_id,
    };
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    char moved_end[LEASE_MOVED_END_MAX];
    lease_keys_moved_end(k.key[LIB_LOCK_KEY_HOLDER], fence, moved_end);
    return lease_script_run_moved(SCRIPT_LOCK_RELEASE, LEASE_KIND_LOCK, name, &k, moved_end, argv,
                                  res, err);
}

int lock_renew(const char *name, const char *lease_id, long long ttl_ms, struct lease_result *res,
               struct fg_error *err)
{
    return lock_renew_attached(name, lease_id, NULL, ttl_ms, res, err);
}

int lock_renew_attached(const char *name, const char *lease_id, const char *attach,
                        long long ttl_ms, struct lease_result *res, struct fg_error *err)
{
    char attached[2 * LEASE_ID_LEN + 2]; /* lua/lock_renew.lua ARGV lease with attach */
    const char *lease = lease_id;
    if (attach != NULL) {
        snprintf(attached, sizeof attached, "%s %s", lease_id, attach);
        lease = attached;
    }
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    const char *keys[LOCK_RENEW_NKEYS];
    lease_keys_lock_renew(&k, keys);
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    const char *argv[LOCK_RENEW_NARGV] = {
        [LOCK_RENEW_ARGV_LEASE] = lease,
        [LOCK_RENEW_ARGV_TTL_MS] = ttl,
    };
    return lease_renewal_run(SCRIPT_LOCK_RENEW, keys, argv, res, err);
}

int lock_revoke(const char *name, long long fence, struct lease_result *res, struct fg_error *err)
{
    char fence_text[24], claim[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    const char *argv[LOCK_REVOKE_NARGV] = {
        [LOCK_REVOKE_ARGV_NAME] = name,
        [LOCK_REVOKE_ARGV_FENCE] = fence_text,
        [LOCK_REVOKE_ARGV_CLAIM_MS] = claim,
        [LOCK_REVOKE_ARGV_MARKER_MS] = FG_STR(LEASE_RELEASED_KEPT_MS),
        [LOCK_REVOKE_ARGV_INSTANCE] = gw.instance_id,
    };
    return lease_script_run(SCRIPT_LOCK_REVOKE, LEASE_KIND_LOCK, name, argv, res, err);
}

int lock_watch(const char *name, long long fence, bool mark_watched, struct lease_watch *out,
               struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    char fence_text[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    char mark[24], moved_end[LEASE_MOVED_END_MAX];
    lease_watch_mark_ms(mark_watched, mark, sizeof mark);
    lease_keys_moved_end(k.key[LIB_LOCK_KEY_HOLDER], fence, moved_end);
    const char *keys[LOCK_WATCH_NKEYS] = {
        [LOCK_WATCH_KEY_HOLDER] = k.key[LIB_LOCK_KEY_HOLDER],
        [LOCK_WATCH_KEY_ENDED] = k.key[LIB_LOCK_KEY_ENDED],
        [LOCK_WATCH_KEY_WATCHED] = k.key[LIB_LOCK_KEY_WATCHED],
        [LOCK_WATCH_KEY_MOVED_END] = moved_end,
    };
    const char *argv[LOCK_WATCH_NARGV] = {
        [LOCK_WATCH_ARGV_FENCE] = fence_text,
        [LOCK_WATCH_ARGV_MARK_MS] = mark,
    };
    return lease_watch_run(SCRIPT_LOCK_WATCH, keys, argv, out, err);
}

int lock_holder_fence(const char *name, long long *fence, struct fg_error *err)
{
    json_t *status = NULL;
    if (lock_status(name, 0, &status, err) != 0)
        return -1;
    *fence = fgjson_answer_int(status, "fence", 0);
    json_decref(status);
    return 0;
}

int lock_status(const char *name, long long waiters, json_t **out, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, name);
    const char *keys[LOCK_STATUS_NKEYS] = {
        [LOCK_STATUS_KEY_HOLDER] = k.key[LIB_LOCK_KEY_HOLDER],
        [LOCK_STATUS_KEY_QUEUE] = k.key[LIB_LOCK_KEY_QUEUE],
        [LOCK_STATUS_KEY_WAITERS] = k.key[LIB_LOCK_KEY_WAITERS],
    };
    char count[24];
    snprintf(count, sizeof count, "%lld", waiters);
    const char *argv[LOCK_STATUS_NARGV] = {[LOCK_STATUS_ARGV_WAITERS] = count};
    json_t *raw = NULL;
    if (redis_script(SCRIPT_LOCK_STATUS, keys, argv, &raw, err) != 0)
        return -1;
    bool held = json_is_true(json_object_get(raw, "held"));
    const char *owner = json_string_value(json_object_get(raw, "owner"));
    *out = json_pack("{s:s, s:b, s:o, s:o, s:o, s:I}", "lock", name, "held", held, "fence",
                     held ? json_integer(fgjson_answer_int(raw, "fence", 0)) : json_null(), "owner",
                     held && owner && owner[0] ? json_string(owner) : json_null(), "expires_in_ms",
                     held ? json_integer(fgjson_answer_int(raw, "pttl", 0)) : json_null(),
                     "waiting", (json_int_t)fgjson_answer_int(raw, "waiting", 0));
    if (waiters > 0)
        lease_answer_waiters(raw, *out);
    json_decref(raw);
    return 0;
}
