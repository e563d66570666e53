/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_keys.c - making the keys of a lock or semaphore from its name: a table
 * per kind of the keys made from the name (prefix, name, tag end, suffix) and
 * where each goes in the script's KEYS, the common lease keys at the offset
 * where the kind's list takes lib_lease.lua's; on a Redis Cluster the keys
 * shared by all leases (fence sequence and limit, gateways, listing index,
 * revoked fences) become those of the lease's slot, the fence limit named
 * after the run_id it is read on too. It must not know what a script does
 * with a key.
 */
#include "lease/lease_keys.h"

#include <stdio.h>
#include <string.h>

#include "store/backend/key_slot.h"
#include "store/backend/shared_keys.h"
#include "util/error.h"

_Static_assert(LIB_SEM_NKEYS >= LIB_LOCK_NKEYS, "struct lease_keys is sized for a semaphore");

/* The transition scripts take exactly the keys of lua/lib_lock.lua or
 * lua/lib_sem.lua, but for those that name only the keys they touch (the first
 * tries, the renewals), and the acquires and releases, which name the key of
 * a request id or an end's record moved away last (lease_keys_rid_moved,
 * lease_keys_moved_end). */
#define TAKES(S, LIB) (S##_KEY_##LIB == 0 && S##_NKEYS == LIB##_NKEYS)
#define TAKES_AND(S, LIB, KEY)                                                                     \
    (S##_KEY_##LIB == 0 && S##_NKEYS == LIB##_NKEYS + 1 && S##_KEY_##KEY == LIB##_NKEYS)
_Static_assert(TAKES_AND(LOCK_ACQUIRE, LIB_LOCK, RID_MOVED) && TAKES(LOCK_CANCEL, LIB_LOCK) &&
                   TAKES_AND(LOCK_RELEASE, LIB_LOCK, MOVED_END) && TAKES(LOCK_REVOKE, LIB_LOCK) &&
                   TAKES(LOCK_LEAVE, LIB_LOCK) && TAKES_AND(SEM_ACQUIRE, LIB_SEM, RID_MOVED) &&
                   TAKES(SEM_CANCEL, LIB_SEM) && TAKES_AND(SEM_RELEASE, LIB_SEM, MOVED_END) &&
                   TAKES(SEM_REVOKE, LIB_SEM) && TAKES(SEM_LEAVE, LIB_SEM),
               "a transition script takes other keys than lua/lib_lock.lua's or lib_sem.lua's");

/* The request ids' keys, which the lean tries of an acquire name last
 * (lease_keys_of_request): rid_until, rid_one and rid_moved, after rids where
 * the script maps ids to leases in it (the try beside holders, the queue
 * joins; a first try never does). */
#define RID_KEYS_LAST(S)                                                                           \
    (S##_KEY_RID_UNTIL + 3 == S##_NKEYS && S##_KEY_RID_ONE == S##_KEY_RID_UNTIL + 1 &&             \
     S##_KEY_RID_MOVED == S##_KEY_RID_UNTIL + 2)
#define RIDS_FIRST(S) (RID_KEYS_LAST(S) && S##_KEY_RIDS + 1 == S##_KEY_RID_UNTIL)
_Static_assert(RID_KEYS_LAST(LOCK_ACQUIRE_FAST) && RID_KEYS_LAST(SEM_ACQUIRE_FAST) &&
                   RIDS_FIRST(LOCK_ACQUIRE_QUEUE) && RIDS_FIRST(SEM_ACQUIRE_MORE) &&
                   RIDS_FIRST(SEM_ACQUIRE_QUEUE),
               "a lean try of an acquire names the request ids' keys after the others");

/* A key made from the name: its index in the KEYS list, and its suffix. */
struct made_key {
    size_t at;
    const char *suffix;
};

/* A key named once for all leases, and its index in lib_lease.lua's list. */
struct fixed_key {
    size_t at;
    const char *key;
};

/* How the keys of one kind are laid out. */
struct kind_layout {
    size_t nkeys;               /* LIB_LOCK_NKEYS or LIB_SEM_NKEYS */
    const char *prefix;         /* KEY_LOCK_PREFIX or KEY_SEM_PREFIX */
    const char *index;          /* the kind's listing index */
    const struct made_key *own; /* the kind's own keys */
    size_t nown;                /* entries in own */
    size_t common_at;           /* where lib_lease.lua's keys start */
};

static const struct made_key lock_own[] = {
    {LIB_LOCK_KEY_HOLDER, KEY_SUFFIX_HOLDERS},
    {LIB_LOCK_KEY_QUEUE, KEY_SUFFIX_QUEUE},
    {LIB_LOCK_KEY_WAITERS, KEY_SUFFIX_WAITERS},
    {LIB_LOCK_KEY_TICKETS, KEY_SUFFIX_TICKETS},
};

static const struct made_key sem_own[] = {
    {LIB_SEM_KEY_HOLDERS, KEY_SUFFIX_HOLDERS}, {LIB_SEM_KEY_DATA, KEY_SUFFIX_HOLDER_DATA},
    {LIB_SEM_KEY_QUEUE, KEY_SUFFIX_QUEUE},     {LIB_SEM_KEY_WAITERS, KEY_SUFFIX_WAITERS},
    {LIB_SEM_KEY_LIMIT, KEY_SUFFIX_LIMIT},     {LIB_SEM_KEY_TICKETS, KEY_SUFFIX_TICKETS},
};

static const struct made_key common_made[] = {
    {LIB_LEASE_KEY_RIDS, KEY_SUFFIX_RIDS},       {LIB_LEASE_KEY_RID_UNTIL, KEY_SUFFIX_RID_UNTIL},
    {LIB_LEASE_KEY_RID_ONE, KEY_SUFFIX_RID_ONE}, {LIB_LEASE_KEY_ENDED, KEY_SUFFIX_ENDED},
    {LIB_LEASE_KEY_WATCHED, KEY_SUFFIX_WATCHED},
};

static const struct fixed_key common_fixed[] = {
    {LIB_LEASE_KEY_FENCE, KEY_FENCE},
    {LIB_LEASE_KEY_FENCE_LIMIT, KEY_FENCE_LIMIT},
    {LIB_LEASE_KEY_GATEWAYS, KEY_GATEWAYS},
    {LIB_LEASE_KEY_REVOKED, KEY_REVOKED},
};

/* The layouts of a lock (0) and of a semaphore (1). */
static const struct kind_layout layouts[] = {
    {LIB_LOCK_NKEYS, KEY_LOCK_PREFIX, KEY_LOCK_INDEX, lock_own,
     sizeof lock_own / sizeof lock_own[0], LIB_LOCK_KEY_LIB_LEASE},
    {LIB_SEM_NKEYS, KEY_SEM_PREFIX, KEY_SEM_INDEX, sem_own, sizeof sem_own / sizeof sem_own[0],
     LIB_SEM_KEY_LIB_LEASE},
};

/* Makes the key of m for name at offset + m->at: prefix, name, tag end and
 * suffix joined (cut to fit, as snprintf would cut them; copied, not printed:
 * every lease request makes eight or more). */
static void make(struct lease_keys *k, const struct kind_layout *layout, const char *name,
                 size_t offset, const struct made_key *m)
{
    size_t at = offset + m->at;
    const char *parts[] = {layout->prefix, name, KEY_TAG_END, m->suffix};
    char *out = k->made[at];
    size_t room = sizeof k->made[at] - 1, len = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t n = strnlen(parts[i], room - len);
        memcpy(out + len, parts[i], n);
        len += n;
    }
    out[len] = '\0';
    k->key[at] = out;
}

/* Set once at start-up, read by every lease_keys_init after. */
static enum lease_keys_layout layout_in_force = LEASE_KEYS_ONE_REDIS;

void lease_keys_set_layout(enum lease_keys_layout layout)
{
    layout_in_force = layout;
    shared_keys_set_per_slot(layout == LEASE_KEYS_PER_SLOT);
}

/* Names each key of k shared by all leases (the fixed ones and the index)
 * after the slot of the lease's own keys, which all carry the name as their
 * hash tag. */
static void per_slot(struct lease_keys *k, const struct kind_layout *layout)
{
    const char *own = k->made[layout->own[0].at];
    unsigned slot = key_slot(own, strlen(own));
    size_t shared[sizeof common_fixed / sizeof common_fixed[0] + 1];
    for (size_t i = 0; i < sizeof common_fixed / sizeof common_fixed[0]; i++)
        shared[i] = layout->common_at + common_fixed[i].at;
    shared[sizeof shared / sizeof shared[0] - 1] = layout->common_at + LIB_LEASE_KEY_INDEX;
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        size_t at = shared[i];
        size_t len = slot_tag_key(k->made[at], sizeof k->made[at], k->key[at], slot);
        k->key[at] = k->made[at];
        if (at == layout->common_at + LIB_LEASE_KEY_FENCE_LIMIT)
            memcpy(k->made[at] + len, ":" REDIS_RUN_ID_PLACEHOLDER,
                   sizeof ":" REDIS_RUN_ID_PLACEHOLDER);
    }
}

