/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_list.c - the listing of live locks and semaphores: builds the
 * arguments of lua/lease_list.lua and turns its answer into the API's items;
 * on a cluster, reads every slot's index and merges the page from them
 * (lease/list_merge.h). It knows nothing of HTTP or scopes (the handler
 * filters what a caller sees).
 */
#include "lease/lease_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/lease_keys.h"
#include "lease/lease_result.h"
#include "lease/list_merge.h"
#include "store/backend/key_slot.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "util/fgjson.h"

#define PRUNE_BUDGET      500 /* names a janitor pass looks at */
#define INDEX_KEY_MAX     (sizeof KEY_SEM_INDEX + SLOT_TAG_MAX + 3) /* a slot's listing index */
#define PRUNE_SLOTS       1024 /* slots a janitor pass looks at on a cluster */
#define PRUNE_SLOT_BUDGET 100  /* names it looks at in each */

/* The listing index of each kind (kept by the lease scripts), its name in
 * lease_list.lua and the kind of lease it lists. */
static const struct {
    const char *index;
    const char *kind;
    enum lease_kind lease;
} kinds[] = {
    [LEASE_LIST_LOCKS] = {KEY_LOCK_INDEX, "l", LEASE_KIND_LOCK},
    [LEASE_LIST_SEMAPHORES] = {KEY_SEM_INDEX, "s", LEASE_KIND_SEMAPHORE},
};

/* The integer member of raw as JSON, or null when absent. */
static json_t *int_or_null(const json_t *raw, const char *member)
{
    json_t *v = json_object_get(raw, member);
    return json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null();
}

/* The owner member of raw as JSON, or null when absent or empty. */
static json_t *owner_of(const json_t *raw)
{
    const char *owner = json_string_value(json_object_get(raw, "owner"));
    return owner && owner[0] ? json_string(owner) : json_null();
}

static json_t *lock_item(const json_t *raw)
{
    bool held = json_is_true(json_object_get(raw, "held"));
    return json_pack("{s:O, s:b, s:o, s:o, s:o, s:I}", "lock", json_object_get(raw, "name"), "held",
                     held, "fence", int_or_null(raw, "fence"), "owner", owner_of(raw),
                     "expires_in_ms", int_or_null(raw, "pttl"), "waiting",
                     (json_int_t)fgjson_answer_int(raw, "waiting", 0));
}

static json_t *sem_item(const json_t *raw)
{
    json_t *leases = json_array();
    const json_t *in = json_object_get(raw, "leases");
    size_t i;
    const json_t *lease;
    if (json_is_array(in))
        json_array_foreach(in, i, lease) json_array_append_new(
            leases, json_pack("{s:o, s:o, s:o}", "fence", int_or_null(lease, "fence"), "owner",
                              owner_of(lease), "expires_in_ms", int_or_null(lease, "pttl")));
    return json_pack("{s:O, s:o, s:I, s:I, s:o}", "semaphore", json_object_get(raw, "name"),
                     "limit", int_or_null(raw, "limit"), "holders",
                     (json_int_t)fgjson_answer_int(raw, "holders", 0), "waiting",
                     (json_int_t)fgjson_answer_int(raw, "waiting", 0), "leases", leases);
}

/* The arguments of one lease_list.lua call, the texts they point to. */
struct list_call {
    const char *keys[LEASE_LIST_NKEYS];
    const char *argv[LEASE_LIST_NARGV];
    char limit[16], budget[16], shown[16];
    char index[INDEX_KEY_MAX]; /* a slot's index (per-slot layout) */
};

/* Fills c with a call of lease_list.lua over index (borrowed, or c->index
 * when NULL); the other texts are borrowed too. */
