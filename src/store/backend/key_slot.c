/* SPDX-License-Identifier: Apache-2.0 */
/*
 * key_slot.c - the hash slot of a key (the Redis Cluster specification's
 * "Keys distribution model") and the slot tags: a table of one short tag per
 * slot, found at first use by hashing "0", "1", "2", ... until every slot has
 * one. Pure functions and one table computed once; routing and connections
 * belong to store/backend/redis_cluster.c and redis.c.
 */
#include "store/backend/key_slot.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

/* CRC16-CCITT as the specification names it (XMODEM: polynomial 0x1021, no
 * reflection, initial value 0). */
static uint16_t crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint8_t)buf[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

unsigned key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & (CLUSTER_SLOTS - 1);
    }
    return crc16(key, len) & (CLUSTER_SLOTS - 1);
}

/* The tag of each slot, "" until the table is made. */
static char tags[CLUSTER_SLOTS][SLOT_TAG_MAX];
static pthread_once_t tags_once = PTHREAD_ONCE_INIT;

static void tags_make(void)
{
    unsigned left = CLUSTER_SLOTS;
    for (unsigned i = 0; left > 0; i++) {
        char text[SLOT_TAG_MAX];
        int len = snprintf(text, sizeof text, "%u", i);
        FG_ASSERT(len > 0 && (size_t)len < sizeof text);
        unsigned slot = crc16(text, (size_t)len) & (CLUSTER_SLOTS - 1);
        if (tags[slot][0] != '\0')
            continue;
        memcpy(tags[slot], text, (size_t)len + 1);
        left--;
    }
}

const char *slot_tag(unsigned slot)
{
    FG_ASSERT(slot < CLUSTER_SLOTS);
    pthread_once(&tags_once, tags_make);
    return tags[slot];
}

size_t slot_tag_key(char *out, size_t cap, const char *base, unsigned slot)
{
    int len = snprintf(out, cap, "%s:{%s}", base, slot_tag(slot));
    FG_ASSERT(len > 0 && (size_t)len < cap);
    return (size_t)len;
}
