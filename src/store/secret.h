/*
 * secret.h - the token-signing secret: the configured one, or else one generated
 * once and kept in Postgres (fencegate.settings), so that restarts and replicas
 * share it and tokens held by clients stay valid.
 */
#ifndef FG_SECRET_H
#define FG_SECRET_H

#include <stddef.h>

#include "config.h"
#include "util/error.h"

/* Fills out (cap bytes) with the secret and *len with its length. */
int secret_load(const struct config *cfg, unsigned char *out, size_t cap, size_t *len,
                struct fg_error *err) FG_WUR;

#endif
