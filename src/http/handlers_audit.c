/*
 * handlers_audit.c - GET /v1/audit/rejections: decodes the query arguments,
 * lets audit_filter check them and answers the page that audit_query reads.
 */
#include "http/handlers_audit.h"

#include <string.h>

#include "store/audit.h"
#include "util/names.h"

#define ARG_MAX 4096 /* longest decoded query argument */

/* Query arguments the endpoint reads, in the order audit_filter_parse takes them. */
enum audit_arg { ARG_RESOURCE, ARG_LOCK, ARG_SINCE_MS, ARG_LIMIT, ARG_AFTER_ID, ARG_COUNT };

static const char *const arg_names[ARG_COUNT] = {
    [ARG_RESOURCE] = "resource", [ARG_LOCK] = "lock",         [ARG_SINCE_MS] = "since_ms",
    [ARG_LIMIT] = "limit",       [ARG_AFTER_ID] = "after_id",
};

enum handler_result handle_audit_rejections(struct http_request *req, struct http_reply *reply)
{
    char values[ARG_COUNT][ARG_MAX + 1];
    const char *args[ARG_COUNT];
    struct fg_error err = {0};
    for (int i = 0; i < ARG_COUNT; i++) {
        const char *raw = http_request_query(req, arg_names[i]);
        size_t len;
        args[i] = NULL;
        if (raw == NULL)
            continue;
        if (name_decode(raw, strlen(raw), values[i], sizeof values[i], &len, &err) != 0) {
            fg_fail(&err, FG_ERR_INVALID_FIELD, "query argument '%s' is not well encoded",
                    arg_names[i]);
            reply_problem(reply, &err);
            return HANDLER_DONE;
        }
        args[i] = values[i];
    }
    struct audit_filter filter;
    json_t *page = NULL;
    if (audit_filter_parse(args[ARG_RESOURCE], args[ARG_LOCK], args[ARG_SINCE_MS], args[ARG_LIMIT],
                           args[ARG_AFTER_ID], &filter, &err) != 0 ||
        audit_query(&filter, &page, &err) != 0) {
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    reply_json(reply, 200, page);
    return HANDLER_DONE;
}
