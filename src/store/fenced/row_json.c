/* SPDX-License-Identifier: Apache-2.0 */
/*
 * row_json.c - a written row's JSON text from its columns' texts, as
 * Postgres's row_to_json writes it (json.c: composite_to_json, datum_to_json,
 * escape_json, IsValidJsonNumber; datetime.c: EncodeDateTime). It owns that
 * one correspondence and must not run statements or parse the result: the
 * text goes into the answer as it is, as the rows Postgres builds itself do,
 * so that both answer alike, every digit of their numbers included. Cutting
 * a row down to some of its members copies their text; it reads no value.
 */
#include "store/fenced/row_json.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[ROW_JSON_KIND_COUNT] = {
    [ROW_JSON_OTHER] = "other",
    [ROW_JSON_NUMBER] = "number",
    [ROW_JSON_BOOL] = "bool",
    [ROW_JSON_JSON] = "json",
    [ROW_JSON_STRING] = "string",
    [ROW_JSON_TIMESTAMP] = "timestamp",
    [ROW_JSON_TIMESTAMPTZ] = "timestamptz",
};

enum row_json_kind row_json_kind_of(const char *name)
{
    for (int k = 0; name != NULL && k < ROW_JSON_KIND_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return (enum row_json_kind)k;
    return ROW_JSON_OTHER;
}

/* Appends the C string text as it is. */
static void put_text(struct fgjson_out *out, const char *text)
{
    fgjson_out_raw(out, text, strlen(text));
}

/* The escape escape_json writes for c, or NULL if c goes as it is. */
static const char *short_escape(char c)
{
    switch (c) {
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '"': return "\\\"";
    case '\\': return "\\\\";
    default: return NULL;
    }
}

/* text as a JSON string, escaped as escape_json does (lowercase \u00XX for
 * the other control characters; everything else as it is), in runs. */
static void put_string(struct fgjson_out *out, const char *text)
{
    fgjson_out_raw(out, "\"", 1);
    const char *run = text;
    for (const char *p = text; *p != '\0'; p++) {
        const char *escape = short_escape(*p);
        if (escape == NULL && (unsigned char)*p >= ' ')
            continue;
        fgjson_out_raw(out, run, (size_t)(p - run));
        run = p + 1;
        char control[8];
        if (escape == NULL)
            snprintf(control, sizeof control, "\\u%04x", (unsigned)*p);
        put_text(out, escape != NULL ? escape : control);
    }
    put_text(out, run);
    fgjson_out_raw(out, "\"", 1);
}

/* Skips the digits at *p; false if there is none. */
static bool digits(const char **p)
{
    const char *from = *p;
    while (**p >= '0' && **p <= '9')
        (*p)++;
    return *p > from;
}

/* True if text is a JSON number (IsValidJsonNumber): -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
 * Postgres prints NaN, Infinity and -Infinity, which row_to_json writes as strings. */
static bool json_number(const char *text)
{
    const char *p = text + (*text == '-');
    if (*p == '0')
        p++;
    else if (*p < '1' || *p > '9' || !digits(&p))
        return false;
    if (*p == '.' && (p++, !digits(&p)))
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += *p == '+' || *p == '-';
        if (!digits(&p))
            return false;
    }
    return *p == '\0';
}

/*
 * A timestamp's text with DateStyle ISO ("2026-12-02 04:55:00.5+01", "... BC",
 * "infinity") as row_to_json writes it (XSD style): a 'T' for the space between
 * date and time, and with_zone, an offset of whole hours with its minutes
 * ("+01:00"; "+05:30" and "+00:00:30" stay).
 */
static void put_timestamp(struct fgjson_out *out, const char *text, bool with_zone)
{
    const char *space = strchr(text, ' ');
    if (space == NULL) { /* infinity, -infinity */
        put_string(out, text);
        return;
    }
    const char *hms = space + 1;
    size_t hms_len = strcspn(hms, with_zone ? "+- " : " ");
    const char *zone = hms + hms_len; /* the offset, then " BC" or nothing */
    size_t zone_len = strcspn(zone, " ");
    /* nothing in these texts needs an escape */
    fgjson_out_raw(out, "\"", 1);
    fgjson_out_raw(out, text, (size_t)(space - text));
    fgjson_out_raw(out, "T", 1);
    fgjson_out_raw(out, hms, hms_len);
    fgjson_out_raw(out, zone, zone_len);
    put_text(out, zone_len == 3 ? ":00" : "");
    put_text(out, zone + zone_len);
    fgjson_out_raw(out, "\"", 1);
}

/* Column value text of kind, as datum_to_json writes it. */
static void put_value(struct fgjson_out *out, const char *text, enum row_json_kind kind)
{
    if (text == NULL) {
        put_text(out, "null");
        return;
    }
    switch (kind) {
    case ROW_JSON_NUMBER:
        if (json_number(text))
            put_text(out, text);
        else
            put_string(out, text);
        break;
    case ROW_JSON_BOOL: put_text(out, strcmp(text, "t") == 0 ? "true" : "false"); break;
    case ROW_JSON_STRING: put_string(out, text); break;
    case ROW_JSON_TIMESTAMP: put_timestamp(out, text, false); break;
    case ROW_JSON_TIMESTAMPTZ: put_timestamp(out, text, true); break;
    default: put_text(out, text); /* json, jsonb, and to_json's text */
    }
}

void row_json_write(struct fgjson_out *out, const char *const *names, const char *const *texts,
                    const enum row_json_kind *kinds, size_t n)
{
    fgjson_out_raw(out, "{", 1);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            fgjson_out_raw(out, ",", 1);
        put_string(out, names[i]);
        fgjson_out_raw(out, ":", 1);
        put_value(out, texts[i], kinds[i]);
    }
    fgjson_out_raw(out, "}", 2); /* the text's NUL too */
}

/* The offset of the first byte of row (len bytes) at or after at that is no
 * JSON white space, or len. */
static size_t skip_space(const char *row, size_t len, size_t at)
{
    while (at < len && strchr(" \t\r\n", row[at]) != NULL)
        at++;
    return at;
}

/* Where the member whose value follows row[at] ends (len bytes): at the ','
 * or '}' after it that no string, object or array inside it holds, or at len. */
static size_t member_end(const char *row, size_t len, size_t at)
{
    size_t depth = 0;
    while (at < len && !(depth == 0 && (row[at] == ',' || row[at] == '}'))) {
        if (row[at] == '"') {
            at = fgjson_string_end(row, len, at);
            continue;
        }
        if (row[at] == '{' || row[at] == '[')
            depth++;
        else if ((row[at] == '}' || row[at] == ']') && depth > 0)
            depth--;
        at++;
    }
    return at;
}

void row_json_pick(struct fgjson_out *out, const char *row, const bool *shown, size_t n)
{
    size_t len = strlen(row), at = skip_space(row, len, 0);
    const char *sep = "";
    at += at < len && row[at] == '{';
    fgjson_out_raw(out, "{", 1);
    for (size_t i = 0; i < n && (at = skip_space(row, len, at)) < len && row[at] == '"'; i++) {
        size_t end = member_end(row, len, fgjson_string_end(row, len, at));
        if (shown[i]) {
            put_text(out, sep);
            fgjson_out_raw(out, row + at, end - at);
            sep = ",";
        }
        at = end < len && row[end] == ',' ? end + 1 : end;
    }
    fgjson_out_raw(out, "}", 2); /* the text's NUL too */
}
