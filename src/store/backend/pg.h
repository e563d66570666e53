/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pg.h - the Postgres module: the only code that speaks libpq. A fixed-size pool
 * of connections, made lazily and remade after a failure; statements run with a
 * statement_timeout and, when named, as prepared statements cached per
 * connection. Results arrive as jansson arrays of row objects (column name ->
 * text or null), so callers never see a libpq type.
 */
#ifndef FG_PG_H
#define FG_PG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "util/error.h"

struct pg_conn;

/* Sets up the pool (no connection yet). cfg is borrowed for the process's life. */
int pg_init(const struct config *cfg, struct fg_error *err) FG_WUR;

/* Closes every pooled connection. */
void pg_shutdown(void);

/* Takes a connection from the pool, waiting up to the request deadline and
 * connecting if needed. NULL with FG_ERR_BACKEND_UNAVAILABLE on failure. */
struct pg_conn *pg_acquire(struct fg_error *err);

/* The pool now: its size, the connections taken and the callers waiting for one. */
void pg_pool_stats(long *size, long *in_use, long *waiting);

/* Returns conn to the pool; a connection left in a failed state is reset. */
void pg_release(struct pg_conn *conn);

/*
 * Runs sql with nparams text parameters (NULL entries are SQL NULL) on conn. With
 * stmt_name not NULL the statement is prepared once per connection under that
 * name. On success stores the rows (new reference; an empty array for commands)
 * in *rows when rows is not NULL. A failure's code comes from its SQLSTATE
 * (sqlstate_code, store/backend/sqlstate.h: 23505 -> FG_ERR_CONFLICT, 22xxx and 23xxx
 * -> FG_ERR_INVALID_FIELD, connection loss and timeouts ->
 * FG_ERR_BACKEND_UNAVAILABLE, anything else FG_ERR_INTERNAL). The SQLSTATE of
 * the last failure is kept for pg_last_sqlstate.
 */
int pg_exec(struct pg_conn *conn, const char *stmt_name, const char *sql, int nparams,
            const char *const *params, json_t **rows, struct fg_error *err) FG_WUR;

/* One statement, run by pg_exec_stmt or in a group or pipeline. */
struct pg_group_stmt {
    const char *name;          /* prepared once per connection under this name, or NULL */
    const char *sql;           /* its text */
    int nparams;               /* entries in params */
    const char *const *params; /* text parameters, NULL entries for SQL NULL */
    json_t *rows;              /* its rows (new reference), once run (committed, in a group) */
    long count;                /* then the rows its command touched (-1: its tag has no count) */
};

/* pg_exec of stmt, keeping its rows and count in it. */
int pg_exec_stmt(struct pg_conn *conn, struct pg_group_stmt *stmt, struct fg_error *err) FG_WUR;

/* How pg_exec_group ended. */
enum pg_group_outcome {
    PG_GROUP_COMMITTED,    /* every statement ran and the transaction committed */
    PG_GROUP_STMT_FAILED,  /* statement *failed failed: nothing was committed */
    PG_GROUP_NOT_COMMITTED /* the COMMIT was refused: nothing was committed */
};

/*
 * Runs stmts[0..n) in one transaction on conn, sent as one pipeline (BEGIN,
 * each statement, COMMIT: one round trip once the statements are prepared).
 * 0 with *outcome set when Postgres answered (PG_GROUP_COMMITTED: each
 * statement's rows and count in it); on PG_GROUP_STMT_FAILED, err
 * tells why statement *failed failed, and conn is out of the failed
 * transaction again; the SQLSTATE of the failure (of the statement, or of the
 * refused COMMIT) is kept for pg_last_sqlstate. -1 with err when conn failed (lost, no answer in
 * time): it is dropped, and whether the COMMIT took effect is unknown, as for
 * a lost pg_exec.
 */
int pg_exec_group(struct pg_conn *conn, struct pg_group_stmt *stmts, size_t n,
                  enum pg_group_outcome *outcome, size_t *failed, struct fg_error *err) FG_WUR;

