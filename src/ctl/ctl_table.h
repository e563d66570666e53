/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_table.h - readable tables for fencectl: columns padded to their widest
 * cell, over-long cells cut with "...", and the audit of rejected writes as
 * such a table, and the listing of locks and semaphores. Pure: returns text,
 * prints nothing.
 */
#ifndef FG_CTL_TABLE_H
#define FG_CTL_TABLE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_CELL_MAX 40 /* display width at which a cell is cut */

/*
 * Renders a table: headers (ncols of them), then nrows rows of cells in row-major
 * order (a NULL cell shows as "-"). Columns are separated by two spaces and no
 * line has trailing blanks. Returns malloc'd text owned by the caller.
 */
char *ctl_table_render(const char *const *headers, size_t ncols, const char *const *cells,
                       size_t nrows);

/*
 * A copy of text (UTF-8 from the gateway) safe to print on a terminal: control
 * characters (C0, DEL, C1) become \xNN, bidirectional overrides and isolates
 * \u{XXXX}, and a backslash \\, so that nothing a client stored (an owner, a
 * resource) can move the cursor, recolour or reorder what an operator reads.
 * malloc'd, owned by the caller; NULL stays NULL.
 */
char *ctl_escape(const char *text);

/* Writes epoch milliseconds as "YYYY-MM-DD HH:MM:SS.mmm" (UTC) into out. */
void ctl_format_time(int64_t ms, char *out, size_t cap);

/* The items array of GET /v1/audit/rejections (borrowed) as a table; malloc'd. */
char *ctl_audit_table(const json_t *items);

/*
 * The items of GET /v1/locks and GET /v1/semaphores (borrowed arrays, either
 * NULL for none) as one table, locks first: kind, name, held (a semaphore's
 * holders/limit), fence(s), owner(s), time left (a semaphore's soonest) and
 * waiters. malloc'd.
 */
char *ctl_lease_table(const json_t *locks, const json_t *semaphores);

#endif
