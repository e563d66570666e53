/* SPDX-License-Identifier: Apache-2.0 */
/*
 * semaphore.c - the semaphore transitions: acquire (first try, queueing,
 * re-check, claim), cancel, release, renew and status. Each is exactly one
 * script call; the decision and the action happen inside Redis, with Redis's
 * clock. This file fills each script's ARGV by name (lua_scripts.h);
 * lease_keys.c makes the keys, lease_result.c reads the answers.
 */
#include "lease/semaphore.h"

#include <stdio.h>

#include "gateway.h"
#include "lease/contention.h"
#include "lease/lease_answer.h"
#include "lease/lease_keys.h"
#include "store/backend/redis.h"
#include "util/fgjson.h"

/* The first try of an acquire (lua/sem_acquire_fast.lua): takes the first
 * slot of an idle semaphore, else sets *contended. */
static int acquire_first_try(const char *name, const struct acquire_params *p, const char *lease_id,
                             const char *attach, const char *ttl, const char *hold,
                             const char *limit, struct lease_result *res, bool *contended,
                             struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved_of_request(&k, p->request_id, rid_moved);
    const char *keys[SEM_ACQUIRE_FAST_NKEYS];
    lease_keys_sem_acquire_fast(&k, rid_moved, keys);
    char tail[LEASE_HOLDER_TAIL_MAX];
    lease_holder_tail(lease_id, ttl, hold, attach, p->request_id, p->owner, tail);
    const char *argv[SEM_ACQUIRE_FAST_NARGV] = {
        [SEM_ACQUIRE_FAST_ARGV_NAME] = name,
        [SEM_ACQUIRE_FAST_ARGV_TTL_MS] = ttl,
        [SEM_ACQUIRE_FAST_ARGV_LIMIT] = limit,
        [SEM_ACQUIRE_FAST_ARGV_TAIL] = tail,
        [SEM_ACQUIRE_FAST_ARGV_REQUEST_ID] = p->request_id,
    };
    size_t nkeys = lease_keys_of_request(SEM_ACQUIRE_FAST_NKEYS, SEM_ACQUIRE_FAST_KEY_RID_UNTIL,
                                         p->request_id);
    if (lease_first_try(SCRIPT_SEM_ACQUIRE_FAST, LEASE_KIND_SEMAPHORE, name, nkeys, keys, argv,
                        CONTENTION_IN_USE, res, contended, err) != 0)
        return -1;
    lease_first_grant(res, lease_id, p->ttl_ms);
    return 0;
}

/* The holder record's JSON from its claimed field on (lua/lib_sem_holder.lua)
 * of a claimed grant to attach: the request_id, the two ids and the owner,
 * every byte of the first and the last escaping to at most six. */
#define HOLDER_JSON_TAIL_MAX                                                                       \
    (2 * LEASE_ID_LEN + 64 + 6 * LEASE_REQUEST_ID_MAX + 6 * OWNER_NAME_MAX_LEN)
static void holder_json_tail(const char *attach, const char *request_id, const char *owner,
                             char out[HOLDER_JSON_TAIL_MAX])
{
    struct fgjson_out json;
    fgjson_out_init(&json, out, HOLDER_JSON_TAIL_MAX);
    fgjson_out_raw(&json, ",\"claimed\":1,", sizeof ",\"claimed\":1," - 1);
    fgjson_out_str(&json, "rid", request_id);
    char ids[2 * LEASE_ID_LEN + 64];
    int n = snprintf(ids, sizeof ids, ",\"inst\":\"%s\",\"attach\":\"%s\"", gw.instance_id, attach);
    FG_ASSERT(n > 0 && (size_t)n < sizeof ids);
    fgjson_out_raw(&json, ids, (size_t)n);
    fgjson_out_str(&json, "owner", owner);
    fgjson_out_raw(&json, "}", sizeof "}"); /* the brace and the text's NUL */
    FG_ASSERT(json.heap == NULL);
}

