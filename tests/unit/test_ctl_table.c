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

static void times(void **state)
{
    (void)state;
    char out[40];
    ctl_format_time(0, out, sizeof out);
    assert_string_equal(out, "1970-01-01 00:00:00.000");
    ctl_format_time(1734000000123, out, sizeof out);
    assert_string_equal(out, "2024-12-12 10:40:00.123");
}

static void audit_view(void **state)
{
    (void)state;
    json_t *items =
        json_pack("[{s:i, s:I, s:s, s:s, s:i, s:i, s:n, s:s, s:s, s:s}]", "id", 7, "at_ms",
                  (json_int_t)1734000000123, "resource", "pg:invoices/42", "lock", "invoice:42",
                  "presented_fence", 11, "current_fence", 12, "owner", "client_addr", "10.0.0.5",
                  "method", "PATCH", "reason", "stale_fence");
    char *text = ctl_audit_table(items);
    assert_non_null(strstr(text, "ID  AT (UTC)"));
    assert_non_null(strstr(text, "REASON\n"));
    assert_non_null(strstr(text, "7   2024-12-12 10:40:00.123  pg:invoices/42  invoice:42  11"));
    assert_non_null(strstr(text, "  12       -      10.0.0.5  PATCH   stale_fence\n"));
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
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = ctl_escape(cases[i].in);
        assert_string_equal(got, cases[i].out);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pads_columns),
        cmocka_unit_test(no_trailing_blanks),
        cmocka_unit_test(cuts_long_cells_on_characters),
        cmocka_unit_test(times),
        cmocka_unit_test(audit_view),
        cmocka_unit_test(escapes_what_came_from_the_gateway),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
