/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_list_merge.c - a listing page merged from the indexes of many slots:
 * the cut where a slot may hold names not read, the limit, the cursor; and
 * paging through a model of 64 slot indexes (pages read as the gateway reads
 * them: the first names after the cursor from every index) that must give
 * every name once and in order, whatever the page size and the names a slot
 * is asked for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lease/list_merge.h"

static void all_when_no_slot_is_full(void **state)
{
    (void)state;
    struct list_merge_name names[] = {{"c", 1}, {"a", 2}, {"b", 1}};
    bool more = true;
    assert_int_equal(list_merge_pick(names, 3, 3, 10, &more), 3);
    assert_false(more);
    assert_string_equal(names[0].name, "a");
    assert_string_equal(names[1].name, "b");
    assert_string_equal(names[2].name, "c");
}

static void cut_at_the_earliest_last_name_of_a_full_slot(void **state)
{
    (void)state;
    /* Slot 1 gave its two and may hold more after "b": "c" and "d" of slot 2 wait for the next page. */
    struct list_merge_name names[] = {{"d", 2}, {"a", 1}, {"b", 1}, {"c", 2}};
    bool more = false;
    assert_int_equal(list_merge_pick(names, 4, 2, 10, &more), 2);
    assert_true(more);
    assert_string_equal(names[1].name, "b");
}

static void cut_at_the_limit(void **state)
{
    (void)state;
    struct list_merge_name names[] = {{"e", 3}, {"a", 1}, {"c", 2}, {"b", 1}};
    bool more = false;
    assert_int_equal(list_merge_pick(names, 4, 5, 3, &more), 3);
    assert_true(more);
    assert_string_equal(names[2].name, "c");
    assert_int_equal(list_merge_pick(names, 4, 5, 4, &more), 4);
    assert_false(more);
}

static void empty(void **state)
{
    (void)state;
    bool more = true;
    assert_int_equal(list_merge_pick(NULL, 0, 1, 10, &more), 0);
    assert_false(more);
}

#define SLOTS 64
#define NAMES 2000

static char model_names[NAMES][16];

static int by_text(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Pages through NAMES names spread over SLOTS slots (the index of a slot:
 * its names in order), each page reading at most per_slot names after the
 * cursor from every slot; checks that the pages give every name once, in
 * order. */
static void page_through(size_t per_slot, size_t limit, unsigned seed)
{
    unsigned slot_of[NAMES];
    for (size_t i = 0; i < NAMES; i++) /* random order, unique by the suffix */
        snprintf(model_names[i], sizeof model_names[i], "n%05u-%zu",
                 (unsigned)rand_r(&seed) % 90000u, i);
    qsort(model_names, NAMES, sizeof model_names[0], by_text);
    for (size_t i = 0; i < NAMES; i++)
        slot_of[i] = (unsigned)rand_r(&seed) % SLOTS;
    struct list_merge_name *read = calloc(SLOTS * per_slot, sizeof *read);
    const char *cursor = "";
    size_t seen = 0, pages = 0;
    for (bool more = true; more; pages++) {
        size_t n = 0;
        for (unsigned s = 0; s < SLOTS; s++) {
            size_t taken = 0;
            for (size_t i = 0; i < NAMES && taken < per_slot; i++)
                if (slot_of[i] == s && strcmp(model_names[i], cursor) > 0) {
                    read[n++] = (struct list_merge_name){model_names[i], s};
                    taken++;
                }
        }
        size_t k = list_merge_pick(read, n, per_slot, limit, &more);
        for (size_t i = 0; i < k; i++) {
            assert_true(seen < NAMES);
            assert_string_equal(read[i].name, model_names[seen]); /* the next one, none skipped */
            seen++;
        }
        if (more) {
            assert_true(k > 0);
            cursor = read[k - 1].name;
        }
        assert_true(pages <= NAMES); /* one name a page, and maybe an empty last one */
    }
    assert_int_equal(seen, NAMES);
    free(read);
}

static void every_name_once_and_in_order(void **state)
{
    (void)state;
    page_through(100, 100, 1);
    page_through(3, 100, 2); /* slots that fill up cut most pages short */
    page_through(1, 7, 3);
    page_through(50, 1, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_when_no_slot_is_full),
        cmocka_unit_test(cut_at_the_earliest_last_name_of_a_full_slot),
        cmocka_unit_test(cut_at_the_limit),
        cmocka_unit_test(empty),
        cmocka_unit_test(every_name_once_and_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