enum lease_keys_layout lease_keys_layout(void)
{
    return layout_in_force;
}

void lease_keys_fence(const struct lease_keys *k, struct lease_fence_keys *out)
{
    out->fence = k->key[k->common_at + LIB_LEASE_KEY_FENCE];
    out->limit = k->key[k->common_at + LIB_LEASE_KEY_FENCE_LIMIT];
    out->origin = KEY_FENCE_ORIGIN;
    out->floor = KEY_FENCE_FLOOR;
    if (layout_in_force != LEASE_KEYS_PER_SLOT)
        return;
    unsigned slot = key_slot(k->key[0], strlen(k->key[0]));
    slot_tag_key(out->made[0], sizeof out->made[0], KEY_FENCE_ORIGIN, slot);
    slot_tag_key(out->made[1], sizeof out->made[1], KEY_FENCE_FLOOR, slot);
    out->origin = out->made[0];
    out->floor = out->made[1];
}

void lease_keys_init(struct lease_keys *k, enum lease_kind kind, const char *name)
{
    const struct kind_layout *layout = &layouts[kind == LEASE_KIND_SEMAPHORE];
    memset(k->key, 0, sizeof k->key);
    k->nkeys = layout->nkeys;
    k->common_at = layout->common_at;
    for (size_t i = 0; i < layout->nown; i++)
        make(k, layout, name, 0, &layout->own[i]);
    for (size_t i = 0; i < sizeof common_made / sizeof common_made[0]; i++)
        make(k, layout, name, layout->common_at, &common_made[i]);
    for (size_t i = 0; i < sizeof common_fixed / sizeof common_fixed[0]; i++)
        k->key[layout->common_at + common_fixed[i].at] = common_fixed[i].key;
    k->key[layout->common_at + LIB_LEASE_KEY_INDEX] = layout->index;
    if (layout_in_force == LEASE_KEYS_PER_SLOT)
        per_slot(k, layout);
}

