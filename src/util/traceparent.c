/* SPDX-License-Identifier: Apache-2.0 */
/*
 * traceparent.c - the trace id of a W3C traceparent header, checked as the
 * Trace Context specification tells a receiver to, and the trace id the
 * calling thread works for now. It must not generate ids or know where the id
 * goes (log, audit, Postgres): callers do.
 */
#include "util/traceparent.h"

#include <string.h>

#define VERSION_LEN 2
#define PARENT_LEN  16
#define FLAGS_LEN   2
/* "00-" trace "-" parent "-" flags */
#define HEADER_LEN (VERSION_LEN + 1 + TRACE_ID_LEN + 1 + PARENT_LEN + 1 + FLAGS_LEN)

/* True if s[0..n) are lowercase hex digits, not all of them '0' when nonzero. */
static bool is_hex(const char *s, size_t n, bool nonzero)
{
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
        any = any || s[i] != '0';
    }
    return any || !nonzero;
}

bool traceparent_trace_id(const char *header, char *out)
{
    out[0] = '\0';
    if (header == NULL || strlen(header) < HEADER_LEN)
        return false;
    const char *trace = header + VERSION_LEN + 1, *parent = trace + TRACE_ID_LEN + 1;
    const char *flags = parent + PARENT_LEN + 1, *rest = flags + FLAGS_LEN;
    if (!is_hex(header, VERSION_LEN, false) || strncmp(header, "ff", VERSION_LEN) == 0 ||
        header[VERSION_LEN] != '-' || !is_hex(trace, TRACE_ID_LEN, true) ||
        trace[TRACE_ID_LEN] != '-' || !is_hex(parent, PARENT_LEN, true) ||
        parent[PARENT_LEN] != '-' || !is_hex(flags, FLAGS_LEN, false))
        return false;
    bool version_00 = strncmp(header, "00", VERSION_LEN) == 0;
    if ((version_00 && *rest != '\0') || (!version_00 && *rest != '\0' && *rest != '-'))
        return false;
    memcpy(out, trace, TRACE_ID_LEN);
    out[TRACE_ID_LEN] = '\0';
    return true;
}

static _Thread_local char current[TRACE_ID_LEN + 1];

void trace_current_set(const char *trace_id)
{
    size_t n = trace_id != NULL ? strnlen(trace_id, TRACE_ID_LEN) : 0;
    memcpy(current, trace_id != NULL ? trace_id : "", n);
    current[n] = '\0';
}

const char *trace_current(void)
{
    return current;
}
