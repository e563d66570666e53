/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap.c - the binary min-heap of heap.h: sift up and down over an array of
 * pointers that grows by doubling; each move writes the element's slot.
 */
#include "util/heap.h"

#include <stdlib.h>

#include "util/error.h"

#define HEAP_FIRST_CAP 1024

/* Puts node at slot i. */
static void place(struct heap *h, struct heap_node *node, size_t i)
{
    h->nodes[i] = node;
    node->slot = i;
}

/* Moves the element at slot i up or down until the heap is in order again. */
static void fix(struct heap *h, size_t i)
{
    struct heap_node *node = h->nodes[i];
    while (i > 0 && h->nodes[(i - 1) / 2]->key > node->key) {
        place(h, h->nodes[(i - 1) / 2], i);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t least = i, l = 2 * i + 1, r = l + 1;
        int64_t at = node->key;
        if (l < h->n && h->nodes[l]->key < at)
            least = l, at = h->nodes[l]->key;
        if (r < h->n && h->nodes[r]->key < at)
            least = r;
        if (least == i)
            break;
        place(h, h->nodes[least], i);
        i = least;
    }
    place(h, node, i);
}

void heap_add(struct heap *h, struct heap_node *node, int64_t key)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : HEAP_FIRST_CAP;
        h->nodes = realloc(h->nodes, h->cap * sizeof *h->nodes);
        FG_ASSERT(h->nodes != NULL);
    }
    node->key = key;
    place(h, node, h->n++);
    fix(h, node->slot);
}

void heap_remove(struct heap *h, struct heap_node *node)
{
    FG_ASSERT(node->slot < h->n && h->nodes[node->slot] == node);
    size_t i = node->slot;
    struct heap_node *last = h->nodes[--h->n];
    if (last == node)
        return;
    place(h, last, i);
    fix(h, i);
}

struct heap_node *heap_min(const struct heap *h)
{
    return h->n > 0 ? h->nodes[0] : NULL;
}

void heap_free(struct heap *h)
{
    free(h->nodes);
    *h = (struct heap)HEAP_INIT;
}
