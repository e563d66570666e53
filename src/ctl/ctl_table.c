/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_table.c - table layout for fencectl's human output. Widths count UTF-8
 * characters, not bytes, and a cut never splits a character or an escape. The audit view
 * maps each record field to a column through one table. Everything that came
 * from the gateway is escaped before it reaches the terminal (ctl_escape).
 */
#include "ctl/ctl_table.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/names.h"

#define COLUMN_GAP "  "

/* Characters (UTF-8 lead bytes) in the first len bytes of s. */
static size_t display_width(const char *s, size_t len)
{
    size_t w = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            w++;
    return w;
}

/* Bytes of the piece of text s that a cut keeps whole: one escape that
 * ctl_escape printed (two backslashes for one, \xHH, \u{H...}; a cell holds
 * no other backslash), or one UTF-8 character. s is not empty. */
static size_t piece_len(const char *s)
{
    if (s[0] == '\\' && s[1] == '\\')
        return 2;
    if (s[0] == '\\' && s[1] == 'x' && isxdigit((unsigned char)s[2]) &&
        isxdigit((unsigned char)s[3]))
        return 4;
    if (s[0] == '\\' && s[1] == 'u' && s[2] == '{') {
        const char *end = strchr(s + 3, '}');
        if (end != NULL)
            return (size_t)(end - s) + 1;
    }
    size_t n = 1;
    while ((((unsigned char)s[n]) & 0xC0) == 0x80)
        n++;
    return n;
}

/* Bytes of s that fit in width characters, cut between whole pieces
 * (piece_len): never inside an escape or a character. */
static size_t bytes_for_width(const char *s, size_t width)
{
    size_t w = 0, i = 0;
    while (s[i] != '\0') {
        size_t n = piece_len(s + i), shown = display_width(s + i, n);
        if (w + shown > width)
            break;
        w += shown;
        i += n;
    }
    return i;
}

/* Appends cell to *pos, cut at CTL_CELL_MAX and padded to width when pad. */
static char *put_cell(char *pos, const char *cell, size_t width, bool pad)
{
    const char *text = cell ? cell : "-";
    size_t len = strlen(text), shown = display_width(text, len);
    if (shown > CTL_CELL_MAX) {
        len = bytes_for_width(text, CTL_CELL_MAX - 3);
        memcpy(pos, text, len);
        memcpy(pos + len, "...", 3);
        pos += len + 3;
        shown = display_width(text, len) + 3;
    } else {
        memcpy(pos, text, len);
        pos += len;
    }
    for (; pad && shown < width; shown++)
        *pos++ = ' ';
    return pos;
}

/* Unicode's format (Cf) and line, paragraph and non-ASCII space separator
 * (Zl, Zp, Zs) characters: invisible, or reordering, joining or breaking the
 * text around them (bidi overrides, U+200B, U+2028, U+FEFF), never shown raw. */
static const struct {
    unsigned first, last;
} invisible[] = {
    {0x00A0, 0x00A0},   {0x00AD, 0x00AD},   {0x0600, 0x0605},   {0x061C, 0x061C},
    {0x06DD, 0x06DD},   {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},
    {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},
    {0x205F, 0x2064},   {0x2066, 0x206F},   {0x3000, 0x3000},   {0xFEFF, 0xFEFF},
    {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F},
    {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F},
};

/* The code point of the UTF-8 sequence of n bytes (2 to 4) at p. */
static unsigned code_point(const unsigned char *p, size_t n)
{
    unsigned cp = p[0] & (0x7F >> n);
    for (size_t k = 1; k < n; k++)
        cp = cp << 6 | (p[k] & 0x3F);
    return cp;
}

static bool is_invisible(unsigned cp)
{
    for (size_t i = 0; i < sizeof invisible / sizeof invisible[0]; i++)
        if (cp >= invisible[i].first && cp <= invisible[i].last)
            return true;
    return false;
}

char *ctl_escape(const char *text)
{
    if (text == NULL)
        return NULL;
    size_t len = strlen(text);
    char *out = malloc(len * 8 + 1), *pos = out;
    FG_ASSERT(out != NULL);
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t n = p[i] < 0x80 ? 1 : utf8_sequence_len(p + i, len - i);
        unsigned cp = n > 1 ? code_point(p + i, n) : p[i];
        if (p[i] < 0x20 || p[i] == 0x7F) {
            pos += sprintf(pos, "\\x%02x", p[i]);
            i++;
        } else if (n == 0) {
            pos += sprintf(pos, "\\x%02x", p[i]); /* not UTF-8 */
            i++;
        } else if (n == 2 && cp < 0xA0) {
            pos += sprintf(pos, "\\x%02x", cp); /* C1 control U+0080..U+009F */
            i += 2;
        } else if (n > 1 && is_invisible(cp)) {
            pos += sprintf(pos, "\\u{%04x}", cp);
            i += n;
        } else if (p[i] == '\\') {
            *pos++ = '\\';
            *pos++ = '\\';
            i++;
        } else {
            memcpy(pos, p + i, n);
            pos += n;
            i += n;
        }
    }
    *pos = '\0';
    return out;
}

