/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_write_order.c - the order in which a group of writes locks its rows:
 * tables first, then keys by value, one order whatever the arrival order,
 * every spelling of a row at one place, and a row's writes that take its lock
 * (creates) before its other writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "store/fenced/write_order.h"

static const struct key_shape int4 = {.form = KEY_FORM_INT32};
static const struct key_shape text = {.form = KEY_FORM_TEXT};

static struct write_group_stmt row(size_t table, const char *key)
{
    return (struct write_group_stmt){
        .table = table, .key = key, .shape = table == 0 ? &int4 : &text};
}

static int by_row(const void *a, const void *b)
{
    return write_order_compare(a, b);
}

static void compare(void **state)
{
    (void)state;
    struct write_group_stmt nine = row(0, "9"), ten = row(0, "10"), other_nine = row(0, "9");
    struct write_group_stmt a = row(1, "a"), b = row(1, "b");
    /* integers by value, not by text */
    assert_true(write_order_compare(&nine, &ten) < 0);
    assert_true(write_order_compare(&ten, &nine) > 0);
    assert_int_equal(write_order_compare(&nine, &other_nine), 0);
    /* the table decides before the key */
    assert_true(write_order_compare(&ten, &a) < 0);
    assert_true(write_order_compare(&a, &nine) > 0);
    assert_true(write_order_compare(&a, &b) < 0);
    assert_true(write_order_compare(&b, &a) > 0);
}

/* For one row, a write that takes the row's lock (a create) comes before one
 * that takes only the row, whichever came first; between rows, the key decides
 * alone. */
static void creates_first(void **state)
{
    (void)state;
    struct write_group_stmt patch = row(0, "9"), put = row(0, "9"), next_put = row(0, "10");
    put.creates = next_put.creates = true;
    assert_true(write_order_compare(&put, &patch) < 0);
    assert_true(write_order_compare(&patch, &put) > 0);
    assert_int_equal(write_order_compare(&put, &put), 0);
    assert_true(write_order_compare(&patch, &next_put) < 0);
    assert_true(write_order_compare(&next_put, &put) > 0);
    struct write_group_stmt group[] = {patch, next_put, row(0, "9"), put};
    qsort(group, 4, sizeof group[0], by_row);
    assert_true(group[0].creates);
    assert_false(group[1].creates || group[2].creates);
    assert_string_equal(group[3].key, "10");
}

/* Every arrival order of one set of rows sorts to the same locking order. */
static void one_order(void **state)
{
    (void)state;
    const struct write_group_stmt expected[] = {row(0, "-3"), row(0, "2"),  row(0, "10"),
                                                row(1, "A"),  row(1, "a"),  row(1, "ab"),
                                                row(2, "b"),  row(2, "ba"), row(2, "c")};
    enum { N = sizeof expected / sizeof expected[0] };
    struct write_group_stmt group[N];
    for (unsigned seed = 0; seed < 50; seed++) {
        for (size_t i = 0; i < N; i++)
            group[i] = expected[i];
        for (size_t i = N - 1; i > 0; i--) {
            size_t j = (seed * 7 + i * 13) % (i + 1);
            struct write_group_stmt t = group[i];
            group[i] = group[j];
            group[j] = t;
        }
        qsort(group, N, sizeof group[0], by_row);
        for (size_t i = 0; i < N; i++) {
            assert_int_equal(group[i].table, expected[i].table);
            assert_string_equal(group[i].key, expected[i].key);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(compare),
        cmocka_unit_test(creates_first),
        cmocka_unit_test(one_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