/* The lean try of an acquire on a semaphore in use (lua/sem_acquire_more.lua):
 * takes a free slot nobody waits for beside the holders there are, or the
 * first slot of a semaphore gone idle since, else sets *contended. */
static int acquire_more_try(const char *name, const struct acquire_params *p, const char *lease_id,
                            const char *attach, const char *ttl, const char *hold,
                            const char *limit, struct lease_result *res, bool *contended,
                            struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved_of_request(&k, p->request_id, rid_moved);
    const char *keys[SEM_ACQUIRE_MORE_NKEYS] = {
        [SEM_ACQUIRE_MORE_KEY_HOLDERS] = k.key[LIB_SEM_KEY_HOLDERS],
        [SEM_ACQUIRE_MORE_KEY_DATA] = k.key[LIB_SEM_KEY_DATA],
        [SEM_ACQUIRE_MORE_KEY_QUEUE] = k.key[LIB_SEM_KEY_QUEUE],
        [SEM_ACQUIRE_MORE_KEY_WAITERS] = k.key[LIB_SEM_KEY_WAITERS],
        [SEM_ACQUIRE_MORE_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_ACQUIRE_MORE_KEY_TICKETS] = k.key[LIB_SEM_KEY_TICKETS],
        [SEM_ACQUIRE_MORE_KEY_FENCE] = k.key[LIB_SEM_KEY_FENCE],
        [SEM_ACQUIRE_MORE_KEY_FENCE_LIMIT] = k.key[LIB_SEM_KEY_FENCE_LIMIT],
        [SEM_ACQUIRE_MORE_KEY_INDEX] = k.key[LIB_SEM_KEY_INDEX],
        [SEM_ACQUIRE_MORE_KEY_RIDS] = k.key[LIB_SEM_KEY_RIDS],
        [SEM_ACQUIRE_MORE_KEY_RID_UNTIL] = k.key[LIB_SEM_KEY_RID_UNTIL],
        [SEM_ACQUIRE_MORE_KEY_RID_ONE] = k.key[LIB_SEM_KEY_RID_ONE],
        [SEM_ACQUIRE_MORE_KEY_RID_MOVED] = rid_moved,
    };
    char tail[HOLDER_JSON_TAIL_MAX], first_tail[LEASE_HOLDER_TAIL_MAX];
    holder_json_tail(attach, p->request_id, p->owner, tail);
    lease_holder_tail(lease_id, ttl, hold, attach, p->request_id, p->owner, first_tail);
    const char *argv[SEM_ACQUIRE_MORE_NARGV] = {
        [SEM_ACQUIRE_MORE_ARGV_NAME] = name,
        [SEM_ACQUIRE_MORE_ARGV_LEASE] = lease_id,
        [SEM_ACQUIRE_MORE_ARGV_TTL_MS] = ttl,
        [SEM_ACQUIRE_MORE_ARGV_MAX_HOLD_MS] = hold,
        [SEM_ACQUIRE_MORE_ARGV_LIMIT] = limit,
        [SEM_ACQUIRE_MORE_ARGV_TAIL] = tail,
        [SEM_ACQUIRE_MORE_ARGV_REQUEST_ID] = p->request_id,
        [SEM_ACQUIRE_MORE_ARGV_FIRST_TAIL] = first_tail,
    };
    size_t nkeys =
        lease_keys_of_request(SEM_ACQUIRE_MORE_NKEYS, SEM_ACQUIRE_MORE_KEY_RIDS, p->request_id);
    if (lease_first_try(SCRIPT_SEM_ACQUIRE_MORE, LEASE_KIND_SEMAPHORE, name, nkeys, keys, argv,
                        CONTENTION_QUEUE, res, contended, err) != 0)
        return -1;
    lease_first_grant(res, lease_id, p->ttl_ms);
    return 0;
}

/* The lean try of an acquire that waits, on a semaphore found with a queue
 * (lua/sem_acquire_queue.lua): joins the queue where every slot is held, takes
 * a slot free where nobody waits, else sets *contended. */
