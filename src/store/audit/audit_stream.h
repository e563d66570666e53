/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit_stream.h - the way audit records of stale Redis writes reach Postgres.
 * The script that refuses such a write appends the record to the Redis stream
 * KEY_AUDIT (store/backend/redis_keys.h) in the same step, so the refusal is recorded even while
 * Postgres is down. The gateway then copies entries into fencegate.rejections, at least once and
 * idempotently (the entry id is the row's unique source_id), and deletes them from the stream, on
 * the backend janitor's thread: at once after a refusal (audit_stream_poke), and every so often for
 * whatever is left (Postgres was down, another gateway died in between). A refusal is never
 * answered later because of Postgres. On a Redis Cluster each slot has its stream, the one of the
 * written key's slot (store/backend/shared_keys.h), found by a sweep of every slot once a minute.
 */
#ifndef FG_AUDIT_STREAM_H
#define FG_AUDIT_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "store/audit/audit.h"
#include "util/error.h"

/* Copies up to max of the oldest entries of the stream of slot (on one Redis
 * the stream; store/backend/shared_keys.h) into Postgres, after the entries it
 * holds, and deletes them from the stream; an entry Postgres refuses for its
 * contents, or again right after storing an entry behind it, moves to the
 * dead letters, and one it refuses otherwise is held there. *left gets how
 * many entries it went past (stored, dead-lettered, or held behind them; up
 * to twice max: past max entries all held, it reads max more). Fails, keeping
 * the rest, while Redis or Postgres does not answer. */
int audit_stream_drain(unsigned slot, int max, int *left, struct fg_error *err) FG_WUR;

/* Prints up to max dead letters, oldest first (on a cluster, slot by slot),
 * one JSON object per line {"id", "fields"} to out (the operator command
 * "fencegate audit-dead-letters"). */
int audit_stream_list_dead(int max, FILE *out, struct fg_error *err) FG_WUR;

/* Sets how a new entry pokes the drain (the backend janitor's), once, before any write. */
void audit_stream_on_entry(void (*poke)(void));

/* A refused write left an entry in the stream of slot (fenced_result's
 * audit_slot): pokes the drain of that stream (a no-op until one is set). */
void audit_stream_poke(unsigned slot);

/* Backend janitor: drains the stream when its time came (now_ms) or when poked
 * (a new entry), backing off while it fails; on a cluster, the streams of the
 * slots poked, and every SWEEP_INTERVAL_MS (and at the first call) first looks
 * for the streams of every slot that hold entries. Returns when it is due next. */
int64_t audit_stream_tick(int64_t now_ms, bool poked);

#endif
