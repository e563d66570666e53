/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strmap.c - the chained hash table of strmap.h, hashed with FNV-1a.
 */
#include "util/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fnv.h"

#define STRMAP_MIN_BUCKETS 1024

static size_t hash(const char *key)
{
    return (size_t)fnv1a_text(FNV1A_START, key);
}

static struct strmap_node **bucket_of(const struct strmap *m, const char *key)
{
    return &m->buckets[hash(key) & (m->nbuckets - 1)];
}

/* Makes room: the first buckets, or twice as many once there are twice as many elements. */
static void grow(struct strmap *m)
{
    if (m->nbuckets != 0 && m->n < 2 * m->nbuckets)
        return;
    struct strmap_node **old = m->buckets;
    size_t nold = m->nbuckets;
    m->nbuckets = nold ? 2 * nold : STRMAP_MIN_BUCKETS;
    m->buckets = calloc(m->nbuckets, sizeof *m->buckets);
    FG_ASSERT(m->buckets != NULL);
    for (size_t i = 0; i < nold; i++)
        for (struct strmap_node *node = old[i], *next; node != NULL; node = next) {
            next = node->next;
            struct strmap_node **b = bucket_of(m, node->key);
            node->next = *b;
            *b = node;
        }
    free(old);
}

void strmap_add(struct strmap *m, struct strmap_node *node, const char *key)
{
    grow(m);
    node->key = key;
    struct strmap_node **b = bucket_of(m, key);
    node->next = *b;
    *b = node;
    m->n++;
}

void strmap_remove(struct strmap *m, struct strmap_node *node)
{
    if (m->nbuckets == 0)
        return;
    for (struct strmap_node **p = bucket_of(m, node->key); *p != NULL; p = &(*p)->next)
        if (*p == node) {
            *p = node->next;
            node->next = NULL;
            m->n--;
            return;
        }
}

struct strmap_node *strmap_find(const struct strmap *m, const char *key)
{
    if (m->nbuckets == 0)
        return NULL;
    for (struct strmap_node *node = *bucket_of(m, key); node != NULL; node = node->next)
        if (strcmp(node->key, key) == 0)
            return node;
    return NULL;
}

void strmap_free(struct strmap *m)
{
    free(m->buckets);
    *m = (struct strmap)STRMAP_INIT;
}
