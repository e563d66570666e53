/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_utf8.c - cuts of UTF-8 text at a byte count: a cut inside a character
 * of two, three or four bytes moves before it, a cut between characters or
 * after ASCII stays, a text shorter than the cut is kept whole; a trailing
 * character cut short is trimmed, a whole one kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/utf8.h"

#define CHECK   "\xE2\x9C\x93"     /* U+2713, three bytes */
#define E_ACUTE "\xC3\xA9"         /* U+00E9, two bytes */
#define EMOJI   "\xF0\x9F\x98\x80" /* U+1F600, four bytes */

static void cuts_keep_whole_characters(void **state)
{
    (void)state;
    const char *checks = "ab" CHECK CHECK; /* 2 + 3 + 3 bytes */
    assert_int_equal(utf8_cut_len(checks, 2), 2);
    assert_int_equal(utf8_cut_len(checks, 3), 2);
    assert_int_equal(utf8_cut_len(checks, 4), 2);
    assert_int_equal(utf8_cut_len(checks, 5), 5);
    assert_int_equal(utf8_cut_len(checks, 7), 5);
    assert_int_equal(utf8_cut_len(checks, 8), 8);
    assert_int_equal(utf8_cut_len(checks, 100), 8); /* shorter than the cut: whole */
    assert_int_equal(utf8_cut_len(E_ACUTE E_ACUTE, 3), 2);
    for (size_t max = 1; max < 4; max++)
        assert_int_equal(utf8_cut_len("x" EMOJI, max + 1), 1);
    assert_int_equal(utf8_cut_len("x" EMOJI "y", 5), 5);
    assert_int_equal(utf8_cut_len("plain ascii", 5), 5);
    assert_int_equal(utf8_cut_len("", 5), 0);
    assert_int_equal(utf8_cut_len(CHECK, 0), 0);
}

/* What "%.*s" prints with the cut: never half a character. */
static void cut_names_print_whole(void **state)
{
    (void)state;
    char name[40 * 3 + 1] = "";
    for (int i = 0; i < 40; i++)
        strcat(name, CHECK);
    char out[256];
    snprintf(out, sizeof out, "field 'fields.%.*s' must be", utf8_cut_len(name, 100), name);
    assert_int_equal(strlen(out), strlen("field 'fields.' must be") + 33 * 3);
}

static void trims_a_character_cut_short(void **state)
{
    (void)state;
    char text[32];
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"ab" CHECK, "ab" CHECK}, {"ab\xE2\x9C", "ab"},
        {"ab\xE2", "ab"},         {"x" E_ACUTE, "x" E_ACUTE},
        {"x\xC3", "x"},           {"x\xF0\x9F\x98", "x"},
        {"x\xF0\x9F", "x"},       {"x" EMOJI, "x" EMOJI},
        {"ascii", "ascii"},       {"", ""},
        {"\x9C\x93", "\x9C\x93"}, /* no lead byte: not a cut, left for its reader */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        strcpy(text, cases[i].in);
        utf8_trim_cut(text);
        assert_string_equal(text, cases[i].out);
    }
}

/* A message snprintf cut at any byte of a run of characters ends whole. */
static void trims_every_snprintf_cut(void **state)
{
    (void)state;
    const char *text = "k:" CHECK E_ACUTE EMOJI CHECK "end";
    /* the longest whole prefix for each cut, 0 to 17 bytes */
    static const size_t whole[] = {0, 1, 2, 2, 2, 5, 5, 7, 7, 7, 7, 11, 11, 11, 14, 15, 16, 17};
    assert_int_equal(sizeof whole / sizeof whole[0], strlen(text) + 1);
    for (size_t cut = 0; cut <= strlen(text); cut++) {
        char out[64];
        snprintf(out, cut + 1, "%s", text);
        utf8_trim_cut(out);
        assert_int_equal(strlen(out), whole[cut]);
        assert_memory_equal(out, text, whole[cut]);
        assert_int_equal(utf8_cut_len(text, cut), whole[cut]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cuts_keep_whole_characters),
        cmocka_unit_test(cut_names_print_whole),
        cmocka_unit_test(trims_a_character_cut_short),
        cmocka_unit_test(trims_every_snprintf_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
