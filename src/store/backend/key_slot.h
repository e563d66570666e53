/* SPDX-License-Identifier: Apache-2.0 */
/*
 * key_slot.h - where a key lives in a Redis Cluster, and how to name a key
 * that must live in a given slot. Redis Cluster puts every key in one of 16384
 * hash slots (CRC16 of the key, or of its hash tag, modulo 16384); keys that
 * a script touches together must share a slot. A slot tag is a short string
 * whose CRC16 falls in one slot: a key written "<base>:{<slot tag of s>}" lives
 * in slot s, so state that used to be one key for the whole deployment (the
 * fence sequence, the listing index, ...) can have one key per slot, each next
 * to the locks of its slot (docs/cluster.md). Pure: no I/O.
 */
#ifndef FG_KEY_SLOT_H
#define FG_KEY_SLOT_H

#include <stddef.h>

#define CLUSTER_SLOTS 16384 /* hash slots of every cluster */

/* Bytes of the longest slot tag with its terminating NUL (the last slot found
 * takes "109757"). */
#define SLOT_TAG_MAX 7

/* The hash slot of key (len bytes): CRC16 (XMODEM) of the key, or of its hash
 * tag (what lies between the first '{' and the first '}' after it, when that
 * is not empty), modulo 16384. */
unsigned key_slot(const char *key, size_t len);

/* The slot tag of slot (< CLUSTER_SLOTS): the first of the decimal strings
 * "0", "1", "2", ... whose CRC16 falls in slot. The table is computed on first
 * use (about 110,000 CRC16s; thread-safe); static storage, never freed. */
const char *slot_tag(unsigned slot);

/* Writes base ":{" slot_tag(slot) "}" into out (cap bytes) and returns its
 * length; a key of that name lives in slot. Asserts that it fits. */
size_t slot_tag_key(char *out, size_t cap, const char *base, unsigned slot);

/* Sets seen[slot] (seen has nslots entries; slot -1: none) for a set of slots
 * being gathered; returns 1 if it was not set before, else 0. */
static inline size_t slot_seen(unsigned char *seen, size_t nslots, int slot)
{
    if (slot < 0 || (size_t)slot >= nslots || seen[slot])
        return 0;
    seen[slot] = 1;
    return 1;
}

#endif
