/* SPDX-License-Identifier: Apache-2.0 */
/*
 * key_text.c - reading a row key as Postgres reads it, into the canonical text
 * Postgres prints for its value (integers, numerics, text, uuids and dates).
 * The readers follow Postgres 15's input functions (pg_strtoint*, numeric_in,
 * string_to_uuid) and refuse what they do not follow exactly, rather than
 * guess: a refused spelling is a 400, a misread one would be a row written
 * under another row's lock. It must not talk to Postgres.
 */
#include "store/fenced/key_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fglimits.h"
#include "util/names.h"

#define NUMERIC_MAX_EXPONENT 1000 /* Postgres refuses a larger exponent */

/* The key column types the gateway reads. */
static const struct {
    const char *base_type; /* pg_type.typname */
    const char *type;      /* format_type of the type itself (not a domain) */
    enum key_form form;
    bool takes_modifier; /* a domain may hide a modifier that changes values */
} forms[] = {
    {"int2", "smallint", KEY_FORM_INT16, false},
    {"int4", "integer", KEY_FORM_INT32, false},
    {"int8", "bigint", KEY_FORM_INT64, false},
    {"numeric", "numeric", KEY_FORM_NUMERIC, true},
    {"text", "text", KEY_FORM_TEXT, false},
    {"varchar", "character varying", KEY_FORM_TEXT, true},
    {"bpchar", "bpchar", KEY_FORM_BPCHAR, true},
    {"uuid", "uuid", KEY_FORM_UUID, false},
    {"date", "date", KEY_FORM_DATE, false},
};

struct key_shape key_shape_of(const char *type, const char *base_type, int typmod)
{
    struct key_shape shape = {.form = KEY_FORM_OTHER};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (strcmp(base_type, forms[i].base_type) != 0)
            continue;
        bool domain = strcmp(type, forms[i].type) != 0 &&
                      !(forms[i].form == KEY_FORM_BPCHAR && strcmp(type, "character") == 0);
        if (domain && forms[i].takes_modifier)
            return shape;
        shape.form = forms[i].form;
        /* varchar(n)'s and char(n)'s typmod: n + VARHDRSZ */
        if ((shape.form == KEY_FORM_TEXT || shape.form == KEY_FORM_BPCHAR) && typmod >= 4)
            shape.max_chars = typmod - 4;
        /* numeric's typmod: ((precision << 16) | (scale & 0x7ff)) + VARHDRSZ, the
         * scale an 11-bit two's complement number (Postgres 15) */
        if (shape.form == KEY_FORM_NUMERIC && typmod >= 4) {
            int scale = (typmod - 4) & 0x7ff;
            shape.scaled = true;
            shape.scale = scale >= 1024 ? scale - 2048 : scale;
        }
        return shape;
    }
    return shape;
}

