/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_strmap.c - the hash table of util/strmap.h: finds what was added and
 * not what was not, keeps finding every element while it grows far past its
 * first buckets, forgets what was removed (twice is harmless), returns the
 * element added last of those sharing a key, and takes a key again after the
 * element changed it outside the map.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "util/strmap.h"

#define MANY 10000

struct item {
    char key[24];
    struct strmap_node node;
};

static struct item items[MANY];

static void grows_and_finds(void **state)
{
    (void)state;
    struct strmap m = STRMAP_INIT;
    assert_null(strmap_find(&m, "nothing"));
    for (size_t i = 0; i < MANY; i++) {
        snprintf(items[i].key, sizeof items[i].key, "lease-%zu", i);
        strmap_add(&m, &items[i].node, items[i].key);
    }
    assert_int_equal(m.n, MANY);
    assert_true(m.nbuckets > 1024 && m.nbuckets * 2 > MANY);
    for (size_t i = 0; i < MANY; i++)
        assert_ptr_equal(strmap_find(&m, items[i].key), &items[i].node);
    assert_null(strmap_find(&m, "lease-10000"));
    assert_null(strmap_find(&m, ""));
    for (size_t i = 0; i < MANY; i += 2)
        strmap_remove(&m, &items[i].node);
    strmap_remove(&m, &items[0].node); /* not in the map any more */
    assert_int_equal(m.n, MANY / 2);
    for (size_t i = 0; i < MANY; i++)
        assert_ptr_equal(strmap_find(&m, items[i].key), i % 2 ? &items[i].node : NULL);
    strmap_free(&m);
    assert_null(m.buckets);
}

static void shared_key_and_rekey(void **state)
{
    (void)state;
    struct strmap m = STRMAP_INIT;
    struct item a = {.key = "same"}, b = {.key = "same"};
    strmap_remove(&m, &a.node); /* an empty map */
    strmap_add(&m, &a.node, a.key);
    strmap_add(&m, &b.node, b.key);
    assert_ptr_equal(strmap_find(&m, "same"), &b.node);
    strmap_remove(&m, &b.node);
    assert_ptr_equal(strmap_find(&m, "same"), &a.node);
    strmap_remove(&m, &a.node);
    snprintf(a.key, sizeof a.key, "%s", "other");
    strmap_add(&m, &a.node, a.key);
    assert_null(strmap_find(&m, "same"));
    assert_ptr_equal(strmap_find(&m, "other"), &a.node);
    strmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grows_and_finds),
        cmocka_unit_test(shared_key_and_rekey),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
