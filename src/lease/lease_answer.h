/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_answer.h - reading what a lease script answers (lua/lock_*.lua,
 * lua/sem_*.lua): one reply text (lua/lib_lease.lua lease_reply), the
 * outcome and its facts, into struct lease_result; a watch's into struct
 * lease_watch. Pure: lease_result.c runs the scripts and deals with the
 * answers that ask for a retry. (A status script's JSON object is read by
 * lease_answer_waiters.)
 */
#ifndef FG_LEASE_ANSWER_H
#define FG_LEASE_ANSWER_H

#include <jansson.h>

#include "lease/lease_result.h"
#include "util/error.h"

/* Answers after which a script runs once more, once the gateway has dealt with them. */
enum lease_retry {
    LEASE_RETRY_NONE,
    LEASE_RETRY_NOFENCE,   /* reserve fences (lease/fence.h) */
    LEASE_RETRY_NOREVOKED, /* rebuild the revoked set (store/fenced/revocations.h) */
    LEASE_RETRY_CONTENDED, /* a first try found the lease in use: run the full script */
    LEASE_RETRY_REPEAT,    /* a lean try met a request_id that names a lease: the full script
                              answers the retry; the name is not in use for it */
};

/* The most words lease_answer_read reads (the outcome, each fact once, and
 * LEASE_MAX_HANDOFF grants of five words), and the most bytes: more than any
 * reply takes (the grants under 1,700, a leave's digits LEASE_LEAVE_MAX). */
#define LEASE_ANSWER_WORDS (1 + 2 * LIB_LEASE_NREPLY + 5 * LEASE_MAX_HANDOFF)
#define LEASE_ANSWER_MAX   4096

/*
 * Reads the reply text (len bytes) of script into *res, or sets *retry when
 * the reply asks for one ("nofence", "norevoked", "contended", "repeat"; *res is then
 * zeroed). Facts the reply lacks read as 0, but holder_pttl_ms and held_ms as
 * -1 (a first try's release answers granted_at instead, from which
 * lease_result.c lease_first_try reckons held_ms). A reply that names no
 * outcome this module knows, or a fact whose code or value is not one of the
 * table's, fails with FG_ERR_INTERNAL naming script.
 */
int lease_answer_read(const char *script, const char *text, size_t len, struct lease_result *res,
                      enum lease_retry *retry, struct fg_error *err) FG_WUR;

/* Reads a watch script's reply, as lease_answer_read read it into *res, into
 * *out: held, or how the lease ended ("released", "expired", "revoked");
 * another outcome fails with FG_ERR_INTERNAL naming script. */
int lease_answer_watch(const char *script, const struct lease_result *res, struct lease_watch *out,
                       struct fg_error *err) FG_WUR;

/* Sets out's "waiters" to the first waiters a status script (lua/lock_status.lua,
 * lua/sem_status.lua) listed in its answer's "first", in queue order: an array of
 * {"owner" (null when none was given), "since_ms"}. */
void lease_answer_waiters(const json_t *answer, json_t *out);

#endif
