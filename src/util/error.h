/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.h - the one error contract of fencegate. Functions that can fail return
 * 0 on success and -1 on failure, are marked FG_WUR, and fill a caller-owned
 * struct fg_error with a stable code and a human-readable message. The codes are
 * the problem types of the public API, so an error travels unchanged from the
 * place it is found to the problem+json reply.
 */
#ifndef FG_ERROR_H
#define FG_ERROR_H

#include <stdio.h>
#include <stdlib.h>

#define FG_WUR __attribute__((warn_unused_result))

enum fg_code {
    FG_OK = 0,
    FG_ERR_INVALID_JSON,
    FG_ERR_INVALID_NAME,
    FG_ERR_INVALID_FIELD,
    FG_ERR_UNAUTHORIZED,
    FG_ERR_FORBIDDEN,
    FG_ERR_INVALID_FENCE_TOKEN,
    FG_ERR_NOT_FOUND,
    FG_ERR_METHOD_NOT_ALLOWED,
    FG_ERR_LOCK_BUSY,
    FG_ERR_STALE_FENCE,
    FG_ERR_LIMIT_MISMATCH,
    FG_ERR_MAX_HOLD_EXCEEDED,
    FG_ERR_CONFLICT,
    FG_ERR_LEASE_LOST,
    FG_ERR_BODY_TOO_LARGE,
    FG_ERR_UNSUPPORTED_MEDIA_TYPE,
    FG_ERR_MISDIRECTED_REQUEST,
    FG_ERR_TOO_MANY_WAITERS,
    FG_ERR_BACKEND_UNAVAILABLE,
    FG_ERR_INTERNAL,
    FG_ERR_CONFIG,
    FG_CODE_COUNT
};

struct fg_error {
    enum fg_code code; /* FG_OK until something fails */
    char msg[256];     /* what failed, for the problem detail or the log */
};

/* Records code and a printf-style message in err (which may be NULL); returns -1
 * so that callers can write `return fg_fail(err, ...);`. */
int fg_fail(struct fg_error *err, enum fg_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Stable problem code ("invalid_name", ...) and HTTP status of an error code. */
const char *fg_code_name(enum fg_code code);
int fg_code_status(enum fg_code code);

/* A broken invariant: a bug, never a user error. Prints file and line, aborts. */
#define FG_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fencegate: assertion failed: %s (%s:%d)\n", #cond, __FILE__,          \
                    __LINE__);                                                                     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
