/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_audit.c - GET /v1/audit/rejections and GET /v1/audit/summary:
 * decodes the query arguments, checks that the text ones are UTF-8, lets
 * audit_filter check the others and answers what audit_query or audit_summary
 * reads.
 */
#include "http/handlers_audit.h"

#include <string.h>
#include <sys/time.h>

#include "http/query.h"
#include "store/audit/audit.h"
#include "util/names.h"

#define ARG_MAX 4096 /* longest decoded query argument */

/* Query arguments the endpoint reads, in the order audit_filter_parse takes them. */
enum audit_arg {
    ARG_RESOURCE,
    ARG_LOCK,
    ARG_SINCE_MS,
    ARG_LIMIT,
    ARG_AFTER_ID,
    ARG_OWNER,
    ARG_UNTIL_MS,
    ARG_COUNT
};

static const char *const arg_names[ARG_COUNT] = {
    [ARG_RESOURCE] = "resource", [ARG_LOCK] = "lock",         [ARG_SINCE_MS] = "since_ms",
    [ARG_LIMIT] = "limit",       [ARG_AFTER_ID] = "after_id", [ARG_OWNER] = "owner",
    [ARG_UNTIL_MS] = "until_ms",
};

/* The arguments compared with the text columns of the records: Postgres takes
 * them as UTF-8 text only. */
static const enum audit_arg text_args[] = {ARG_RESOURCE, ARG_LOCK, ARG_OWNER};

#define SUMMARY_TOP_RESOURCES 10 /* most refused resources in a summary */

/* True if text (NUL-terminated) is valid UTF-8. */
static bool utf8_text(const char *text)
{
    size_t len = strlen(text);
    for (size_t at = 0, n; at < len; at += n)
        if ((n = utf8_sequence_len((const unsigned char *)text + at, len - at)) == 0)
            return false;
    return true;
}

/* Checks that the text arguments given in args (decoded, NULL when absent)
 * are UTF-8, so that Postgres is not asked to refuse them, and returns 0, or
 * -1 with a 400 invalid_field naming the first that is not. */
static int check_text_args(const char *const *args, struct fg_error *err)
{
    for (size_t i = 0; i < sizeof text_args / sizeof text_args[0]; i++) {
        const char *text = args[text_args[i]];
        if (text != NULL && !utf8_text(text))
            return fg_fail(err, FG_ERR_INVALID_FIELD, "query argument '%s' must be UTF-8 text",
                           arg_names[text_args[i]]);
    }
    return 0;
}

static int64_t wall_clock_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

enum handler_result handle_audit_rejections(struct http_request *req, struct http_reply *reply)
{
    char values[ARG_COUNT][ARG_MAX + 1];
    const char *args[ARG_COUNT];
    struct fg_error err = {0};
    struct audit_filter filter;
    json_t *page = NULL;
    if (http_query_args(req, arg_names, ARG_COUNT, &values[0][0], ARG_MAX + 1, args, &err) != 0 ||
        check_text_args(args, &err) != 0 ||
        audit_filter_parse(args[ARG_RESOURCE], args[ARG_LOCK], args[ARG_SINCE_MS], args[ARG_LIMIT],
                           args[ARG_AFTER_ID], &filter, &err) != 0 ||
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
    char values[ARG_COUNT][ARG_MAX + 1];
    const char *args[ARG_COUNT];
    struct fg_error err = {0};
    struct audit_window window;
    json_t *summary = NULL;
    if (http_query_args(req, arg_names, ARG_COUNT, &values[0][0], ARG_MAX + 1, args, &err) != 0 ||
        audit_window_parse(args[ARG_SINCE_MS], args[ARG_UNTIL_MS], wall_clock_ms(), &window,
                           &err) != 0 ||
        audit_summary(&window, SUMMARY_TOP_RESOURCES, &summary, &err) != 0) {
        reply_problem(reply, &err);
        return HANDLER_DONE;
    }
    reply_json(reply, 200, summary);
    return HANDLER_DONE;
}
