/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_audit.c - GET /v1/audit/rejections and GET /v1/audit/summary:
 * reads the query arguments (decoded, and the text ones UTF-8, as the server
 * reads every query), lets audit_filter check them and answers what
 * audit_query or audit_summary reads.
 */
#include "http/handlers_audit.h"

#include <sys/time.h>

#include "http/query.h"
#include "store/audit/audit.h"

#define ARG_MAX 4095 /* longest decoded query argument */

/* Query arguments the endpoint reads, in the order audit_filter_parse takes them. */
enum audit_arg {
    ARG_RESOURCE,
    ARG_LOCK,
    ARG_LEASE_KIND,
    ARG_SINCE_MS,
    ARG_LIMIT,
    ARG_AFTER_ID,
    ARG_OWNER,
    ARG_UNTIL_MS,
    ARG_COUNT
};

static const char *const arg_names[ARG_COUNT] = {
    [ARG_RESOURCE] = "resource", [ARG_LOCK] = "lock",         [ARG_LEASE_KIND] = "lease_kind",
    [ARG_SINCE_MS] = "since_ms", [ARG_LIMIT] = "limit",       [ARG_AFTER_ID] = "after_id",
    [ARG_OWNER] = "owner",       [ARG_UNTIL_MS] = "until_ms",
};

#define SUMMARY_TOP_RESOURCES 10 /* most refused resources in a summary */

static int64_t wall_clock_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

enum handler_result handle_audit_rejections(struct http_request *req, struct http_reply *reply)
{
    const char *args[ARG_COUNT];
    struct fg_error err = {0};
    struct audit_filter filter;
    json_t *page = NULL;
    if (http_query_args(req, arg_names, ARG_COUNT, ARG_MAX, args, &err) != 0 ||
        audit_filter_parse(args[ARG_RESOURCE], args[ARG_LOCK], args[ARG_LEASE_KIND],
                           args[ARG_SINCE_MS], args[ARG_LIMIT], args[ARG_AFTER_ID], &filter,
                           &err) != 0 ||
        audit_filter_narrow(args[ARG_OWNER], args[ARG_UNTIL_MS], &filter, &err) != 0 ||
        audit_query(&filter, &page, &err) != 0) {
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    reply_json(reply, 200, page);
    return HANDLER_DONE;
}

enum handler_result handle_audit_summary(struct http_request *req, struct http_reply *reply)
{
    const char *args[ARG_COUNT];
    struct fg_error err = {0};
    struct audit_window window;
    json_t *summary = NULL;
    if (http_query_args(req, arg_names, ARG_COUNT, ARG_MAX, args, &err) != 0 ||
        audit_window_parse(args[ARG_SINCE_MS], args[ARG_UNTIL_MS], wall_clock_ms(), &window,
                           &err) != 0 ||
        audit_summary(&window, SUMMARY_TOP_RESOURCES, &summary, &err) != 0) {
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    reply_json(reply, 200, summary);
    return HANDLER_DONE;
}
