/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit_stream.c - copying the audit stream KEY_AUDIT into
 * fencegate.rejections (on a Redis Cluster, the stream of each slot,
 * KEY_AUDIT ":{T(s)}": store/backend/shared_keys.h). Reads and acknowledgements are Lua scripts
 * (lua/rw_audit_read.lua, rw_audit_ack.lua); the insert is one prepared
 * statement that ignores an entry already stored (unique source_id, added by
 * sql/010, and the same contents: audit_insert_copy). Entries are deleted from
 * the stream only after their row is committed, so a crash in between stores a
 * row twice at worst, which the unique source_id turns into once.
 *
 * One entry must never stop the drain: an entry that Postgres refuses for its
 * contents (bytes that are not UTF-8, a data or constraint error) moves to the
 * dead-letter stream KEY_AUDIT_DEAD (with the reason in field "error" and its
 * id in "source_id") (lua/rw_audit_dead.lua), is counted and logged, and the
 * entries behind it are stored. An entry refused for another reason (an
 * internal error, a privilege, a trigger) may share that refusal with every
 * entry: it is held, and moves to the dead letters only if Postgres refuses it
 * again right after storing an entry behind it; held entries with no entry
 * stored behind them stay in the stream, logged once as audit_held, the
 * drains go on past them, and every HELD_RELOOK_MS looks at them all again
 * (struct held_slot). An unreachable Postgres stops
 * the drain and backs off, keeping every entry. On one Redis the stream is
 * drained every DRAIN_INTERVAL_MS and
 * at once after a refusal; on a cluster a slot's stream is drained after a
 * refusal there (audit_stream_poke names the slot), and every SWEEP_INTERVAL_MS
 * one EXISTS per slot (pipelined per primary) finds the streams that hold
 * entries another gateway left (it died before draining them), which are
 * drained then. Runs on the backend janitor thread only. Must not: decide what
 * is stale (the write scripts do), or run on a thread that keeps leases alive
 * (Postgres may stall).
 */
#include "store/audit/audit_stream.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"
#include "store/backend/shared_keys.h"
#include "store/backend/slot_scan.h"
#include "util/budget.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

#define DRAIN_INTERVAL_MS 500
#define DRAIN_BACKOFF_MAX 8000
#define DRAIN_BATCH       20    /* entries per read; one ack call carries them all */
#define DRAIN_READS       2     /* reads of a drain: its batch, one more past a batch held whole */
#define HELD_RELOOK_MS    5000  /* a slot holding entries is read from its head again after this */
#define STREAM_ID_MAX     48    /* "<ms>-<seq>", two 64-bit numbers */
#define SWEEP_INTERVAL_MS 60000 /* a cluster: every slot's stream looked at */
#define SWEEP_WAIT_MS     1000  /* a sweep's wait for Redis in all (request_timeout_ms if less) */

/* Inserts rec, an entry of stream, under source id "<stream>/<entry_id>" (or
 * one derived from it when that id holds another record); a repeat is a no-op. */
static int insert_record(const char *stream, const char *entry_id, const struct audit_record *rec,
                         struct fg_error *err)
{
    char source[SHARED_KEY_MAX + 48];
    snprintf(source, sizeof source, "%s/%s", stream, entry_id);
    struct audit_record keyed = *rec;
    keyed.source_id = source;
    if (audit_insert_copy(&keyed, err) != 0)
        return -1;
    metrics_audit_written(rec->reason);
    return 0;
}

/* Deletes the entries ids[0..n) of stream. */
static int ack(const char *stream, const char *const *ids, size_t n, struct fg_error *err)
{
    const char *keys[RW_AUDIT_ACK_NKEYS] = {[RW_AUDIT_ACK_KEY_AUDIT] = stream};
    json_t *out = NULL;
    if (redis_script_more(SCRIPT_RW_AUDIT_ACK, keys, NULL, ids, n, &out, err) != 0)
        return -1;
    json_decref(out);
    return 0;
}

/* Moves entry id of slot's stream to its dead letters because of why;
 * counted and logged. */
