/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sqlstate.c - the SQLSTATE classes the gateway tells apart, as one table
 * from state (or class prefix) to answer code. It must not speak libpq.
 */
#include "store/backend/sqlstate.h"

#include <stddef.h>
#include <string.h>

/* States or classes (a prefix of 2) and their code; the first match wins. */
static const struct {
    const char *state; /* a whole SQLSTATE, or its two-character class */
    enum fg_code code; /* what a failure with it is answered with */
} states[] = {
    {"25006", FG_ERR_BACKEND_UNAVAILABLE}, /* read-only server */
    {"08", FG_ERR_BACKEND_UNAVAILABLE},    /* connection exception */
    {"57", FG_ERR_BACKEND_UNAVAILABLE},    /* operator intervention: shutdown, cancel */
    {"53", FG_ERR_BACKEND_UNAVAILABLE},    /* insufficient resources */
    {"58", FG_ERR_BACKEND_UNAVAILABLE},    /* system error: I/O */
    {"55P03", FG_ERR_BACKEND_UNAVAILABLE}, /* lock not available: lock_timeout */
    {"40P01", FG_ERR_BACKEND_UNAVAILABLE}, /* deadlock detected */
    {"40001", FG_ERR_BACKEND_UNAVAILABLE}, /* serialization failure */
    /* The table changed under the gateway since it read the catalogue at start-up: its
       statements name what is no longer there, and a client names only what was (503 until
       the table is put back or the gateway restarts with a configuration that matches it) */
    {"42703", FG_ERR_BACKEND_UNAVAILABLE}, /* undefined column: a listed column, the key */
    {"42P01", FG_ERR_BACKEND_UNAVAILABLE}, /* undefined table: dropped or renamed */
    {"42P10", FG_ERR_BACKEND_UNAVAILABLE}, /* ON CONFLICT finds no unique index on the key */
    {"428C9", FG_ERR_BACKEND_UNAVAILABLE}, /* a written column (the key) made generated or an
                                              identity ALWAYS: the table makes its values */
    {"42804", FG_ERR_BACKEND_UNAVAILABLE}, /* datatype mismatch: a column's new type takes no
                                              value of the type read at start-up */
    {"42883", FG_ERR_BACKEND_UNAVAILABLE}, /* undefined function or operator: the key's new
                                              type has no = with the type read at start-up */
    {"23505", FG_ERR_CONFLICT},            /* unique violation */
    {"22", FG_ERR_INVALID_FIELD},          /* data exception */
    {"23", FG_ERR_INVALID_FIELD},          /* integrity constraint violation */
    {"0A", FG_ERR_INVALID_FIELD},          /* not supported for these values (NaN into an integer
                                              a generated column computes); stale plans, the one
                                              0A000 of the gateway's own, count as a lost session */
    {"P0", FG_ERR_INVALID_FIELD},          /* a trigger's RAISE or ASSERT refused the values */
    {"FGM01", FG_ERR_INVALID_FIELD},       /* the table moved the write onto another key (a trigger
                                              that changes it: fencegate.key_moved) */
    {"42501", FG_ERR_FORBIDDEN}, /* the role may not: a privilege, a row security policy */
};

/* States told apart by the function of Postgres's that raised them (the
 * error's untranslated source field), looked at before states. */
static const struct {
    const char *state;    /* a whole SQLSTATE */
    const char *function; /* where Postgres raised it */
    enum fg_code code;
} raised_by[] = {
    /* the key's unique index made DEFERRABLE, which no ON CONFLICT takes as its arbiter (another
       55000 is a fault of the gateway's) */
    {"55000", "ExecCheckIndexConstraints", FG_ERR_BACKEND_UNAVAILABLE},
};

/* True if state is pattern, or of class pattern (two characters). */
static bool matches(const char *state, const char *pattern)
{
    size_t n = strlen(pattern);
    return n == 2 ? strncmp(state, pattern, 2) == 0 : strcmp(state, pattern) == 0;
}

enum fg_code sqlstate_code(const char *state, const char *source_function, bool connection_lost)
{
    if (connection_lost)
        return FG_ERR_BACKEND_UNAVAILABLE;
    for (size_t i = 0; i < sizeof raised_by / sizeof raised_by[0] && source_function != NULL; i++)
        if (strcmp(state, raised_by[i].state) == 0 &&
            strcmp(source_function, raised_by[i].function) == 0)
            return raised_by[i].code;
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
        if (matches(state, states[i].state))
            return states[i].code;
    return FG_ERR_INTERNAL;
}

bool sqlstate_read_only(const char *state)
{
    return matches(state, "25006");
}

bool sqlstate_data_error(const char *state)
{
    return matches(state, "22");
}

bool sqlstate_too_large(const char *state)
{
    return matches(state, "54");
}

bool sqlstate_deadlock(const char *state)
{
    return matches(state, "40P01");
}

bool sqlstate_fence_kept_above(const char *state)
{
    return matches(state, "FGK01");
}

bool sqlstate_claim_unused(const char *state)
{
    return matches(state, "FGC01");
}

bool sqlstate_plans_stale(const char *state, const char *source_function)
{
    return matches(state, "0A000") && source_function != NULL &&
           strcmp(source_function, "RevalidateCachedQuery") == 0;
}

bool sqlstate_session_ended(const char *state)
{
    return matches(state, "57P01") || matches(state, "57P02") || matches(state, "57P03");
}
