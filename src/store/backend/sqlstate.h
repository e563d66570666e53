/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sqlstate.h - what the gateway makes of a Postgres SQLSTATE: the error code a
 * failure is answered with, and the classes the stores act on (a data error
 * worth naming the bad value for, a value too large, a session the server
 * ended, a server that is read-only). Pure: pg.c reads the SQLSTATE.
 */
#ifndef FG_SQLSTATE_H
#define FG_SQLSTATE_H

#include <stdbool.h>

#include "util/error.h"

/* The code a failure with SQLSTATE state is answered with: lost connections,
 * shutdowns, lack of resources, deadlocks, serialization failures and a
 * read-only server are FG_ERR_BACKEND_UNAVAILABLE (as is any state when
 * connection_lost), and so are a column, table or unique index that is no
 * longer there, a column whose type no longer takes the gateway's values and
 * a key whose type no longer compares with them, a written column the table
 * now makes itself and a key's unique index made DEFERRABLE (42703, 42P01,
 * 42P10, 428C9, 42804, 42883, 55000 from ExecCheckIndexConstraints: a table
 * altered under the gateway since it read the catalogue at start-up, which no
 * request of a client can cause);
 * a unique violation FG_ERR_CONFLICT, other data and integrity errors
 * FG_ERR_INVALID_FIELD, the rest FG_ERR_INTERNAL. source_function is the
 * error's untranslated source field (NULL when absent), which tells apart the
 * causes of one state. */
enum fg_code sqlstate_code(const char *state, const char *source_function, bool connection_lost);

/* 25006: the server is no writable primary (a demoted primary or a standby). */
bool sqlstate_read_only(const char *state);

/* Class 22, data exception: a value does not convert to its column's type. */
bool sqlstate_data_error(const char *state);

/* Class 54, program limit exceeded: e.g. a value too large to index. */
bool sqlstate_too_large(const char *state);

/* 40P01: the transaction was chosen as a deadlock's victim and rolled back. */
bool sqlstate_deadlock(const char *state);

/* FGK01: a write that created a row met a higher fence kept for it since
 * (fencegate.fence_kept_check, sql/080_fence_kept_check.sql). */
bool sqlstate_fence_kept_above(const char *state);

/* FGC01: a default-mode PATCH or DELETE that claimed its fence wrote nothing
 * (its row deleted since its snapshot), and failed, which undid the claim
 * (fencegate.fence_claim_used, sql/100_fence_claim_used.sql). */
bool sqlstate_claim_unused(const char *state);

/* 57P01..57P03: the server ended the session before running the statement
 * (shutdown, crash recovery), so running it again is safe. */
bool sqlstate_session_ended(const char *state);

/* What Postgres answers a prepared statement whose result changed type under
 * it ("cached plan must not change result type", after a listed column's type
 * was altered): 0A000, feature not supported, raised by its plan cache's
 * RevalidateCachedQuery (source_function, the error's untranslated source
 * field; NULL when absent), where other causes of 0A000 are the data's. The
 * session is dropped, its prepared statements with it, and running the
 * statement again on a new one is safe: it wrote nothing. */
bool sqlstate_plans_stale(const char *state, const char *source_function);

#endif
