/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_answer.c - from a lease script's JSON answer to struct lease_result.
 * The outcome table here is the vocabulary of every lua/lock_*.lua and
 * lua/sem_*.lua script. It must not run scripts nor act on an answer.
 */
#include "lease/lease_answer.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "util/fgjson.h"

static const struct {
    const char *name;
    enum lease_outcome outcome;
} outcome_names[] = {
    {"granted", LEASE_GRANTED},   {"queued", LEASE_QUEUED},         {"busy", LEASE_BUSY},
    {"full", LEASE_FULL},         {"mismatch", LEASE_MISMATCH},     {"ended", LEASE_ENDED},
    {"released", LEASE_RELEASED}, {"canceled", LEASE_CANCELED},     {"gone", LEASE_GONE},
    {"lost", LEASE_LOST},         {"superseded", LEASE_SUPERSEDED}, {"max_hold", LEASE_MAX_HOLD},
    {"renewed", LEASE_RENEWED},   {"revoked", LEASE_REVOKED},
};

/* Answers that ask for a retry, by name. */
static const struct {
    const char *name;
    enum lease_retry retry;
} retry_names[] = {
    {"nofence", LEASE_RETRY_NOFENCE},
    {"norevoked", LEASE_RETRY_NOREVOKED},
    {"contended", LEASE_RETRY_CONTENDED},
};

/* Reads the grants to other waiters of this gateway (well-formed ones only). */
static void read_handoff(const json_t *handoff, struct lease_result *res)
{
    for (size_t j = 0; j < json_array_size(handoff) && res->nhandoff < LEASE_MAX_HANDOFF; j++) {
        const json_t *g = json_array_get(handoff, j);
        const char *lease = json_string_value(json_object_get(g, "lease"));
        if (lease == NULL || strlen(lease) != LEASE_ID_LEN)
            continue;
        struct lease_grant *grant = &res->handoff[res->nhandoff++];
        memcpy(grant->lease_id, lease, LEASE_ID_LEN + 1);
        grant->fence = fgjson_answer_int(g, "fence", 0);
        grant->ttl_ms = fgjson_answer_int(g, "ttl", 0);
        grant->expires_at_ms = fgjson_answer_int(g, "expires_at", 0);
    }
}

/* Fills the facts of an answer whose outcome is known. */
static void read_facts(const json_t *out, struct lease_result *res)
{
    const char *lease = json_string_value(json_object_get(out, "lease"));
    if (lease != NULL)
        snprintf(res->lease_id, sizeof res->lease_id, "%s", lease);
    res->fence = fgjson_answer_int(out, "fence", 0);
    res->ttl_ms = fgjson_answer_int(out, "ttl", 0);
    res->expires_at_ms = fgjson_answer_int(out, "expires_at", 0);
    res->hold_until_ms = fgjson_answer_int(out, "hold_until", 0);
    res->position = fgjson_answer_int(out, "position", 0);
    res->holder_pttl_ms = fgjson_answer_int(out, "holder_pttl", -1);
    res->waiting = fgjson_answer_int(out, "waiting", 0);
    res->limit = fgjson_answer_int(out, "limit", 0);
    res->again = json_is_true(json_object_get(out, "again"));
    res->held_ms = fgjson_answer_int(out, "held_ms", -1);
    read_handoff(json_object_get(out, "handoff"), res);
}

/* Sets *retry, or res->outcome, from the answer's r (NULL: none). */
static int read_outcome(const char *script, const char *r, struct lease_result *res,
                        enum lease_retry *retry, struct fg_error *err)
{
    *retry = LEASE_RETRY_NONE;
    for (size_t i = 0; r != NULL && i < sizeof retry_names / sizeof retry_names[0]; i++)
        if (strcmp(r, retry_names[i].name) == 0) {
            memset(res, 0, sizeof *res);
            *retry = retry_names[i].retry;
            return 0;
        }
    for (size_t i = 0; r != NULL && i < sizeof outcome_names / sizeof outcome_names[0]; i++)
        if (strcmp(r, outcome_names[i].name) == 0) {
            res->outcome = outcome_names[i].outcome;
            return 0;
        }
    return fg_fail(err, FG_ERR_INTERNAL, "%s answered '%s'", script, r ? r : "(nothing)");
}

/* An answer read as it is scanned: the facts go into res, r into r. */
struct answer_scan {
    struct lease_result *res;
    char r[16];
};

/* The integer facts a scanned answer may name, and where each goes: an
 * int64_t (fences, times) or a long long (places and counts). */
