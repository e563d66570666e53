/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strmap.h - an intrusive hash table keyed by strings: the element embeds a
 * struct strmap_node whose key points at a string the element owns (it must
 * not change while the node is in the map). Chained buckets, a power of two
 * of them, doubled once the map holds twice as many elements, so a lookup
 * stays constant-time at tens of thousands of entries. Several elements may
 * share a key; strmap_find returns the one added last. The map owns its
 * bucket array, not the elements.
 */
#ifndef FG_STRMAP_H
#define FG_STRMAP_H

#include <stddef.h>

struct strmap_node {
    const char *key;          /* borrowed from the element */
    struct strmap_node *next; /* chain of its bucket */
};

struct strmap {
    struct strmap_node **buckets; /* nbuckets chains */
    size_t nbuckets;              /* a power of two; 0 before the first add */
    size_t n;                     /* elements */
};

#define STRMAP_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/* The element of type whose struct strmap_node member is node. */
#define STRMAP_ENTRY(node, type, member) ((type *)(void *)((char *)(node)-offsetof(type, member)))

/* Adds node under key (borrowed); crashes if memory runs out. */
void strmap_add(struct strmap *m, struct strmap_node *node, const char *key);

/* Takes node out (no-op if it is not in m). */
void strmap_remove(struct strmap *m, struct strmap_node *node);

/* The element added last under key, or NULL. */
struct strmap_node *strmap_find(const struct strmap *m, const char *key);

/* Frees the buckets (the elements are the caller's). */
void strmap_free(struct strmap *m);

#endif
