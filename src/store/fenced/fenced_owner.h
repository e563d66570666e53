/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_owner.h - the rule of a fenced write's Fence-Owner header, the same
 * for both stores. Pure: no I/O.
 */
#ifndef FG_FENCED_OWNER_H
#define FG_FENCED_OWNER_H

#include "util/error.h"

/* Checks a Fence-Owner header value (NULL = absent): 1..OWNER_NAME_MAX_LEN
 * printable bytes, else FG_ERR_INVALID_FIELD naming the header. */
int fenced_owner_check(const char *owner, struct fg_error *err) FG_WUR;

#endif