static const struct {
    const char *name;
    size_t offset;
    bool count;
} integer_facts[] = {
    {"fence", offsetof(struct lease_result, fence), false},
    {"ttl", offsetof(struct lease_result, ttl_ms), false},
    {"expires_at", offsetof(struct lease_result, expires_at_ms), false},
    {"hold_until", offsetof(struct lease_result, hold_until_ms), false},
    {"held_ms", offsetof(struct lease_result, held_ms), false},
    {"position", offsetof(struct lease_result, position), true},
    {"holder_pttl", offsetof(struct lease_result, holder_pttl_ms), true},
    {"waiting", offsetof(struct lease_result, waiting), true},
    {"limit", offsetof(struct lease_result, limit), true},
};

static bool is_key(const struct fgjson_member *m, const char *name)
{
    return m->key_len == strlen(name) && memcmp(m->key, name, m->key_len) == 0;
}

/* Takes one member of a scanned answer; false for one the tree must read. */
static bool scan_member(void *ctx, const struct fgjson_member *m)
{
    struct answer_scan *a = ctx;
    if (is_key(m, "r")) {
        if (m->type != JSON_STRING || m->len >= sizeof a->r)
            return false;
        memcpy(a->r, m->text, m->len);
        a->r[m->len] = '\0';
        return true;
    }
    if (is_key(m, "lease")) {
        if (m->type != JSON_STRING || m->len > LEASE_ID_LEN)
            return false;
        memcpy(a->res->lease_id, m->text, m->len);
        a->res->lease_id[m->len] = '\0';
        return true;
    }
    if (is_key(m, "again")) {
        a->res->again = m->type == JSON_TRUE;
        return true;
    }
    for (size_t i = 0; i < sizeof integer_facts / sizeof integer_facts[0]; i++) {
        if (!is_key(m, integer_facts[i].name))
            continue;
        if (m->type != JSON_INTEGER)
            return false;
        char *at = (char *)a->res + integer_facts[i].offset;
        if (integer_facts[i].count)
            *(long long *)at = m->number;
        else
            *(int64_t *)at = m->number;
        return true;
    }
    return true; /* not a fact of the result */
}

/* Zeroes res, but for the facts whose absence reads as -1. */
static void clear_result(struct lease_result *res)
{
    memset(res, 0, sizeof *res);
    res->holder_pttl_ms = -1;
    res->held_ms = -1;
}

/* Reads an answer that fgjson_scan_flat cannot: through a jansson tree. */
static int read_tree(const char *script, const char *text, size_t len, struct lease_result *res,
                     enum lease_retry *retry, struct fg_error *err)
{
    json_error_t jerr;
    json_t *answer = json_loadb(text, len, 0, &jerr);
    if (answer == NULL)
        return fg_fail(err, FG_ERR_INTERNAL, "%s answered no JSON object: %s", script, jerr.text);
    memset(res, 0, sizeof *res);
    int rc = read_outcome(script, json_string_value(json_object_get(answer, "r")), res, retry, err);
    if (rc == 0 && *retry == LEASE_RETRY_NONE)
        read_facts(answer, res);
    json_decref(answer);
    return rc;
}

int lease_answer_read(const char *script, const char *text, size_t len, struct lease_result *res,
                      enum lease_retry *retry, struct fg_error *err)
{
    struct answer_scan scan = {.res = res};
    clear_result(res);
    if (!fgjson_scan_flat(text, len, scan_member, &scan))
        return read_tree(script, text, len, res, retry, err);
    return read_outcome(script, scan.r[0] != '\0' ? scan.r : NULL, res, retry, err);
}

void lease_answer_watch(const json_t *answer, struct lease_watch *out)
{
    memset(out, 0, sizeof *out);
    out->held = json_is_true(json_object_get(answer, "held"));
    out->pttl_ms = fgjson_answer_int(answer, "pttl", 0);
    const char *reason = json_string_value(json_object_get(answer, "reason"));
    snprintf(out->reason, sizeof out->reason, "%s", reason != NULL ? reason : "expired");
}

void lease_answer_waiters(const json_t *answer, json_t *out)
{
    json_t *list = json_array();
    size_t i;
    const json_t *w;
    json_array_foreach(json_object_get(answer, "first"), i, w)
    {
        const char *owner = json_string_value(json_object_get(w, "owner"));
        json_array_append_new(list,
                              json_pack("{s:o, s:I}", "owner",
                                        owner && owner[0] ? json_string(owner) : json_null(),
                                        "since_ms", (json_int_t)fgjson_answer_int(w, "since", 0)));
    }
    json_object_set_new(out, "waiters", list);
}
