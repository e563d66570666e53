/* SPDX-License-Identifier: Apache-2.0 */
/*
 * binding.h - resources bound to locks (docs/api.md, "Resources bound to locks"): a
 * table or Redis prefix may name, by a template, the lock or semaphore that
 * guards each of its resources ("invoice:{key}"); a write whose token was
 * issued for any other lease is refused. Pure: templates and token claims in,
 * a verdict out.
 */
#ifndef FG_BINDING_H
#define FG_BINDING_H

#include <stdbool.h>

#include "auth/token.h"
#include "config.h"
#include "lease/lease_kind.h"
#include "util/error.h"

/* Checks a template of the configuration: name bytes (A-Z a-z 0-9 . _ : / -)
 * around any number of "{key}"; anything else fails with FG_ERR_CONFIG. */
int binding_template_check(const char *template, struct fg_error *err) FG_WUR;

/* Writes the name template gives for key into out (cap bytes); -1 if it does
 * not fit. */
int binding_expand(const char *template, const char *key, char *out, size_t cap) FG_WUR;

/*
 * 0 if guard binds nothing or claims (a verified token) are of the lease it
 * names for key; otherwise -1 with FG_ERR_INVALID_FENCE_TOKEN ("issued for
 * another lock") naming the lease that guards resource.
 */
int binding_check(const struct resource_guard *guard, const char *key,
                  const struct token_claims *claims, const char *resource,
                  struct fg_error *err) FG_WUR;

#endif
