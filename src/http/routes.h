/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes.h - the route table of the public API (docs/api.md), one entry per
 * endpoint: method, pattern, handler, label, the scope an API key needs
 * (router.h; pg_batch checks the write scope of every table it names in its
 * handler), and the body members and query parameters the route accepts
 * (anything else answers 400 before the handler runs). The listings show only
 * the names the key's scopes match, and the console's page and /v1/whoami are
 * open (the page's API calls carry the key). The first matching entry wins,
 * so fixed paths come before parameters that could swallow them.
 *
 * The table is generated at build time (scripts/gen_routes.py) from the route
 * descriptions of openapi/routes/, with the bounds of each route's members
 * (http/strict.h); the same descriptions give openapi/openapi.json its request
 * schemas and answers and docs/api.md its tables: edit those, not the
 * generated route_table.c.
 */
#ifndef FG_ROUTES_H
#define FG_ROUTES_H

#include "http/router.h"

/* Ends with an entry whose pattern is NULL. */
extern const struct route api_routes[];

#endif
