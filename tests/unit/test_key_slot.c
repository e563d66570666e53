/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_key_slot.c - slots of keys against the Redis Cluster specification
 * (the CRC16 check value, hash tags and their edge cases, checked against
 * CLUSTER KEYSLOT of Redis 7.0), and the slot tag table against CRC16
 * computed here another way (a byte table, as the specification's reference
 * code does): every slot has a tag, the tag hashes to its slot alone or as a
 * hash tag, and it is the first decimal string that does. The cluster lab
 * checks the same table against CLUSTER KEYSLOT of a running cluster.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/backend/key_slot.h"

static void key_slots(void **state)
{
    (void)state;
    static const struct {
        const char *key;
        unsigned slot;
    } cases[] = {
        {"123456789", 12739}, /* the specification's CRC16 check value 0x31C3 */
        {"foo", 12182},
        {"bar", 5061},
        {"{user1000}.following", 3443},
        {"{user1000}.followers", 3443},
        {"foo{}{bar}", 8363},    /* an empty tag: the whole key */
        {"foo{{bar}}zap", 4015}, /* the tag is "{bar" */
        {"foo{bar}{zap}", 5061}, /* the first tag only: "bar" */
        {"{bar", 4015},          /* no closing brace: the whole key */
        {"fg:lk:{orders}:h", 105},
        {"orders", 105},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(key_slot(cases[i].key, strlen(cases[i].key)), cases[i].slot);
    /* Only the bytes given count. */
    assert_int_equal(key_slot("foobar", 3), 12182);
}

/* CRC16 XMODEM through a table of the 256 byte values (the specification's
 * reference implementation's shape), built here rather than copied. */
static uint16_t table[256];

static void table_make(void)
{
    for (unsigned b = 0; b < 256; b++) {
        uint16_t crc = (uint16_t)(b << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
        table[b] = crc;
    }
}

static unsigned reference_slot(const char *text)
{
    uint16_t crc = 0;
    for (const char *c = text; *c != '\0'; c++)
        crc = (uint16_t)((crc << 8) ^ table[((crc >> 8) ^ (uint8_t)*c) & 0xff]);
    return crc % CLUSTER_SLOTS;
}

static void tags_hash_to_their_slot(void **state)
{
    (void)state;
    table_make();
    assert_int_equal(reference_slot("123456789"), 0x31C3 % CLUSTER_SLOTS);
    long longest = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        const char *tag = slot_tag(s);
        size_t len = strlen(tag);
        assert_true(len > 0 && len < SLOT_TAG_MAX);
        assert_int_equal(strspn(tag, "0123456789"), len);
        assert_int_equal(reference_slot(tag), s);
        char key[64];
        size_t key_len = slot_tag_key(key, sizeof key, "fg:fence", s);
        assert_int_equal(key_len, strlen(key));
        assert_int_equal(key_slot(key, strlen(key)), s);
        long n = strtol(tag, NULL, 10);
        longest = n > longest ? n : longest;
    }
    assert_string_equal(slot_tag(0), "3560");
    assert_int_equal(longest, 109757);
}

/* Each tag is the first number that hashes to its slot: no smaller one does. */
static void tags_are_the_first(void **state)
{
    (void)state;
    table_make();
    for (long n = 0; n <= 109757; n++) {
        char text[SLOT_TAG_MAX];
        snprintf(text, sizeof text, "%ld", n);
        assert_true(strtol(slot_tag(reference_slot(text)), NULL, 10) <= n);
    }
}

static void tagged_keys(void **state)
{
    (void)state;
    char key[32];
    size_t key_len = slot_tag_key(key, sizeof key, "fg:idx:lk", 0);
    assert_int_equal(key_len, strlen("fg:idx:lk:{3560}"));
    assert_string_equal(key, "fg:idx:lk:{3560}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_slots),
        cmocka_unit_test(tags_hash_to_their_slot),
        cmocka_unit_test(tags_are_the_first),
        cmocka_unit_test(tagged_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
