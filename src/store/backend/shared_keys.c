/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shared_keys.c - naming the deployment-wide keys of fenced Redis writes,
 * revocations and the audit stream once (one Redis) or per hash slot (a Redis
 * Cluster). It must not know what the scripts do with them.
 */
#include "store/backend/shared_keys.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend/redis.h"
#include "util/error.h"

_Static_assert(sizeof REDIS_RUN_ID_PLACEHOLDER == 41, "SHARED_KEY_MAX counts a 40-byte run_id");

/* Set once at start-up, read by every request after. */
static atomic_bool per_slot;

void shared_keys_set_per_slot(bool on)
{
    atomic_store(&per_slot, on);
}

bool shared_keys_per_slot(void)
{
    return atomic_load(&per_slot);
}

unsigned shared_keys_slot_of(const char *key, size_t len)
{
    return shared_keys_per_slot() ? key_slot(key, len) : 0;
}

void shared_key(char out[SHARED_KEY_MAX], const char *base, unsigned slot)
{
    if (shared_keys_per_slot()) {
        slot_tag_key(out, SHARED_KEY_MAX, base, slot);
        return;
    }
    size_t len = strlen(base);
    FG_ASSERT(len < SHARED_KEY_MAX);
    memcpy(out, base, len + 1);
}

char *shared_write_fence_key(const char *key)
{
    size_t keylen = strlen(key);
    char tag[SLOT_TAG_MAX + 4] = "";
    size_t taglen = 0;
    if (shared_keys_per_slot()) {
        const char *t = slot_tag(key_slot(key, keylen));
        taglen = strlen(t) + 3;
        tag[0] = '{';
        memcpy(tag + 1, t, taglen - 3);
        memcpy(tag + taglen - 2, "}:", 3);
    }
    char *out = malloc(sizeof KEY_WRITE_FENCE_PREFIX + taglen + keylen);
    FG_ASSERT(out != NULL);
    char *at = out;
    memcpy(at, KEY_WRITE_FENCE_PREFIX, sizeof KEY_WRITE_FENCE_PREFIX - 1);
    at += sizeof KEY_WRITE_FENCE_PREFIX - 1;
    memcpy(at, tag, taglen);
    at += taglen;
    memcpy(at, key, keylen + 1);
    return out;
}

void shared_fence_limit_key(char out[SHARED_KEY_MAX], unsigned slot)
{
    shared_key(out, KEY_FENCE_LIMIT, slot);
    if (shared_keys_per_slot())
        strcat(out, ":" REDIS_RUN_ID_PLACEHOLDER);
}
