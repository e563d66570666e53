/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redact.h - texts that may carry a password, made fit to print: no log line,
 * error answer or printed configuration shows the password of redis_url or
 * pg_dsn. Pure: strings in, strings out.
 */
#ifndef FG_REDACT_H
#define FG_REDACT_H

#include <stddef.h>

/*
 * Writes into out (cap bytes, cut short if need be) url with its password
 * replaced by "***": "redis://user:***@host", "postgresql://u:***@h/db",
 * "password=***" in a query ("?password=...") or a libpq key/value string
 * ("host=h password='a b'"). A userinfo without ':' is the password of a Redis
 * URL (masked whole) and the user of any other.
 */
void redact_url(const char *url, char *out, size_t cap);

/* Replaces every occurrence of secret (when not NULL or empty) in text, a
 * NUL-terminated buffer, with "***" (never longer than what it replaces:
 * a secret of fewer than 3 bytes is replaced by as many '*'). */
void redact_scrub(char *text, const char *secret);

#endif