int lease_keys_slot(enum lease_kind kind, const char *name)
{
    if (layout_in_force != LEASE_KEYS_PER_SLOT)
        return -1;
    struct lease_keys k;
    const struct kind_layout *layout = &layouts[kind == LEASE_KIND_SEMAPHORE];
    make(&k, layout, name, 0, &layout->own[0]);
    const char *own = k.made[layout->own[0].at];
    return (int)key_slot(own, strlen(own));
}

/* Where each key of a script that names only some of a lock's comes from in
 * the lock's KEYS. */
static const size_t acquire_fast_from[LOCK_ACQUIRE_FAST_NKEYS] = {
    [LOCK_ACQUIRE_FAST_KEY_HOLDER] = LIB_LOCK_KEY_HOLDER,
    [LOCK_ACQUIRE_FAST_KEY_TICKETS] = LIB_LOCK_KEY_TICKETS,
    [LOCK_ACQUIRE_FAST_KEY_FENCE] = LIB_LOCK_KEY_FENCE,
    [LOCK_ACQUIRE_FAST_KEY_FENCE_LIMIT] = LIB_LOCK_KEY_FENCE_LIMIT,
    [LOCK_ACQUIRE_FAST_KEY_INDEX] = LIB_LOCK_KEY_INDEX,
    [LOCK_ACQUIRE_FAST_KEY_RID_UNTIL] = LIB_LOCK_KEY_RID_UNTIL,
    [LOCK_ACQUIRE_FAST_KEY_RID_ONE] = LIB_LOCK_KEY_RID_ONE,
};

/* The same of a semaphore's first try, in the semaphore's KEYS. */
static const size_t sem_acquire_fast_from[SEM_ACQUIRE_FAST_NKEYS] = {
    [SEM_ACQUIRE_FAST_KEY_LIMIT] = LIB_SEM_KEY_LIMIT,
    [SEM_ACQUIRE_FAST_KEY_HOLDERS] = LIB_SEM_KEY_HOLDERS,
    [SEM_ACQUIRE_FAST_KEY_QUEUE] = LIB_SEM_KEY_QUEUE,
    [SEM_ACQUIRE_FAST_KEY_FENCE] = LIB_SEM_KEY_FENCE,
    [SEM_ACQUIRE_FAST_KEY_FENCE_LIMIT] = LIB_SEM_KEY_FENCE_LIMIT,
    [SEM_ACQUIRE_FAST_KEY_INDEX] = LIB_SEM_KEY_INDEX,
    [SEM_ACQUIRE_FAST_KEY_RID_UNTIL] = LIB_SEM_KEY_RID_UNTIL,
    [SEM_ACQUIRE_FAST_KEY_RID_ONE] = LIB_SEM_KEY_RID_ONE,
};

