/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_request.c - the field rules of docs/api.md for lease calls: which fields
 * exist, their types and ranges, and the defaults of the configuration.
 */
#include "lease/lease_request.h"

#include <stdio.h>
#include <string.h>

#include "auth/token.h"
#include "util/fgjson.h"
#include "util/names.h"

int acquire_params_parse(const json_t *body, const struct config *cfg, bool with_limit,
                         struct acquire_params *out, struct fg_error *err)
{
    out->ttl_ms = cfg->default_ttl_ms;
    out->wait_ms = cfg->default_wait_ms;
    out->max_hold_ms = cfg->default_max_hold_ms;
    out->limit = 0;
    out->owner = "";
    out->request_id = "";
    bool hold_given = false, limit_given = false;
    if (fgjson_int(body, "ttl_ms", TTL_MIN_MS, TTL_MAX_MS, &out->ttl_ms, NULL, err) != 0 ||
        fgjson_int(body, "wait_ms", 0, WAIT_MAX_MS, &out->wait_ms, NULL, err) != 0 ||
        fgjson_int(body, "max_hold_ms", TTL_MIN_MS, MAX_HOLD_MAX_MS, &out->max_hold_ms, &hold_given,
                   err) != 0 ||
        fgjson_string(body, "owner", OWNER_NAME_MAX_LEN, &out->owner, err) != 0 ||
        fgjson_string(body, "request_id", REQUEST_ID_MAX_LEN, &out->request_id, err) != 0)
        return -1;
    if (out->owner[0] != '\0' && !name_is_valid_owner(out->owner, strlen(out->owner)))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field 'owner' must be 1 to %d bytes of printable UTF-8",
                       OWNER_NAME_MAX_LEN);
    if (with_limit) {
        if (fgjson_int(body, "limit", 1, SEMAPHORE_MAX_LIMIT, &out->limit, &limit_given, err) != 0)
            return -1;
        if (!limit_given)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'limit' is required");
    }
    if (out->ttl_ms > out->max_hold_ms) {
        if (hold_given)
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "field 'ttl_ms' must not exceed field 'max_hold_ms'");
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

static int token_field(const json_t *body, const char **token, struct fg_error *err)
{
    *token = NULL;
    if (fgjson_string(body, "token", TOKEN_MAX_LEN, token, err) != 0)
        return -1;
    if (*token == NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "field 'token' is required");
    return 0;
}

int renew_params_parse(const json_t *body, struct renew_params *out, struct fg_error *err)
{
    out->ttl_ms = 0;
    if (token_field(body, &out->token, err) != 0)
        return -1;
    return fgjson_int(body, "ttl_ms", TTL_MIN_MS, TTL_MAX_MS, &out->ttl_ms, NULL, err);
}

int release_params_parse(const json_t *body, const char **token, struct fg_error *err)
{
    return token_field(body, token, err);
}
