/* SPDX-License-Identifier: Apache-2.0 */
/*
 * janitor.h - the threads of periodic work: the lease janitor (waiter timers
 * and hang-ups, orphaned grants, this process's liveness mark in Redis; never
 * Postgres) and the backend janitor (the audit drain into Postgres).
 */
#ifndef FG_JANITOR_H
#define FG_JANITOR_H

#include "util/error.h"

/* Marks this gateway alive in Redis once (also done by the janitor's beat). */
int janitor_beat(struct fg_error *err) FG_WUR;

/* Asks the backend janitor to drain the audit stream now (a stale write left
 * an entry). Never blocks on a backend. */
void janitor_poke_audit(void);

/* Starts both janitor threads. */
int janitor_start(struct fg_error *err) FG_WUR;

/* Stops and joins them. */
void janitor_stop(void);

#endif
