/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - the JSON-lines logger. Each line, newline included, is written by
 * fgjson's writer into a buffer of the calling thread (a heap one only for a
 * line longer than it) and handed to the kernel in one write(2) on stderr, so
 * lines from different threads never mix and a reader of a pipe or journal
 * never sees half a line; short lines share a lock that only a line over
 * PIPE_BUF takes alone. The request log is on every request's path: a line
 * costs one system call, no lock wait, no allocation and, through
 * log_line_begin, no line object. Must not: buffer lines (a crash would lose
 * them) or go through stdio.
 */
#include "util/log.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/utf8.h"

#define LINE_BUF 4096 /* bytes of a log line built without allocating */

static enum log_level min_level = LOG_INFO;
/* Shared by the writers of short lines, held alone by the writer of a long one
 * (writers first, so that a long line is not put off for ever). */
static pthread_rwlock_t write_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(const char *level)
{
    for (int i = LOG_DEBUG; i <= LOG_ERROR; i++)
        if (strcmp(level, level_names[i]) == 0)
            min_level = (enum log_level)i;
}

bool log_enabled(enum log_level level)
{
    return level >= min_level;
}

/* Writes buf (a line and its newline) to stderr in one write(2). A write of at
 * most PIPE_BUF bytes is never split nor mixed with another, whether stderr is a
 * pipe, a file (the kernel holds the file's lock across a write) or a terminal,
 * so such lines share the lock (no waiting, no system call); a longer line,
 * which a pipe may take in pieces, holds it alone, and only its partial writes
 * take more than one call. */
static void write_line(const char *buf, size_t len)
{
    if (len > PIPE_BUF)
        pthread_rwlock_wrlock(&write_lock);
    else
        pthread_rwlock_rdlock(&write_lock);
    for (size_t done = 0; done < len;) {
        ssize_t n = write(STDERR_FILENO, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    pthread_rwlock_unlock(&write_lock);
}

/* Writes now as 2026-11-30T15:04:05.123Z into out (25 bytes); the date and
 * time of day are formatted once a second per thread. */
static void timestamp(char out[25])
{
    static _Thread_local time_t cached_sec = -1;
    static _Thread_local char cached[20]; /* YYYY-MM-DDTHH:MM:SS */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec != cached_sec) {
        struct tm tm;
        gmtime_r(&now.tv_sec, &tm);
        strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
        cached_sec = now.tv_sec;
    }
    long ms = now.tv_nsec / 1000000;
    memcpy(out, cached, 19);
    out[19] = '.';
    out[20] = (char)('0' + ms / 100);
    out[21] = (char)('0' + ms / 10 % 10);
    out[22] = (char)('0' + ms % 10);
    out[23] = 'Z';
    out[24] = '\0';
}

bool log_line_begin(struct fgjson_out *line, enum log_level level, const char *event)
{
    static _Thread_local char local[LINE_BUF];
    if (!log_enabled(level))
        return false;
    char ts[25];
    timestamp(ts);
    fgjson_out_init(line, local, sizeof local);
    fgjson_out_open(line);
    fgjson_out_strn(line, "ts", ts, 24);
    fgjson_out_str(line, "level", level_names[level]);
    fgjson_out_str(line, "event", event);
    return true;
}

void log_line_end(struct fgjson_out *line)
{
    fgjson_out_close(line);
    fgjson_out_raw(line, "\n", 1);
    write_line(line->buf, line->len);
    fgjson_out_free(line);
}

void log_event(enum log_level level, const char *event, json_t *fields)
{
    struct fgjson_out line;
    if (!log_line_begin(&line, level, event)) {
        json_decref(fields);
        return;
    }
    if (fields != NULL) {
        json_object_del(fields, "ts"); /* the head's members win */
        json_object_del(fields, "level");
        json_object_del(fields, "event");
        fgjson_out_members(&line, fields);
    }
    log_line_end(&line);
    json_decref(fields);
}

void log_message(enum log_level level, const char *event, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    utf8_trim_cut(detail);
    log_event(level, event, json_pack("{s:o}", "detail", fgjson_string(detail)));
}

void log_lease_lost(const char *kind, const char *name, const char *op, long long fence,
                    const char *client)
{
    log_event(LOG_WARN, "lease_lost",
              json_pack("{s:s, s:s, s:s, s:I, s:s}", "kind", kind, kind, name, "op", op, "fence",
                        (json_int_t)fence, "client", client));
}

void log_stale_write(const char *resource, const char *lock, long long presented_fence,
                     long long current_fence, const char *method, const char *client)
{
    log_event(LOG_WARN, "stale_write",
              json_pack("{s:s, s:s, s:I, s:I, s:s, s:s}", "resource", resource, "lock", lock,
                        "presented_fence", (json_int_t)presented_fence, "current_fence",
                        (json_int_t)current_fence, "method", method, "client", client));
}