static void list_call_init(struct list_call *c, enum lease_list_kind kind, const char *index,
                           const char *prefix, const char *after, int limit, int budget,
                           const char *upto)
{
    snprintf(c->limit, sizeof c->limit, "%d", limit);
    snprintf(c->budget, sizeof c->budget, "%d", budget);
    snprintf(c->shown, sizeof c->shown, "%d", LEASE_LIST_SEM_HOLDERS);
    c->keys[LEASE_LIST_KEY_INDEX] = index != NULL ? index : c->index;
    c->argv[LEASE_LIST_ARGV_KIND] = kinds[kind].kind;
    c->argv[LEASE_LIST_ARGV_PREFIX] = prefix;
    c->argv[LEASE_LIST_ARGV_AFTER] = after;
    c->argv[LEASE_LIST_ARGV_LIMIT] = c->limit;
    c->argv[LEASE_LIST_ARGV_BUDGET] = c->budget;
    c->argv[LEASE_LIST_ARGV_SHOWN] = c->shown;
    c->argv[LEASE_LIST_ARGV_UPTO] = upto;
}

/* Sets page's cursor from the script's answer raw (borrowed). */
static void read_next(const json_t *raw, struct lease_page *page)
{
    const char *next = json_string_value(json_object_get(raw, "next"));
    page->items = NULL;
    page->more = next != NULL && strlen(next) <= NAME_MAX_LEN;
    snprintf(page->next, sizeof page->next, "%s", page->more ? next : "");
}

/* Runs the script over index (of kind) and reads its cursor into page; *raw
 * gets the answer. */
static int run(enum lease_list_kind kind, const char *index, const char *prefix, const char *after,
               int limit, int budget, const char *upto, struct lease_page *page, json_t **raw,
               struct fg_error *err)
{
    struct list_call c;
    list_call_init(&c, kind, index, prefix, after, limit, budget, upto);
    if (redis_script(SCRIPT_LEASE_LIST, c.keys, c.argv, raw, err) != 0)
        return -1;
    read_next(*raw, page);
    return 0;
}

/* The items of the script's answer raw (borrowed): cjson writes an empty list as {}. */
static const json_t *items_of(const json_t *raw)
{
    const json_t *in = json_object_get(raw, "items");
    return json_is_array(in) ? in : NULL;
}

/* The API item of the script's item raw (borrowed). */
static json_t *api_item(enum lease_list_kind kind, const json_t *raw)
{
    return kind == LEASE_LIST_LOCKS ? lock_item(raw) : sem_item(raw);
}

/* Orders the script's items (borrowed) by name. */
static int by_item_name(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(const json_t *const *)a, "name"));
    const char *y = json_string_value(json_object_get(*(const json_t *const *)b, "name"));
    return strcmp(x ? x : "", y ? y : "");
}

/* The API items of the n answers of calls (borrowed) named no later than
 * upto, in name order: a new array. */
static json_t *merged_items(enum lease_list_kind kind, const struct redis_batch_call *calls,
                            size_t n, const char *upto)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += json_array_size(items_of(calls[i].reply));
    const json_t **raw = calloc(count > 0 ? count : 1, sizeof *raw);
    FG_ASSERT(raw != NULL);
    count = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        const json_t *item;
        json_array_foreach(items_of(calls[i].reply), k, item)
        {
            const char *name = json_string_value(json_object_get(item, "name"));
            if (name != NULL && strcmp(name, upto) <= 0)
                raw[count++] = item;
        }
    }
    qsort(raw, count, sizeof *raw, by_item_name);
    json_t *items = json_array();
    for (size_t i = 0; i < count; i++)
        json_array_append_new(items, api_item(kind, raw[i]));
    free(raw);
    return items;
}

/* The names the listing reads from every slot's index: after the cursor,
 * matching the prefix, at most limit from each (a page shows no more). */