/* The text between leading and trailing spaces of key: *start, *len. */
static void trim_spaces(const char *key, const char **start, size_t *len)
{
    while (*key == ' ')
        key++;
    size_t n = strlen(key);
    while (n > 0 && key[n - 1] == ' ')
        n--;
    *start = key;
    *len = n;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* An owned copy of the n bytes at s. */
static char *copy(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    FG_ASSERT(out != NULL);
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

static int refuse(struct fg_error *err, const char *field, const char *what)
{
    return fg_fail(err, FG_ERR_INVALID_FIELD, "field '%s' must be %s", field, what);
}

/* --- integers ------------------------------------------------------------------------------ */

static int integer_canonical(enum key_form form, const char *key, const char *field, char **out,
                             struct fg_error *err)
{
    static const char *const most[] = {[KEY_FORM_INT16] = "32767",
                                       [KEY_FORM_INT32] = "2147483647",
                                       [KEY_FORM_INT64] = "9223372036854775807"};
    static const char *const least[] = {[KEY_FORM_INT16] = "32768",
                                        [KEY_FORM_INT32] = "2147483648",
                                        [KEY_FORM_INT64] = "9223372036854775808"};
    const char *s;
    size_t n;
    trim_spaces(key, &s, &n);
    bool negative = n > 0 && s[0] == '-';
    if (n > 0 && (s[0] == '-' || s[0] == '+')) {
        s++;
        n--;
    }
    if (n == 0)
        return refuse(err, field, "an integer in decimal digits");
    for (size_t i = 0; i < n; i++)
        if (!is_digit(s[i]))
            return refuse(err, field, "an integer in decimal digits");
    while (n > 1 && s[0] == '0') {
        s++;
        n--;
    }
    const char *limit = negative ? least[form] : most[form];
    size_t limit_len = strlen(limit);
    if (n > limit_len || (n == limit_len && memcmp(s, limit, n) > 0))
        return refuse(err, field, "an integer within the range of the key column");
    negative = negative && !(n == 1 && s[0] == '0');
    *out = malloc(n + 2);
    FG_ASSERT(*out != NULL);
    snprintf(*out, n + 2, "%s%.*s", negative ? "-" : "", (int)n, s);
    return 0;
}

/* --- numerics ------------------------------------------------------------------------------ */

/* The canonical text of a numeric NaN or infinity spelled s (n bytes), or NULL. */
static const char *numeric_special(const char *s, size_t n)
{
    static const struct {
        const char *spelling, *canonical;
    } specials[] = {
        {"nan", "NaN"},        {"infinity", "Infinity"}, {"+infinity", "Infinity"},
        {"inf", "Infinity"},   {"+inf", "Infinity"},     {"-infinity", "-Infinity"},
        {"-inf", "-Infinity"},
    };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (strlen(specials[i].spelling) == n && strncasecmp(s, specials[i].spelling, n) == 0)
            return specials[i].canonical;
    return NULL;
}

/* A finite numeric as numeric_in reads it: its digits, where its point
 * falls among them, and the decimals it keeps. */
struct decimal {
    bool negative;
    const char *int_digits; /* before the point, as written */
    size_t nint;
    const char *frac_digits; /* after the point, as written */
    size_t nfrac;
    long exponent; /* of the e part */
};

/* Reads [sign] digits [. digits] [e [sign] digits] (at least one digit in the
 * mantissa); -1 for anything else. */
static int decimal_read(const char *s, size_t n, struct decimal *d)
{
    size_t i = 0;
    memset(d, 0, sizeof *d);
    if (i < n && (s[i] == '+' || s[i] == '-'))
        d->negative = s[i++] == '-';
    d->int_digits = s + i;
    while (i < n && is_digit(s[i]))
        i++, d->nint++;
    if (i < n && s[i] == '.') {
        i++;
        d->frac_digits = s + i;
        while (i < n && is_digit(s[i]))
            i++, d->nfrac++;
    }
    if (d->nint + d->nfrac == 0)
        return -1;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool negative = i < n && s[i] == '-';
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i == n)
            return -1;
        for (; i < n && is_digit(s[i]); i++) {
            d->exponent = d->exponent * 10 + (s[i] - '0');
            if (d->exponent > NUMERIC_MAX_EXPONENT)
                return -1;
        }
        if (negative)
            d->exponent = -d->exponent;
    }
    return i == n ? 0 : -1;
}

/* Digit k of d's mantissa (integer digits, then decimals), '0' outside it. */
static char decimal_digit(const struct decimal *d, long k)
{
    if (k < 0 || (size_t)k >= d->nint + d->nfrac)
        return '0';
    return (size_t)k < d->nint ? d->int_digits[k] : d->frac_digits[(size_t)k - d->nint];
}

/* Whether scaled numeric(p,s) keeps the value of canonical text c exactly. */
static bool numeric_fits_scale(const char *c, int scale)
{
    const char *point = strchr(c, '.');
    size_t decimals = 0;
    if (point != NULL)
        for (size_t i = 1; point[i] != '\0'; i++)
            if (point[i] != '0')
                decimals = i;
    if (scale >= 0)
        return decimals <= (size_t)scale;
    if (decimals > 0)
        return false;
    size_t nint = point != NULL ? (size_t)(point - c) : strlen(c);
    if (nint == 1 && c[0] == '0')
        return true;
    for (int k = 1; k <= -scale; k++)
        if ((size_t)k > nint || c[nint - (size_t)k] != '0')
            return false;
    return true;
}

static int numeric_canonical(const struct key_shape *shape, const char *key, const char *field,
                             char **out, struct fg_error *err)
{
    const char *s;
    size_t n;
    trim_spaces(key, &s, &n);
    const char *special = numeric_special(s, n);
    if (special != NULL) {
        *out = copy(special, strlen(special));
        return 0;
    }
    struct decimal d;
    if (decimal_read(s, n, &d) != 0)
        return refuse(err, field, "a decimal number");
    /* numeric_in: the point moves by the exponent; the decimals kept are those
     * written less the exponent, none below zero */
    long point = (long)d.nint + d.exponent;
    long decimals = (long)d.nfrac - d.exponent;
    if (decimals < 0)
        decimals = 0;
    long first = 0; /* first integer digit that is not a leading zero */
    while (first < point - 1 && decimal_digit(&d, first) == '0')
        first++;
    long nint = point > 0 ? point - first : 1;
    if (nint + decimals + 3 > SEGMENT_MAX_LEN)
        return refuse(err, field, "a decimal number of at most 1024 characters");
    char *c = malloc((size_t)(nint + decimals + 3));
    FG_ASSERT(c != NULL);
    size_t len = 0;
    c[len++] = '-';
    bool zero = true;
    if (point <= 0)
        c[len++] = '0'; /* and decimals > 0: point <= 0 means exponent <= -nint */
    for (long k = point > 0 ? first : point; k < point + decimals; k++) {
        if (k == point)
            c[len++] = '.';
        char digit = decimal_digit(&d, k);
        zero = zero && digit == '0';
        c[len++] = digit;
    }
    c[len] = '\0';
    if (!d.negative || zero)
        memmove(c, c + 1, len--);
    if (shape->scaled && !numeric_fits_scale(c, shape->scale)) {
        free(c);
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field '%s' must be a number with at most %d decimals (the key column's "
                       "scale)",
                       field, shape->scale);
    }
    *out = c;
    return 0;
}

