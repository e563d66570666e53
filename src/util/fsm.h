/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsm.h - a lifecycle as a table of arrows: which state follows which event.
 * Each lifecycle (http/conn_phase.h, lease/wait_state.h) declares its states
 * once in an X-macro list of (enum value, name), lists its arrows over its
 * own enums and names the whole a struct fsm. The module that owns the
 * objects keeps their state and moves it in its one transition function,
 * through fsm_step. Pure but for fsm_step's crash on a bug.
 */
#ifndef FG_FSM_H
#define FG_FSM_H

#include <stdbool.h>
#include <stddef.h>

/* Expands an X-macro list of states into enum values and into names. */
#define FSM_ENUM(id, name) id,
#define FSM_NAME(id, name) [id] = name,

/* Entries of a static array. */
#define FSM_COUNT(array) (sizeof(array) / sizeof((array)[0]))

struct fsm_arrow {
    int from; /* a state */
    int ev;   /* an event */
    int to;   /* the state that follows ev in from */
};

/* A lifecycle: static tables, borrowed for the life of the process. */
struct fsm {
    const char *name;               /* the lifecycle, for logs ("lease wait") */
    const struct fsm_arrow *arrows; /* read from the top: the first match wins */
    size_t narrows;                 /* entries of arrows */
    const char *const *names;       /* the states' names, by state */
    size_t nnames;                  /* entries of names */
};

/* Sets *to to the state that follows event ev in state from. Returns false
 * (*to untouched) when no arrow of m leaves from on ev. */
bool fsm_next(const struct fsm *m, int from, int ev, int *to);

/* The state that follows event ev in state from. An event that no arrow of m
 * takes in that state is a bug: it is logged with both names and the process
 * aborts (FG_ASSERT). */
int fsm_step(const struct fsm *m, int from, int ev);

/* The name of state in m, or "unknown". */
const char *fsm_name(const struct fsm *m, int state);

#endif