static int dead_letter(unsigned slot, const char *id, const char *why, struct fg_error *err)
{
    char stream[SHARED_KEY_MAX], dead[SHARED_KEY_MAX];
    shared_key(stream, KEY_AUDIT, slot);
    shared_key(dead, KEY_AUDIT_DEAD, slot);
    const char *keys[RW_AUDIT_DEAD_NKEYS] = {
        [RW_AUDIT_DEAD_KEY_AUDIT] = stream, [RW_AUDIT_DEAD_KEY_DEAD] = dead};
    const char *argv[RW_AUDIT_DEAD_NARGV] = {
        [RW_AUDIT_DEAD_ARGV_ID] = id, [RW_AUDIT_DEAD_ARGV_ERROR] = why};
    json_t *out = NULL;
    if (redis_script(SCRIPT_RW_AUDIT_DEAD, keys, argv, &out, err) != 0)
        return -1;
    json_decref(out);
    metrics_audit_dead_letter();
    log_event(
        LOG_WARN, "audit_dead_letter",
        json_pack("{s:s, s:s, s:o}", "entry", id, "stream", dead, "detail", fgjson_string(why)));
    return 0;
}

/* Reads up to max of the oldest entries of stream after entry id after ("" from
 * the start) into *out (lua/rw_audit_read.lua). */
