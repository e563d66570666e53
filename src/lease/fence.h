/*
 * fence.h - keeping the one fence sequence above every fence ever issued, also
 * after Redis loses its data. Called at start-up, on every new Redis connection,
 * and whenever a script answers "nofence" (the sequence is missing or its
 * reserved block is used up).
 */
#ifndef FG_FENCE_H
#define FG_FENCE_H

#include "util/error.h"

/* Reserves the next block of fences in Postgres and raises the Redis sequence
 * and its limit to it. Needs both backends. */
int fence_recover(struct fg_error *err) FG_WUR;

#endif
