/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.c - fills struct fg_error and maps each error code to its stable problem
 * name, HTTP status, Retry-After and problem title. The table here, expanded from FG_CODES
 * (error.h), is the single source of the codes of docs/api.md; nothing else in
 * the tree decides a name, status or title for an error.
 */
#include "util/error.h"

#include <stdarg.h>
#include <string.h>

#include "util/utf8.h"

#define FG_CODE_ROW(code, name, status, retry_after_s, title, metric)                              \
    [code] = {name, status, retry_after_s, title},

static const struct {
    const char *name;  /* problem name, as in /problems/<name> */
    int status;        /* HTTP status of the problem reply */
    int retry_after_s; /* Retry-After of the problem reply in seconds, 0 for none */
    const char *title; /* problem title, the same for every reply of the code */
} code_table[FG_CODE_COUNT] = {FG_CODES(FG_CODE_ROW)};

int fg_fail(struct fg_error *err, enum fg_code code, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    err->code = code;
    err->not_run = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    utf8_trim_cut(err->msg); /* a message over msg ends with whole characters */
    return -1;
}

int fg_not_run(struct fg_error *err)
{
    if (err != NULL)
        err->not_run = true;
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

const char *fg_code_title(enum fg_code code)
{
    FG_ASSERT(code >= 0 && code < FG_CODE_COUNT);
    return code_table[code].title;
}

int fg_code_retry_after(enum fg_code code)
{
    FG_ASSERT(code >= 0 && code < FG_CODE_COUNT);
    return code_table[code].retry_after_s;
}

enum fg_code fg_code_of_name(const char *name)
{
    for (int code = FG_OK + 1; name != NULL && code < FG_CODE_COUNT; code++)
        if (strcmp(name, code_table[code].name) == 0)
            return (enum fg_code)code;
    return FG_OK;
}
