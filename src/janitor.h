/* SPDX-License-Identifier: Apache-2.0 */
/*
 * janitor.h - the threads of periodic work: the lease janitor (waiter timers
 * and hang-ups, orphaned grants, this process's liveness mark in Redis; never
 * Postgres) and the backend janitor (the audit drain into Postgres).
 */
#ifndef FG_JANITOR_H
#define FG_JANITOR_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

/* Marks this gateway alive in Redis once (also done by the janitor's beat). */
int janitor_beat(struct fg_error *err) FG_WUR;

/* Starts both janitor threads; a refused write's audit entry pokes the backend one
 * (audit_stream_poke). */
int janitor_start(struct fg_error *err) FG_WUR;

/* Asks both janitor threads to end, without waiting for them. */
void janitor_stop_ask(void);

/* Stops them (janitor_stop_ask) and joins each by until_ms (clock_mono_ms);
 * false if one is still in a backend call then, left behind. */
bool janitor_stop(int64_t until_ms);

#endif
