/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_list.c - the lease listings: reads prefix, limit and cursor, lets
 * list_query check them and answers the page that lease_list reads in the
 * ranges of names the caller's lock: or semaphore: scopes cover (auth/scope.h),
 * keeping only the names they match. So names the caller may not see are not
 * read at all, and leave no trace (a short page with a cursor), unless a
 * pattern has a '*' before its end: its range is then the names that start
 * like it, and a page of it reads on until it is full or the range ends, so
 * that where it stops (and so what the next page shows) depends on the names
 * the caller may see alone: a page that stopped among the others would let
 * the caller find where, with names of its own, and so spell them out. The
 * cursor is sealed (auth/cursor.h): it must not tell the name a page
 * continues after either. Tokens never appear (the script does not return
 * them).
 */
#include "http/handlers_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/cursor.h"
#include "auth/keyset.h"
#include "auth/scope.h"
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

#define ARG_MAX (CURSOR_TEXT_MAX - 1) /* longest decoded argument worth reading */
/* Items a call of a range read on asks for at least (it looks at 2 x that + 100 names). */
#define READ_ON_LIMIT 100

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

/* The ranges of names under q's prefix after its cursor that the caller's
 * scopes may match (auth/scope.h), in name order: a new array of *n. */
static struct scope_range *visible_ranges(enum lease_list_kind kind, const struct http_request *req,
                                          const struct list_query *q, size_t *n)
{
    static const char *const everything[] = {"admin"};
    const struct api_key *key = req->principal;
    const char *const *granted = key != NULL ? (const char *const *)key->scopes : everything;
    size_t nscopes = key != NULL ? key->nscopes : 1;
    struct scope_range *ranges = calloc(nscopes > 0 ? nscopes : 1, sizeof *ranges);
    FG_ASSERT(ranges != NULL);
    *n = scope_ranges(granted, nscopes, kinds[kind].scope, q->prefix, q->after, ranges, nscopes);
    return ranges;
}

/* The name of the last item of items (an array of kind's items, not empty). */
static const char *last_name(enum lease_list_kind kind, const json_t *items)
{
    const json_t *last = json_array_get(items, json_array_size(items) - 1);
    return json_string_value(json_object_get(last, kinds[kind].member));
}

/* The items of q's page that the caller may see, read range by range, into
 * page (items, more and the name to continue after). A whole range (every
 * name of it visible) is read by one call; a range that holds names the
 * caller may not see is read on until the page is full or the range ends,
 * and a full page continues after its last item: a page never stops among
 * names the caller may not see, nor after one. */
static int read_visible(enum lease_list_kind kind, const struct http_request *req,
                        const struct list_query *q, struct lease_page *page, struct fg_error *err)
{
    size_t n;
    struct scope_range *ranges = visible_ranges(kind, req, q, &n);
    page->items = json_array();
    page->more = false;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0 && !page->more; i++) {
        struct list_query part = *q;
        snprintf(part.prefix, sizeof part.prefix, "%s", ranges[i].start);
        snprintf(part.upto, sizeof part.upto, "%s", ranges[i].exact ? ranges[i].start : "");
        for (;;) {
            struct lease_page got = {0};
            int wanted = q->limit - (int)json_array_size(page->items);
            /* A range read on looks at a few hundred names a call at least. */
            part.limit = ranges[i].whole || wanted >= READ_ON_LIMIT ? wanted : READ_ON_LIMIT;
            rc = lease_list(kind, &part, &got, err);
            bool cut = false; /* items left for the next page, which goes on after the last kept */
            if (rc == 0) {
                keep_permitted(kind, req, got.items);
                for (; json_array_size(got.items) > (size_t)wanted; cut = true)
                    json_array_remove(got.items, json_array_size(got.items) - 1);
                json_array_extend(page->items, got.items);
            }
            json_decref(got.items);
            /* A cursor that does not move on ends the range, so the loop ends. */
            if (rc != 0 || (!cut && (!got.more || strcmp(got.next, part.after) <= 0)))
                break;
            bool full = json_array_size(page->items) >= (size_t)q->limit;
            if (ranges[i].whole || full) {
                page->more = true;
                snprintf(page->next, sizeof page->next, "%s",
                         ranges[i].whole ? got.next : last_name(kind, page->items));
                break;
            }
            memcpy(part.after, got.next, sizeof part.after);
        }
        /* A page that fills as a range ends goes on after its last item. */
        if (rc == 0 && !page->more && i + 1 < n &&
            json_array_size(page->items) >= (size_t)q->limit) {
            page->more = true;
            snprintf(page->next, sizeof page->next, "%s", last_name(kind, page->items));
        }
    }
    free(ranges);
    return rc;
}

static enum handler_result list(enum lease_list_kind kind, struct http_request *req,
                                struct http_reply *reply)
{
    const char *args[ARG_COUNT];
    struct fg_error err = {0};
    struct list_query q;
    struct lease_page page = {0};
    char after[NAME_MAX_LEN + 1] = "", next[CURSOR_TEXT_MAX], bound[API_KEY_ID_MAX + 16];
    /* A cursor serves its listing and its key alone: another key's may sit at a
     * name this one may not see, and would tell where it sorts. */
    snprintf(bound, sizeof bound, "%s%s", kinds[kind].scope,
             req->principal != NULL ? req->principal->id : "");
    if (http_query_args(req, arg_names, ARG_COUNT, ARG_MAX, args, &err) != 0 ||
        (args[ARG_CURSOR] != NULL &&
         cursor_open(args[ARG_CURSOR], bound, secret_current(), after, &err) != 0) ||
        list_query_parse(args[ARG_PREFIX], args[ARG_LIMIT], after, &q, &err) != 0 ||
        read_visible(kind, req, &q, &page, &err) != 0 ||
        (page.more && cursor_seal(page.next, bound, secret_current(), next, &err) != 0)) {
        json_decref(page.items);
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
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
