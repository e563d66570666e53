/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names.h - decoding and validation of the names that arrive in URL paths: lock
 * and semaphore names, table names, row keys and Redis keys. Pure functions over
 * bytes; no allocation beyond what the caller passes in.
 */
#ifndef FG_NAMES_H
#define FG_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "fglimits.h"
#include "util/error.h"

/*
 * Percent-decodes one path segment of raw_len bytes into out (capacity out_cap,
 * always NUL-terminated on success). Refuses a malformed escape, an encoded or
 * literal NUL byte, and a result that does not fit. On success stores the decoded
 * length in *out_len and returns 0; otherwise returns -1 with FG_ERR_INVALID_NAME.
 */
int name_decode(const char *raw, size_t raw_len, char *out, size_t out_cap, size_t *out_len,
                struct fg_error *err) FG_WUR;

/* The value of hex digit c (0-9, a-f, A-F), or -1 if c is none: for
 * percent-escapes and for the hex digests of the configuration. */
int name_hex_value(char c);

/* True iff name (len bytes) is a valid lock or semaphore name: 1..NAME_MAX_LEN
 * bytes of A-Z a-z 0-9 . _ : / - */
bool name_is_valid_lock(const char *name, size_t len);

/* True iff key (len bytes) is a usable row or Redis key: 1..SEGMENT_MAX_LEN bytes,
 * valid UTF-8, and no control characters (C0, DEL, C1). */
bool name_is_valid_key(const char *key, size_t len);

/* Length of the UTF-8 sequence starting at s (at most left bytes), 0 if it is
 * not one (overlong, a surrogate, beyond U+10FFFF, cut short). */
size_t utf8_sequence_len(const unsigned char *s, size_t left);

/* True iff owner (len bytes) may name a holder or writer (acquire's "owner",
 * the Fence-Owner header): 1..OWNER_NAME_MAX_LEN bytes of valid UTF-8 without
 * control characters (C0, DEL or C1), so that no log, audit record or terminal
 * that shows it can be fooled or broken by it. */
bool name_is_valid_owner(const char *owner, size_t len);

#endif
