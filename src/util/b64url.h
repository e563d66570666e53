/* SPDX-License-Identifier: Apache-2.0 */
/*
 * b64url.h - unpadded base64url (RFC 4648 section 5), one spelling per byte
 * string: the text of tokens and listing cursors. Pure.
 */
#ifndef FG_B64URL_H
#define FG_B64URL_H

#include <stddef.h>

/* Characters b64url_encode writes for len bytes. */
#define B64URL_LEN(len) (((len)*4 + 2) / 3)

/* Writes the unpadded base64url of len bytes of in into out (at least
 * B64URL_LEN(len) + 1 bytes, NUL-terminated); returns the number of characters. */
size_t b64url_encode(const unsigned char *in, size_t len, char *out);

/* The 6-bit value of a base64url character, or -1. */
int b64url_value(char c);

/* Decodes len characters of unpadded base64url into out (cap bytes). Returns
 * the byte count, or -1 on a bad character, a bad length, trailing bits that
 * are not zero (a second spelling of the same bytes) or a short buffer. */
long b64url_decode(const char *in, size_t len, unsigned char *out, size_t cap);

#endif
