/* SPDX-License-Identifier: Apache-2.0 */
/*
 * embedded.h - what is compiled into the binary: the Lua scripts of lua/ as
 * Redis runs them (cmake/lua_scripts.cmake, which also writes lua_scripts.h:
 * enum fg_script and each script's KEYS and ARGV indexes), and the SQL
 * migrations of sql/, the API description of openapi/ and the operator console
 * of ui/ (cmake/embed.cmake). The file tables end with a {NULL, NULL} entry and
 * are sorted by file name.
 */
#ifndef FG_EMBEDDED_H
#define FG_EMBEDDED_H

#include <stdbool.h>
#include <stddef.h>

#include "lua_scripts.h"

struct embedded_file {
    const char *name;   /* file name, e.g. "001_schema.sql" */
    const char *source; /* whole file contents, NUL-terminated */
};

/* One script of lua/, as declared by its "-- KEYS:" and "-- ARGV:" lines. */
struct lua_script {
    const char *name;     /* file name, e.g. "lock_acquire.lua" */
    const char *function; /* the Redis function it is called as (FCALL), named after its source */
    const char *source;   /* the function library Redis loads (FUNCTION LOAD): the key names
                             it uses, its libraries, the script as the function's body */
    size_t nkeys;         /* KEYS it takes */
    size_t nargv;         /* ARGV it takes (at least, when variadic) */
    bool variadic;        /* more ARGV may follow the declared ones */
    bool own_connection;  /* calls go on their thread's own connection ("-- own-connection:") */
};

/* Indexed by enum fg_script. */
extern const struct lua_script lua_scripts[SCRIPT_COUNT];

extern const struct embedded_file embedded_sql[];
extern const struct embedded_file embedded_openapi[];
extern const struct embedded_file embedded_ui[];

#endif