static size_t cell_width(const char *cell)
{
    const char *text = cell ? cell : "-";
    size_t w = display_width(text, strlen(text));
    return w > CTL_CELL_MAX ? CTL_CELL_MAX : w;
}

char *ctl_table_render(const char *const *headers, size_t ncols, const char *const *cells,
                       size_t nrows)
{
    size_t *widths = calloc(ncols, sizeof *widths);
    FG_ASSERT(widths != NULL);
    size_t bytes = 1;
    for (size_t r = 0; r <= nrows; r++) {
        for (size_t c = 0; c < ncols; c++) {
            const char *cell = r == 0 ? headers[c] : cells[(r - 1) * ncols + c];
            size_t w = cell_width(cell);
            if (w > widths[c])
                widths[c] = w;
            bytes += (cell ? strlen(cell) : 1) + 4 * CTL_CELL_MAX + strlen(COLUMN_GAP);
        }
        bytes++;
    }
    char *text = malloc(bytes), *pos = text;
    FG_ASSERT(text != NULL);
    for (size_t r = 0; r <= nrows; r++) {
        for (size_t c = 0; c < ncols; c++) {
            const char *cell = r == 0 ? headers[c] : cells[(r - 1) * ncols + c];
            pos = put_cell(pos, cell, widths[c], c + 1 < ncols);
            if (c + 1 < ncols) {
                memcpy(pos, COLUMN_GAP, strlen(COLUMN_GAP));
                pos += strlen(COLUMN_GAP);
            }
        }
        while (pos > text && pos[-1] == ' ')
            pos--;
        *pos++ = '\n';
    }
    *pos = '\0';
    free(widths);
    return text;
}

void ctl_format_time(int64_t ms, char *out, size_t cap)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    if (ms < 0 || gmtime_r(&secs, &tm) == NULL) {
        snprintf(out, cap, "%" PRId64, ms);
        return;
    }
    size_t n = strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03d", (int)(ms % 1000));
}

enum audit_format { AUDIT_TEXT, AUDIT_INTEGER, AUDIT_TIME };

/* The columns of the audit view: header, record field, how to show it. */
static const struct {
    const char *header;
    const char *field;
    enum audit_format format;
} audit_columns[] = {
    {"ID", "id", AUDIT_INTEGER},
    {"AT (UTC)", "at_ms", AUDIT_TIME},
    {"RESOURCE", "resource", AUDIT_TEXT},
    {"LOCK", "lock", AUDIT_TEXT},
    {"KIND", "lease_kind", AUDIT_TEXT},
    {"PRESENTED", "presented_fence", AUDIT_INTEGER},
    {"CURRENT", "current_fence", AUDIT_INTEGER},
    {"OWNER", "owner", AUDIT_TEXT},
    {"CLIENT", "client_addr", AUDIT_TEXT},
    {"METHOD", "method", AUDIT_TEXT},
    {"REASON", "reason", AUDIT_TEXT},
};
#define AUDIT_NCOLS (sizeof audit_columns / sizeof audit_columns[0])

/* The text of one audit field, malloc'd, or NULL for a missing or null one. */
static char *audit_cell(const json_t *value, enum audit_format format)
{
    char buf[64];
    if (value == NULL || json_is_null(value))
        return NULL;
    if (json_is_string(value))
        return ctl_escape(json_string_value(value));
    if (!json_is_integer(value))
        return json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
    int64_t v = (int64_t)json_integer_value(value);
    if (format == AUDIT_TIME)
        ctl_format_time(v, buf, sizeof buf);
    else
        snprintf(buf, sizeof buf, "%" PRId64, v);
    return strdup(buf);
}

char *ctl_audit_table(const json_t *items)
{
    size_t nrows = json_array_size(items);
    const char *headers[AUDIT_NCOLS];
    char **cells = calloc(nrows * AUDIT_NCOLS + 1, sizeof *cells);
    FG_ASSERT(cells != NULL);
    for (size_t c = 0; c < AUDIT_NCOLS; c++)
        headers[c] = audit_columns[c].header;
    for (size_t r = 0; r < nrows; r++) {
        const json_t *item = json_array_get(items, r);
        for (size_t c = 0; c < AUDIT_NCOLS; c++)
            cells[r * AUDIT_NCOLS + c] =
                audit_cell(json_object_get(item, audit_columns[c].field), audit_columns[c].format);
    }
    char *text = ctl_table_render(headers, AUDIT_NCOLS, (const char *const *)cells, nrows);
    for (size_t i = 0; i < nrows * AUDIT_NCOLS; i++)
        free(cells[i]);
    free(cells);
    return text;
}

