/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_list.c - the intrusive list of util/list.h: an empty list, elements in
 * the order pushed (last first), unlinking the first, a middle and the last
 * element, and an unlinked element that can be pushed again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "util/list.h"

struct item {
    int id;
    struct list_link link;
};

/* Writes the ids on head's list into ids (up to cap); returns how many there are. */
static size_t ids_of(const struct list_link *head, int *ids, size_t cap)
{
    size_t n = 0;
    for (const struct list_link *l = head->next; l != head; l = l->next) {
        const struct item *it = LIST_ENTRY(l, const struct item, link);
        assert_ptr_equal(l->next->prev, l);
        if (n < cap)
            ids[n] = it->id;
        n++;
    }
    return n;
}

static void push_and_unlink(void **state)
{
    (void)state;
    struct list_link head;
    struct item items[4] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3}};
    int ids[4];
    list_init(&head);
    assert_true(list_empty(&head));
    assert_int_equal(ids_of(&head, ids, 4), 0);
    for (int i = 0; i < 4; i++)
        list_push(&head, &items[i].link);
    assert_false(list_empty(&head));
    assert_int_equal(ids_of(&head, ids, 4), 4);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[3], 0);
    list_unlink(&items[2].link); /* a middle one */
    list_unlink(&items[3].link); /* the first */
    list_unlink(&items[0].link); /* the last */
    assert_ptr_equal(items[0].link.next, &items[0].link);
    assert_int_equal(ids_of(&head, ids, 4), 1);
    assert_int_equal(ids[0], 1);
    list_push(&head, &items[3].link); /* pushed again */
    assert_int_equal(ids_of(&head, ids, 4), 2);
    assert_int_equal(ids[0], 3);
    list_unlink(&items[1].link);
    list_unlink(&items[3].link);
    assert_true(list_empty(&head));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(push_and_unlink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
