/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_answer.c - from a lease script's JSON answer to struct lease_result.
 * The outcome table here is the vocabulary of every lua/lock_*.lua and
 * lua/sem_*.lua script. It must not run scripts nor act on an answer.
 */
#include "lease/lease_answer.h"

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

int lease_answer_read(const char *script, const json_t *answer, struct lease_result *res,
                      enum lease_retry *retry, struct fg_error *err)
{
    const char *r = json_string_value(json_object_get(answer, "r"));
    memset(res, 0, sizeof *res);
    *retry = LEASE_RETRY_NONE;
    for (size_t i = 0; r != NULL && i < sizeof retry_names / sizeof retry_names[0]; i++)
        if (strcmp(r, retry_names[i].name) == 0) {
            *retry = retry_names[i].retry;
            return 0;
        }
    for (size_t i = 0; r != NULL && i < sizeof outcome_names / sizeof outcome_names[0]; i++)
        if (strcmp(r, outcome_names[i].name) == 0) {
            res->outcome = outcome_names[i].outcome;
            read_facts(answer, res);
            return 0;
        }
    return fg_fail(err, FG_ERR_INTERNAL, "%s answered '%s'", script, r ? r : "(nothing)");
}

void lease_answer_watch(const json_t *answer, struct lease_watch *out)
{
    memset(out, 0, sizeof *out);
    out->held = json_is_true(json_object_get(answer, "held"));
    out->pttl_ms = fgjson_answer_int(answer, "pttl", 0);
    const char *reason = json_string_value(json_object_get(answer, "reason"));
    snprintf(out->reason, sizeof out->reason, "%s", reason != NULL ? reason : "expired");
}