static int read_stream(const char *stream, int max, const char *after, json_t **out,
                       struct fg_error *err)
{
    char count[16];
    snprintf(count, sizeof count, "%d", max);
    const char *keys[RW_AUDIT_READ_NKEYS] = {[RW_AUDIT_READ_KEY_STREAM] = stream};
    const char *argv[RW_AUDIT_READ_NARGV] = {
        [RW_AUDIT_READ_ARGV_COUNT] = count, [RW_AUDIT_READ_ARGV_AFTER] = after};
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
        .lease_kind = field(f, "lease_kind"), /* "": an entry of a gateway from before it */
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

/* What became of one entry of a drain (take_entry). */
enum taken {
    TAKEN_STORED, /* stored: to acknowledge */
    TAKEN_DEAD,   /* moved to the dead letters */
    TAKEN_HELD,   /* refused for a reason that need not be the entry's own */
    TAKEN_STOP,   /* Postgres or Redis does not answer: the drain stops here */
};

/*
 * Stores entry e of slot's stream, or dead-letters it when its own contents
 * are refused (not UTF-8 text, a data or constraint error). Any other refusal
 * (an internal error, a missing privilege) may be every entry's: the entry is
 * held, *why saying why, and the drain decides (retry_held). err is set with
 * TAKEN_STOP.
 */
static enum taken take_entry(unsigned slot, const char *stream, const json_t *e, const char *id,
                             struct fg_error *why, struct fg_error *err)
{
    if (json_is_true(json_object_get(e, "bad")))
        return dead_letter(slot, id, "a field is not UTF-8 text", err) == 0 ? TAKEN_DEAD
                                                                            : TAKEN_STOP;
    struct audit_record rec = record_of(json_object_get(e, "fields"));
    if (insert_record(stream, id, &rec, why) == 0)
        return TAKEN_STORED;
    if (why->code == FG_ERR_BACKEND_UNAVAILABLE) {
        *err = *why;
        return TAKEN_STOP;
    }
    if (why->code != FG_ERR_INVALID_FIELD && why->code != FG_ERR_CONFLICT)
        return TAKEN_HELD;
    return dead_letter(slot, id, why->msg, err) == 0 ? TAKEN_DEAD : TAKEN_STOP;
}

/* A slot whose drains hold entries with none stored behind them: a drain
 * reads after resume (everything up to it was held), but at relook_at one
 * looks at the held ones again, after look ("" from the head): a look that
 * holds all it reads goes on from there soon, until it reaches resume, and
 * then from the head 5 s later; a look that stores an entry ends the holding.
 * The backend janitor's thread only. */
struct held_slot {
    char resume[STREAM_ID_MAX];
    char look[STREAM_ID_MAX];
    int64_t relook_at;
};

/* Where a drain reads from. */
enum pass {
    PASS_HEAD,   /* the head: nothing is held */
    PASS_RESUME, /* after the held entries */
    PASS_LOOK,   /* among the held entries, after held_slot.look */
};

static struct held_slot *held_slots[CLUSTER_SLOTS];

/* True iff stream entry id a comes before id b. */
static bool id_before(const char *a, const char *b)
{
    unsigned long long a_ms = 0, a_seq = 0, b_ms = 0, b_seq = 0;
    if (sscanf(a, "%llu-%llu", &a_ms, &a_seq) < 1 || sscanf(b, "%llu-%llu", &b_ms, &b_seq) < 1)
        return false;
    return a_ms < b_ms || (a_ms == b_ms && a_seq < b_seq);
}

/* A drain: what it took out of slot's stream so far, and the entries it holds
 * (refused for a reason that need not be theirs) until an entry after them
 * is stored. */
struct drain {
    unsigned slot;
    const char *stream;
    const char *acked[DRAIN_BATCH * DRAIN_READS]; /* stored: to acknowledge */
    size_t nacked;
    size_t ndead; /* moved to the dead letters */
    struct held_entry {
        const json_t *entry; /* borrowed from the read */
        const char *id;
        struct fg_error why;
    } held[DRAIN_BATCH * DRAIN_READS];
    size_t nheld;
};

/* An entry after the held ones was stored, so Postgres stores: each held entry
 * is tried once more, and one refused again moves to the dead letters (the
 * refusal is its own). The held ones stay in the stream if the drain stops. */
static int retry_held(struct drain *d, struct fg_error *err)
{
    size_t n = d->nheld;
    d->nheld = 0;
    for (size_t i = 0; i < n; i++) {
        struct held_entry *h = &d->held[i];
        struct fg_error why = {0};
        enum taken taken = take_entry(d->slot, d->stream, h->entry, h->id, &why, err);
        if (taken == TAKEN_STOP)
            return -1;
        if (taken == TAKEN_HELD && dead_letter(d->slot, h->id, why.msg, err) != 0)
            return -1;
        if (taken == TAKEN_STORED)
            d->acked[d->nacked++] = h->id;
        else
            d->ndead++;
    }
    return 0;
}

/* Takes entry e (its id id) of d's stream: stored, dead-lettered or held. */
static int drain_entry(struct drain *d, const json_t *e, const char *id, struct fg_error *err)
{
    struct held_entry *h = &d->held[d->nheld];
    h->why = (struct fg_error){0};
    switch (take_entry(d->slot, d->stream, e, id, &h->why, err)) {
    case TAKEN_STOP: return -1;
    case TAKEN_DEAD: d->ndead++; return 0;
    case TAKEN_HELD:
        h->entry = e;
        h->id = id;
        d->nheld++;
        return 0;
    case TAKEN_STORED: d->acked[d->nacked++] = id; return retry_held(d, err);
    }
    return 0;
}

/* Logs once while drains hold entries and store none: Postgres may refuse
 * every entry (a privilege revoked, a broken table); they wait in the stream. */
static void note_held(const struct drain *d)
{
    static bool holding; /* the backend janitor's thread only */
    if (d->nacked > 0)
        holding = false;
    if (d->nheld == 0 || d->nacked > 0 || holding)
        return;
    holding = true;
    log_event(LOG_WARN, "audit_held",
              json_pack("{s:s, s:I, s:o}", "stream", d->stream, "entries", (json_int_t)d->nheld,
                        "detail", fgjson_string(d->held[0].why.msg)));
}

/* The next look of hs after one that read up to last (its reach held whole
 * when full): on from there soon, or from the head later once at resume. */
static void next_look(struct held_slot *hs, const char *last, bool full, int64_t now)
{
    bool on = full && id_before(last, hs->resume);
    snprintf(hs->look, sizeof hs->look, "%s", on ? last : "");
    hs->relook_at = now + (on ? DRAIN_INTERVAL_MS : HELD_RELOOK_MS);
}

/* Keeps slot's held_slot after drain d, a pass of kind pass up to entry
 * last_read ("" for none), whose last read was full. Returns true if the
 * resume moved past d's held entries. */
static bool note_slot(const struct drain *d, enum pass pass, const char *last_read, bool full,
                      int64_t now)
{
    struct held_slot *hs = held_slots[d->slot];
    char last[STREAM_ID_MAX];
    snprintf(last, sizeof last, "%s", last_read); /* it may be hs->resume or hs->look */
    bool moved = false;
    if (pass == PASS_LOOK && d->nacked > 0)
        hs->resume[0] = '\0'; /* Postgres stores held entries again: all from the head */
    else if (pass == PASS_LOOK && d->nheld == 0 && !full && hs->look[0] == '\0')
        hs->resume[0] = '\0'; /* none held any more (another gateway took them) */
    else if (pass == PASS_LOOK)
        next_look(hs, last, full && d->nheld > 0, now);
    else if (d->nacked == 0 && d->nheld > 0) {
        if (hs == NULL) {
            hs = held_slots[d->slot] = calloc(1, sizeof *hs);
            FG_ASSERT(hs != NULL);
            hs->relook_at = now + HELD_RELOOK_MS;
        }
        moved = hs->resume[0] == '\0' || id_before(hs->resume, last);
        if (moved)
            snprintf(hs->resume, sizeof hs->resume, "%s", last);
    }
    if (hs != NULL && hs->resume[0] == '\0') {
        free(hs);
        held_slots[d->slot] = NULL;
    }
    return moved;
}

int audit_stream_drain(unsigned slot, int max, int *left, struct fg_error *err)
{
    *left = 0;
    if (max > DRAIN_BATCH)
        max = DRAIN_BATCH;
    char stream[SHARED_KEY_MAX];
    shared_key(stream, KEY_AUDIT, slot);
    struct drain *d = calloc(1, sizeof *d);
    FG_ASSERT(d != NULL);
    d->slot = slot;
    d->stream = stream;
    const struct held_slot *hs = held_slots[slot];
    int64_t now = clock_mono_ms();
    enum pass pass = hs == NULL ? PASS_HEAD : now >= hs->relook_at ? PASS_LOOK : PASS_RESUME;
    json_t *reads[DRAIN_READS] = {0};
    const char *after = pass == PASS_HEAD ? "" : pass == PASS_LOOK ? hs->look : hs->resume;
    bool full = false;
    int rc = 0;
    for (size_t r = 0; r < DRAIN_READS && rc == 0; r++) {
        rc = read_stream(stream, max, after, &reads[r], err);
        const json_t *entries = json_object_get(reads[r], "entries");
        size_t count = rc == 0 ? json_array_size(entries) : 0, held_before = d->nheld;
        for (size_t i = 0; i < count && rc == 0; i++) {
            const json_t *e = json_array_get(entries, i);
            const char *id = json_string_value(json_object_get(e, "id"));
            if (id == NULL)
                continue;
            after = id;
            rc = drain_entry(d, e, id, err);
        }
        /* Past a batch held whole, one read more: an entry stored there shows
         * the refusals were the entries' own. */
        full = count == (size_t)max;
        if (!full || d->nheld != held_before + count)
            break;
    }
    if (d->nacked > 0 && ack(stream, d->acked, d->nacked, err) != 0)
        rc = -1;
    bool moved = false;
    if (rc == 0) {
        note_held(d);
        moved = note_slot(d, pass, after, full, now);
    }
    *left = (int)(d->nacked + d->ndead + (moved ? d->nheld : 0));
    for (size_t r = 0; r < DRAIN_READS; r++)
        json_decref(reads[r]);
    free(d);
    return rc;
}

int audit_stream_list_dead(int max, FILE *out, struct fg_error *err)
{
    bool *has = calloc(CLUSTER_SLOTS, sizeof *has);
    FG_ASSERT(has != NULL);
    int rc = slot_scan(KEY_AUDIT_DEAD, has, err);
    for (unsigned s = 0; rc == 0 && max > 0 && s < CLUSTER_SLOTS; s++) {
        if (!has[s])
            continue;
        char dead[SHARED_KEY_MAX];
        shared_key(dead, KEY_AUDIT_DEAD, s);
        json_t *listed = NULL;
        rc = read_stream(dead, max, "", &listed, err);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(listed, "entries"), i, e)
        {
            char *line = json_dumps(e, JSON_COMPACT | JSON_ENSURE_ASCII);
            FG_ASSERT(line != NULL);
            fprintf(out, "%s\n", line);
            free(line);
            max--;
        }
        json_decref(listed);
    }
    free(has);
    return rc;
}

