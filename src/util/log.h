/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - structured logs: one JSON object per line on stderr, for each request
 * and each notable event (lease lost, stale write, backend down or up). Callers
 * pass fields as a jansson object; secrets (tokens, passwords) must never be put
 * in one. Thread-safe.
 */
#ifndef FG_LOG_H
#define FG_LOG_H

#include <jansson.h>
#include <stdbool.h>

#include "util/fgjson.h"

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Sets the lowest level written ("debug", "info", "warn" or "error"). */
void log_set_level(const char *level);

/* True if a line at level would be written (to skip building its fields). */
bool log_enabled(enum log_level level);

/* Writes {"ts":..., "level":..., "event": event, ...fields} (fields stolen, may be NULL). */
void log_event(enum log_level level, const char *event, json_t *fields);

/*
 * A line built member by member, for the lines of every request: if level is
 * written, starts {"ts":..., "level":..., "event": event in a buffer of the
 * calling thread and returns true; the caller appends members with
 * fgjson_out_str/int and ends with log_line_end, which writes the line.
 */
bool log_line_begin(struct fgjson_out *line, enum log_level level, const char *event);
void log_line_end(struct fgjson_out *line);
/* A holder's renew or release found its lease gone: kind is "lock" or
 * "semaphore", op "renew" or "release". Names no token. */
void log_lease_lost(const char *kind, const char *name, const char *op, long long fence,
                    const char *client);

/* A fenced write was refused as stale. */
void log_stale_write(const char *resource, const char *lock, long long presented_fence,
                     long long current_fence, const char *method, const char *client);

/* Shorthand: an event whose only field is "detail" (printf-style), cut at 511
 * bytes before a character that would not fit whole; bytes that are not UTF-8
 * become U+FFFD (fgjson_string), so the line keeps its detail. */
void log_message(enum log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
