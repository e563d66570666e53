/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit_stream.c - copying the audit stream KEY_AUDIT into
 * fencegate.rejections. Reads and acknowledgements are Lua scripts
 * (lua/rw_audit_read.lua, rw_audit_ack.lua); the insert is one prepared
 * statement that ignores an entry already stored (unique source_id, added by
 * sql/010). Entries are deleted from the stream only after their row is
 * committed, so a crash in between stores a row twice at worst, which the
 * unique source_id turns into once.
 *
 * One entry must never stop the drain: an entry that Postgres refuses (bytes
 * that are not UTF-8, a value over a limit: anything but an unreachable
 * backend) moves to the dead-letter stream KEY_AUDIT_DEAD (with the reason in
 * field "error" and its id in "source_id")
 * (lua/rw_audit_dead.lua), is counted and logged, and the entries behind it
 * are stored. An unreachable Postgres stops the batch and backs off, keeping
 * every entry. Runs on the backend janitor thread only. Must not: decide what
 * is stale (the write scripts do), or run on a thread that keeps leases alive
 * (Postgres may stall).
 */
#include "store/audit/audit_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "util/log.h"
#include "util/metrics.h"

#define DRAIN_INTERVAL_MS 500
#define DRAIN_BACKOFF_MAX 8000
#define DRAIN_BATCH       20 /* entries per read; one ack call carries them all */

/* Inserts rec under source id KEY_AUDIT "/<entry_id>"; a repeat is a no-op. */
static int insert_record(const char *entry_id, const struct audit_record *rec, struct fg_error *err)
{
    char source[96];
    snprintf(source, sizeof source, "%s/%s", KEY_AUDIT, entry_id);
    struct audit_record keyed = *rec;
    keyed.source_id = source;
    if (audit_insert(NULL, &keyed, err) != 0)
        return -1;
    metrics_audit_written(rec->reason);
    return 0;
}

/* Deletes the stream entries ids[0..n). */
static int ack(const char *const *ids, size_t n, struct fg_error *err)
{
    const char *keys[RW_AUDIT_ACK_NKEYS] = {[RW_AUDIT_ACK_KEY_AUDIT] = KEY_AUDIT};
    json_t *out = NULL;
    if (redis_script_more(SCRIPT_RW_AUDIT_ACK, keys, NULL, ids, n, &out, err) != 0)
        return -1;
    json_decref(out);
    return 0;
}

/* Moves entry id to the dead letters because of why; counted and logged. */
static int dead_letter(const char *id, const char *why, struct fg_error *err)
{
    const char *keys[RW_AUDIT_DEAD_NKEYS] = {
        [RW_AUDIT_DEAD_KEY_AUDIT] = KEY_AUDIT, [RW_AUDIT_DEAD_KEY_DEAD] = KEY_AUDIT_DEAD};
    const char *argv[RW_AUDIT_DEAD_NARGV] = {
        [RW_AUDIT_DEAD_ARGV_ID] = id, [RW_AUDIT_DEAD_ARGV_ERROR] = why};
    json_t *out = NULL;
    if (redis_script(SCRIPT_RW_AUDIT_DEAD, keys, argv, &out, err) != 0)
        return -1;
    json_decref(out);
    metrics_audit_dead_letter();
    log_event(LOG_WARN, "audit_dead_letter",
              json_pack("{s:s, s:s, s:s}", "entry", id, "stream", KEY_AUDIT_DEAD, "detail", why));
    return 0;
}

/* Reads up to max of the oldest entries of stream into *out (lua/rw_audit_read.lua). */
static int read_stream(const char *stream, int max, json_t **out, struct fg_error *err)
{
    char count[16];
    snprintf(count, sizeof count, "%d", max);
    const char *keys[RW_AUDIT_READ_NKEYS] = {[RW_AUDIT_READ_KEY_STREAM] = stream};
    const char *argv[RW_AUDIT_READ_NARGV] = {[RW_AUDIT_READ_ARGV_COUNT] = count};
    return redis_script(SCRIPT_RW_AUDIT_READ, keys, argv, out, err);
}

static const char *field(const json_t *fields, const char *name)
{
    const char *s = json_string_value(json_object_get(fields, name));
    return s != NULL ? s : "";
}