static int acquire_queue_try(const char *name, const struct acquire_params *p, const char *lease_id,
                             const char *attach, const char *ttl, const char *hold,
                             const char *limit, struct lease_result *res, bool *contended,
                             struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved_of_request(&k, p->request_id, rid_moved);
    const char *keys[SEM_ACQUIRE_QUEUE_NKEYS] = {
        [SEM_ACQUIRE_QUEUE_KEY_HOLDERS] = k.key[LIB_SEM_KEY_HOLDERS],
        [SEM_ACQUIRE_QUEUE_KEY_DATA] = k.key[LIB_SEM_KEY_DATA],
        [SEM_ACQUIRE_QUEUE_KEY_QUEUE] = k.key[LIB_SEM_KEY_QUEUE],
        [SEM_ACQUIRE_QUEUE_KEY_WAITERS] = k.key[LIB_SEM_KEY_WAITERS],
        [SEM_ACQUIRE_QUEUE_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_ACQUIRE_QUEUE_KEY_TICKETS] = k.key[LIB_SEM_KEY_TICKETS],
        [SEM_ACQUIRE_QUEUE_KEY_FENCE] = k.key[LIB_SEM_KEY_FENCE],
        [SEM_ACQUIRE_QUEUE_KEY_FENCE_LIMIT] = k.key[LIB_SEM_KEY_FENCE_LIMIT],
        [SEM_ACQUIRE_QUEUE_KEY_GATEWAYS] = k.key[LIB_SEM_KEY_GATEWAYS],
        [SEM_ACQUIRE_QUEUE_KEY_RIDS] = k.key[LIB_SEM_KEY_RIDS],
        [SEM_ACQUIRE_QUEUE_KEY_RID_UNTIL] = k.key[LIB_SEM_KEY_RID_UNTIL],
        [SEM_ACQUIRE_QUEUE_KEY_RID_ONE] = k.key[LIB_SEM_KEY_RID_ONE],
        [SEM_ACQUIRE_QUEUE_KEY_RID_MOVED] = rid_moved,
    };
    struct lease_queue_join q;
    lease_queue_join_init(&q, attach, ttl, hold, p);
    const char *argv[SEM_ACQUIRE_QUEUE_NARGV] = {
        [SEM_ACQUIRE_QUEUE_ARGV_LEASE] = lease_id,
        [SEM_ACQUIRE_QUEUE_ARGV_LIMIT] = limit,
        [SEM_ACQUIRE_QUEUE_ARGV_MAX_WAITERS] = q.max_waiters,
        [SEM_ACQUIRE_QUEUE_ARGV_INSTANCE] = gw.instance_id,
        [SEM_ACQUIRE_QUEUE_ARGV_MARK_MS] = q.mark_ms,
        [SEM_ACQUIRE_QUEUE_ARGV_RECORD] = q.record,
        [SEM_ACQUIRE_QUEUE_ARGV_REQUEST_ID] = p->request_id,
        [SEM_ACQUIRE_QUEUE_ARGV_REQUEST_ID_TTL_MS] = q.request_id_ttl_ms,
    };
    size_t nkeys =
        lease_keys_of_request(SEM_ACQUIRE_QUEUE_NKEYS, SEM_ACQUIRE_QUEUE_KEY_RIDS, p->request_id);
    if (lease_first_try(SCRIPT_SEM_ACQUIRE_QUEUE, LEASE_KIND_SEMAPHORE, name, nkeys, keys, argv,
                        CONTENTION_NONE, res, contended, err) != 0)
        return -1;
    lease_first_grant(res, lease_id, p->ttl_ms);
    return 0;
}

/* The claim of a grant another gateway made to the waiter lease_id of attach, which the doorbell
 * rang for (lua/sem_claim.lua), else sets *contended. */
