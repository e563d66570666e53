/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ctl_table.c - fencectl's tables: column widths, cut cells, UTF-8, and
 * the audit view of rejected writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl/ctl_table.h"

static void pads_columns(void **state)
{
    (void)state;
    const char *headers[] = {"ID", "NAME", "N"};
    const char *cells[] = {"1", "alpha", "x", "22", NULL, "yy"};
    char *text = ctl_table_render(headers, 3, cells, 2);
    assert_string_equal(text, "ID  NAME   N\n"
                              "1   alpha  x\n"
                              "22  -      yy\n");
    free(text);
}

static void no_trailing_blanks(void **state)
{
    (void)state;
    const char *headers[] = {"A", "B"};
    const char *cells[] = {"long-value", ""};
    char *text = ctl_table_render(headers, 2, cells, 1);
    assert_string_equal(text, "A           B\nlong-value\n");
    free(text);
}

static void cuts_long_cells_on_characters(void **state)
{
    (void)state;
    char cell[200];
    strcpy(cell, "");
    for (int i = 0; i < 50; i++)
        strcat(cell, "\xc3\xa9"); /* 50 x e-acute: 100 bytes, 50 characters */
    const char *headers[] = {"V"};
    const char *cells[] = {cell};
    char *text = ctl_table_render(headers, 1, cells, 1);
    const char *row = strchr(text, '\n') + 1;
    /* 37 characters, then "...": the cut never splits a character. */
    assert_int_equal(strlen(row), 37 * 2 + 3 + 1);
    assert_memory_equal(row + 74, "...\n", 4);
    free(text);
}

/* A cut falls between whole escapes: a cell whose 37th character is inside the escape of U+00A0
 * is cut before that escape, never after its backslash (a broken variant left "\\..." behind). */
