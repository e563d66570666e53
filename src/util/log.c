/*
 * log.c - the JSON-lines logger. Each line, newline included, is built in memory
 * and handed to the kernel in one write(2) on stderr under a mutex, so lines from
 * different threads never mix and a reader of a pipe or journal never sees half
 * a line. Must not: buffer lines (a crash would lose them) or go through stdio.
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

/* Writes text and a newline to stderr in one write(2) (text is malloc'd by jansson
 * and gets the newline in place of its NUL for the time of the call). Only a
 * partial write, which a pipe does not do for lines under PIPE_BUF, takes more. */
static void write_line(char *text)
{
    size_t len = strlen(text);
    text[len] = '\n';
    pthread_mutex_lock(&write_lock);
    for (size_t done = 0; done <= len;) {
        ssize_t n = write(STDERR_FILENO, text + done, len + 1 - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    pthread_mutex_unlock(&write_lock);
    text[len] = '\0';
}

void log_event(enum log_level level, const char *event, json_t *fields)
{
    if (!log_enabled(level)) {
        json_decref(fields);
        return;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[40];
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03ldZ", (long)(tv.tv_usec / 1000));
    json_t *line =
        json_pack("{s:s, s:s, s:s}", "ts", ts, "level", level_names[level], "event", event);
    if (fields != NULL) {
        json_object_update_missing(line, fields);
        json_decref(fields);
    }
    char *text = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    if (text == NULL)
        return;
    write_line(text);
    free(text);
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
