/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_heap.c - the min-heap of util/heap.h: elements come out least first
 * whatever the order they went in, any element leaves from any slot and the
 * rest stay in order, equal keys all come out, the array grows past its first
 * allocation and each element knows its slot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "util/heap.h"

#define MANY 3000

/* Checks the heap property and every element's slot. */
static void assert_heap(const struct heap *h)
{
    for (size_t i = 0; i < h->n; i++) {
        assert_int_equal(h->nodes[i]->slot, i);
        if (i > 0)
            assert_true(h->nodes[(i - 1) / 2]->key <= h->nodes[i]->key);
    }
}

/* Takes every element out through heap_min and checks they come least first. */
static void drain_in_order(struct heap *h, size_t expect)
{
    int64_t last = INT64_MIN;
    size_t taken = 0;
    for (struct heap_node *least; (least = heap_min(h)) != NULL; taken++) {
        assert_true(least->key >= last);
        last = least->key;
        heap_remove(h, least);
        assert_heap(h);
    }
    assert_int_equal(taken, expect);
}

static void least_first(void **state)
{
    (void)state;
    static struct heap_node nodes[MANY];
    struct heap h = HEAP_INIT;
    assert_null(heap_min(&h));
    srand(7);
    for (size_t i = 0; i < MANY; i++)
        heap_add(&h, &nodes[i], rand() % 500); /* many equal keys */
    assert_int_equal(h.n, MANY);
    assert_true(h.cap >= MANY);
    assert_heap(&h);
    drain_in_order(&h, MANY);
    heap_free(&h);
    assert_null(h.nodes);
}

static void leaves_from_any_slot(void **state)
{
    (void)state;
    static struct heap_node nodes[MANY];
    struct heap h = HEAP_INIT;
    for (size_t i = 0; i < MANY; i++)
        heap_add(&h, &nodes[i], (int64_t)((i * 7919) % MANY) - 1000);
    for (size_t i = 0; i < MANY; i += 3) { /* middle, leaves and the root among them */
        heap_remove(&h, &nodes[i]);
        assert_heap(&h);
    }
    drain_in_order(&h, MANY - (MANY + 2) / 3);
    heap_free(&h);
}

static void last_and_only(void **state)
{
    (void)state;
    struct heap_node a, b;
    struct heap h = HEAP_INIT;
    heap_add(&h, &a, 5);
    assert_ptr_equal(heap_min(&h), &a);
    heap_add(&h, &b, 3);
    assert_ptr_equal(heap_min(&h), &b);
    assert_int_equal(a.slot, 1);
    heap_remove(&h, &a); /* the last slot */
    assert_ptr_equal(heap_min(&h), &b);
    heap_remove(&h, &b); /* the only one */
    assert_null(heap_min(&h));
    heap_add(&h, &a, INT64_MAX);
    assert_ptr_equal(heap_min(&h), &a);
    heap_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(least_first),
        cmocka_unit_test(leaves_from_any_slot),
        cmocka_unit_test(last_and_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
