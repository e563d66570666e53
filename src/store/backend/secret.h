/* SPDX-License-Identifier: Apache-2.0 */
/*
 * secret.h - the token-signing keys: the configured ones (secret, secrets or
 * secret_file), or else one secret generated once and kept in Postgres
 * (fencegate.settings), so that restarts and replicas share it and tokens held
 * by clients stay valid. The ring in force is published whole (replaced on
 * SIGHUP) and read by every handler that signs or verifies a token.
 */
#ifndef FG_SECRET_H
#define FG_SECRET_H

#include "auth/token.h"
#include "config.h"
#include "util/error.h"

/* Fills *ring with cfg's keys, or with the one kept in Postgres (id "default"). */
int secret_load(const struct config *cfg, struct token_keyring *ring, struct fg_error *err) FG_WUR;

/* Puts ring (owned from now on, malloc'ed) in force. */
void secret_publish(struct token_keyring *ring);

/* The signing keys in force (borrowed; valid until exit). */
const struct token_keyring *secret_current(void);

/* Frees every ring ever published. No request may be running. */
void secret_shutdown(void);

#endif