/* --- uuids and dates ------------------------------------------------------------------------ */

/* string_to_uuid: 16 bytes in hex, an optional hyphen after each group of two
 * bytes but the last, the whole optionally in braces; no spaces. */
static int uuid_canonical(const char *key, const char *field, char **out, struct fg_error *err)
{
    unsigned char bytes[16];
    const char *s = key;
    bool braces = *s == '{';
    if (braces)
        s++;
    for (int i = 0; i < 16; i++) {
        int hi = name_hex_value(s[0]), lo = hi < 0 ? -1 : name_hex_value(s[1]);
        if (lo < 0)
            return refuse(err, field, "a uuid");
        bytes[i] = (unsigned char)(hi << 4 | lo);
        s += 2;
        if (*s == '-' && i % 2 == 1 && i < 15)
            s++;
    }
    if (braces && *s++ != '}')
        return refuse(err, field, "a uuid");
    if (*s != '\0')
        return refuse(err, field, "a uuid");
    char *c = malloc(37);
    FG_ASSERT(c != NULL);
    size_t len = 0;
    for (int i = 0; i < 16; i++) {
        len += (size_t)snprintf(c + len, 37 - len, "%02x", bytes[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9)
            c[len++] = '-';
    }
    c[len] = '\0';
    *out = c;
    return 0;
}

static bool leap_year(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Reads 1 to max digits at *s into *v, moving *s past them. */
static bool read_number(const char **s, int max, int *v)
{
    int n = 0;
    *v = 0;
    while (n < max && is_digit(**s)) {
        *v = *v * 10 + (**s - '0');
        (*s)++;
        n++;
    }
    return n > 0 && !is_digit(**s);
}

/* A date as YYYY-M-D (year 1 to 9999, one or two digits of month and day,
 * spaces around it), or infinity / -infinity: spellings whose meaning does
 * not depend on DateStyle or on today's date. */
static int date_canonical(const char *key, const char *field, char **out, struct fg_error *err)
{
    const char *s;
    size_t n;
    trim_spaces(key, &s, &n);
    if ((n == 8 && strncasecmp(s, "infinity", 8) == 0) ||
        (n == 9 && strncasecmp(s, "-infinity", 9) == 0)) {
        *out = copy(n == 8 ? "infinity" : "-infinity", n);
        return 0;
    }
    char text[SEGMENT_MAX_LEN + 1];
    snprintf(text, sizeof text, "%.*s", (int)n, s);
    const char *p = text;
    int y, m, d;
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (n < 8 || text[4] != '-' || !read_number(&p, 4, &y) || p != text + 4 || *p++ != '-' ||
        !read_number(&p, 2, &m) || *p++ != '-' || !read_number(&p, 2, &d) || *p != '\0' || y < 1 ||
        m < 1 || m > 12 || d < 1 || d > days[m - 1] + (m == 2 && leap_year(y)))
        return refuse(err, field, "a date written YYYY-MM-DD");
    *out = malloc(11);
    FG_ASSERT(*out != NULL);
    snprintf(*out, 11, "%04d-%02d-%02d", y, m, d);
    return 0;
}

/* --- texts --------------------------------------------------------------------------------- */

/* The characters of the n bytes of UTF-8 at s (the bytes that do not continue one). */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    return chars;
}

/* The n bytes of key as the canonical text of a text or char(n) key, refused
 * past the column's length: Postgres would store such a text cut to its
 * length when the rest is spaces, the key of another row. */
static int text_canonical(const struct key_shape *shape, const char *key, size_t n,
                          const char *field, char **out, struct fg_error *err)
{
    if (shape->max_chars > 0 && utf8_chars(key, n) > (size_t)shape->max_chars)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "field '%s' must be at most %d characters, the length of its column", field,
                       shape->max_chars);
    *out = copy(key, n);
    return 0;
}

