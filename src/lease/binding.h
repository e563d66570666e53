/* SPDX-License-Identifier: Apache-2.0 */
/*
 * binding.h - resources bound to locks (API.md, "Resources bound to locks"): a
 * table or Redis prefix may name, by a template, the lock or semaphore that
 * guards each of its resources ("invoice:{key}"); a write whose token was
 * issued for any other lease is refused. Pure: templates and token claims in,
 * a verdict out.
 */
#ifndef FG_BINDING_H
#define FG_BINDING_H

#include <stdbool.h>

#include "auth/token.h"
#include "util/error.h"

/* The lease that guards each resource of a table or prefix. */
struct resource_guard {
    char *template;  /* "invoice:{key}" ({key}: the row's key, or the whole Redis key);
                        NULL when the resources are not bound (owned) */
    bool semaphore;  /* the template names a semaphore, not a lock */
    bool live_lease; /* require_live_lease: a write is applied only while its token's
                        lease holds (whether or not a template binds the resources) */
};

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
