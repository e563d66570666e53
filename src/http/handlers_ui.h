/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_ui.h - the operator console: GET /ui/ and the files it loads, all
 * built into the binary from ui/ (docs/operations.md "Operator console"). The page talks
 * to the gateway's own API with the caller's key; these routes hand out only
 * static files. With "ui": false in the configuration they answer 404.
 * GET /v1/whoami tells the page who its key is, so that it shows only what
 * the key may see.
 */
#ifndef FG_HANDLERS_UI_H
#define FG_HANDLERS_UI_H

#include "http/server.h"

/* GET /ui and /ui/: the page itself. */
enum handler_result handle_ui_page(struct http_request *req, struct http_reply *reply);

/* GET /ui/{file}: a script, style sheet or image of the page. */
enum handler_result handle_ui_file(struct http_request *req, struct http_reply *reply);

/* GET /v1/whoami: {"auth": "required" | "off", "principal": key id or null,
 * "scopes": [...]} of the key the request presents. */
enum handler_result handle_whoami(struct http_request *req, struct http_reply *reply);

#endif