/* The record in stream entry fields f (strings borrowed from f). */
static struct audit_record record_of(const json_t *f)
{
    return (struct audit_record){
        .resource = field(f, "resource"),
        .lock_name = field(f, "lock"),
        .presented_fence = strtoll(field(f, "presented"), NULL, 10),
        .current_fence = strtoll(field(f, "current"), NULL, 10),
        .owner = field(f, "owner"),
        .client_addr = field(f, "client_addr"),
        .method = field(f, "method"),
        .reason = field(f, "reason"),
        .at_ms = strtoll(field(f, "at_ms"), NULL, 10),
        .principal = field(f, "principal"),
        .trace_id = field(f, "trace_id"),
    };
}

/*
 * Stores entry e (or dead-letters it). Returns 1 if it was stored and must be
 * acknowledged, 0 if it left the stream as a dead letter, -1 (err set) if the
 * drain must stop here: Postgres or Redis does not answer.
 */
static int take_entry(const json_t *e, const char *id, struct fg_error *err)
{
    if (json_is_true(json_object_get(e, "bad")))
        return dead_letter(id, "a field is not UTF-8 text", err);
    struct audit_record rec = record_of(json_object_get(e, "fields"));
    struct fg_error why = {0};
    if (insert_record(id, &rec, &why) == 0)
        return 1;
    if (why.code == FG_ERR_BACKEND_UNAVAILABLE) {
        *err = why;
        return -1;
    }
    return dead_letter(id, why.msg, err);
}

int audit_stream_drain(int max, int *stored, struct fg_error *err)
{
    *stored = 0;
    if (max > DRAIN_BATCH)
        max = DRAIN_BATCH;
    json_t *out = NULL;
    if (read_stream(KEY_AUDIT, max, &out, err) != 0)
        return -1;
    const json_t *entries = json_object_get(out, "entries");
    const char *ids[DRAIN_BATCH];
    size_t n = 0, seen = 0;
    int rc = 0;
    for (size_t i = 0; i < json_array_size(entries) && n < DRAIN_BATCH; i++) {
        const json_t *e = json_array_get(entries, i);
        const char *id = json_string_value(json_object_get(e, "id"));
        if (id == NULL)
            continue;
        seen++;
        int taken = take_entry(e, id, err);
        if (taken < 0) {
            rc = -1;
            break;
        }
        if (taken == 1)
            ids[n++] = id;
    }
    if (n > 0 && ack(ids, n, err) != 0)
        rc = -1;
    *stored = (int)seen;
    json_decref(out);
    return rc;
}

int audit_stream_list_dead(int max, FILE *out, struct fg_error *err)
{
    json_t *listed = NULL;
    if (read_stream(KEY_AUDIT_DEAD, max, &listed, err) != 0)
        return -1;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(listed, "entries"), i, e)
    {
        char *line = json_dumps(e, JSON_COMPACT | JSON_ENSURE_ASCII);
        FG_ASSERT(line != NULL);
        fprintf(out, "%s\n", line);
        free(line);
    }
    json_decref(listed);
    return 0;
}

/* The drain's poke (audit_stream_on_entry): set once at start-up, read by the HTTP threads. */
static void (*entry_poke)(void);

void audit_stream_on_entry(void (*poke)(void))
{
    entry_poke = poke;
}

void audit_stream_poke(void)
{
    if (entry_poke != NULL)
        entry_poke();
}

int64_t audit_stream_tick(int64_t now_ms, bool poked)
{
    static int64_t next_ms, backoff_ms;
    if (now_ms < next_ms && !(poked && backoff_ms == 0))
        return next_ms;
    struct fg_error err = {0};
    int stored = 0;
    if (audit_stream_drain(DRAIN_BATCH, &stored, &err) != 0) {
        if (backoff_ms == 0)
            log_message(LOG_WARN, "audit_drain_failed", "%s", err.msg);
        backoff_ms = backoff_ms == 0 ? DRAIN_INTERVAL_MS : backoff_ms * 2;
        if (backoff_ms > DRAIN_BACKOFF_MAX)
            backoff_ms = DRAIN_BACKOFF_MAX;
        next_ms = now_ms + backoff_ms;
        return next_ms;
    }
    if (backoff_ms != 0)
        log_message(LOG_INFO, "audit_drain_recovered", "audit stream drains again");
    backoff_ms = 0;
    /* a full batch: more may wait, come back at once */
    next_ms = stored == DRAIN_BATCH ? now_ms : now_ms + DRAIN_INTERVAL_MS;
    return next_ms;
}
