/* SPDX-License-Identifier: Apache-2.0 */
/*
 * b64url.c - unpadded base64url, written and read strictly: a decoder that
 * took non-zero trailing bits would give one token two spellings.
 */
#include "util/b64url.h"

#include <stdint.h>

static const char b64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t b64url_encode(const unsigned char *in, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = b64url_alphabet[(v >> 18) & 63];
        out[o++] = b64url_alphabet[(v >> 12) & 63];
        if (i + 1 < len)
            out[o++] = b64url_alphabet[(v >> 6) & 63];
        if (i + 2 < len)
            out[o++] = b64url_alphabet[v & 63];
    }
    out[o] = '\0';
    return o;
}

/* Computed, not looked up in the alphabet: every character of every token
 * presented goes through here. */
int b64url_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '-' ? 62 : c == '_' ? 63 : -1;
}

long b64url_decode(const char *in, size_t len, unsigned char *out, size_t cap)
{
    if (len % 4 == 1)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value(in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (unsigned char)((acc >> bits) & 0xFF);
        }
    }
    if ((acc & ((1u << bits) - 1)) != 0)
        return -1; /* non-canonical trailing bits: one token, one spelling */
    return (long)o;
}
