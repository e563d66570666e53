/* SPDX-License-Identifier: Apache-2.0 */
/*
 * row_json.c - a written row's JSON text from its columns' texts, as
 * Postgres's row_to_json writes it (json.c: composite_to_json, datum_to_json,
 * escape_json, IsValidJsonNumber; datetime.c: EncodeDateTime). It owns that
 * one correspondence and must not run statements or parse the result: the
 * text goes to the same reader as the rows Postgres builds itself, so that
 * both answer alike, a row jansson cannot read included.
 */
#include "store/fenced/row_json.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

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

/* text as a JSON string, escaped as escape_json does (lowercase \u00XX for
 * the other control characters; everything else as it is). */
static void put_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (const char *p = text; *p != '\0'; p++) {
        switch (*p) {
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        default:
            if ((unsigned char)*p < ' ')
                fprintf(out, "\\u%04x", (unsigned)*p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
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
static void put_timestamp(FILE *out, const char *text, bool with_zone)
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
    fprintf(out, "\"%.*sT%.*s%.*s%s%s\"", (int)(space - text), text, (int)hms_len, hms,
            (int)zone_len, zone, zone_len == 3 ? ":00" : "", zone + zone_len);
}

/* Column value text of kind, as datum_to_json writes it. */
static void put_value(FILE *out, const char *text, enum row_json_kind kind)
{
    if (text == NULL) {
        fputs("null", out);
        return;
    }
    switch (kind) {
    case ROW_JSON_NUMBER:
        if (json_number(text))
            fputs(text, out);
        else
            put_string(out, text);
        break;
    case ROW_JSON_BOOL: fputs(strcmp(text, "t") == 0 ? "true" : "false", out); break;
    case ROW_JSON_STRING: put_string(out, text); break;
    case ROW_JSON_TIMESTAMP: put_timestamp(out, text, false); break;
    case ROW_JSON_TIMESTAMPTZ: put_timestamp(out, text, true); break;
    default: fputs(text, out); /* json, jsonb, and to_json's text */
    }
}

char *row_json_text(const char *const *names, const char *const *texts,
                    const enum row_json_kind *kinds, size_t n)
{
    char *buf = NULL;
    size_t len;
    FILE *out = open_memstream(&buf, &len);
    FG_ASSERT(out != NULL);
    fputc('{', out);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            fputc(',', out);
        put_string(out, names[i]);
        fputc(':', out);
        put_value(out, texts[i], kinds[i]);
    }
    fputc('}', out);
    FG_ASSERT(fclose(out) == 0);
    return buf;
}
