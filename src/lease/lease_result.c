/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_result.c - running lease scripts, the one retry after a "nofence" or
 * "norevoked" answer, and the hand-over of the grants an answer makes to
 * waiters of this gateway (lease_hand_over), so no caller has to remember it.
 * Reading the answers is lease_answer.c's.
 */
#include "lease/lease_result.h"

#include <stdio.h>
#include <string.h>

#include "embedded.h"
#include "gateway.h"
#include "lease/contention.h"
#include "lease/fence.h"
#include "lease/lease_answer.h"
#include "lease/lease_keys.h"
#include "lease/lease_wait.h"
#include "lease/redis_clock.h"
#include "store/backend/redis.h"
#include "store/fenced/revocations.h"
#include "util/fgjson.h"

const char *lease_acquire_wait_name(enum lease_acquire_wait wait)
{
    static const char *const names[] = {
        [LEASE_ACQUIRE_ONCE] = "0",
        [LEASE_ACQUIRE_QUEUE] = "1",
        [LEASE_ACQUIRE_AGAIN] = "again",
        [LEASE_ACQUIRE_RUNG] = "again",
    };
    return names[wait];
}

const char *lease_cancel_mode_name(enum lease_cancel_mode mode)
{
    static const char *const names[] = {
        [LEASE_CANCEL_TAKE] = "take",
        [LEASE_CANCEL_DROP] = "drop",
        [LEASE_CANCEL_ORPHAN] = "orphan",
        [LEASE_CANCEL_PLACE] = "place",
    };
    return names[mode];
}

/* Where a lease script's answer goes: lease_answer_read's result and retry. */
struct answer_into {
    struct lease_result *res;
    enum lease_retry retry;
};

static int read_answer(const char *name, const char *text, size_t len, void *ctx,
                       struct fg_error *err)
{
    struct answer_into *into = ctx;
    return lease_answer_read(name, text, len, into->res, &into->retry, err);
}

/* Runs script with the first nkeys of keys and argv, and reads its reply
 * into *res, or *retry (NULL: a reply that asks for a retry fails). */
static int script_answer(enum fg_script script, size_t nkeys, const char *const *keys,
                         const char *const *argv, struct lease_result *res, enum lease_retry *retry,
                         struct fg_error *err)
{
    struct answer_into into = {.res = res, .retry = LEASE_RETRY_NONE};
    if (redis_script_text(script, nkeys, keys, argv, read_answer, &into, err) != 0)
        return -1;
    if (retry != NULL)
        *retry = into.retry;
    else if (into.retry != LEASE_RETRY_NONE)
        return fg_fail(err, FG_ERR_INTERNAL, "%s asked for a retry", lua_scripts[script].name);
    return 0;
}

int lease_script_run_moved(enum fg_script script, enum lease_kind kind, const char *name,
                           const struct lease_keys *k, const char *moved, const char *const *argv,
                           struct lease_result *res, struct fg_error *err)
{
    const char *keys[LIB_SEM_NKEYS + 1];
    size_t nkeys = k->nkeys;
    memcpy(keys, k->key, nkeys * sizeof *keys);
    if (moved != NULL)
        keys[nkeys++] = moved;
    FG_ASSERT(lua_scripts[script].nkeys == nkeys);
    for (int attempt = 0; attempt < 2; attempt++) {
        enum lease_retry retry;
        if (script_answer(script, nkeys, keys, argv, res, &retry, err) != 0)
            return -1;
        if (retry == LEASE_RETRY_NONE) {
            if (res->outcome == LEASE_QUEUED || res->outcome == LEASE_BUSY ||
                res->outcome == LEASE_FULL || res->nhandoff > 0)
                contention_seen(kind, name, CONTENTION_QUEUE);
            lease_hand_over(kind, name, res);
            return 0;
        }
        int dealt = retry == LEASE_RETRY_NOFENCE
                        ? fence_recover_lease(k, err)
                        : revocations_restore(k->key[k->common_at + LIB_LEASE_KEY_REVOKED], err);
        if (dealt != 0)
            return fg_not_run(err); /* the script answered a retry before it changed anything */
    }
    fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "no fence could be reserved");
    return fg_not_run(err); /* the second answer was a retry too */
}

