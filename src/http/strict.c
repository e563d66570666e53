/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strict.c - header rules of strict requests: what keeps a web page that a
 * user happens to visit from driving a gateway on their machine (a JSON
 * Content-Type needs a CORS preflight; a foreign Host means DNS rebinding; a
 * request without a body tells its page's origin in Origin), and what keeps a
 * proxy in front from reading one request where the gateway reads two
 * (ambiguous body framing), or the gateway from waiting for a body it cannot
 * frame (a transfer coding other than chunked). And the bounds of each route's
 * members, from the table generated out of the route descriptions: what makes
 * a bound written in openapi/routes/ the bound the gateway enforces. It must
 * not do I/O or build replies.
 */
#include "http/strict.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/fgjson.h"
#include "util/integer.h"
#include "util/names.h"

bool strict_content_type_is_json(const char *value)
{
    static const char json[] = "application/json";
    if (value == NULL || strncasecmp(value, json, sizeof json - 1) != 0)
        return false;
    const char *rest = value + sizeof json - 1;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    return *rest == '\0' || *rest == ';';
}

bool strict_host_allowed(const char *host, char *const *allowed, size_t n)
{
    if (host == NULL)
        return true;
    for (size_t i = 0; i < n; i++)
        if (strcmp(allowed[i], "*") == 0 || strcasecmp(allowed[i], host) == 0)
            return true;
    return false;
}

/* The length of the scheme that begins url, "://" included ("http://",
 * "https://", any case): a target in absolute form. 0 for any other target. */
static size_t absolute_scheme_len(const char *url)
{
    return strncasecmp(url, "http://", 7) == 0 ? 7 : strncasecmp(url, "https://", 8) == 0 ? 8 : 0;
}

const char *strict_target_path(const char *url, char *authority, size_t cap)
{
    authority[0] = '\0';
    size_t scheme = absolute_scheme_len(url);
    if (scheme == 0)
        return url;
    const char *host = url + scheme;
    size_t len = strcspn(host, "/?#");
    snprintf(authority, cap, "%.*s", (int)(len < cap ? len : cap - 1), host);
    if (len >= cap && cap > 1)
        authority[cap - 2] = '/'; /* a cut name is no host's */
    return host[len] == '/' ? host + len : "/";
}

const char *strict_target_fault(const char *url)
{
    size_t scheme = absolute_scheme_len(url);
    if (scheme == 0)
        return NULL;
    char first = url[scheme];
    if (first == '\0' || strchr("/?#:", first) != NULL)
        return "the target names no host: a target in absolute form names one "
               "(http://host[:port]/path)";
    return NULL;
}

bool strict_target_scheme_ok(const char *url, bool tls)
{
    size_t scheme = absolute_scheme_len(url);
    return scheme == 0 || (scheme == sizeof "https://" - 1) == tls;
}

size_t strict_value_len(const char *value)
{
    size_t len = strlen(value);
    while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    return len;
}

/* True if every byte of text is an ASCII letter or digit or one of marks. */
static bool letters_digits_or(const char *text, const char *marks)
{
    for (const char *p = text; *p != '\0'; p++) {
        bool alnum =
            (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        if (!alnum && strchr(marks, *p) == NULL)
            return false;
    }
    return true;
}

bool strict_request_id_valid(const char *id)
{
    size_t len = strlen(id);
    return len > 0 && len <= X_REQUEST_ID_MAX_LEN && letters_digits_or(id, "-_.:/+=@");
}

bool strict_framing_ok(int content_lengths, int transfer_encodings)
{
    return content_lengths <= 1 && transfer_encodings <= 1 &&
           (content_lengths == 0 || transfer_encodings == 0);
}

bool strict_header_name_ok(const char *name)
{
    return *name != '\0' && letters_digits_or(name, "!#$%&'*+-.^_`|~");
}

bool strict_transfer_coding_ok(const char *value)
{
    return value == NULL || strcasecmp(value, "chunked") == 0;
}

bool strict_header_has_token(const char *value, const char *token)
{
    size_t len = strlen(token);
    for (const char *at = value; at != NULL && *at != '\0';) {
        at += strspn(at, " \t,");
        size_t word = strcspn(at, ",");
        while (word > 0 && (at[word - 1] == ' ' || at[word - 1] == '\t'))
            word--;
        if (word == len && strncasecmp(at, token, len) == 0)
            return true;
        at = strchr(at, ',');
    }
    return false;
}

const char *strict_cross_origin(const char *origin, const char *fetch_site, const char *host)
{
    if (fetch_site != NULL &&
        (strcasecmp(fetch_site, "cross-site") == 0 || strcasecmp(fetch_site, "same-site") == 0))
        return "Sec-Fetch-Site says the page is of another site";
    if (origin == NULL)
        return NULL;
    if (strcmp(origin, "null") == 0)
        return "Origin: null, a page of no origin";
    const char *authority = strstr(origin, "://");
    if (authority == NULL || host == NULL || strcasecmp(authority + 3, host) != 0)
        return "its Origin is not the Host it names";
    return NULL;
}

/* The checks of a present body integer or string, with fgjson_int's and
 * fgjson_string's answers. */
static int typed_check(const struct member_bound *b, const json_t *v, struct fg_error *err)
{
    if (b->check == CHECK_INTEGER) {
        if (!json_is_integer(v))
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be an integer", b->name);
        long long n = json_integer_value(v);
        return n < b->min || n > b->max ? fg_fail(err, FG_ERR_INVALID_FIELD, "%s", b->refusal) : 0;
    }
    if (!json_is_string(v))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be a string", b->name);
    long long len = (long long)json_string_length(v);
    if (len < b->min || len > b->max)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "%s", b->refusal);
    if (strlen(json_string_value(v)) != (size_t)len)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must not contain NUL", b->name);
    if (b->printable != NULL && !name_is_valid_owner(json_string_value(v), (size_t)len))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "%s", b->printable);
    return 0;
}

