/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_shared_keys.c - the names of the keys of fenced Redis writes,
 * revocations and the audit stream (store/backend/shared_keys.h): on one Redis
 * exactly those of store/backend/redis_keys.h, as before cluster mode; per slot,
 * each in the slot it is named for (checked with key_slot, itself checked
 * against CLUSTER KEYSLOT in test_key_slot.c), the fence key of an application
 * key in that key's slot whatever braces the key has, and the fence limit
 * named as lease/lease_keys.c names it, with the run_id placeholder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lease/lease_keys.h"
#include "store/backend/redis.h"
#include "store/backend/shared_keys.h"

static unsigned slot_of(const char *key)
{
    return key_slot(key, strlen(key));
}

static int one_redis(void **state)
{
    (void)state;
    lease_keys_set_layout(LEASE_KEYS_ONE_REDIS);
    return 0;
}

static int per_slot(void **state)
{
    (void)state;
    lease_keys_set_layout(LEASE_KEYS_PER_SLOT);
    return 0;
}

static void one_redis_names(void **state)
{
    (void)state;
    assert_false(shared_keys_per_slot());
    char out[SHARED_KEY_MAX];
    static const char *const bases[] = {KEY_AUDIT, KEY_AUDIT_DEAD, KEY_FENCE_FLOOR, KEY_REVOKED};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        shared_key(out, bases[i], 777);
        assert_string_equal(out, bases[i]);
    }
    shared_fence_limit_key(out, 777);
    assert_string_equal(out, "fg:fence_limit");
    assert_int_equal(shared_keys_slot_of("app:{x}/y", 9), 0);
    char *fence = shared_write_fence_key("app:{x}/y");
    assert_string_equal(fence, "fg:rf:app:{x}/y");
    free(fence);
}

static void per_slot_names(void **state)
{
    (void)state;
    assert_true(shared_keys_per_slot());
    char out[SHARED_KEY_MAX], want[SHARED_KEY_MAX + 8];
    for (unsigned slot = 0; slot < CLUSTER_SLOTS; slot += 127) {
        shared_key(out, KEY_AUDIT, slot);
        snprintf(want, sizeof want, "fg:audit:{%s}", slot_tag(slot));
        assert_string_equal(out, want);
        assert_int_equal(slot_of(out), slot);
        shared_key(out, KEY_REVOKED, slot);
        assert_int_equal(slot_of(out), slot);
        shared_fence_limit_key(out, slot);
        snprintf(want, sizeof want, "fg:fence_limit:{%s}:%s", slot_tag(slot),
                 REDIS_RUN_ID_PLACEHOLDER);
        assert_string_equal(out, want);
        assert_int_equal(slot_of(out), slot);
    }
    shared_key(out, KEY_FENCE_LIMIT, 16383); /* the longest name fits */
    assert_true(strlen(out) + 1 + REDIS_RUN_ID_LEN < SHARED_KEY_MAX);
}

/* The fence key lives in the key's slot, its own hash tag or not. */
static void write_fence_keys(void **state)
{
    (void)state;
    static const char *const keys[] = {
        "app:plain", "app:{user1000}.following", "{a}{b}", "app:{}x", "app:{x", "{"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char *fence = shared_write_fence_key(keys[i]);
        unsigned slot = slot_of(keys[i]);
        assert_int_equal(shared_keys_slot_of(keys[i], strlen(keys[i])), slot);
        assert_int_equal(slot_of(fence), slot);
        char want[128];
        snprintf(want, sizeof want, "fg:rf:{%s}:%s", slot_tag(slot), keys[i]);
        assert_string_equal(fence, want);
        free(fence);
    }
}

/* The limit named here is the one the lease scripts of the slot use. */
static void limit_as_lease_keys_name_it(void **state)
{
    (void)state;
    struct lease_keys k;
    lease_keys_init(&k, LEASE_KIND_LOCK, "orders");
    struct lease_fence_keys fk;
    lease_keys_fence(&k, &fk);
    char limit[SHARED_KEY_MAX], floor[SHARED_KEY_MAX];
    unsigned slot = slot_of("orders");
    shared_fence_limit_key(limit, slot);
    shared_key(floor, KEY_FENCE_FLOOR, slot);
    assert_string_equal(fk.limit, limit);
    assert_string_equal(fk.floor, floor);
    assert_string_equal(k.key[k.common_at + LIB_LEASE_KEY_REVOKED],
                        (shared_key(limit, KEY_REVOKED, slot), limit));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(one_redis_names, one_redis),
        cmocka_unit_test_setup(per_slot_names, per_slot),
        cmocka_unit_test_setup(write_fence_keys, per_slot),
        cmocka_unit_test_setup(limit_as_lease_keys_name_it, per_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
