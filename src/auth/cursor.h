/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cursor.h - listing cursors sealed for the client. A listing continues after
 * a name, which may be one the caller's key may not see; next_cursor carries
 * it encrypted and authenticated (AES-256-GCM under a key derived from a
 * token signing key, the name padded to one length), so a page names nothing
 * outside the caller's scope, and an altered or forged cursor is refused. A
 * cursor is bound to the listing and the caller it was made for ("bound",
 * authenticated along): another caller's cursor, which may sit at a name this
 * one may not see, is refused as a forged one.
 */
#ifndef FG_CURSOR_H
#define FG_CURSOR_H

#include "auth/token.h"
#include "fglimits.h"
#include "util/b64url.h"
#include "util/error.h"

#define CURSOR_NONCE 12 /* bytes of a cursor's GCM nonce */
#define CURSOR_TAG   16 /* bytes of its GCM tag */
/* Characters of a cursor's text, plus its NUL. */
#define CURSOR_TEXT_MAX (B64URL_LEN(CURSOR_NONCE + NAME_MAX_LEN + 1 + CURSOR_TAG) + 1)

/* Writes the cursor of name (at most NAME_MAX_LEN bytes) for bound (the
 * listing and caller it serves, any text) sealed with ring's signing key into
 * out. -1 with FG_ERR_INTERNAL if randomness fails. */
int cursor_seal(const char *name, const char *bound, const struct token_keyring *ring,
                char out[CURSOR_TEXT_MAX], struct fg_error *err) FG_WUR;

/* Opens text, a cursor sealed for bound with any key of ring, into name.
 * Anything else (altered, forged, sealed for another bound or with a key the
 * ring no longer holds) fails with FG_ERR_INVALID_FIELD naming the cursor
 * argument. */
int cursor_open(const char *text, const char *bound, const struct token_keyring *ring,
                char name[NAME_MAX_LEN + 1], struct fg_error *err) FG_WUR;

#endif