static const size_t release_fast_from[LOCK_RELEASE_FAST_NKEYS] = {
    [LOCK_RELEASE_FAST_KEY_HOLDER] = LIB_LOCK_KEY_HOLDER,
    [LOCK_RELEASE_FAST_KEY_WATCHED] = LIB_LOCK_KEY_WATCHED,
    [LOCK_RELEASE_FAST_KEY_TICKETS] = LIB_LOCK_KEY_TICKETS,
    [LOCK_RELEASE_FAST_KEY_INDEX] = LIB_LOCK_KEY_INDEX,
};

static const size_t renew_from[LOCK_RENEW_NKEYS] = {
    [LOCK_RENEW_KEY_HOLDER] = LIB_LOCK_KEY_HOLDER,
    [LOCK_RENEW_KEY_RIDS] = LIB_LOCK_KEY_RIDS,
    [LOCK_RENEW_KEY_RID_UNTIL] = LIB_LOCK_KEY_RID_UNTIL,
    [LOCK_RENEW_KEY_RID_ONE] = LIB_LOCK_KEY_RID_ONE,
    [LOCK_RENEW_KEY_ENDED] = LIB_LOCK_KEY_ENDED,
};

/* Fills out[0..n) with the keys of k at the indexes from[0..n). */
static void pick(const struct lease_keys *k, const size_t *from, size_t n, const char **out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = k->key[from[i]];
}

_Static_assert(LOCK_ACQUIRE_FAST_KEY_RID_MOVED == LOCK_ACQUIRE_FAST_NKEYS - 1 &&
                   SEM_ACQUIRE_FAST_KEY_RID_MOVED == SEM_ACQUIRE_FAST_NKEYS - 1,
               "a first try names rid_moved last");

void lease_keys_lock_acquire_fast(const struct lease_keys *k, const char *rid_moved,
                                  const char **out)
{
    pick(k, acquire_fast_from, LOCK_ACQUIRE_FAST_KEY_RID_MOVED, out);
    out[LOCK_ACQUIRE_FAST_KEY_RID_MOVED] = rid_moved;
}

void lease_keys_sem_acquire_fast(const struct lease_keys *k, const char *rid_moved,
                                 const char **out)
{
    pick(k, sem_acquire_fast_from, SEM_ACQUIRE_FAST_KEY_RID_MOVED, out);
    out[SEM_ACQUIRE_FAST_KEY_RID_MOVED] = rid_moved;
}

void lease_keys_lock_release_fast(const struct lease_keys *k, const char **out)
{
    pick(k, release_fast_from, LOCK_RELEASE_FAST_NKEYS, out);
}

void lease_keys_lock_renew(const struct lease_keys *k, const char **out)
{
    pick(k, renew_from, LOCK_RENEW_NKEYS, out);
}

size_t lease_keys_of_request(size_t nkeys, size_t first_rid_key, const char *request_id)
{
    return request_id[0] != '\0' ? nkeys : first_rid_key;
}

void lease_keys_rid_moved(const struct lease_keys *k, const char *request_id,
                          char out[LEASE_RID_MOVED_MAX])
{
    int n = snprintf(out, LEASE_RID_MOVED_MAX, "%s" KEY_MOVED "%s",
                     k->key[k->common_at + LIB_LEASE_KEY_RID_ONE], request_id);
    FG_ASSERT(n > 0 && (size_t)n < LEASE_RID_MOVED_MAX);
}

void lease_keys_rid_moved_of_request(const struct lease_keys *k, const char *request_id,
                                     char out[LEASE_RID_MOVED_MAX])
{
    if (request_id[0] == '\0')
        out[0] = '\0';
    else
        lease_keys_rid_moved(k, request_id, out);
}

void lease_keys_moved_end(const char *record_key, long long fence, char out[LEASE_MOVED_END_MAX])
{
    snprintf(out, LEASE_MOVED_END_MAX, "%s" KEY_MOVED "%lld", record_key, fence);
}
