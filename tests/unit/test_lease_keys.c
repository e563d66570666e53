/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lease_keys.c - the keys of a lock and of a semaphore, each at the index
 * its scripts read it from (lua/lib_lock.lua, lib_sem.lua, lib_lease.lua),
 * every one of them set, and the longest name fitting; in the per-slot layout
 * of a Redis Cluster, every key of a lease in the slot of its own keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lease/lease_keys.h"
#include "store/backend/key_slot.h"

/* A key expected at index at of the KEYS list. */
struct want {
    size_t at;
    const char *key;
};

/* Checks that the keys of kind name are exactly want[0..n), each at its index. */
static void expect_keys(enum lease_kind kind, const char *name, const struct want *want, size_t n)
{
    struct lease_keys k;
    lease_keys_init(&k, kind, name);
    assert_int_equal(k.nkeys, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(k.key[want[i].at], want[i].key);
    for (size_t i = n; i < LIB_SEM_NKEYS; i++)
        assert_null(k.key[i]);
}

static void lock_keys_in_script_order(void **state)
{
    (void)state;
    static const struct want want[] = {
        {LIB_LOCK_KEY_HOLDER, "fg:lk:{inv:42}:h"},
        {LIB_LOCK_KEY_QUEUE, "fg:lk:{inv:42}:q"},
        {LIB_LOCK_KEY_WAITERS, "fg:lk:{inv:42}:w"},
        {LIB_LOCK_KEY_TICKETS, "fg:lk:{inv:42}:t"},
        {LIB_LOCK_KEY_FENCE, "fg:fence"},
        {LIB_LOCK_KEY_FENCE_LIMIT, "fg:fence_limit"},
        {LIB_LOCK_KEY_GATEWAYS, "fg:gateways"},
        {LIB_LOCK_KEY_RIDS, "fg:lk:{inv:42}:r"},
        {LIB_LOCK_KEY_RID_UNTIL, "fg:lk:{inv:42}:e"},
        {LIB_LOCK_KEY_INDEX, "fg:idx:lk"},
        {LIB_LOCK_KEY_ENDED, "fg:lk:{inv:42}:n"},
        {LIB_LOCK_KEY_REVOKED, "fg:revoked"},
        {LIB_LOCK_KEY_WATCHED, "fg:lk:{inv:42}:v"},
        {LIB_LOCK_KEY_RID_ONE, "fg:lk:{inv:42}:i"},
    };
    expect_keys(LEASE_KIND_LOCK, "inv:42", want, sizeof want / sizeof want[0]);
}

static void semaphore_keys_in_script_order(void **state)
{
    (void)state;
    static const struct want want[] = {
        {LIB_SEM_KEY_HOLDERS, "fg:sm:{pool}:h"},   {LIB_SEM_KEY_DATA, "fg:sm:{pool}:d"},
        {LIB_SEM_KEY_QUEUE, "fg:sm:{pool}:q"},     {LIB_SEM_KEY_WAITERS, "fg:sm:{pool}:w"},
        {LIB_SEM_KEY_LIMIT, "fg:sm:{pool}:l"},     {LIB_SEM_KEY_TICKETS, "fg:sm:{pool}:t"},
        {LIB_SEM_KEY_FENCE, "fg:fence"},           {LIB_SEM_KEY_FENCE_LIMIT, "fg:fence_limit"},
        {LIB_SEM_KEY_GATEWAYS, "fg:gateways"},     {LIB_SEM_KEY_RIDS, "fg:sm:{pool}:r"},
        {LIB_SEM_KEY_RID_UNTIL, "fg:sm:{pool}:e"}, {LIB_SEM_KEY_INDEX, "fg:idx:sm"},
        {LIB_SEM_KEY_ENDED, "fg:sm:{pool}:n"},     {LIB_SEM_KEY_REVOKED, "fg:revoked"},
        {LIB_SEM_KEY_WATCHED, "fg:sm:{pool}:v"},   {LIB_SEM_KEY_RID_ONE, "fg:sm:{pool}:i"},
    };
    expect_keys(LEASE_KIND_SEMAPHORE, "pool", want, sizeof want / sizeof want[0]);
}

static void longest_name_fits(void **state)
{
    (void)state;
    char name[NAME_MAX_LEN + 1];
    memset(name, 'n', NAME_MAX_LEN);
    name[NAME_MAX_LEN] = '\0';
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, name);
    size_t want = strlen(KEY_SEM_PREFIX) + NAME_MAX_LEN + strlen(KEY_TAG_END) + 1;
    for (size_t i = 0; i < LIB_SEM_NKEYS; i++) {
        assert_non_null(k.key[i]);
        if (strncmp(k.key[i], KEY_SEM_PREFIX, strlen(KEY_SEM_PREFIX)) == 0)
            assert_int_equal(strlen(k.key[i]), want);
    }
    char moved[LEASE_MOVED_END_MAX];
    lease_keys_moved_end(k.key[LIB_SEM_KEY_LIMIT], INT64_MAX, moved);
    assert_int_equal(strlen(moved), want + strlen(":9223372036854775807"));
}