enum lease_column {
    LEASE_KIND,
    LEASE_NAME,
    LEASE_HELD,
    LEASE_FENCE,
    LEASE_OWNER,
    LEASE_LEFT,
    LEASE_WAITING,
    LEASE_NCOLS
};

static const char *const lease_headers[LEASE_NCOLS] = {"KIND",  "NAME",       "HELD",   "FENCE",
                                                       "OWNER", "EXPIRES IN", "WAITING"};

/* "<n> ms" of an integer, malloc'd; NULL for none. */
static char *ms_cell(const json_t *value)
{
    char buf[32];
    if (!json_is_integer(value))
        return NULL;
    snprintf(buf, sizeof buf, "%" PRId64 " ms", (int64_t)json_integer_value(value));
    return strdup(buf);
}

/* The cells of a listed lock into row. */
static void lock_row(const json_t *item, char **row)
{
    bool held = json_is_true(json_object_get(item, "held"));
    row[LEASE_KIND] = strdup("lock");
    row[LEASE_NAME] = audit_cell(json_object_get(item, "lock"), AUDIT_TEXT);
    row[LEASE_HELD] = strdup(held ? "yes" : "no");
    row[LEASE_FENCE] = held ? audit_cell(json_object_get(item, "fence"), AUDIT_INTEGER) : NULL;
    row[LEASE_OWNER] = held ? audit_cell(json_object_get(item, "owner"), AUDIT_TEXT) : NULL;
    row[LEASE_LEFT] = held ? ms_cell(json_object_get(item, "expires_in_ms")) : NULL;
    row[LEASE_WAITING] = audit_cell(json_object_get(item, "waiting"), AUDIT_INTEGER);
}

/* Appends ", " (unless first) and text to the malloc'd list *out. */
static void append_listed(char **out, const char *text)
{
    size_t have = *out ? strlen(*out) : 0, add = strlen(text);
    char *grown = realloc(*out, have + add + 3);
    FG_ASSERT(grown != NULL);
    if (have > 0)
        memcpy(grown + have, ", ", 2), have += 2;
    memcpy(grown + have, text, add + 1);
    *out = grown;
}

/* The cells of a listed semaphore into row: its leases' fences and owners
 * comma-separated, and the soonest expiry. */
static void semaphore_row(const json_t *item, char **row)
{
    char held[48];
    snprintf(held, sizeof held, "%" PRId64 "/%" PRId64,
             (int64_t)json_integer_value(json_object_get(item, "holders")),
             (int64_t)json_integer_value(json_object_get(item, "limit")));
    row[LEASE_KIND] = strdup("semaphore");
    row[LEASE_NAME] = audit_cell(json_object_get(item, "semaphore"), AUDIT_TEXT);
    row[LEASE_HELD] = strdup(held);
    const json_t *lease, *soonest = NULL;
    size_t i;
    json_array_foreach(json_object_get(item, "leases"), i, lease)
    {
        char *fence = audit_cell(json_object_get(lease, "fence"), AUDIT_INTEGER);
        char *owner = audit_cell(json_object_get(lease, "owner"), AUDIT_TEXT);
        append_listed(&row[LEASE_FENCE], fence ? fence : "-");
        append_listed(&row[LEASE_OWNER], owner ? owner : "-");
        free(fence);
        free(owner);
        const json_t *left = json_object_get(lease, "expires_in_ms");
        if (json_is_integer(left) &&
            (soonest == NULL || json_integer_value(left) < json_integer_value(soonest)))
            soonest = left;
    }
    row[LEASE_LEFT] = ms_cell(soonest);
    row[LEASE_WAITING] = audit_cell(json_object_get(item, "waiting"), AUDIT_INTEGER);
}

char *ctl_lease_table(const json_t *locks, const json_t *semaphores)
{
    size_t nlocks = json_array_size(locks), nrows = nlocks + json_array_size(semaphores);
    char **cells = calloc(nrows * LEASE_NCOLS + 1, sizeof *cells);
    FG_ASSERT(cells != NULL);
    for (size_t r = 0; r < nrows; r++) {
        if (r < nlocks)
            lock_row(json_array_get(locks, r), cells + r * LEASE_NCOLS);
        else
            semaphore_row(json_array_get(semaphores, r - nlocks), cells + r * LEASE_NCOLS);
    }
    char *text = ctl_table_render(lease_headers, LEASE_NCOLS, (const char *const *)cells, nrows);
    for (size_t i = 0; i < nrows * LEASE_NCOLS; i++)
        free(cells[i]);
    free(cells);
    return text;
}
