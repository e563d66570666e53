/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_refusal.h - the audit record of a refused fenced write, for either
 * store: the one place a writer and its refused result (fenced_result.h)
 * become a row of fencegate.rejections (store/audit/audit.h). The refusals a write statement
 * or script audits itself write the same columns and reasons (fenced_sql.c,
 * lua/lib_rw.lua).
 */
#ifndef FG_FENCED_REFUSAL_H
#define FG_FENCED_REFUSAL_H

#include "store/fenced/fenced_result.h"
#include "store/fenced/fenced_writer.h"
#include "util/error.h"

struct pg_conn;

/*
 * Inserts the audit row of the refused write of who whose result is refused
 * (STALE, REVOKED or EXPIRED) and whose HTTP method is method ("POST" for a
 * batch). reason is fenced_outcome_reason of the outcome; the current fence is
 * refused->fence; resources are those of refused->stale, else just its
 * resource. conn: a connection the caller holds (outside a transaction, so
 * that the row commits on its own), or NULL for one of the pool.
 */
int fenced_refusal_audit(struct pg_conn *conn, const struct fenced_writer *who,
                         const struct fenced_result *refused, const char *method,
                         struct fg_error *err) FG_WUR;

#endif