/* The key of an end's record moved away: the record's key, ":" and the fence,
 * in the record key's slot. */
static void moved_end_key(void **state)
{
    (void)state;
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, "inv:42");
    char moved[LEASE_MOVED_END_MAX];
    lease_keys_moved_end(k.key[LIB_LOCK_KEY_HOLDER], 1734, moved);
    assert_string_equal(moved, "fg:lk:{inv:42}:h:1734");
    char rid_moved[LEASE_RID_MOVED_MAX];
    lease_keys_rid_moved(&k, "key:k1:r-1", rid_moved);
    assert_string_equal(rid_moved, "fg:lk:{inv:42}:i:key:k1:r-1");
    lease_keys_rid_moved_of_request(&k, "r-2", rid_moved);
    assert_string_equal(rid_moved, "fg:lk:{inv:42}:i:r-2");
    lease_keys_rid_moved_of_request(&k, "", rid_moved); /* a lean try without one names none */
    assert_string_equal(rid_moved, "");
    assert_int_equal(key_slot(moved, strlen(moved)), key_slot("inv:42", 6));
    lease_keys_init(&k, LEASE_KIND_SEMAPHORE, "pool");
    lease_keys_moved_end(k.key[LIB_SEM_KEY_LIMIT], 7, moved);
    assert_string_equal(moved, "fg:sm:{pool}:l:7");
}

/* Per slot: the shared keys carry the slot tag of the lease's slot, and every
 * key of a lock or semaphore hashes to one slot (lease_keys_slot's); the
 * one-Redis names come back with the default layout (no slot). */
static void per_slot_keys_share_the_slot(void **state)
{
    (void)state;
    static const char *const names[] = {"inv:42", "a", "orders/2026-12-01", "x.y_z-1", "Z:9"};
    lease_keys_set_layout(LEASE_KEYS_PER_SLOT);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (int kind = 0; kind < 2; kind++) {
            struct lease_keys k;
            lease_keys_init(&k, kind ? LEASE_KIND_SEMAPHORE : LEASE_KIND_LOCK, names[i]);
            unsigned slot = key_slot(k.key[0], strlen(k.key[0]));
            for (size_t j = 0; j < k.nkeys; j++)
                assert_int_equal(key_slot(k.key[j], strlen(k.key[j])), slot);
            assert_int_equal(
                lease_keys_slot(kind ? LEASE_KIND_SEMAPHORE : LEASE_KIND_LOCK, names[i]),
                (int)slot);
        }
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, "inv:42");
    unsigned slot = key_slot("inv:42", 6);
    char want[64];
    snprintf(want, sizeof want, "fg:fence:{%s}", slot_tag(slot));
    assert_string_equal(k.key[LIB_LOCK_KEY_FENCE], want);
    snprintf(want, sizeof want, "fg:idx:lk:{%s}", slot_tag(slot));
    assert_string_equal(k.key[LIB_LOCK_KEY_INDEX], want);
    lease_keys_set_layout(LEASE_KEYS_ONE_REDIS);
    lease_keys_init(&k, LEASE_KIND_LOCK, "inv:42");
    assert_string_equal(k.key[LIB_LOCK_KEY_FENCE], "fg:fence");
    assert_string_equal(k.key[LIB_LOCK_KEY_INDEX], "fg:idx:lk");
    assert_int_equal(lease_keys_slot(LEASE_KIND_LOCK, "inv:42"), -1);
}