int lease_script_run(enum fg_script script, enum lease_kind kind, const char *name,
                     const char *const *argv, struct lease_result *res, struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, kind, name);
    return lease_script_run_moved(script, kind, name, &k, NULL, argv, res, err);
}

int lease_renewal_run(enum fg_script script, const char *const *keys, const char *const *argv,
                      struct lease_result *res, struct fg_error *err)
{
    if (script_answer(script, lua_scripts[script].nkeys, keys, argv, res, NULL, err) != 0)
        return -1;
    if (res->outcome == LEASE_RENEWED) {
        res->expires_at_ms = res->now_ms + res->ttl_ms;
        redis_clock_saw(res->now_ms);
    }
    return 0;
}

int lease_gone(enum lease_kind kind, const char *name, long long fence, struct lease_result *res,
               struct fg_error *err)
{
    struct lease_keys k;
    lease_keys_init(&k, kind, name);
    char fence_text[24], moved_end[LEASE_MOVED_END_MAX];
    snprintf(fence_text, sizeof fence_text, "%lld", fence);
    /* the key a lease's end is recorded in when it leaves nobody behind (lua/lib_lease.lua) */
    const char *record = k.key[kind == LEASE_KIND_LOCK ? LIB_LOCK_KEY_HOLDER : LIB_SEM_KEY_LIMIT];
    lease_keys_moved_end(record, fence, moved_end);
    const char *keys[LEASE_GONE_NKEYS] = {
        [LEASE_GONE_KEY_ENDED] = k.key[k.common_at + LIB_LEASE_KEY_ENDED],
        [LEASE_GONE_KEY_RECORD] = record,
        [LEASE_GONE_KEY_MOVED_END] = moved_end,
    };
    const char *argv[LEASE_GONE_NARGV] = {[LEASE_GONE_ARGV_FENCE] = fence_text};
    return script_answer(SCRIPT_LEASE_GONE, LEASE_GONE_NKEYS, keys, argv, res, NULL, err);
}

int lease_first_try(enum fg_script script, enum lease_kind kind, const char *name, size_t nkeys,
                    const char *const *keys, const char *const *argv, enum contention seen,
                    struct lease_result *res, bool *contended, struct fg_error *err)
{
    enum lease_retry retry;
    if (script_answer(script, nkeys, keys, argv, res, &retry, err) != 0)
        return -1;
    if (retry == LEASE_RETRY_NOFENCE) {
        /* The block of fences ran out: reserved anew, as for a full script
         * (lease_script_run_moved), the try runs once more, so a grant keeps
         * the layout of a lean try's, which the lean release takes. */
        struct lease_keys k;
        lease_keys_init(&k, kind, name);
        if (fence_recover_lease(&k, err) != 0)
            return fg_not_run(err); /* "nofence" comes before the try changes anything */
        if (script_answer(script, nkeys, keys, argv, res, &retry, err) != 0)
            return -1;
    }
    res->full_only = retry == LEASE_RETRY_REPEAT || retry == LEASE_RETRY_NOFENCE;
    *contended = retry == LEASE_RETRY_CONTENDED || res->full_only;
    if (retry == LEASE_RETRY_CONTENDED && seen != CONTENTION_NONE)
        contention_seen(kind, name, seen);
    else if (res->outcome == LEASE_QUEUED || res->nhandoff > 0)
        contention_seen(kind, name, CONTENTION_QUEUE);
    if (retry != LEASE_RETRY_NONE && !*contended)
        return fg_fail(err, FG_ERR_INTERNAL, "%s asked for a retry", lua_scripts[script].name);
    lease_hand_over(kind, name, res);
    /* A grant answers Redis's time; a release, which asks Redis none, the
     * grant's, of which the hold's length is reckoned (redis_clock.h). */
    if (res->outcome == LEASE_GRANTED && res->granted_at_ms > 0)
        redis_clock_saw(res->granted_at_ms);
    else if (res->outcome == LEASE_RELEASED && res->granted_at_ms > 0)
        res->held_ms = redis_clock_since(res->granted_at_ms);
    return 0;
}

