/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_answer.h - reading what a lease script answers (lua/lock_*.lua,
 * lua/sem_*.lua): one JSON object {r = "<outcome>", ...} into struct
 * lease_result, or a watch script's {held, pttl, reason} into struct
 * lease_watch. Pure: lease_result.c runs the scripts and deals with the
 * answers that ask for a retry.
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
};

/*
 * Reads the answer text (len bytes) of script into *res, or sets *retry when
 * the answer asks for one ("nofence", "norevoked", "contended"; *res is then
 * zeroed). The
 * common answers, one level of plain members, are read as they are scanned
 * (fgjson_scan_flat); others (grants to other waiters, numbers sent as reals)
 * through a jansson tree. An answer that is no JSON object or names no lease
 * outcome fails with FG_ERR_INTERNAL naming script.
 */
int lease_answer_read(const char *script, const char *text, size_t len, struct lease_result *res,
                      enum lease_retry *retry, struct fg_error *err) FG_WUR;

/* Reads a watch script's answer (borrowed) into *out; a lease not held
 * without a reason reads as "expired". */
void lease_answer_watch(const json_t *answer, struct lease_watch *out);

/* Sets out's "waiters" to the first waiters a status script (lua/lock_status.lua,
 * lua/sem_status.lua) listed in its answer's "first", in queue order: an array of
 * {"owner" (null when none was given), "since_ms"}. */
void lease_answer_waiters(const json_t *answer, json_t *out);

#endif
