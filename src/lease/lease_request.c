/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_request.c - reads the bodies of lease calls, with the defaults of the
 * configuration and the one rule between members (ttl_ms within max_hold_ms).
 * Each member's own rules (type, bounds, presence) are its route's
 * description's, checked before the handler runs (http/strict.h).
 */
#include "lease/lease_request.h"

#include <stdio.h>
#include <string.h>

/* The value of integer member name of body, or absent when it has none. */
static long long member_int(const json_t *body, const char *name, long long absent, bool *given)
{
    const json_t *v = json_object_get(body, name);
    if (given != NULL)
        *given = json_is_integer(v);
    return json_is_integer(v) ? json_integer_value(v) : absent;
}

/* The value of string member name of body, or absent when it has none. */
static const char *member_string(const json_t *body, const char *name, const char *absent)
{
    const char *s = json_string_value(json_object_get(body, name));
    return s != NULL ? s : absent;
}

int acquire_params_parse(const json_t *body, const struct config *cfg, bool with_limit,
                         struct acquire_params *out, struct fg_error *err)
{
    bool hold_given = false, ttl_given = false;
    out->ttl_ms = member_int(body, "ttl_ms", cfg->default_ttl_ms, &ttl_given);
    out->wait_ms = member_int(body, "wait_ms", cfg->default_wait_ms, NULL);
    out->max_hold_ms = member_int(body, "max_hold_ms", cfg->default_max_hold_ms, &hold_given);
    out->owner = member_string(body, "owner", "");
    out->request_id = member_string(body, "request_id", "");
    out->limit = with_limit ? member_int(body, "limit", 0, NULL) : 0;
    if (out->ttl_ms > out->max_hold_ms) {
        if (hold_given && ttl_given)
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "field 'ttl_ms' must not exceed field 'max_hold_ms'");
        if (hold_given)
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "the default ttl_ms (%lld) exceeds field 'max_hold_ms': give a ttl_ms "
                           "within it",
                           (long long)out->ttl_ms);
        out->max_hold_ms = out->ttl_ms;
    }
    return 0;
}

long long acquire_request_id_ttl_ms(const struct acquire_params *p)
{
    return p->wait_ms + p->ttl_ms + REQUEST_ID_GRACE_MS;
}

const char *acquire_request_id_scoped(const char *request_id, const char *principal,
                                      char out[SCOPED_REQUEST_ID_MAX])
{
    if (request_id[0] == '\0' || principal == NULL)
        return request_id;
    snprintf(out, SCOPED_REQUEST_ID_MAX, "key:%s:%s", principal, request_id);
    return out;
}

const char *lease_request_token(const json_t *body)
{
    return member_string(body, "token", "");
}

void renew_params_read(const json_t *body, struct renew_params *out)
{
    out->token = lease_request_token(body);
    out->ttl_ms = member_int(body, "ttl_ms", 0, NULL);
}
