/* SPDX-License-Identifier: Apache-2.0 */
/*
 * integer.c - reads a decimal integer within bounds (integer.h). It decides
 * which texts are integers; the callers word the refusal.
 */
#include "util/integer.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

enum integer_parse integer_parse(const char *text, long long min, long long max, long long *out)
{
    bool negative = text[0] == '-';
    const char *p = negative ? text + 1 : text;
    if (*p == '\0')
        return INTEGER_NOT_DECIMAL;
    /* Accumulated as a negative number, whose range holds LLONG_MIN. */
    long long v = 0;
    bool overflow = false;
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return INTEGER_NOT_DECIMAL;
        int digit = *p - '0';
        if (v < (LLONG_MIN + digit) / 10)
            overflow = true;
        else
            v = v * 10 - digit;
    }
    if (overflow || (!negative && v == LLONG_MIN))
        return INTEGER_OUT_OF_RANGE;
    if (!negative)
        v = -v;
    if (v < min || v > max)
        return INTEGER_OUT_OF_RANGE;
    *out = v;
    return INTEGER_OK;
}

enum integer_parse integer_parse_exact(const char *text, long long min, long long max,
                                       long long *out)
{
    const char *digits = text + (text[0] == '-');
    if (digits[0] == '0' && (digits[1] != '\0' || digits != text))
        return INTEGER_NOT_DECIMAL;
    return integer_parse(text, min, max, out);
}

long long integer_read(const char *text, long long absent)
{
    long long v = absent;
    if (text == NULL || integer_parse(text, LLONG_MIN, LLONG_MAX, &v) != INTEGER_OK)
        return absent;
    return v;
}