/* The lock scripts that name only some keys (the first tries, the renewal)
 * take them from the lock's, each at its index. */
static void lock_scripts_of_some_keys(void **state)
{
    (void)state;
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, "inv:42");
    const char *acquire[LOCK_ACQUIRE_FAST_NKEYS], *release[LOCK_RELEASE_FAST_NKEYS];
    const char *renew[LOCK_RENEW_NKEYS];
    lease_keys_lock_acquire_fast(&k, "fg:lk:{inv:42}:i:r-1", acquire);
    lease_keys_lock_release_fast(&k, release);
    lease_keys_lock_renew(&k, renew);
    assert_string_equal(acquire[LOCK_ACQUIRE_FAST_KEY_HOLDER], "fg:lk:{inv:42}:h");
    assert_string_equal(acquire[LOCK_ACQUIRE_FAST_KEY_TICKETS], "fg:lk:{inv:42}:t");
    assert_string_equal(acquire[LOCK_ACQUIRE_FAST_KEY_FENCE], "fg:fence");
    assert_string_equal(acquire[LOCK_ACQUIRE_FAST_KEY_FENCE_LIMIT], "fg:fence_limit");
    assert_string_equal(acquire[LOCK_ACQUIRE_FAST_KEY_INDEX], "fg:idx:lk");
    assert_int_equal(LOCK_ACQUIRE_FAST_NKEYS, 8);
    assert_string_equal(acquire[LOCK_ACQUIRE_FAST_KEY_RID_MOVED], "fg:lk:{inv:42}:i:r-1");
    assert_string_equal(acquire[LOCK_ACQUIRE_FAST_KEY_RID_UNTIL], "fg:lk:{inv:42}:e");
    assert_string_equal(acquire[LOCK_ACQUIRE_FAST_KEY_RID_ONE], "fg:lk:{inv:42}:i");
    assert_string_equal(release[LOCK_RELEASE_FAST_KEY_HOLDER], "fg:lk:{inv:42}:h");
    assert_string_equal(release[LOCK_RELEASE_FAST_KEY_WATCHED], "fg:lk:{inv:42}:v");
    assert_string_equal(release[LOCK_RELEASE_FAST_KEY_TICKETS], "fg:lk:{inv:42}:t");
    assert_string_equal(release[LOCK_RELEASE_FAST_KEY_INDEX], "fg:idx:lk");
    assert_int_equal(LOCK_RENEW_NKEYS, 5);
    assert_string_equal(renew[LOCK_RENEW_KEY_HOLDER], "fg:lk:{inv:42}:h");
    assert_string_equal(renew[LOCK_RENEW_KEY_RIDS], "fg:lk:{inv:42}:r");
    assert_string_equal(renew[LOCK_RENEW_KEY_RID_UNTIL], "fg:lk:{inv:42}:e");
    assert_string_equal(renew[LOCK_RENEW_KEY_ENDED], "fg:lk:{inv:42}:n");
    assert_string_equal(renew[LOCK_RENEW_KEY_RID_ONE], "fg:lk:{inv:42}:i");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lock_keys_in_script_order),
        cmocka_unit_test(semaphore_keys_in_script_order),
        cmocka_unit_test(longest_name_fits),
        cmocka_unit_test(moved_end_key),
        cmocka_unit_test(per_slot_keys_share_the_slot),
        cmocka_unit_test(lock_scripts_of_some_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