static int claim_try(const char *name, const struct acquire_params *p, const char *lease_id,
                     const char *attach, struct lease_result *res, bool *contended,
                     struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    const char *keys[SEM_CLAIM_NKEYS] = {
        [SEM_CLAIM_KEY_HOLDERS] = k.key[LIB_SEM_KEY_HOLDERS],
        [SEM_CLAIM_KEY_DATA] = k.key[LIB_SEM_KEY_DATA],
        [SEM_CLAIM_KEY_QUEUE] = k.key[LIB_SEM_KEY_QUEUE],
        [SEM_CLAIM_KEY_WAITERS] = k.key[LIB_SEM_KEY_WAITERS],
        [SEM_CLAIM_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_CLAIM_KEY_TICKETS] = k.key[LIB_SEM_KEY_TICKETS],
        [SEM_CLAIM_KEY_RIDS] = k.key[LIB_SEM_KEY_RIDS],
        [SEM_CLAIM_KEY_RID_UNTIL] = k.key[LIB_SEM_KEY_RID_UNTIL],
    };
    const char *argv[SEM_CLAIM_NARGV] = {
        [SEM_CLAIM_ARGV_LEASE] = lease_id,
        [SEM_CLAIM_ARGV_ATTACH] = attach,
    };
    size_t nkeys = lease_keys_of_request(SEM_CLAIM_NKEYS, SEM_CLAIM_KEY_RIDS, p->request_id);
    return lease_first_try(SCRIPT_SEM_CLAIM, LEASE_KIND_SEMAPHORE, name, nkeys, keys, argv,
                           CONTENTION_NONE, res, contended, err);
}

int sem_acquire(const char *name, const struct acquire_params *p, const char *lease_id,
                enum lease_acquire_wait wait, const char *attach, struct lease_result *res,
                struct fg_error *err)
{
    const struct config *cfg = gw.cfg;
    char ttl[24], hold[24], claim[24], maxw[24], rid_ttl[24], limit[24];
    snprintf(ttl, sizeof ttl, "%lld", p->ttl_ms);
    snprintf(hold, sizeof hold, "%lld", p->max_hold_ms);
    snprintf(limit, sizeof limit, "%lld", p->limit);
    /* The lean tries come first, as the hint says: the first try on a name
     * not seen contended, the try beside other holders on one it or an
     * earlier call found in use, the queue's on one found with a queue when
     * the caller waits; then the full script. A waiter looking again goes to
     * the full script alone (after the claim of a grant, if the doorbell rang
     * it): the try beside other holders knows nothing of a grant made to it,
     * and would take its slot once more under a new fence.
     * A retry of a request whose request_id names a lease, or a try that
     * finds no fence may be issued even once the next block was reserved,
     * goes from the first try to the full script (res->full_only). */
    bool again = wait == LEASE_ACQUIRE_AGAIN || wait == LEASE_ACQUIRE_RUNG;
    enum contention hint = again ? CONTENTION_QUEUE : contention_hint(LEASE_KIND_SEMAPHORE, name);
    bool contended = true;
    res->full_only = false;
    if (wait == LEASE_ACQUIRE_RUNG &&
        claim_try(name, p, lease_id, attach, res, &contended, err) != 0)
        return -1;
    if (hint == CONTENTION_NONE &&
        acquire_first_try(name, p, lease_id, attach, ttl, hold, limit, res, &contended, err) != 0)
        return -1;
    if (contended && !res->full_only && hint != CONTENTION_QUEUE &&
        acquire_more_try(name, p, lease_id, attach, ttl, hold, limit, res, &contended, err) != 0)
        return -1;
    if (contended && hint == CONTENTION_QUEUE && wait == LEASE_ACQUIRE_QUEUE &&
        acquire_queue_try(name, p, lease_id, attach, ttl, hold, limit, res, &contended, err) != 0)
        return -1;
    if (!contended)
        return 0;
    snprintf(claim, sizeof claim, "%lld", cfg->waiter_lease_ms);
    snprintf(maxw, sizeof maxw, "%lld", cfg->max_waiters_per_lock);
    snprintf(rid_ttl, sizeof rid_ttl, "%lld", acquire_request_id_ttl_ms(p));
    const char *argv[SEM_ACQUIRE_NARGV] = {
        [SEM_ACQUIRE_ARGV_NAME] = name,
        [SEM_ACQUIRE_ARGV_LEASE] = lease_id,
        [SEM_ACQUIRE_ARGV_REQUEST_ID] = p->request_id,
        [SEM_ACQUIRE_ARGV_TTL_MS] = ttl,
        [SEM_ACQUIRE_ARGV_MAX_HOLD_MS] = hold,
        [SEM_ACQUIRE_ARGV_OWNER] = p->owner,
        [SEM_ACQUIRE_ARGV_WAIT] = lease_acquire_wait_name(wait),
        [SEM_ACQUIRE_ARGV_INSTANCE] = gw.instance_id,
        [SEM_ACQUIRE_ARGV_ATTACH] = attach,
        [SEM_ACQUIRE_ARGV_CLAIM_MS] = claim,
        [SEM_ACQUIRE_ARGV_MAX_WAITERS] = maxw,
        [SEM_ACQUIRE_ARGV_REQUEST_ID_TTL_MS] = rid_ttl,
        [SEM_ACQUIRE_ARGV_MARK_MS] = lease_keys_layout() == LEASE_KEYS_PER_SLOT ? claim : "",
        [SEM_ACQUIRE_ARGV_LIMIT] = limit,
    };
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved(&k, p->request_id, rid_moved);
    return lease_script_run_moved(SCRIPT_SEM_ACQUIRE, LEASE_KIND_SEMAPHORE, name, &k, rid_moved,
                                  argv, res, err);
}