static void cuts_long_cells_between_escapes(void **state)
{
    (void)state;
    char *cell = ctl_escape("redis:app:f06001\xe2\x80\xae"
                            "evil\xe2\x80\x8b\xc2\xa0x");
    assert_string_equal(cell, "redis:app:f06001\\u{202e}evil\\u{200b}\\u{00a0}x");
    const char *headers[] = {"RESOURCE", "N"};
    const char *cells[] = {cell, "1"};
    char *text = ctl_table_render(headers, 2, cells, 1);
    const char *row = strchr(text, '\n') + 1;
    assert_string_equal(row, "redis:app:f06001\\u{202e}evil\\u{200b}...   1\n");
    free(text);
    free(cell);
    /* An escaped backslash is one piece too: 36 characters, then "\\" would pass 37. */
    const char *slashes[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\\\bbbbbb"};
    text = ctl_table_render(headers, 1, slashes, 1);
    assert_string_equal(strchr(text, '\n') + 1, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\n");
    free(text);
    /* An escape that fits ends the kept text whole. */
    const char *hexes[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\x1bbbbbbbbbb"};
    text = ctl_table_render(headers, 1, hexes, 1);
    assert_string_equal(strchr(text, '\n') + 1, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\x1b...\n");
    free(text);
}

static void times(void **state)
{
    (void)state;
    char out[40];
    ctl_format_time(0, out, sizeof out);
    assert_string_equal(out, "1970-01-01 00:00:00.000");
    ctl_format_time(1734000000123, out, sizeof out);
    assert_string_equal(out, "2024-12-12 10:40:00.123");
}

/* A record names its lease's kind; one stored before the kind was kept shows "-" there. */
static void audit_view(void **state)
{
    (void)state;
    json_t *items = json_pack(
        "[{s:i, s:I, s:s, s:s, s:s, s:i, s:i, s:n, s:s, s:s, s:s},"
        " {s:i, s:I, s:s, s:s, s:n, s:i, s:i, s:s, s:s, s:s, s:s}]",
        "id", 7, "at_ms", (json_int_t)1734000000123, "resource", "pg:invoices/42", "lock",
        "invoice:42", "lease_kind", "semaphore", "presented_fence", 11, "current_fence", 12,
        "owner", "client_addr", "10.0.0.5", "method", "PATCH", "reason", "stale_fence", "id", 8,
        "at_ms", (json_int_t)1734000000124, "resource", "pg:invoices/42", "lock", "invoice:42",
        "lease_kind", "presented_fence", 10, "current_fence", 12, "owner", "w", "client_addr",
        "10.0.0.5", "method", "PATCH", "reason", "stale_fence");
    char *text = ctl_audit_table(items);
    assert_non_null(strstr(text, "ID  AT (UTC)"));
    assert_non_null(strstr(text, "  LOCK        KIND       PRESENTED"));
    assert_non_null(strstr(text, "REASON\n"));
    assert_non_null(
        strstr(text, "7   2024-12-12 10:40:00.123  pg:invoices/42  invoice:42  semaphore  11"));
    assert_non_null(strstr(text, "  12       -      10.0.0.5  PATCH   stale_fence\n"));
    assert_non_null(
        strstr(text, "8   2024-12-12 10:40:00.124  pg:invoices/42  invoice:42  -          10"));
    free(text);
    json_decref(items);
}

/* What the gateway stored (an owner, say) never reaches the terminal raw: a broken variant that
 * printed cells as they came was caught by the ESC and bidi cases. */
static void escapes_what_came_from_the_gateway(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain caf\xc3\xa9", "plain caf\xc3\xa9"},
        {"red\x1b[31m", "red\\x1b[31m"},
        {"bell\a del\x7f", "bell\\x07 del\\x7f"},
        {"c1\xc2\x9b"
         "2J",
         "c1\\x9b2J"},
        {"rlo\xe2\x80\xaetxt.exe", "rlo\\u{202e}txt.exe"},
        {"iso\xe2\x81\xa6"
         "x",
         "iso\\u{2066}x"},
        {"back\\slash", "back\\\\slash"},
        {"nl\ncr\r", "nl\\x0acr\\x0d"},
        {"ls\xe2\x80\xa8ps\xe2\x80\xa9", "ls\\u{2028}ps\\u{2029}"},
        {"bom\xef\xbb\xbfzw\xe2\x80\x8bx", "bom\\u{feff}zw\\u{200b}x"},
        {"nbsp\xc2\xa0shy\xc2\xad", "nbsp\\u{00a0}shy\\u{00ad}"},
        {"tag\xf3\xa0\x80\x81", "tag\\u{e0001}"},
        {"bad\xff", "bad\\xff"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = ctl_escape(cases[i].in);
        if (strcmp(got, cases[i].out) != 0)
            fail_msg("case %zu: got %s", i, got);
        free(got);
    }
    assert_null(ctl_escape(NULL));
    json_t *items = json_pack("[{s:i, s:s, s:s}]", "id", 1, "resource", "pg:x\x1b]0;pwned\x07",
                              "owner", "o\xe2\x80\xaeo");
    char *text = ctl_audit_table(items);
    assert_null(strchr(text, '\x1b'));
    assert_null(strstr(text, "\xe2\x80\xae"));
    free(text);
    json_decref(items);
}

/* Locks, then semaphores: a free lock shows no fence or owner; a semaphore shows
 * holders/limit, its leases' fences and owners, and its soonest expiry. */
static void lease_listing(void **state)
{
    (void)state;
    json_t *locks = json_loads("[{\"lock\": \"inv:1\", \"held\": true, \"fence\": 100004,"
                               " \"owner\": \"billing\", \"expires_in_ms\": 2500, \"waiting\": 2},"
                               " {\"lock\": \"inv:2\", \"held\": false, \"waiting\": 1}]",
                               0, NULL);
    json_t *sems = json_loads("[{\"semaphore\": \"pool\", \"limit\": 4, \"holders\": 2,"
                              " \"waiting\": 0, \"leases\": [{\"fence\": 7, \"owner\": \"a\","
                              " \"expires_in_ms\": 900}, {\"fence\": 9, \"expires_in_ms\": 300}]}]",
                              0, NULL);
    char *text = ctl_lease_table(locks, sems);
    assert_string_equal(text, "KIND       NAME   HELD  FENCE   OWNER    EXPIRES IN  WAITING\n"
                              "lock       inv:1  yes   100004  billing  2500 ms     2\n"
                              "lock       inv:2  no    -       -        -           1\n"
                              "semaphore  pool   2/4   7, 9    a, -     300 ms      0\n");
    free(text);
    text = ctl_lease_table(NULL, sems);
    assert_non_null(strstr(text, "\nsemaphore  pool"));
    free(text);
    json_decref(locks);
    json_decref(sems);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pads_columns),
        cmocka_unit_test(no_trailing_blanks),
        cmocka_unit_test(cuts_long_cells_on_characters),
        cmocka_unit_test(cuts_long_cells_between_escapes),
        cmocka_unit_test(times),
        cmocka_unit_test(audit_view),
        cmocka_unit_test(lease_listing),
        cmocka_unit_test(escapes_what_came_from_the_gateway),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
