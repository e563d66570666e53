/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fgjson.c - field readers for request bodies: the one place that decides what a
 * wrong type or an out-of-range number looks like to a client.
 */
#include "util/fgjson.h"

#include <string.h>

int fgjson_int(const json_t *obj, const char *field, long long min, long long max, long long *out,
               bool *present, struct fg_error *err)
{
    const json_t *v = json_object_get(obj, field);
    if (present != NULL)
        *present = false;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be an integer", field);
    long long n = json_integer_value(v);
    if (n < min || n > max)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be between %lld and %lld", field,
                       min, max);
    *out = n;
    if (present != NULL)
        *present = true;
    return 0;
}

long long fgjson_answer_int(const json_t *obj, const char *field, long long fallback)
{
    const json_t *v = json_object_get(obj, field);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (long long)json_real_value(v);
    return fallback;
}

int fgjson_string(const json_t *obj, const char *field, size_t max_len, const char **out,
                  struct fg_error *err)
{
    const json_t *v = json_object_get(obj, field);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be a string", field);
    size_t len = json_string_length(v);
    const char *s = json_string_value(v);
    if (len == 0 || len > max_len)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be 1 to %zu bytes long", field,
                       max_len);
    if (strlen(s) != len)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must not contain NUL", field);
    *out = s;
    return 0;
}

bool fgjson_listed(const char *const *list, const char *name)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

int fgjson_only(const json_t *obj, const char *const *allowed, const char *where,
                struct fg_error *err)
{
    char names[160];
    size_t used = 0, unknown = 0;
    const char *name;
    const json_t *value;
    json_object_foreach((json_t *)obj, name, value)
    {
        if (fgjson_listed(allowed, name))
            continue;
        int w = snprintf(names + used, sizeof names - used, "%s'%s%.40s'", unknown ? ", " : "",
                         where, name);
        unknown++;
        if (w < 0 || (size_t)w >= sizeof names - used)
            break; /* the first few name the problem well enough */
        used += (size_t)w;
    }
    if (unknown == 0)
        return 0;
    names[used] = '\0';
    return fg_fail(err, FG_ERR_INVALID_FIELD, "unknown field%s %s", unknown > 1 ? "s" : "", names);
}

json_t *fgjson_parse_object(const char *body, size_t len, struct fg_error *err)
{
    if (len == 0)
        return json_object();
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        fg_fail(err, FG_ERR_INVALID_JSON, "body is not valid JSON: %s (line %d, column %d)",
                jerr.text, jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        fg_fail(err, FG_ERR_INVALID_JSON, "body must be a JSON object");
        return NULL;
    }
    return root;
}
