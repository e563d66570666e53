/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_kind.h - the kinds of lease: a lock (one holder) or a semaphore (up
 * to its limit of holders). Their values are the letters a fencing token
 * carries (auth/token.h), so a token's claims compare with them as they are.
 */
#ifndef FG_LEASE_KIND_H
#define FG_LEASE_KIND_H

#include "auth/token.h"

enum lease_kind {
    LEASE_KIND_LOCK = TOKEN_KIND_LOCK,
    LEASE_KIND_SEMAPHORE = TOKEN_KIND_SEMAPHORE,
};

#endif