void lease_holder_tail(const char *lease_id, const char *ttl, const char *hold, const char *attach,
                       const char *request_id, const char *owner, char out[LEASE_HOLDER_TAIL_MAX])
{
    int n = snprintf(out, LEASE_HOLDER_TAIL_MAX, "%s %s %s 1 %s %s %zu %s%s", lease_id, ttl, hold,
                     gw.instance_id, attach, strlen(request_id), request_id, owner);
    FG_ASSERT(n > 0 && n < LEASE_HOLDER_TAIL_MAX);
}

void lease_queue_join_init(struct lease_queue_join *q, const char *attach, const char *ttl,
                           const char *hold, const struct acquire_params *p)
{
    struct fgjson_out json;
    fgjson_out_init(&json, q->record, sizeof q->record);
    char fields[2 * LEASE_ID_LEN + 2 * 24 + 64];
    int n = snprintf(fields, sizeof fields,
                     "{\"inst\":\"%s\",\"attach\":\"%s\",\"ttl\":\"%s\",\"max_hold\":\"%s\",",
                     gw.instance_id, attach, ttl, hold);
    FG_ASSERT(n > 0 && (size_t)n < sizeof fields);
    fgjson_out_raw(&json, fields, (size_t)n);
    fgjson_out_str(&json, "owner", p->owner);
    fgjson_out_str(&json, "rid", p->request_id);
    static const char rest[] = ",\"since\":";
    fgjson_out_raw(&json, rest, sizeof rest); /* the text's NUL too */
    FG_ASSERT(json.heap == NULL);
    snprintf(q->request_id_ttl_ms, sizeof q->request_id_ttl_ms, "%lld",
             acquire_request_id_ttl_ms(p));
    snprintf(q->max_waiters, sizeof q->max_waiters, "%lld", gw.cfg->max_waiters_per_lock);
    q->mark_ms[0] = '\0';
    if (lease_keys_layout() == LEASE_KEYS_PER_SLOT)
        snprintf(q->mark_ms, sizeof q->mark_ms, "%lld", gw.cfg->waiter_lease_ms);
}

void lease_first_grant(struct lease_result *res, const char *lease_id, long long ttl_ms)
{
    if (res->outcome != LEASE_GRANTED)
        return;
    snprintf(res->lease_id, sizeof res->lease_id, "%s", lease_id);
    res->ttl_ms = ttl_ms;
    res->expires_at_ms = res->granted_at_ms + ttl_ms;
}

void lease_leave_pack(const struct lease_leaver *ws, size_t n, char *out)
{
    FG_ASSERT(n > 0 && n <= LEASE_LEAVE_MAX);
    for (size_t i = 0; i < n; i++) {
        FG_ASSERT(strlen(ws[i].lease_id) == LEASE_ID_LEN && strlen(ws[i].attach) == LEASE_ID_LEN);
        memcpy(out + 2 * i * LEASE_ID_LEN, ws[i].lease_id, LEASE_ID_LEN);
        memcpy(out + (2 * i + 1) * LEASE_ID_LEN, ws[i].attach, LEASE_ID_LEN);
    }
    out[2 * n * LEASE_ID_LEN] = '\0';
}

int lease_leave_run(enum fg_script script, const char *const *keys, const char *const *argv,
                    size_t n, bool *left, struct fg_error *err)
{
    struct lease_result res;
    if (script_answer(script, lua_scripts[script].nkeys, keys, argv, &res, NULL, err) != 0)
        return -1;
    if (res.outcome != LEASE_LEFT || strlen(res.left) != n)
        return fg_fail(err, FG_ERR_INTERNAL, "%s answered no waiter list",
                       lua_scripts[script].name);
    for (size_t i = 0; i < n; i++)
        left[i] = res.left[i] == '1';
    return 0;
}

void lease_watch_mark_ms(bool mark, char *buf, size_t size)
{
    long long ms = 3 * gw.cfg->poll_ms;
    snprintf(buf, size, "%lld",
             !mark                    ? 0
             : ms > WATCH_MARK_MIN_MS ? ms
                                      : (long long)WATCH_MARK_MIN_MS);
}

int lease_watch_run(enum fg_script script, const char *const *keys, const char *const *argv,
                    struct lease_watch *out, struct fg_error *err)
{
    struct lease_result res;
    if (script_answer(script, lua_scripts[script].nkeys, keys, argv, &res, NULL, err) != 0)
        return -1;
    return lease_answer_watch(lua_scripts[script].name, &res, out, err);
}