static int read_slot_indexes(enum lease_list_kind kind, const struct list_query *q, json_t **names,
                             struct fg_error *err)
{
    char low[NAME_MAX_LEN + 3], high[NAME_MAX_LEN + 3], count[16];
    if (q->after[0] != '\0' && strcmp(q->after, q->prefix) >= 0)
        snprintf(low, sizeof low, "(%s", q->after);
    else
        snprintf(low, sizeof low, "[%s", q->prefix);
    if (q->upto[0] != '\0')
        snprintf(high, sizeof high, "[%s", q->upto);
    else if (q->prefix[0] != '\0')
        snprintf(high, sizeof high, "[%s\xff", q->prefix);
    else
        snprintf(high, sizeof high, "+");
    snprintf(count, sizeof count, "%d", q->limit);
    struct read {
        char key[INDEX_KEY_MAX];
        const char *args[7];
    } *reads = malloc(CLUSTER_SLOTS * sizeof *reads);
    struct redis_batch_call *calls = calloc(CLUSTER_SLOTS, sizeof *calls);
    FG_ASSERT(reads != NULL && calls != NULL);
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        struct read *r = &reads[s];
        slot_tag_key(r->key, sizeof r->key, kinds[kind].index, s);
        const char *args[] = {"ZRANGEBYLEX", r->key, low, high, "LIMIT", "0", count};
        memcpy(r->args, args, sizeof args);
        calls[s] = (struct redis_batch_call){.argc = 7, .args = r->args};
    }
    int rc = redis_batch(calls, CLUSTER_SLOTS, err);
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
        names[s] = calls[s].reply;
    free(calls);
    free(reads);
    return rc;
}

/* lease_list on a cluster (per-slot layout): the first names after the
 * cursor from every slot's index (16384 reads, pipelined per primary), the
 * page picked from them in name order (lease/list_merge.h), then the status of
 * the picked names read by lease_list.lua in the slots that hold them (one
 * call a slot, pipelined per primary), each looking exactly at its names up
 * to the page's last. The cursor stays the last name looked at. */
static int list_slots(enum lease_list_kind kind, const struct list_query *q,
                      struct lease_page *page, struct fg_error *err)
{
    json_t **names = calloc(CLUSTER_SLOTS, sizeof *names);
    FG_ASSERT(names != NULL);
    int rc = read_slot_indexes(kind, q, names, err);
    size_t n = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS && rc == 0; s++)
        n += json_array_size(names[s]);
    struct list_merge_name *read = calloc(n > 0 ? n : 1, sizeof *read);
    FG_ASSERT(read != NULL);
    n = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS && rc == 0; s++)
        for (size_t i = 0; i < json_array_size(names[s]); i++) {
            const char *name = json_string_value(json_array_get(names[s], i));
            if (name != NULL && strlen(name) <= NAME_MAX_LEN)
                read[n++] = (struct list_merge_name){name, s};
        }
    bool more = false;
    size_t picked =
        rc == 0 ? list_merge_pick(read, n, (size_t)q->limit, (size_t)q->limit, &more) : 0;
    char upto[NAME_MAX_LEN + 1] = "";
    if (picked > 0)
        snprintf(upto, sizeof upto, "%s", read[picked - 1].name);
    /* One call for each slot that holds picked names, in the order of their first. */
    struct list_call *lists = calloc(picked > 0 ? picked : 1, sizeof *lists);
    struct redis_batch_call *calls = calloc(picked > 0 ? picked : 1, sizeof *calls);
    FG_ASSERT(lists != NULL && calls != NULL);
    size_t ncalls = 0;
    for (size_t i = 0; i < picked; i++) {
        size_t k = 0, same = 0;
        for (size_t j = 0; j < picked; j++)
            same += read[j].slot == read[i].slot;
        while (k < i && read[k].slot != read[i].slot)
            k++;
        if (k < i)
            continue; /* its slot has its call */
        struct list_call *c = &lists[ncalls];
        slot_tag_key(c->index, sizeof c->index, kinds[kind].index, read[i].slot);
        list_call_init(c, kind, NULL, q->prefix, q->after, (int)(2 * same + 100),
                       (int)(2 * same + 100), upto);
        calls[ncalls++] = (struct redis_batch_call){
            .script = SCRIPT_LEASE_LIST, .keys = c->keys, .argv = c->argv};
    }
    if (rc == 0 && ncalls > 0)
        rc = redis_batch(calls, ncalls, err);
    /* A slot whose call ran out of budget (names added meanwhile) was looked
     * at up to its cursor only: the page ends there. */
    for (size_t i = 0; i < ncalls && rc == 0; i++) {
        const char *next = json_string_value(json_object_get(calls[i].reply, "next"));
        if (next != NULL && strcmp(next, upto) < 0) {
            snprintf(upto, sizeof upto, "%s", next);
            more = true;
        }
    }
    page->items = rc == 0 ? merged_items(kind, calls, ncalls, upto) : NULL;
    page->more = rc == 0 && more;
    snprintf(page->next, sizeof page->next, "%s", page->more ? upto : "");
    for (size_t i = 0; i < ncalls; i++)
        json_decref(calls[i].reply);
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
        json_decref(names[s]);
    free(calls);
    free(lists);
    free(read);
    free(names);
    return rc;
}

