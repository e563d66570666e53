/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fnv.h - FNV-1a, the 64-bit hash of the gateway's tables, tags and digests:
 * fast and well spread for texts the gateway picks or checks, no defence
 * against collisions chosen on purpose.
 */
#ifndef FG_FNV_H
#define FG_FNV_H

#include <stdint.h>

/* The hash of no bytes, where a hash starts. */
#define FNV1A_START UINT64_C(14695981039346656037)

/* h with one byte more. */
static inline uint64_t fnv1a_byte(uint64_t h, unsigned char c)
{
    return (h ^ c) * UINT64_C(1099511628211);
}

/* h with the bytes of text (up to its NUL) more. */
static inline uint64_t fnv1a_text(uint64_t h, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++)
        h = fnv1a_byte(h, *p);
    return h;
}

#endif
