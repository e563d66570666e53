/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsm.c - looking up the arrows and the state names of a lifecycle (fsm.h).
 * A table of a few dozen arrows is read from the top: no lifecycle is larger,
 * and the order a lifecycle lists its arrows in is the order it lives them.
 */
#include "util/fsm.h"

#include "util/error.h"
#include "util/log.h"

bool fsm_next(const struct fsm *m, int from, int ev, int *to)
{
    for (size_t i = 0; i < m->narrows; i++)
        if (m->arrows[i].from == from && m->arrows[i].ev == ev) {
            *to = m->arrows[i].to;
            return true;
        }
    return false;
}

int fsm_step(const struct fsm *m, int from, int ev)
{
    int to = from;
    bool known = fsm_next(m, from, ev, &to);
    if (!known)
        log_message(LOG_ERROR, "lifecycle_bug", "%s: event %d in state %s", m->name, ev,
                    fsm_name(m, from));
    FG_ASSERT(known);
    return to;
}

const char *fsm_name(const struct fsm *m, int state)
{
    if (state < 0 || (size_t)state >= m->nnames || m->names[state] == NULL)
        return "unknown";
    return m->names[state];
}
