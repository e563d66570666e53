/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_result.h - what came of a fenced write or read, the same for both
 * stores (fenced_pg.h, fenced_redis.h): the outcome, the resource, its fence
 * and what is stored now. A refused write's result is all its answer
 * (http/fenced_write.c) and its audit record (fenced_refusal.h) are made of.
 */
#ifndef FG_FENCED_RESULT_H
#define FG_FENCED_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/fenced/fenced_outcome.h"

struct fenced_result {
    enum fenced_outcome outcome; /* APPLIED (a read too), STALE, REVOKED or EXPIRED */
    char *resource;              /* the resource written or read, or the (first) one that refused
                                    the write (owned) */
    int64_t fence;               /* applied: the fence now stored; refused: the fence stored for
                                    resource, 0 if none (stale below Redis's write floor: the
                                    floor); read: the fence stored, 0 if none */
    char *after;                 /* applied or read: the JSON text of what is stored now, answered
                                    as it is: the row as Postgres's row_to_json or row_json.h wrote
                                    it (its numbers never read into doubles), the Redis value, the
                                    hash fields written or true (a delete), a batch's array of
                                    {op, resource, row} per operation (owned; NULL for null: no
                                    row, or none asked for) */
    json_t *stale;               /* a stale batch: {resource, current_fence} per stale resource
                                    (owned, or NULL) */
    json_t *resources;           /* a refused batch: every resource that refused it, as JSON
                                    strings, for its one audit record (owned, or NULL) */
    bool audit_streamed;         /* refused: its audit record went to the Redis stream, whose
                                    drain is woken; otherwise it is in Postgres already */
    unsigned audit_slot;         /* audit_streamed: the slot of that stream (store/backend/
                                    shared_keys.h; 0 on one Redis) */
    bool below_floor;            /* stale: fence is Redis's write floor, above the key's own
                                    fence (Redis lost or may have lost data since the token) */
};

/* Frees what res owns and zeroes it. */
void fenced_result_free(struct fenced_result *res);

#endif
