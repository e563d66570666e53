/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_wire.h - the bytes of fencectl's HTTP/1.1 exchanges: percent-encoding of
 * path parts, the request text, and the parse of a whole response (status,
 * content type, body; Content-Length or chunked). Pure: the sockets are in
 * ctl_http.c.
 */
#ifndef FG_CTL_WIRE_H
#define FG_CTL_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "ctl/ctl_args.h"
#include "util/error.h"

struct ctl_response {
    int status;             /* HTTP status code */
    char content_type[128]; /* Content-Type header, "" if none */
    char *body;             /* body bytes, NUL-terminated (owned) */
    size_t body_len;        /* bytes in body */
};

/*
 * Appends text to out (capacity cap, NUL-terminated, holding a string already),
 * percent-encoding every byte but A-Z a-z 0-9 - . _ ~ and those in also_plain
 * (e.g. "/:", which paths and queries may carry as they are).
 * Returns 0, or -1 if it does not fit.
 */
int ctl_escape_append(char *out, size_t cap, const char *text, const char *also_plain) FG_WUR;

/*
 * The text of one request to gateway: method, path (already encoded, without
 * the URL's base path) and an optional JSON body (NULL for none). Asks the
 * server to close the connection after answering, and carries the gateway's
 * API key as a bearer header when it has one. Returns a malloc'd buffer
 * (owned by the caller) of *len bytes.
 */
char *ctl_request_format(const struct ctl_url *gateway, const char *method, const char *path,
                         const char *body, size_t *len);

/* Parses a whole response (raw, len bytes: everything the server sent before
 * closing) into *out. Fails with FG_ERR_BACKEND_UNAVAILABLE (no usable answer)
 * when it is not HTTP/1.x or is cut short. */
int ctl_response_parse(const char *raw, size_t len, struct ctl_response *out,
                       struct fg_error *err) FG_WUR;

/* Frees what *r owns and zeroes it. */
void ctl_response_free(struct ctl_response *r);

#endif
