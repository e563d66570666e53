/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rw_answer.h - reading the answers of the fenced Redis write scripts
 * (lua/rw_put.lua, rw_patch.lua, rw_delete.lua): one JSON object {r =
 * "<outcome>", ...} per call, read into struct rw_result. Pure: the scripts are
 * run by fenced_redis.c.
 */
#ifndef FG_RW_ANSWER_H
#define FG_RW_ANSWER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/fenced/fenced.h"
#include "util/error.h"

struct rw_result {
    enum fenced_outcome outcome; /* what the script did */
    int64_t fence;               /* applied: the fence now stored */
    int64_t current_fence; /* stale, revoked: the stored fence (or the write floor) that refused */
    char audit_id[64];     /* stale, revoked: the audit stream entry of the refusal */
    int64_t at_ms;         /* stale, revoked: Redis time of the refusal */
    char type[16];         /* wrongtype: what the key holds */
    int64_t hash_fields;   /* too many: the fields the hash would have held */
    json_t *after;         /* applied (owned): the value, the fields or "deleted" */
};

/* True if the answer says Redis lost its revoked set ("norevoked"): the caller
 * rebuilds it (store/fenced/revocations.h) and runs the script once more. */
bool rw_answer_norevoked(const json_t *answer);

/*
 * Reads answer (borrowed) of script into *res (release with rw_result_clear).
 * An answer that names no outcome of a write script fails with FG_ERR_INTERNAL
 * naming script and what it answered.
 */
int rw_answer_read(const char *script, const json_t *answer, struct rw_result *res,
                   struct fg_error *err) FG_WUR;

/* Frees what res owns. */
void rw_result_clear(struct rw_result *res);

#endif