/* The drain's poke (audit_stream_on_entry): set once at start-up, read by the HTTP threads. */
static void (*entry_poke)(void);

/* Slots whose stream has entries to drain, one bit each (a cluster; slot 0 on one Redis). */
static atomic_uint_least64_t pending[CLUSTER_SLOTS / 64];

static void pending_set(unsigned slot)
{
    atomic_fetch_or(&pending[slot / 64], UINT64_C(1) << (slot % 64));
}

void audit_stream_on_entry(void (*poke)(void))
{
    entry_poke = poke;
}

void audit_stream_poke(unsigned slot)
{
    pending_set(slot);
    if (entry_poke != NULL)
        entry_poke();
}

/* Drains every pending slot's stream (on one Redis: the stream); a slot with
 * a full batch stays pending, and so does a slot whose drain failed (Redis or
 * Postgres did not answer), the others drained all the same (a primary down
 * stops no other primary's streams). 0, or -1 with err the first failure.
 * *more: some slot with a full batch is still pending. */
static int drain_pending(bool *more, struct fg_error *err)
{
    *more = false;
    int rc = 0;
    for (unsigned w = 0; w < CLUSTER_SLOTS / 64; w++) {
        uint_least64_t bits = atomic_exchange(&pending[w], 0);
        for (unsigned b = 0; b < 64; b++) {
            uint_least64_t bit = UINT64_C(1) << b;
            if (!(bits & bit))
                continue;
            int left = 0;
            struct fg_error failed = {0};
            if (audit_stream_drain(w * 64 + b, DRAIN_BATCH, &left, &failed) != 0) {
                atomic_fetch_or(&pending[w], bit);
                if (rc == 0)
                    *err = failed;
                rc = -1;
            } else if (left >= DRAIN_BATCH) {
                atomic_fetch_or(&pending[w], bit);
                *more = true;
            }
        }
    }
    return rc;
}

