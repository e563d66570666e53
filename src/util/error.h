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

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define FG_WUR __attribute__((warn_unused_result))

/*
 * Every error code once: the enum constant, its stable problem name (the type
 * /problems/<name> of the API), the HTTP status, the seconds of the Retry-After
 * header its replies carry (0: none; a client should come back, not give up),
 * the problem title, and the result it counts as in the lease metrics (a
 * METRIC_RESULT_ suffix of util/metrics.h). This list is the only place a
 * code's name, status, Retry-After, title or metric result is spelled: the enum
 * below, the table of error.c and the map of metrics.c are expanded from it.
 */
#define FG_CODES(X)                                                                                \
    X(FG_OK, "ok", 200, 0, "OK", OK)                                                               \
    X(FG_ERR_INVALID_JSON, "invalid_json", 400, 0, "Request body is not valid JSON", INVALID)      \
    X(FG_ERR_INVALID_NAME, "invalid_name", 400, 0, "Invalid name", INVALID)                        \
    X(FG_ERR_INVALID_FIELD, "invalid_field", 400, 0, "Invalid field", INVALID)                     \
    X(FG_ERR_UNAUTHORIZED, "unauthorized", 401, 0, "Unauthorized", INVALID)                        \
    X(FG_ERR_FORBIDDEN, "forbidden", 403, 0, "Forbidden", INVALID)                                 \
    X(FG_ERR_INVALID_FENCE_TOKEN, "invalid_fence_token", 403, 0, "Invalid fence token", INVALID)   \
    X(FG_ERR_NOT_FOUND, "not_found", 404, 0, "Not found", INVALID)                                 \
    X(FG_ERR_METHOD_NOT_ALLOWED, "method_not_allowed", 405, 0, "Method not allowed", INVALID)      \
    X(FG_ERR_LOCK_BUSY, "lock_busy", 409, 0, "Lock busy", BUSY)                                    \
    X(FG_ERR_STALE_FENCE, "stale_fence", 409, 0, "Stale fence", INVALID)                           \
    X(FG_ERR_LIMIT_MISMATCH, "limit_mismatch", 409, 0, "Semaphore limit mismatch", LIMIT_MISMATCH) \
    X(FG_ERR_MAX_HOLD_EXCEEDED, "max_hold_exceeded", 409, 0, "Maximum hold time exceeded",         \
      MAX_HOLD)                                                                                    \
    X(FG_ERR_CONFLICT, "conflict", 409, 0, "Conflict", SUPERSEDED)                                 \
    X(FG_ERR_LEASE_LOST, "lease_lost", 410, 0, "Lease lost", LEASE_LOST)                           \
    X(FG_ERR_BODY_TOO_LARGE, "body_too_large", 413, 0, "Request body too large", INVALID)          \
    X(FG_ERR_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415, 0, "Unsupported media type",   \
      INVALID)                                                                                     \
    X(FG_ERR_MISDIRECTED_REQUEST, "misdirected_request", 421, 0, "Misdirected request", INVALID)   \
    X(FG_ERR_TOO_MANY_WAITERS, "too_many_waiters", 429, 1, "Too many waiters", TOO_MANY_WAITERS)   \
    X(FG_ERR_BACKEND_UNAVAILABLE, "backend_unavailable", 503, 1, "Backend unavailable",            \
      UNAVAILABLE)                                                                                 \
    X(FG_ERR_INTERNAL, "internal", 500, 0, "Internal error", ERROR)                                \
    X(FG_ERR_CONFIG, "config", 500, 0, "Invalid configuration", ERROR)

#define FG_CODE_ENUM(code, name, status, retry_after_s, title, metric) code,
enum fg_code { FG_CODES(FG_CODE_ENUM) FG_CODE_COUNT };
#undef FG_CODE_ENUM

struct fg_error {
    enum fg_code code; /* FG_OK until something fails */
    char msg[256];     /* what failed, for the problem detail or the log */
    bool not_run;      /* the backend did not run the call, nor can it later (fg_not_run) */
};

/* Records code and a printf-style message in err (which may be NULL), and
 * clears its not_run; returns -1 so that callers can write
 * `return fg_fail(err, ...);`. A message longer than
 * msg is cut before the character that would not fit whole, so that a key or
 * a name of UTF-8 text at its end leaves text, which a problem detail must be;
 * a name cut inside the message is cut with utf8_cut_len (util/utf8.h). */
int fg_fail(struct fg_error *err, enum fg_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Marks err, just filled by fg_fail (which clears the mark), as a call the
 * backend did not run and cannot run later: Redis refused it before it ran (a
 * cluster down, a slot that no primary serves or that keeps moving, a server
 * loading, read-only or out of memory), or no byte of it was ever written to
 * Redis (no connection could be made, or it gave up while queued); so it
 * changed nothing, where a call that got no reply may have run all the same.
 * Returns -1. */
int fg_not_run(struct fg_error *err);

/* Stable problem name ("invalid_name", ...), HTTP status and problem title
 * ("Invalid name", ...) of an error code (static strings). */
const char *fg_code_name(enum fg_code code);
int fg_code_status(enum fg_code code);
const char *fg_code_title(enum fg_code code);

/* Seconds of the Retry-After header a problem reply of code carries; 0 for
 * none. */
int fg_code_retry_after(enum fg_code code);

/* The error code whose problem name is name ("lock_busy"), as a client reads it
 * from an answer; FG_OK for NULL or a name no code has. */
enum fg_code fg_code_of_name(const char *name);

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
