/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.c - fills struct fg_error and maps each error code to its stable problem
 * name and HTTP status. The table here is the single source of the status codes
 * of API.md; nothing else in the tree decides a status for an error.
 */
#include "util/error.h"

#include <stdarg.h>

static const struct {
    const char *name;
    int status;
} code_table[FG_CODE_COUNT] = {
    [FG_OK] = {"ok", 200},
    [FG_ERR_INVALID_JSON] = {"invalid_json", 400},
    [FG_ERR_INVALID_NAME] = {"invalid_name", 400},
    [FG_ERR_INVALID_FIELD] = {"invalid_field", 400},
    [FG_ERR_UNAUTHORIZED] = {"unauthorized", 401},
    [FG_ERR_FORBIDDEN] = {"forbidden", 403},
    [FG_ERR_INVALID_FENCE_TOKEN] = {"invalid_fence_token", 403},
    [FG_ERR_NOT_FOUND] = {"not_found", 404},
    [FG_ERR_METHOD_NOT_ALLOWED] = {"method_not_allowed", 405},
    [FG_ERR_LOCK_BUSY] = {"lock_busy", 409},
    [FG_ERR_STALE_FENCE] = {"stale_fence", 409},
    [FG_ERR_LIMIT_MISMATCH] = {"limit_mismatch", 409},
    [FG_ERR_MAX_HOLD_EXCEEDED] = {"max_hold_exceeded", 409},
    [FG_ERR_CONFLICT] = {"conflict", 409},
    [FG_ERR_LEASE_LOST] = {"lease_lost", 410},
    [FG_ERR_BODY_TOO_LARGE] = {"body_too_large", 413},
    [FG_ERR_UNSUPPORTED_MEDIA_TYPE] = {"unsupported_media_type", 415},
    [FG_ERR_MISDIRECTED_REQUEST] = {"misdirected_request", 421},
    [FG_ERR_TOO_MANY_WAITERS] = {"too_many_waiters", 429},
    [FG_ERR_BACKEND_UNAVAILABLE] = {"backend_unavailable", 503},
    [FG_ERR_INTERNAL] = {"internal", 500},
    [FG_ERR_CONFIG] = {"config", 500},
};

int fg_fail(struct fg_error *err, enum fg_code code, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

const char *fg_code_name(enum fg_code code)
{
    FG_ASSERT(code >= 0 && code < FG_CODE_COUNT);
    return code_table[code].name;
}

int fg_code_status(enum fg_code code)
{
    FG_ASSERT(code >= 0 && code < FG_CODE_COUNT);
    return code_table[code].status;
}
