/*
 * fence.h - keeping the one fence sequence above every fence that storage has
 * seen. Called at start-up, on every new Redis connection, and whenever a script
 * finds the sequence missing (Redis lost its data).
 */
#ifndef FG_FENCE_H
#define FG_FENCE_H

#include "util/error.h"

/* Raises the Redis fence sequence to at least the highest fence stored in
 * Postgres. Needs both backends. */
int fence_recover(struct fg_error *err) FG_WUR;

#endif