int strict_member_check(const struct member_bound *b, const json_t *body, struct fg_error *err)
{
    const json_t *v = json_object_get(body, b->name);
    if (b->check == CHECK_TEXT || b->check == CHECK_ARRAY) {
        if (v == NULL && !b->required)
            return 0;
        long long n = b->check == CHECK_ARRAY ? (long long)json_array_size(v)
                                              : (long long)json_string_length(v);
        bool ok = b->check == CHECK_ARRAY
                      ? json_is_array(v)
                      : json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
        if (!ok || n < b->min || n > b->max)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "%s", b->refusal);
        return b->items != NULL ? b->items(v, err) : 0;
    }
    if (v == NULL || (json_is_null(v) && b->required))
        return b->required ? fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' is required", b->name)
                           : 0;
    if (json_is_null(v))
        return fgjson_null_refused(b->name, err);
    return typed_check(b, v, err);
}

int strict_query_check(const struct member_bound *b, const char *text, struct fg_error *err)
{
    long long n = 0;
    if (text == NULL)
        return 0; /* absent: its default */
    return integer_parse(text, b->min, b->max, &n) == INTEGER_OK
               ? 0
               : fg_fail(err, FG_ERR_INVALID_FIELD, "%s", b->refusal);
}

void strict_too_big(const struct member_bound *bounds, const char *member, struct fg_error *err)
{
    for (const struct member_bound *b = bounds; b != NULL && b->name != NULL; b++) {
        if (b->check == CHECK_QUERY_INTEGER || strcmp(b->name, member) != 0)
            continue;
        /* The largest 64-bit integer stands for the value: what b refuses
         * of it (past an integer's bound, not a string) it refuses of any
         * integer beyond it. */
        json_t *stand_in = json_pack("{s:I}", b->name, (json_int_t)LLONG_MAX);
        FG_ASSERT(stand_in != NULL);
        struct fg_error answer = {0};
        if (strict_member_check(b, stand_in, &answer) != 0)
            *err = answer;
        json_decref(stand_in);
        return;
    }
}

const struct member_bound *strict_bound(const struct member_bound *list, const char *name)
{
    for (; list != NULL && list->name != NULL; list++)
        if (strcmp(list->name, name) == 0)
            return list;
    FG_ASSERT(!"a handler reads a bound its route does not describe");
    return NULL;
}
