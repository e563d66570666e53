/* SPDX-License-Identifier: Apache-2.0 */
/*
 * janitor.h - the one thread of periodic work: waiter timers and hang-ups,
 * orphaned grants, and this process's liveness key in Redis.
 */
#ifndef FG_JANITOR_H
#define FG_JANITOR_H

#include "util/error.h"

/* Marks this gateway alive in Redis once (also done by the janitor's beat). */
int janitor_beat(struct fg_error *err) FG_WUR;

/* Starts the janitor thread. */
int janitor_start(struct fg_error *err) FG_WUR;

/* Stops and joins it. */
void janitor_stop(void);

#endif
