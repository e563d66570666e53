/* SPDX-License-Identifier: Apache-2.0 */
/*
 * embedded.h - the Lua scripts of lua/, the SQL migrations of sql/, the API
 * description of openapi/ and the operator console of ui/, compiled into the
 * binary by cmake/embed.cmake. Each table ends with a {NULL, NULL} entry and is
 * sorted by file name.
 */
#ifndef FG_EMBEDDED_H
#define FG_EMBEDDED_H

struct embedded_file {
    const char *name;   /* file name, e.g. "lock_acquire.lua" */
    const char *source; /* whole file contents, NUL-terminated */
};

extern const struct embedded_file embedded_lua[];
extern const struct embedded_file embedded_sql[];
extern const struct embedded_file embedded_openapi[];
extern const struct embedded_file embedded_ui[];

#endif
