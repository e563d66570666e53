/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_list.c - the lease listings: decodes prefix, limit and cursor, lets
 * list_query check them and answers the page that lease_list reads, keeping
 * only the names the caller's lock: or semaphore: scopes match (so a page may
 * be shorter than the limit; the cursor still moves on). The cursor is sealed
 * (auth/cursor.h): the name a page continues after may be one the caller may
 * not see, and next_cursor must not tell it. Tokens never appear (the script
 * does not return them).
 */
#include "http/handlers_list.h"

#include <stdio.h>

#include "auth/cursor.h"
#include "auth/keyset.h"
#include "http/query.h"
#include "lease/lease_list.h"
#include "store/backend/secret.h"

/* Query arguments of a listing, in the order list_query_parse takes them. */
enum list_arg { ARG_PREFIX, ARG_LIMIT, ARG_CURSOR, ARG_COUNT };

static const char *const arg_names[ARG_COUNT] = {
    [ARG_PREFIX] = "prefix",
    [ARG_LIMIT] = "limit",
    [ARG_CURSOR] = "cursor",
};

#define ARG_MAX CURSOR_TEXT_MAX /* longest decoded argument worth reading */

/* Scope prefix and name member of the items of each kind. */
static const struct {
    const char *scope;
    const char *member;
} kinds[] = {
    [LEASE_LIST_LOCKS] = {"lock:", "lock"},
    [LEASE_LIST_SEMAPHORES] = {"semaphore:", "semaphore"},
};

/* Drops the items of items (an array) that the caller may not see. */
static void keep_permitted(enum lease_list_kind kind, const struct http_request *req, json_t *items)
{
    char needed[NAME_MAX_LEN + 16];
    for (size_t i = json_array_size(items); i-- > 0;) {
        const char *name =
            json_string_value(json_object_get(json_array_get(items, i), kinds[kind].member));
        snprintf(needed, sizeof needed, "%s%s", kinds[kind].scope, name ? name : "");
        if (!api_key_permits(req->principal, needed))
            json_array_remove(items, i);
    }
}

static enum handler_result list(enum lease_list_kind kind, struct http_request *req,
                                struct http_reply *reply)
{
    char values[ARG_COUNT][ARG_MAX + 1];
    const char *args[ARG_COUNT];
    struct fg_error err = {0};
    struct list_query q;
    struct lease_page page = {0};
    char after[NAME_MAX_LEN + 1] = "", next[CURSOR_TEXT_MAX];
    if (http_query_args(req, arg_names, ARG_COUNT, &values[0][0], ARG_MAX + 1, args, &err) != 0 ||
        (args[ARG_CURSOR] != NULL && args[ARG_CURSOR][0] != '\0' &&
         cursor_open(args[ARG_CURSOR], secret_current(), after, &err) != 0) ||
        list_query_parse(args[ARG_PREFIX], args[ARG_LIMIT], after, &q, &err) != 0 ||
        lease_list(kind, &q, &page, &err) != 0 ||
        (page.more && cursor_seal(page.next, secret_current(), next, &err) != 0)) {
        json_decref(page.items);
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    keep_permitted(kind, req, page.items);
    reply_json(reply, 200,
               json_pack("{s:o, s:o}", "items", page.items, "next_cursor",
                         page.more ? json_string(next) : json_null()));
    return HANDLER_DONE;
}

enum handler_result handle_lock_list(struct http_request *req, struct http_reply *reply)
{
    return list(LEASE_LIST_LOCKS, req, reply);
}

enum handler_result handle_sem_list(struct http_request *req, struct http_reply *reply)
{
    return list(LEASE_LIST_SEMAPHORES, req, reply);
}
