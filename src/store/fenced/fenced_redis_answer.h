/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_redis_answer.h - reading the answers of the fenced Redis write
 * scripts (lua/rw_put.lua, rw_patch.lua, rw_delete.lua): one JSON object {r =
 * "<outcome>", ...} per call, read into struct fenced_result or into the
 * error of a write the script did not take. Pure: the scripts are run by
 * fenced_redis.c.
 */
#ifndef FG_FENCED_REDIS_ANSWER_H
#define FG_FENCED_REDIS_ANSWER_H

#include <jansson.h>
#include <stdbool.h>

#include "store/fenced/fenced_result.h"
#include "util/error.h"

/* True if the answer says Redis lost its revoked set ("norevoked"): the caller
 * rebuilds it (store/fenced/revocations.h) and runs the script once more. */
bool fenced_redis_answer_norevoked(const json_t *answer);

/* True if the answer says Redis has no write floor ("nofloor": it lost its
 * data): the caller recovers the fence sequence and runs the script once more. */
bool fenced_redis_answer_nofloor(const json_t *answer);

/* True if the answer says the revoked set named lives on another node
 * ("elsewhere": the slot map is stale): the caller fetches the map and runs
 * the script once more, naming the set the new map gives. */
bool fenced_redis_answer_elsewhere(const json_t *answer);

/* True if the answer says the lease the write needs to hold (require_live_lease, ARGV lease) does
 * not, by the records the script read ("ended": nothing written, nothing audited): the caller asks
 * how it ended (lease/live.h) and refuses the write, or runs it once more without the look. */
bool fenced_redis_answer_ended(const json_t *answer);

/* True if the script could not read that lease ("nolook": its keys are not on this node, its slot
 * moving or the slot map stale): the caller asks outside the script. */
bool fenced_redis_answer_nolook(const json_t *answer);

/*
 * Reads answer (borrowed) of script, a write of resource, into *res (release
 * with fenced_result_free): APPLIED with the fence stored (what the write
 * stored is the caller's to fill in: the scripts answer the fence alone), or
 * STALE or REVOKED with the fence that refused it, audited into the
 * Redis stream. A write the script did not take fails: a key of another type
 * with FG_ERR_CONFLICT, a DELETE of a missing key with FG_ERR_NOT_FOUND, a
 * hash that would grow over its limit with FG_ERR_INVALID_FIELD, no write
 * floor, no revoked set or one on another node, a lease that could not be told
 * held or ended (once the caller's attempts to mend them are spent) with
 * FG_ERR_BACKEND_UNAVAILABLE, and an answer that names no outcome
 * of a write script with FG_ERR_INTERNAL naming script and what it answered.
 */
int fenced_redis_answer_read(const char *script, const json_t *answer, const char *resource,
                             struct fenced_result *res, struct fg_error *err) FG_WUR;

#endif
