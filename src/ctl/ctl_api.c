/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_api.c - requests of fencectl to the gateway's public API (docs/api.md): the
 * paths, the bodies, the query of the audit, and the reading of answers into
 * struct ctl_answer. Names and query values are percent-encoded but for '/'
 * and ':', which stay literal: the gateway's routes let a name span path
 * segments, and resources ("pg:invoices/42") read as they are.
 */
#include "ctl/ctl_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_http.h"
#include "ctl/ctl_table.h"
#include "fglimits.h"

#define PROBLEM_PREFIX "/problems/"
#define PATH_MAX_LEN   2048

/* The member every 2xx answer of a call carries, and the JSON types it may have. */
struct expect {
    const char *field;
    unsigned types; /* AS() bits */
};

#define AS(type) (1u << (type))
#define AS_BOOL  (AS(JSON_TRUE) | AS(JSON_FALSE))
#define GRANT    ((struct expect){"token", AS(JSON_STRING)})
#define GRANTS   ((struct expect){"locks", AS(JSON_ARRAY)})
#define RENEWED  ((struct expect){"fence", AS(JSON_INTEGER)})
#define RELEASED ((struct expect){"released", AS_BOOL})
#define STATUS   ((struct expect){"waiting", AS(JSON_INTEGER)})
#define PAGE     ((struct expect){"items", AS(JSON_ARRAY)})
#define REVOKED  ((struct expect){"revoked_fence", AS(JSON_INTEGER) | AS(JSON_NULL)})
#define WATCHED  ((struct expect){"held", AS_BOOL})

/* Checks that a 2xx answer is the gateway's: a JSON object with the member of
 * want. Anything else (a web page or another service's JSON at --url, a proxy's
 * answer) would otherwise print as an empty grant, a free lock or "nothing to
 * revoke" and exit 0. Returns 0, or -1 with ans->err saying what came. */
static int check_answer(struct ctl_answer *ans, struct expect want)
{
    const json_t *member = json_object_get(ans->json, want.field);
    if (member != NULL && (want.types & AS(json_typeof(member))) != 0)
        return 0;
    char *ctype = ctl_escape(ans->response.content_type[0] ? ans->response.content_type : "none");
    if (!json_is_object(ans->json))
        fg_fail(&ans->err, FG_ERR_INVALID_JSON,
                "the HTTP %d answer is not a JSON object (Content-Type: %.60s); is the URL the "
                "gateway's?",
                ans->response.status, ctype);
    else
        fg_fail(&ans->err, FG_ERR_INVALID_JSON,
                "the HTTP %d answer lacks '%s' or has it of another type; is the URL the "
                "gateway's?",
                ans->response.status, want.field);
    free(ctype);
    json_decref(ans->json);
    ans->json = NULL;
    ans->exit = CTL_EXIT_ERROR;
    return -1;
}

/* Runs one call and fills *ans; 0 on a 2xx answer that carries want. */
static int call(const struct ctl_args *a, const char *method, const char *path, json_t *body,
                long long timeout_ms, struct expect want, struct ctl_answer *ans)
{
    memset(ans, 0, sizeof *ans);
    int rc = ctl_http(&a->gateway, method, path, body, timeout_ms, &ans->response, &ans->err);
    json_decref(body);
    if (rc != 0) {
        /* --cacert naming no CA file is the command line's fault, not the gateway's */
        ans->exit = ans->err.code == FG_ERR_INVALID_FIELD ? CTL_EXIT_USAGE : ctl_exit_for(0, NULL);
        return -1;
    }
    ans->json = json_loadb(ans->response.body, ans->response.body_len, 0, NULL);
    const char *type = json_string_value(json_object_get(ans->json, "type"));
    if (ans->response.status >= 400 && type != NULL &&
        strncmp(type, PROBLEM_PREFIX, strlen(PROBLEM_PREFIX)) == 0)
        ans->problem = type + strlen(PROBLEM_PREFIX);
    ans->exit = ctl_exit_for(ans->response.status, ans->problem);
    if (ans->exit != CTL_EXIT_OK)
        return -1;
    return check_answer(ans, want);
}

/* "/v1/locks/<name><suffix>" or "/v1/semaphores/<name><suffix>" into path. */
static void name_path(const char *name, bool semaphore, const char *suffix, char *path, size_t cap)
{
    snprintf(path, cap, "/v1/%s/", semaphore ? "semaphores" : "locks");
    int rc = ctl_escape_append(path, cap, name, "/:");
    FG_ASSERT(rc == 0); /* names are at most NAME_MAX_LEN bytes */
    FG_ASSERT(strlen(path) + strlen(suffix) < cap);
    strcat(path, suffix);
}