/* Marks pending the slots whose held entries are due for a look from the
 * head (held_slot); returns when the next one is (INT64_MAX for none). */
static int64_t relook_due(int64_t now_ms)
{
    int64_t next = INT64_MAX;
    unsigned nslots = shared_keys_per_slot() ? CLUSTER_SLOTS : 1; /* one Redis: slot 0's stream */
    for (unsigned s = 0; s < nslots; s++) {
        const struct held_slot *hs = held_slots[s];
        if (hs != NULL && now_ms >= hs->relook_at)
            pending_set(s);
        else if (hs != NULL && hs->relook_at < next)
            next = hs->relook_at;
    }
    return next;
}

/* A cluster: marks pending every slot whose stream exists (those of the
 * primaries that answered, when one did not: then -1 with err). The scan,
 * the slot map fetched for it over every node asked and the calls of every
 * primary, waits for Redis SWEEP_WAIT_MS in all (util/budget.h;
 * request_timeout_ms if less): no longer than the exit waits for the backend
 * janitor (a second, request_timeout_ms if less: main.c), so a sweep under
 * way at SIGTERM ends in time. The scan takes a primary milliseconds
 * (docs/performance.md); one that failed is tried again after a back-off. */
static int sweep(struct fg_error *err)
{
    bool *has = calloc(CLUSTER_SLOTS, sizeof *has);
    FG_ASSERT(has != NULL);
    int64_t wait_ms = redis_timeout_ms();
    budget_start(wait_ms < SWEEP_WAIT_MS ? wait_ms : SWEEP_WAIT_MS);
    int rc = slot_scan(KEY_AUDIT, has, err);
    budget_end();
    unsigned found = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
        if (has[s]) {
            pending_set(s);
            found++;
        }
    free(has);
    if (found > 0)
        log_event(LOG_DEBUG, "audit_sweep", json_pack("{s:I}", "streams", (json_int_t)found));
    return rc;
}

int64_t audit_stream_tick(int64_t now_ms, bool poked)
{
    static int64_t next_ms, backoff_ms, next_sweep_ms;
    if (now_ms < next_ms && !(poked && backoff_ms == 0))
        return next_ms;
    struct fg_error err = {0};
    bool per_slot = shared_keys_per_slot(), more = false;
    int rc = 0;
    (void)relook_due(now_ms);
    if (!per_slot)
        pending_set(0); /* one Redis: its one stream, every time */
    else if (now_ms >= next_sweep_ms) {
        rc = sweep(&err); /* failed: again after the back-off, the slots it found drained now */
        if (rc == 0)
            next_sweep_ms = now_ms + SWEEP_INTERVAL_MS;
    }
    struct fg_error drained = {0};
    if (drain_pending(&more, &drained) != 0 && rc == 0) {
        err = drained;
        rc = -1;
    }
    if (rc != 0) {
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
    if (more)
        next_ms = now_ms;
    else if (per_slot) {
        int64_t relook_ms = relook_due(now_ms); /* those the drains just held */
        next_ms = next_sweep_ms < relook_ms ? next_sweep_ms : relook_ms;
    } else
        next_ms = now_ms + DRAIN_INTERVAL_MS;
    return next_ms;
}
