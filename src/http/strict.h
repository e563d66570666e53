/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strict.h - the header rules of "Strict requests" (docs/api.md) that need no
 * I/O: which Content-Type a body may have, which Host a request may name,
 * which X-Request-Id a client may choose, and how the body length is framed.
 * Pure functions over strings; the server applies them.
 */
#ifndef FG_STRICT_H
#define FG_STRICT_H

#include <stdbool.h>
#include <stddef.h>

#include "fglimits.h"

/* True if value is "application/json", any case, optionally followed by
 * parameters (";charset=utf-8"). NULL is false. */
bool strict_content_type_is_json(const char *value);

/* True if host (the Host header, NULL when absent) is one of allowed[0..n),
 * compared without regard to case, or if allowed holds "*". A request without
 * Host (HTTP/1.0) passes: no browser sends one. */
bool strict_host_allowed(const char *host, char *const *allowed, size_t n);

/* True if id may be echoed as the request id: 1 to X_REQUEST_ID_MAX_LEN bytes
 * of A-Z a-z 0-9 and - _ . : / + = @. */
bool strict_request_id_valid(const char *id);

/* True if a request with content_lengths Content-Length headers and
 * transfer_encodings Transfer-Encoding headers is framed unambiguously: at
 * most one of each, and never a Content-Length beside a Transfer-Encoding. */
bool strict_framing_ok(int content_lengths, int transfer_encodings);

/* True if a request names its Host at most once (hosts: Host headers): with
 * two, a proxy and the gateway may each read another. */
bool strict_host_single(int hosts);

#endif