/* --- all forms ----------------------------------------------------------------------------- */

int key_canonical(const struct key_shape *shape, const char *key, const char *field, char **out,
                  struct fg_error *err)
{
    *out = NULL;
    switch (shape->form) {
    case KEY_FORM_INT16:
    case KEY_FORM_INT32:
    case KEY_FORM_INT64: return integer_canonical(shape->form, key, field, out, err);
    case KEY_FORM_NUMERIC: return numeric_canonical(shape, key, field, out, err);
    case KEY_FORM_UUID: return uuid_canonical(key, field, out, err);
    case KEY_FORM_DATE: return date_canonical(key, field, out, err);
    case KEY_FORM_BPCHAR: {
        size_t n = strlen(key);
        while (n > 0 && key[n - 1] == ' ')
            n--;
        if (n == 0)
            return refuse(err, field, "a key that is not only spaces");
        return text_canonical(shape, key, n, field, out, err);
    }
    case KEY_FORM_TEXT: return text_canonical(shape, key, strlen(key), field, out, err);
    case KEY_FORM_OTHER: *out = copy(key, strlen(key)); return 0;
    }
    FG_ASSERT(!"unknown key form");
    return -1;
}

void key_row_identity(const struct key_shape *shape, const char *canonical, char *out, size_t cap)
{
    size_t n = strlen(canonical);
    FG_ASSERT(n < cap);
    if (shape->form == KEY_FORM_NUMERIC && strchr(canonical, '.') != NULL) {
        while (canonical[n - 1] == '0')
            n--;
        if (canonical[n - 1] == '.')
            n--;
    }
    memcpy(out, canonical, n);
    out[n] = '\0';
}

bool key_identity_known(const struct key_shape *shape)
{
    return shape->form != KEY_FORM_OTHER;
}

bool key_prints_canonical(const struct key_shape *shape)
{
    switch (shape->form) {
    case KEY_FORM_INT16:
    case KEY_FORM_INT32:
    case KEY_FORM_INT64:
    case KEY_FORM_UUID:
    case KEY_FORM_DATE: return true;
    default: return false;
    }
}

/* Rank of a numeric's kind in Postgres's order: -Infinity, numbers, Infinity, NaN. */
static int numeric_rank(const char *c)
{
    if (strcmp(c, "-Infinity") == 0)
        return 0;
    if (strcmp(c, "Infinity") == 0)
        return 2;
    return strcmp(c, "NaN") == 0 ? 3 : 1;
}

/* Compares two canonical decimal numbers (no exponent, no leading zeros) by value. */
static int decimal_compare(const char *a, const char *b)
{
    bool neg_a = a[0] == '-', neg_b = b[0] == '-';
    if (neg_a != neg_b)
        return neg_a ? -1 : 1;
    a += neg_a;
    b += neg_b;
    size_t int_a = strcspn(a, "."), int_b = strcspn(b, ".");
    int magnitude = int_a != int_b ? (int_a < int_b ? -1 : 1) : strncmp(a, b, int_a);
    if (magnitude == 0) {
        const char *fa = a[int_a] == '.' ? a + int_a + 1 : "";
        const char *fb = b[int_b] == '.' ? b + int_b + 1 : "";
        while (magnitude == 0 && (*fa != '\0' || *fb != '\0')) {
            char da = *fa != '\0' ? *fa++ : '0', db = *fb != '\0' ? *fb++ : '0';
            magnitude = (da > db) - (da < db);
        }
    }
    return neg_a ? -magnitude : magnitude;
}

int key_compare(const struct key_shape *shape, const char *a, const char *b)
{
    switch (shape->form) {
    case KEY_FORM_INT16:
    case KEY_FORM_INT32:
    case KEY_FORM_INT64: return decimal_compare(a, b);
    case KEY_FORM_NUMERIC: {
        int ra = numeric_rank(a), rb = numeric_rank(b);
        if (ra != rb)
            return ra < rb ? -1 : 1;
        return ra == 1 ? decimal_compare(a, b) : 0;
    }
    case KEY_FORM_DATE: {
        int ra = strcmp(a, "-infinity") == 0 ? 0 : strcmp(a, "infinity") == 0 ? 2 : 1;
        int rb = strcmp(b, "-infinity") == 0 ? 0 : strcmp(b, "infinity") == 0 ? 2 : 1;
        if (ra != rb)
            return ra < rb ? -1 : 1;
        return strcmp(a, b);
    }
    default: return strcmp(a, b);
    }
}
