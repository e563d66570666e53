/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_list.c - the listing of live locks and semaphores: builds the
 * arguments of lua/lease_list.lua and turns its answer into the API's items.
 * It knows nothing of HTTP or scopes (the handler filters what a caller sees).
 */
#include "lease/lease_list.h"

#include <stdio.h>
#include <string.h>

#include "lease/lease_result.h"
#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "util/fgjson.h"

#define PRUNE_BUDGET 500 /* names a janitor pass looks at */

/* The listing index of each kind (kept by the lease scripts) and its name in lease_list.lua. */
static const struct {
    const char *index;
    const char *kind;
} kinds[] = {
    [LEASE_LIST_LOCKS] = {KEY_LOCK_INDEX, "l"},
    [LEASE_LIST_SEMAPHORES] = {KEY_SEM_INDEX, "s"},
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

/* Runs the script and reads its cursor into page; *raw gets the answer. */
static int run(enum lease_list_kind kind, const char *prefix, const char *after, int limit,
               int budget, struct lease_page *page, json_t **raw, struct fg_error *err)
{
    char limit_s[16], budget_s[16], shown_s[16];
    snprintf(limit_s, sizeof limit_s, "%d", limit);
    snprintf(budget_s, sizeof budget_s, "%d", budget);
    snprintf(shown_s, sizeof shown_s, "%d", LEASE_LIST_SEM_HOLDERS);
    const char *keys[LEASE_LIST_NKEYS] = {[LEASE_LIST_KEY_INDEX] = kinds[kind].index};
    const char *argv[LEASE_LIST_NARGV] = {
        [LEASE_LIST_ARGV_KIND] = kinds[kind].kind, [LEASE_LIST_ARGV_PREFIX] = prefix,
        [LEASE_LIST_ARGV_AFTER] = after,           [LEASE_LIST_ARGV_LIMIT] = limit_s,
        [LEASE_LIST_ARGV_BUDGET] = budget_s,       [LEASE_LIST_ARGV_SHOWN] = shown_s,
    };
    if (redis_script(SCRIPT_LEASE_LIST, keys, argv, raw, err) != 0)
        return -1;
    const char *next = json_string_value(json_object_get(*raw, "next"));
    page->items = NULL;
    page->more = next != NULL && strlen(next) <= NAME_MAX_LEN;
    snprintf(page->next, sizeof page->next, "%s", page->more ? next : "");
    return 0;
}

int lease_list(enum lease_list_kind kind, const struct list_query *q, struct lease_page *page,
               struct fg_error *err)
{
    json_t *raw = NULL;
    if (run(kind, q->prefix, q->after, q->limit, 2 * q->limit + 100, page, &raw, err) != 0)
        return -1;
    page->items = json_array();
    const json_t *in = json_object_get(raw, "items"); /* cjson writes an empty list as {} */
    size_t i;
    const json_t *item;
    if (json_is_array(in))
        json_array_foreach(in, i, item) json_array_append_new(
            page->items, kind == LEASE_LIST_LOCKS ? lock_item(item) : sem_item(item));
    json_decref(raw);
    return 0;
}

int lease_list_prune(enum lease_list_kind kind, const char *after, struct lease_page *page,
                     struct fg_error *err)
{
    json_t *raw = NULL;
    if (run(kind, "", after, 0, PRUNE_BUDGET, page, &raw, err) != 0)
        return -1;
    json_decref(raw);
    return 0;
}
