/* SPDX-License-Identifier: Apache-2.0 */
/*
 * traceparent.h - reading the W3C Trace Context header `traceparent`
 * (https://www.w3.org/TR/trace-context/): the trace id a request belongs to,
 * which the gateway puts on its request log line, on the audit record of a
 * refused write and on the Postgres session that runs the request's statements,
 * so that a refused write can be followed from the caller's trace into the
 * database log. Pure but for the thread's current trace id: no I/O.
 */
#ifndef FG_TRACEPARENT_H
#define FG_TRACEPARENT_H

#include <stdbool.h>

#define TRACE_ID_LEN 32 /* lowercase hex digits of a trace id */

/*
 * Reads the trace id of header (the value of traceparent, or NULL) into out
 * (TRACE_ID_LEN + 1 bytes, NUL-terminated). A header is taken as W3C says a
 * receiver must: version 2 hex digits other than "ff"; for version 00 exactly
 * "00-<32 hex>-<16 hex>-<2 hex>", for a later version at least that, followed
 * by nothing or by '-'; lowercase hex only; neither the trace id nor the parent
 * id all zeros. Returns false (out set to "") for a missing or invalid header,
 * which the gateway then ignores, as the specification asks.
 */
bool traceparent_trace_id(const char *header, char *out);

/* Sets the trace id of the request this thread works for now ("" or NULL:
 * none): the HTTP server sets it before each run of a handler, the Postgres
 * module names its session after it. trace_id is copied. */
void trace_current_set(const char *trace_id);

/* The trace id this thread works for now, "" for none (thread-local). */
const char *trace_current(void);

#endif
