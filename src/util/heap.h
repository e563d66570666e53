/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap.h - an intrusive binary min-heap by a 64-bit key: the element embeds a
 * struct heap_node, which remembers its slot so that any element leaves or
 * moves in O(log n). The heap owns its array of pointers, not the elements.
 */
#ifndef FG_HEAP_H
#define FG_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct heap_node {
    int64_t key; /* the order (least first); set by heap_add, fixed while in the heap */
    size_t slot; /* its place in the heap's array while it is in the heap */
};

struct heap {
    struct heap_node **nodes; /* the array: nodes[0] is the least */
    size_t n;                 /* elements */
    size_t cap;               /* allocated entries */
};

#define HEAP_INIT                                                                                  \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/* Adds node with key; crashes if memory runs out. */
void heap_add(struct heap *h, struct heap_node *node, int64_t key);

/* Takes node (which is in h) out. */
void heap_remove(struct heap *h, struct heap_node *node);

/* The least element, or NULL when h is empty. */
struct heap_node *heap_min(const struct heap *h);

/* Frees the array (the elements are the caller's). */
void heap_free(struct heap *h);

#endif