/* The path of a's lock or semaphore with suffix. */
static void lease_path(const struct ctl_args *a, const char *suffix, char *path, size_t cap)
{
    name_path(a->name, a->semaphore, suffix, path, cap);
}

/* Sets field of obj to v when it was given (v >= 0). */
static void set_given(json_t *obj, const char *field, long long v)
{
    if (v >= 0)
        json_object_set_new(obj, field, json_integer(v));
}

int ctl_api_acquire(const struct ctl_args *a, const char *owner, struct ctl_answer *ans)
{
    char path[PATH_MAX_LEN];
    lease_path(a, "/acquire", path, sizeof path);
    json_t *body = json_object();
    set_given(body, "ttl_ms", a->ttl_ms);
    set_given(body, "wait_ms", a->wait_ms);
    set_given(body, "max_hold_ms", a->max_hold_ms);
    if (a->semaphore)
        set_given(body, "limit", a->limit);
    if (owner != NULL)
        json_object_set_new(body, "owner", json_string(owner));
    if (a->request_id != NULL)
        json_object_set_new(body, "request_id", json_string(a->request_id));
    /* The gateway answers by wait_ms (its own default when none is given, at most an hour). */
    long long waits = a->wait_ms >= 0 ? a->wait_ms : WAIT_MAX_MS;
    return call(a, "POST", path, body, waits + CTL_CALL_TIMEOUT_MS, GRANT, ans);
}

int ctl_api_renew(const struct ctl_args *a, const char *token, long long ttl_ms,
                  long long timeout_ms, struct ctl_answer *ans)
{
    char path[PATH_MAX_LEN];
    lease_path(a, "/renew", path, sizeof path);
    json_t *body = json_pack("{s:s}", "token", token);
    set_given(body, "ttl_ms", ttl_ms);
    return call(a, "POST", path, body, timeout_ms, RENEWED, ans);
}

int ctl_api_release(const struct ctl_args *a, const char *token, long long timeout_ms,
                    struct ctl_answer *ans)
{
    char path[PATH_MAX_LEN];
    lease_path(a, "/release", path, sizeof path);
    return call(a, "POST", path, json_pack("{s:s}", "token", token), timeout_ms, RELEASED, ans);
}

int ctl_api_status(const struct ctl_args *a, struct ctl_answer *ans)
{
    char path[PATH_MAX_LEN];
    lease_path(a, "", path, sizeof path);
    return call(a, "GET", path, NULL, CTL_CALL_TIMEOUT_MS, STATUS, ans);
}

/* Appends "<sep>name=<value>" to the query in path when value is set. */
static void add_query(char *path, size_t cap, const char *name, const char *value)
{
    if (value == NULL)
        return;
    size_t n = strlen(path);
    snprintf(path + n, cap - n, "%s%s=", strchr(path, '?') ? "&" : "?", name);
    int rc = ctl_escape_append(path, cap, value, "/:");
    FG_ASSERT(rc == 0);
}

int ctl_api_audit(const struct ctl_args *a, struct ctl_answer *ans)
{
    char path[PATH_MAX_LEN * 2] = "/v1/audit/rejections", num[3][24];
    snprintf(num[0], sizeof num[0], "%lld", a->since_ms);
    snprintf(num[1], sizeof num[1], "%lld", a->limit);
    snprintf(num[2], sizeof num[2], "%lld", a->after_id);
    add_query(path, sizeof path, "resource", a->resource);
    add_query(path, sizeof path, "lock", a->lock);
    add_query(path, sizeof path, "lease_kind", a->lease_kind);
    add_query(path, sizeof path, "since_ms", a->since_ms >= 0 ? num[0] : NULL);
    add_query(path, sizeof path, "limit", a->limit >= 0 ? num[1] : NULL);
    add_query(path, sizeof path, "after_id", a->after_id >= 0 ? num[2] : NULL);
    return call(a, "GET", path, NULL, CTL_CALL_TIMEOUT_MS, PAGE, ans);
}

