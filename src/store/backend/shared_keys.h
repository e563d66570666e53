/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shared_keys.h - the names of the keys of fenced Redis writes, revocations and
 * the audit stream that one Redis keeps once for the whole deployment
 * (store/backend/redis_keys.h), and that a Redis Cluster keeps per hash slot:
 * "<key>:{T(s)}" (store/backend/key_slot.h, docs/cluster.md), so that every key
 * a write script takes lives in the slot of the key it writes. Which of the two
 * is in force follows the lease keys' layout (lease/lease_keys.h sets it at
 * start-up). Pure: no I/O.
 */
#ifndef FG_SHARED_KEYS_H
#define FG_SHARED_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "store/backend/key_slot.h"
#include "store/backend/redis_keys.h"

/* Bytes of the longest name made here for a slot with its NUL: the longest
 * base, the slot tag, and a run_id (REDIS_RUN_ID_LEN) after ":". */
#define SHARED_KEY_MAX (sizeof KEY_FENCE_LIMIT + 3 + SLOT_TAG_MAX + 1 + 40)

/* Sets whether the keys are named per slot; at start-up, before any is made. */
void shared_keys_set_per_slot(bool per_slot);

/* True when the keys are named per slot (a Redis Cluster). */
bool shared_keys_per_slot(void);

/* The slot whose shared keys a write of application key (len bytes) takes: the
 * key's own slot (0 on one Redis, where it does not matter). */
unsigned shared_keys_slot_of(const char *key, size_t len);

/* Writes the name of base (KEY_AUDIT, KEY_FENCE_FLOOR, KEY_REVOKED, ...) for
 * slot into out (SHARED_KEY_MAX bytes): base itself on one Redis, base
 * ":{T(slot)}" per slot. */
void shared_key(char out[SHARED_KEY_MAX], const char *base, unsigned slot);

/* The key holding the highest fence of application key (malloc'd):
 * KEY_WRITE_FENCE_PREFIX key on one Redis, KEY_WRITE_FENCE_PREFIX "{T(s)}:" key
 * per slot, s the key's own slot (so it lives there whatever braces key has). */
char *shared_write_fence_key(const char *key);

/* The fence limit of slot's sequence, which stands for the trust in the slot's
 * state (lua/lib_rw.lua): KEY_FENCE_LIMIT on one Redis; per slot the name
 * lease/lease_keys.h gives it, KEY_FENCE_LIMIT ":{T(slot)}:" followed by
 * REDIS_RUN_ID_PLACEHOLDER, which the connection replaces with the run_id of
 * the process it writes the call to. */
void shared_fence_limit_key(char out[SHARED_KEY_MAX], unsigned slot);

#endif
