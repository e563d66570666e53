/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes.h - the route table of the public API (docs/api.md), one entry per endpoint.
 */
#ifndef FG_ROUTES_H
#define FG_ROUTES_H

#include "http/router.h"

/* Ends with an entry whose pattern is NULL. */
extern const struct route api_routes[];

#endif