int ctl_api_list(const struct ctl_args *a, bool semaphores, const char *cursor, long long limit,
                 struct ctl_answer *ans)
{
    char path[PATH_MAX_LEN * 2], num[24];
    snprintf(path, sizeof path, "/v1/%s", semaphores ? "semaphores" : "locks");
    snprintf(num, sizeof num, "%lld", limit);
    add_query(path, sizeof path, "prefix", a->name != NULL && a->name[0] != '\0' ? a->name : NULL);
    add_query(path, sizeof path, "limit", num);
    add_query(path, sizeof path, "cursor", cursor);
    return call(a, "GET", path, NULL, CTL_CALL_TIMEOUT_MS, PAGE, ans);
}

int ctl_api_revoke(const struct ctl_args *a, struct ctl_answer *ans)
{
    char path[PATH_MAX_LEN];
    lease_path(a, "/revoke", path, sizeof path);
    json_t *body = json_object();
    if (a->reason != NULL)
        json_object_set_new(body, "reason", json_string(a->reason));
    if (a->semaphore)
        set_given(body, "fence", a->fence);
    return call(a, "POST", path, body, CTL_CALL_TIMEOUT_MS, REVOKED, ans);
}

int ctl_api_watch(const struct ctl_args *a, const char *name, bool semaphore, long long fence,
                  long long wait_ms, struct ctl_answer *ans)
{
    char path[PATH_MAX_LEN], query[96];
    snprintf(query, sizeof query, "?watch=true&fence=%lld&wait_ms=%lld", fence, wait_ms);
    name_path(name, semaphore, query, path, sizeof path);
    return call(a, "GET", path, NULL, wait_ms + CTL_CALL_TIMEOUT_MS, WATCHED, ans);
}

int ctl_api_lockset_acquire(const struct ctl_args *a, const char *owner, struct ctl_answer *ans)
{
    json_t *names = json_array();
    for (size_t i = 0; i < a->set_size; i++)
        json_array_append_new(names, json_string(a->set_names[i]));
    json_t *body = json_pack("{s:o}", "names", names);
    set_given(body, "ttl_ms", a->ttl_ms);
    set_given(body, "wait_ms", a->wait_ms);
    set_given(body, "max_hold_ms", a->max_hold_ms);
    if (owner != NULL)
        json_object_set_new(body, "owner", json_string(owner));
    long long waits = a->wait_ms >= 0 ? a->wait_ms : WAIT_MAX_MS;
    return call(a, "POST", "/v1/locksets/acquire", body, waits + CTL_CALL_TIMEOUT_MS, GRANTS, ans);
}

static json_t *token_list(char *const *tokens, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_string(tokens[i]));
    return list;
}

int ctl_api_lockset_renew(const struct ctl_args *a, char *const *tokens, size_t n, long long ttl_ms,
                          long long timeout_ms, struct ctl_answer *ans)
{
    json_t *body = json_pack("{s:o}", "tokens", token_list(tokens, n));
    set_given(body, "ttl_ms", ttl_ms);
    return call(a, "POST", "/v1/locksets/renew", body, timeout_ms, GRANTS, ans);
}

int ctl_api_lockset_release(const struct ctl_args *a, char *const *tokens, size_t n,
                            long long timeout_ms, struct ctl_answer *ans)
{
    return call(a, "POST", "/v1/locksets/release",
                json_pack("{s:o}", "tokens", token_list(tokens, n)), timeout_ms, RELEASED, ans);
}

void ctl_answer_report(const struct ctl_answer *ans)
{
    if (ans->response.status == 0) {
        fprintf(stderr, "fencectl: %s%s\n",
                ans->exit == CTL_EXIT_USAGE ? "" : "gateway unreachable: ", ans->err.msg);
        return;
    }
    if (ans->response.status >= 200 && ans->response.status < 300) {
        fprintf(stderr, "fencectl: %s\n", ans->err.msg);
        return;
    }
    char *detail = ctl_escape(json_string_value(json_object_get(ans->json, "detail")));
    char *problem = ctl_escape(ans->problem);
    json_t *waiting = json_object_get(ans->json, "waiting");
    fprintf(stderr, "fencectl: %s (HTTP %d)%s%s", problem ? problem : "error", ans->response.status,
            detail ? ": " : "", detail ? detail : "");
    free(detail);
    free(problem);
    if (json_is_integer(waiting))
        fprintf(stderr, " (%lld waiting)", (long long)json_integer_value(waiting));
    fputc('\n', stderr);
}

void ctl_answer_free(struct ctl_answer *ans)
{
    ctl_response_free(&ans->response);
    json_decref(ans->json);
    ans->json = NULL;
    ans->problem = NULL;
}
