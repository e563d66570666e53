/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_http.h - one HTTP/1.1 exchange of fencectl with the gateway over a TCP
 * socket, with TLS for https:// URLs: connect, send, read until the server
 * closes, parse. No keep-alive, no redirects.
 */
#ifndef FG_CTL_HTTP_H
#define FG_CTL_HTTP_H

#include <jansson.h>

#include "ctl/ctl_args.h"
#include "ctl/ctl_wire.h"
#include "util/error.h"

/*
 * Sends method path (encoded, below the gateway URL's base path) with body (a
 * JSON value, borrowed, or NULL) and waits up to timeout_ms for the whole
 * answer, which fills *out (free it with ctl_response_free). Fails with
 * FG_ERR_BACKEND_UNAVAILABLE when the gateway cannot be reached or does not
 * answer in time.
 */
int ctl_http(const struct ctl_url *gateway, const char *method, const char *path,
             const json_t *body, long long timeout_ms, struct ctl_response *out,
             struct fg_error *err) FG_WUR;

#endif