int lease_list(enum lease_list_kind kind, const struct list_query *q, struct lease_page *page,
               struct fg_error *err)
{
    /* On a cluster a name alone is read in its slot only; any other range in every slot. */
    bool alone = q->upto[0] != '\0' && strcmp(q->prefix, q->upto) == 0;
    char slot_index[INDEX_KEY_MAX];
    const char *index = kinds[kind].index;
    if (lease_keys_layout() == LEASE_KEYS_PER_SLOT && !alone)
        return list_slots(kind, q, page, err);
    if (lease_keys_layout() == LEASE_KEYS_PER_SLOT) {
        slot_tag_key(slot_index, sizeof slot_index, index,
                     (unsigned)lease_keys_slot(kinds[kind].lease, q->prefix));
        index = slot_index;
    }
    json_t *raw = NULL;
    if (run(kind, index, q->prefix, q->after, q->limit, 2 * q->limit + 100, q->upto, page, &raw,
            err) != 0)
        return -1;
    page->items = json_array();
    size_t i;
    const json_t *item;
    json_array_foreach(items_of(raw), i, item)
        json_array_append_new(page->items, api_item(kind, item));
    json_decref(raw);
    return 0;
}

/* The idle names a prune-only answer raw (borrowed, may be NULL) says it dropped. */
static size_t pruned_of(const json_t *raw)
{
    json_int_t n = json_integer_value(json_object_get(raw, "pruned"));
    return n > 0 ? (size_t)n : 0;
}

int lease_list_prune(enum lease_list_kind kind, const char *after, struct lease_page *page,
                     size_t *pruned, struct fg_error *err)
{
    json_t *raw = NULL;
    *pruned = 0;
    if (run(kind, kinds[kind].index, "", after, 0, PRUNE_BUDGET, "", page, &raw, err) != 0)
        return -1;
    *pruned = pruned_of(raw);
    json_decref(raw);
    return 0;
}

int lease_list_prune_slots(enum lease_list_kind kind, unsigned *slot, size_t *pruned,
                           struct fg_error *err)
{
    *pruned = 0;
    struct list_call *lists = calloc(PRUNE_SLOTS, sizeof *lists);
    struct redis_batch_call *calls = calloc(PRUNE_SLOTS, sizeof *calls);
    FG_ASSERT(lists != NULL && calls != NULL);
    for (unsigned i = 0; i < PRUNE_SLOTS; i++) {
        struct list_call *c = &lists[i];
        slot_tag_key(c->index, sizeof c->index, kinds[kind].index, (*slot + i) % CLUSTER_SLOTS);
        list_call_init(c, kind, NULL, "", "", 0, PRUNE_SLOT_BUDGET, "");
        calls[i] = (struct redis_batch_call){
            .script = SCRIPT_LEASE_LIST, .keys = c->keys, .argv = c->argv};
    }
    int rc = redis_batch(calls, PRUNE_SLOTS, err);
    for (unsigned i = 0; i < PRUNE_SLOTS; i++) {
        *pruned += pruned_of(calls[i].reply);
        json_decref(calls[i].reply);
    }
    free(calls);
    free(lists);
    *slot = (*slot + PRUNE_SLOTS) % CLUSTER_SLOTS;
    return rc;
}