int sem_cancel(const char *name, const char *lease_id, const char *attach,
               enum lease_cancel_mode mode, struct lease_result *res, struct fg_error *err)
{
    FG_ASSERT(mode != LEASE_CANCEL_PLACE); /* lock sets' alone: sem_cancel.lua has no such mode */
    char claim[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    const char *argv[SEM_CANCEL_NARGV] = {
        [SEM_CANCEL_ARGV_NAME] = name,
        [SEM_CANCEL_ARGV_LEASE] = lease_id,
        [SEM_CANCEL_ARGV_ATTACH] = attach,
        [SEM_CANCEL_ARGV_MODE] = lease_cancel_mode_name(mode),
        [SEM_CANCEL_ARGV_CLAIM_MS] = claim,
        [SEM_CANCEL_ARGV_MARKER_MS] = FG_STR(LEASE_RELEASED_KEPT_MS),
        [SEM_CANCEL_ARGV_KEEP_MS] = FG_STR(SEM_KEEP_MS),
        [SEM_CANCEL_ARGV_INSTANCE] = gw.instance_id,
    };
    return lease_script_run(SCRIPT_SEM_CANCEL, LEASE_KIND_SEMAPHORE, name, argv, res, err);
}

int sem_leave(const char *name, const struct lease_leaver *ws, size_t n, bool *left,
              struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    char waiters[LEASE_LEAVE_PACKED];
    lease_leave_pack(ws, n, waiters);
    const char *argv[SEM_LEAVE_NARGV] = {
        [SEM_LEAVE_ARGV_KEEP_MS] = FG_STR(SEM_KEEP_MS),
        [SEM_LEAVE_ARGV_WAITERS] = waiters,
    };
    return lease_leave_run(SCRIPT_SEM_LEAVE, k.key, argv, n, left, err);
}

/* The first try of a release (lua/sem_release_fast.lua): the release of the
 * first holder kept in the limit key, else sets *contended. */
static int release_first_try(const char *name, const char *lease_id, struct lease_result *res,
                             bool *contended, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    const char *keys[SEM_RELEASE_FAST_NKEYS] = {
        [SEM_RELEASE_FAST_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_RELEASE_FAST_KEY_WATCHED] = k.key[LIB_SEM_KEY_WATCHED],
        [SEM_RELEASE_FAST_KEY_INDEX] = k.key[LIB_SEM_KEY_INDEX],
    };
    const char *argv[SEM_RELEASE_FAST_NARGV] = {
        [SEM_RELEASE_FAST_ARGV_NAME] = name,
        [SEM_RELEASE_FAST_ARGV_LEASE] = lease_id,
    };
    return lease_first_try(SCRIPT_SEM_RELEASE_FAST, LEASE_KIND_SEMAPHORE, name,
                           SEM_RELEASE_FAST_NKEYS, keys, argv, CONTENTION_IN_USE, res, contended,
                           err);
}

/* The lean try of a release of a holder beside others or the last one,
 * nobody waiting (lua/sem_release_more.lua), else sets *contended. */
static int release_more_try(const char *name, const char *lease_id, struct lease_result *res,
                            bool *contended, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    const char *keys[SEM_RELEASE_MORE_NKEYS] = {
        [SEM_RELEASE_MORE_KEY_HOLDERS] = k.key[LIB_SEM_KEY_HOLDERS],
        [SEM_RELEASE_MORE_KEY_DATA] = k.key[LIB_SEM_KEY_DATA],
        [SEM_RELEASE_MORE_KEY_QUEUE] = k.key[LIB_SEM_KEY_QUEUE],
        [SEM_RELEASE_MORE_KEY_ENDED] = k.key[LIB_SEM_KEY_ENDED],
        [SEM_RELEASE_MORE_KEY_WATCHED] = k.key[LIB_SEM_KEY_WATCHED],
        [SEM_RELEASE_MORE_KEY_INDEX] = k.key[LIB_SEM_KEY_INDEX],
        [SEM_RELEASE_MORE_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_RELEASE_MORE_KEY_WAITERS] = k.key[LIB_SEM_KEY_WAITERS],
        [SEM_RELEASE_MORE_KEY_TICKETS] = k.key[LIB_SEM_KEY_TICKETS],
    };
    const char *argv[SEM_RELEASE_MORE_NARGV] = {
        [SEM_RELEASE_MORE_ARGV_NAME] = name,
        [SEM_RELEASE_MORE_ARGV_LEASE] = lease_id,
    };
    return lease_first_try(SCRIPT_SEM_RELEASE_MORE, LEASE_KIND_SEMAPHORE, name,
                           SEM_RELEASE_MORE_NKEYS, keys, argv, CONTENTION_QUEUE, res, contended,
                           err);
}

/* The lean try of a release whose slot goes on to the oldest waiter
 * (lua/sem_release_handover.lua), else sets *contended; claim is the claim
 * window of a grant to another gateway's waiter (decimal text). */
static int release_handover_try(const char *name, const char *lease_id, const char *claim,
                                struct lease_result *res, bool *contended, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    const char *keys[SEM_RELEASE_HANDOVER_NKEYS] = {
        [SEM_RELEASE_HANDOVER_KEY_HOLDERS] = k.key[LIB_SEM_KEY_HOLDERS],
        [SEM_RELEASE_HANDOVER_KEY_DATA] = k.key[LIB_SEM_KEY_DATA],
        [SEM_RELEASE_HANDOVER_KEY_QUEUE] = k.key[LIB_SEM_KEY_QUEUE],
        [SEM_RELEASE_HANDOVER_KEY_WAITERS] = k.key[LIB_SEM_KEY_WAITERS],
        [SEM_RELEASE_HANDOVER_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_RELEASE_HANDOVER_KEY_TICKETS] = k.key[LIB_SEM_KEY_TICKETS],
        [SEM_RELEASE_HANDOVER_KEY_FENCE] = k.key[LIB_SEM_KEY_FENCE],
        [SEM_RELEASE_HANDOVER_KEY_FENCE_LIMIT] = k.key[LIB_SEM_KEY_FENCE_LIMIT],
        [SEM_RELEASE_HANDOVER_KEY_GATEWAYS] = k.key[LIB_SEM_KEY_GATEWAYS],
        [SEM_RELEASE_HANDOVER_KEY_RIDS] = k.key[LIB_SEM_KEY_RIDS],
        [SEM_RELEASE_HANDOVER_KEY_RID_UNTIL] = k.key[LIB_SEM_KEY_RID_UNTIL],
        [SEM_RELEASE_HANDOVER_KEY_ENDED] = k.key[LIB_SEM_KEY_ENDED],
        [SEM_RELEASE_HANDOVER_KEY_WATCHED] = k.key[LIB_SEM_KEY_WATCHED],
    };
    const char *argv[SEM_RELEASE_HANDOVER_NARGV] = {
        [SEM_RELEASE_HANDOVER_ARGV_NAME] = name,
        [SEM_RELEASE_HANDOVER_ARGV_LEASE] = lease_id,
        [SEM_RELEASE_HANDOVER_ARGV_CLAIM_MS] = claim,
        [SEM_RELEASE_HANDOVER_ARGV_INSTANCE] = gw.instance_id,
    };
    return lease_first_try(SCRIPT_SEM_RELEASE_HANDOVER, LEASE_KIND_SEMAPHORE, name,
                           SEM_RELEASE_HANDOVER_NKEYS, keys, argv, CONTENTION_NONE, res, contended,
                           err);
}

int sem_release(const char *name, const char *lease_id, long long fence, struct lease_result *res,
                struct fg_error *err)
{
    /* The lean tries first, as the hint says (sem_acquire): the first try on
     * a name not seen contended, the release beside other holders on one
     * found in use, the hand-over on one found with a queue; then the full
     * script. */
    enum contention hint = contention_hint(LEASE_KIND_SEMAPHORE, name);
    char claim[24];
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    bool contended = true;
    if (hint == CONTENTION_NONE && release_first_try(name, lease_id, res, &contended, err) != 0)
        return -1;
    if (contended && hint != CONTENTION_QUEUE &&
        release_more_try(name, lease_id, res, &contended, err) != 0)
        return -1;
    if (hint == CONTENTION_QUEUE &&
        release_handover_try(name, lease_id, claim, res, &contended, err) != 0)
        return -1;
    if (!contended)
        return 0;
    char fence_text[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    const char *argv[SEM_RELEASE_NARGV] = {
        [SEM_RELEASE_ARGV_NAME] = name,
        [SEM_RELEASE_ARGV_LEASE] = lease_id,
        [SEM_RELEASE_ARGV_FENCE] = fence_text,
        [SEM_RELEASE_ARGV_CLAIM_MS] = claim,
        [SEM_RELEASE_ARGV_INSTANCE] = gw.instance_id,
    };
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    char moved_end[LEASE_MOVED_END_MAX];
    lease_keys_moved_end(k.key[LIB_SEM_KEY_LIMIT], fence, moved_end);
    return lease_script_run_moved(SCRIPT_SEM_RELEASE, LEASE_KIND_SEMAPHORE, name, &k, moved_end,
                                  argv, res, err);
}

int sem_renew(const char *name, const char *lease_id, long long ttl_ms, struct lease_result *res,
              struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    const char *keys[SEM_RENEW_NKEYS] = {
        [SEM_RENEW_KEY_HOLDERS] = k.key[LIB_SEM_KEY_HOLDERS],
        [SEM_RENEW_KEY_DATA] = k.key[LIB_SEM_KEY_DATA],
        [SEM_RENEW_KEY_QUEUE] = k.key[LIB_SEM_KEY_QUEUE],
        [SEM_RENEW_KEY_WAITERS] = k.key[LIB_SEM_KEY_WAITERS],
        [SEM_RENEW_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_RENEW_KEY_TICKETS] = k.key[LIB_SEM_KEY_TICKETS],
        [SEM_RENEW_KEY_RIDS] = k.key[LIB_SEM_KEY_RIDS],
        [SEM_RENEW_KEY_RID_UNTIL] = k.key[LIB_SEM_KEY_RID_UNTIL],
        [SEM_RENEW_KEY_RID_ONE] = k.key[LIB_SEM_KEY_RID_ONE],
        [SEM_RENEW_KEY_ENDED] = k.key[LIB_SEM_KEY_ENDED],
    };
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    const char *argv[SEM_RENEW_NARGV] = {
        [SEM_RENEW_ARGV_LEASE] = lease_id,
        [SEM_RENEW_ARGV_TTL_MS] = ttl,
        [SEM_RENEW_ARGV_KEEP_MS] = FG_STR(SEM_KEEP_MS),
    };
    return lease_renewal_run(SCRIPT_SEM_RENEW, keys, argv, res, err);
}

int sem_revoke(const char *name, long long fence, struct lease_result *res, struct fg_error *err)
{
    char fence_text[24], claim[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    snprintf(claim, sizeof claim, "%lld", gw.cfg->waiter_lease_ms);
    const char *argv[SEM_REVOKE_NARGV] = {
        [SEM_REVOKE_ARGV_NAME] = name,
        [SEM_REVOKE_ARGV_FENCE] = fence_text,
        [SEM_REVOKE_ARGV_CLAIM_MS] = claim,
        [SEM_REVOKE_ARGV_MARKER_MS] = FG_STR(LEASE_RELEASED_KEPT_MS),
        [SEM_REVOKE_ARGV_KEEP_MS] = FG_STR(SEM_KEEP_MS),
        [SEM_REVOKE_ARGV_INSTANCE] = gw.instance_id,
    };
    return lease_script_run(SCRIPT_SEM_REVOKE, LEASE_KIND_SEMAPHORE, name, argv, res, err);
}

int sem_watch(const char *name, long long fence, bool mark_watched, struct lease_watch *out,
              struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    char fence_text[24];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    char mark[24], moved_end[LEASE_MOVED_END_MAX];
    lease_watch_mark_ms(mark_watched, mark, sizeof mark);
    lease_keys_moved_end(k.key[LIB_SEM_KEY_LIMIT], fence, moved_end);
    const char *keys[SEM_WATCH_NKEYS] = {
        [SEM_WATCH_KEY_HOLDERS] = k.key[LIB_SEM_KEY_HOLDERS],
        [SEM_WATCH_KEY_DATA] = k.key[LIB_SEM_KEY_DATA],
        [SEM_WATCH_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_WATCH_KEY_ENDED] = k.key[LIB_SEM_KEY_ENDED],
        [SEM_WATCH_KEY_WATCHED] = k.key[LIB_SEM_KEY_WATCHED],
        [SEM_WATCH_KEY_MOVED_END] = moved_end,
    };
    const char *argv[SEM_WATCH_NARGV] = {
        [SEM_WATCH_ARGV_FENCE] = fence_text,
        [SEM_WATCH_ARGV_MARK_MS] = mark,
    };
    return lease_watch_run(SCRIPT_SEM_WATCH, keys, argv, out, err);
}

int sem_status(const char *name, long long waiters, json_t **out, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    const char *keys[SEM_STATUS_NKEYS] = {
        [SEM_STATUS_KEY_HOLDERS] = k.key[LIB_SEM_KEY_HOLDERS],
        [SEM_STATUS_KEY_QUEUE] = k.key[LIB_SEM_KEY_QUEUE],
        [SEM_STATUS_KEY_LIMIT] = k.key[LIB_SEM_KEY_LIMIT],
        [SEM_STATUS_KEY_WAITERS] = k.key[LIB_SEM_KEY_WAITERS],
    };
    char count[24];
    snprintf(count, sizeof count, "%lld", waiters);
    const char *argv[SEM_STATUS_NARGV] = {[SEM_STATUS_ARGV_WAITERS] = count};
    json_t *raw = NULL;
    if (redis_script(SCRIPT_SEM_STATUS, keys, argv, &raw, err) != 0)
        return -1;
    long long limit = fgjson_answer_int(raw, "limit", 0);
    *out = json_pack("{s:s, s:o, s:I, s:I}", "semaphore", name, "limit",
                     limit > 0 ? json_integer(limit) : json_null(), "holders",
                     (json_int_t)fgjson_answer_int(raw, "holders", 0), "waiting",
                     (json_int_t)fgjson_answer_int(raw, "waiting", 0));
    if (waiters > 0)
        lease_answer_waiters(raw, *out);
    json_decref(raw);
    return 0;
}
