/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names.c - strict percent-decoding of path segments and the character rules for
 * names. The decoder never rewrites or truncates: an escape that is not two hex
 * digits, or any NUL byte, is refused rather than passed on, because a name that
 * changes meaning between the client and Redis or Postgres is a security bug.
 */
#include "util/names.h"

#include <string.h>

int name_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int name_decode(const char *raw, size_t raw_len, char *out, size_t out_cap, size_t *out_len,
                struct fg_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < raw_len; i++) {
        int byte = (unsigned char)raw[i];
        if (byte == '%') {
            if (raw_len - i < 3)
                return fg_fail(err, FG_ERR_INVALID_NAME, "truncated percent-escape in path");
            int h = name_hex_value(raw[i + 1]), l = name_hex_value(raw[i + 2]);
            if (h < 0 || l < 0)
                return fg_fail(err, FG_ERR_INVALID_NAME, "malformed percent-escape in path");
            byte = h * 16 + l;
            i += 2;
        }
        if (byte == 0)
            return fg_fail(err, FG_ERR_INVALID_NAME, "NUL byte in path");
        if (n + 1 >= out_cap)
            return fg_fail(err, FG_ERR_INVALID_NAME, "path segment longer than %zu bytes",
                           out_cap - 1);
        out[n++] = (char)byte;
    }
    out[n] = '\0';
    *out_len = n;
    return 0;
}

bool name_is_valid_lock(const char *name, size_t len)
{
    if (len == 0 || len > NAME_MAX_LEN)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  strchr("._:/-", c) != NULL;
        if (!ok || c == '\0')
            return false;
    }
    return true;
}

size_t utf8_sequence_len(const unsigned char *s, size_t left)
{
    size_t need;
    unsigned int cp;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xE0) == 0xC0) {
        need = 2;
        cp = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        need = 3;
        cp = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        need = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (need > left)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const unsigned int min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[need] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need;
}

bool name_is_valid_key(const char *key, size_t len)
{
    if (len == 0 || len > SEGMENT_MAX_LEN)
        return false;
    const unsigned char *s = (const unsigned char *)key;
    for (size_t i = 0; i < len;) {
        if (s[i] < 0x20 || s[i] == 0x7F)
            return false;
        size_t step = utf8_sequence_len(s + i, len - i);
        if (step == 0 || (step == 2 && s[i] == 0xC2 && s[i + 1] < 0xA0)) /* C1: U+0080..U+009F */
            return false;
        i += step;
    }
    return true;
}

bool name_is_valid_owner(const char *owner, size_t len)
{
    return len <= OWNER_NAME_MAX_LEN && name_is_valid_key(owner, len);
}
