/*
 * audit_stream.c - copying the audit stream "fg:audit" into
 * fencegate.rejections. Reads and acknowledgements are Lua scripts
 * (lua/rw_audit_read.lua, rw_audit_ack.lua); the insert is one prepared
 * statement that ignores an entry already stored (unique source_id, added by
 * sql/010). Entries are deleted from the stream only after their row is
 * committed, so a crash in between stores a row twice at worst, which the
 * unique source_id turns into once. Runs on the backend janitor thread only.
 * Must not: decide what is stale (the write scripts do), or run on a thread
 * that keeps leases alive (Postgres may stall).
 */
#include "store/audit_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/fenced_redis.h"
#include "store/redis.h"
#include "util/log.h"
#include "util/metrics.h"

#define DRAIN_INTERVAL_MS 500
#define DRAIN_BACKOFF_MAX 8000
#define DRAIN_BATCH       20 /* entries per read; one ack call carries them all */

/* Inserts rec under source id "fg:audit/<entry_id>"; a repeat is a no-op. */
static int insert_record(const char *entry_id, const struct audit_record *rec, struct fg_error *err)
{
    char source[96];
    snprintf(source, sizeof source, "%s/%s", FENCED_REDIS_AUDIT_STREAM, entry_id);
    struct audit_record keyed = *rec;
    keyed.source_id = source;
    if (audit_insert(&keyed, err) != 0)
        return -1;
    metrics_audit_written();
    return 0;
}

/* Deletes the stream entries ids[0..n). */
static int ack(const char *const *ids, size_t n, struct fg_error *err)
{
    const char *argv[1 + DRAIN_BATCH];
    argv[0] = FENCED_REDIS_AUDIT_STREAM;
    for (size_t i = 0; i < n; i++)
        argv[1 + i] = ids[i];
    json_t *out = NULL;
    if (redis_script("rw_audit_ack.lua", 1, argv, 1 + n, &out, err) != 0)
        return -1;
    json_decref(out);
    return 0;
}

static const char *field(const json_t *fields, const char *name)
{
    const char *s = json_string_value(json_object_get(fields, name));
    return s != NULL ? s : "";
}

int audit_stream_drain(int max, int *stored, struct fg_error *err)
{
    *stored = 0;
    if (max > DRAIN_BATCH)
        max = DRAIN_BATCH;
    char count[16];
    snprintf(count, sizeof count, "%d", max);
    const char *argv[] = {FENCED_REDIS_AUDIT_STREAM, count};
    json_t *out = NULL;
    if (redis_script("rw_audit_read.lua", 1, argv, 2, &out, err) != 0)
        return -1;
    const json_t *entries = json_object_get(out, "entries");
    const char *ids[DRAIN_BATCH];
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < json_array_size(entries) && n < DRAIN_BATCH; i++) {
        const json_t *e = json_array_get(entries, i);
        const json_t *f = json_object_get(e, "fields");
        const char *id = json_string_value(json_object_get(e, "id"));
        if (id == NULL)
            continue;
        struct audit_record rec = {
            .resource = field(f, "resource"),
            .lock_name = field(f, "lock"),
            .presented_fence = strtoll(field(f, "presented"), NULL, 10),
            .current_fence = strtoll(field(f, "current"), NULL, 10),
            .owner = field(f, "owner"),
            .client_addr = field(f, "client_addr"),
            .method = field(f, "method"),
            .reason = field(f, "reason"),
            .at_ms = strtoll(field(f, "at_ms"), NULL, 10),
        };
        if (insert_record(id, &rec, err) != 0) {
            rc = -1;
            break;
        }
        ids[n++] = id;
    }
    if (n > 0 && ack(ids, n, err) != 0)
        rc = -1;
    *stored = (int)n;
    json_decref(out);
    return rc;
}

void audit_stream_tick(int64_t now_ms, bool poked)
{
    static int64_t next_ms, backoff_ms;
    if (now_ms < next_ms && !(poked && backoff_ms == 0))
        return;
    struct fg_error err = {0};
    int stored = 0;
    if (audit_stream_drain(DRAIN_BATCH, &stored, &err) != 0) {
        if (backoff_ms == 0)
            log_message(LOG_WARN, "audit_drain_failed", "%s", err.msg);
        backoff_ms = backoff_ms == 0 ? DRAIN_INTERVAL_MS : backoff_ms * 2;
        if (backoff_ms > DRAIN_BACKOFF_MAX)
            backoff_ms = DRAIN_BACKOFF_MAX;
        next_ms = now_ms + backoff_ms;
        return;
    }
    if (backoff_ms != 0)
        log_message(LOG_INFO, "audit_drain_recovered", "audit stream drains again");
    backoff_ms = 0;
    /* a full batch: more may wait, come back at the next tick */
    next_ms = stored == DRAIN_BATCH ? now_ms : now_ms + DRAIN_INTERVAL_MS;
}
