/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - the JSON-lines logger. Each line, newline included, is built in a
 * buffer of the calling thread (a heap one only for a line longer than it) and
 * handed to the kernel in one write(2) on stderr under a mutex, so lines from
 * different threads never mix and a reader of a pipe or journal never sees half
 * a line. The request log is on every request's path: a line costs one system
 * call and no line object. Must not: buffer lines (a crash would lose them) or
 * go through stdio.
 */
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define LINE_BUF 4096 /* bytes of a log line built without allocating */

static enum log_level min_level = LOG_INFO;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
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

/* Writes buf (a line and its newline) to stderr in one write(2); only a
 * partial write, which a pipe does not do for lines under PIPE_BUF, takes more. */
static void write_line(const char *buf, size_t len)
{
    pthread_mutex_lock(&write_lock);
    for (size_t done = 0; done < len;) {
        ssize_t n = write(STDERR_FILENO, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    pthread_mutex_unlock(&write_lock);
}

/* The head of a line, {"ts":"...","level":"...","event":"<event>"; returns its length. */
static size_t line_head(char *buf, size_t cap, enum log_level level, const char *event)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[40];
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03ldZ", (long)(tv.tv_usec / 1000));
    int len = snprintf(buf, cap, "{\"ts\":\"%s\",\"level\":\"%s\",\"event\":\"%s\"", ts,
                       level_names[level], event);
    return len > 0 && (size_t)len < cap ? (size_t)len : 0;
}

void log_event(enum log_level level, const char *event, json_t *fields)
{
    if (!log_enabled(level)) {
        json_decref(fields);
        return;
    }
    static _Thread_local char local[LINE_BUF];
    char *buf = local, *heap = NULL;
    size_t head = line_head(local, sizeof local - 2, level, event), len = head;
    if (fields != NULL) {
        json_object_del(fields, "ts"); /* the head's members win */
        json_object_del(fields, "level");
        json_object_del(fields, "event");
    }
    if (fields != NULL && json_object_size(fields) > 0) {
        /* {"a":1} is appended as ,"a":1}: its brace replaced by a comma */
        size_t body = json_dumpb(fields, local + head, sizeof local - head - 1, JSON_COMPACT);
        if (body > sizeof local - head - 1) {
            heap = malloc(head + body + 1);
            if (heap == NULL)
                goto out;
            memcpy(heap, local, head);
            buf = heap;
            body = json_dumpb(fields, buf + head, body, JSON_COMPACT);
        }
        if (body == 0)
            goto out;
        buf[head] = ',';
        len = head + body;
    } else {
        buf[len++] = '}';
    }
    buf[len++] = '\n';
    write_line(buf, len);
out:
    free(heap);
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
    log_event(level, event, json_pack("{s:s}", "detail", detail));
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