/*
 * Runs BEGIN and stmt on conn as one pipeline (one round trip once stmt is
 * prepared) and leaves the transaction open: the caller ends it with a
 * pg_exec of COMMIT, or pg_rollback. 0 with stmt's rows and count in it. -1
 * with err as for pg_exec_stmt: stmt failed (the transaction is rolled back
 * and the failure's SQLSTATE kept for pg_last_sqlstate), or conn failed and
 * was dropped.
 */
int pg_exec_begun(struct pg_conn *conn, struct pg_group_stmt *stmt, struct fg_error *err) FG_WUR;

/* Rolls back the transaction open on conn, if any; a connection that does
 * not take the ROLLBACK, whose prepared statements went stale or whose last
 * failure said the server is read-only (a standby), is dropped.
 * What pg_last_sqlstate and pg_last_plans_stale said stays. */
void pg_rollback(struct pg_conn *conn);

/*
 * Runs stmts[0..n) on conn as one pipeline followed by a sync: one round trip
 * once the statements are prepared, inside the transaction the caller opened
 * (the first statement may be its BEGIN). 0 with every statement's rows and
 * count in stmts[i]. -1 with err: statement *failed failed (its SQLSTATE kept for
 * pg_last_sqlstate; the statements after it did not run and the transaction,
 * if any, is aborted), or conn failed and was dropped. No rows are kept then.
 */
int pg_exec_pipeline(struct pg_conn *conn, struct pg_group_stmt *stmts, size_t n, size_t *failed,
                     struct fg_error *err) FG_WUR;

/* SQLSTATE of the last failed pg_exec on conn ("" if none). */
const char *pg_last_sqlstate(const struct pg_conn *conn);

/* True if the last failure on conn found its prepared statements stale
 * (store/backend/sqlstate.h, sqlstate_plans_stale): conn was dropped, and the
 * statements, run again, are prepared anew. */
bool pg_last_plans_stale(const struct pg_conn *conn);

/* Convenience: acquire, pg_exec, release. */
int pg_query(const char *stmt_name, const char *sql, int nparams, const char *const *params,
             json_t **rows, struct fg_error *err) FG_WUR;

/* Applies the pending migrations of sql/ under an advisory lock; refuses a
 * schema newer than this binary knows. */
int pg_migrate(struct fg_error *err) FG_WUR;

/*
 * Reserves the next block of fences: the reservation rises to the greatest of
 * itself, issued (the last fence Redis issued; -1 if Redis lost it, and then
 * the reservation is first raised by skip) and the highest stored fence, plus
 * block. *floor receives the start of the new block, *limit its end. With a
 * slot (>= 0: the sequence of a Redis Cluster slot), the same statement records
 * the slot in fencegate.fence_slots with owner (the run_id of the Redis
 * process the sequence is recovered on; borrowed), and *first tells whether it
 * was not there yet (its first recovery ever); else *first is false and owner
 * is not read.
 */
int pg_reserve_fences(int64_t issued, int64_t block, int64_t skip, int slot, const char *owner,
                      bool *first, int64_t *floor, int64_t *limit, struct fg_error *err) FG_WUR;

/*
 * Makes the Redis process to (a run_id) the owner of the fence sequence of
 * Redis Cluster slot slot in fencegate.fence_slots, if its owner is from (the
 * process the slot's keys name as the last to recover it) or to already:
 * *adopted tells whether it did. Another owner means the slot was recovered
 * elsewhere since those keys were written (the new owner holds older data).
 */
int pg_adopt_slot(int slot, const char *from, const char *to, bool *adopted,
                  struct fg_error *err) FG_WUR;

/* Reads the end of the fences reserved so far (by any gateway) into *reserved. */
int pg_reserved_fences(int64_t *reserved, struct fg_error *err) FG_WUR;

/* SELECT 1 on a pooled connection. */
int pg_ping(struct fg_error *err) FG_WUR;

#endif
