/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wake.h - threads that sleep on a socket and must also be woken on demand:
 * the followers of subscribed Redis connections, which sleep until a message
 * comes and must look again at their stop flag, or at the primary's generation
 * after a failover, when told, and which pause between tries to subscribe
 * that a stop must not wait out either. Each sleeper joins with a slot on its own stack
 * (an event descriptor of its own); wake_all writes every joined slot, and a
 * slot keeps a wake until its sleeper takes it, so a wake given while its
 * sleeper was awake ends its next sleep at once.
 */
#ifndef FG_WAKE_H
#define FG_WAKE_H

#include <stdbool.h>

/* A sleeper's place among those wake_all reaches (on the sleeper's stack). */
struct wake_slot {
    int fd;                        /* its event descriptor; -1 if none could be made */
    struct wake_slot *prev, *next; /* links among the joined slots */
};

/* Joins slot to those wake_all reaches. Without an event descriptor to spare,
 * the slot still joins (fd -1): its sleeps then end every WAKE_FALLBACK_MS. */
void wake_join(struct wake_slot *slot);

/* Leaves and closes slot's descriptor. */
void wake_leave(struct wake_slot *slot);

/* Wakes every joined sleeper, now or at its next sleep. Any thread. */
void wake_all(void);

/* Sleeps until fd is readable or closed (true) or slot is woken (false, the
 * wake taken). A signal or the fallback period also ends it with false. */
bool wake_wait(struct wake_slot *slot, int fd);

/* Sleeps ms milliseconds, or until slot is woken (true, the wake taken): the
 * pause of a thread between tries that a stop must not wait out. */
bool wake_nap(struct wake_slot *slot, int ms);

#define WAKE_FALLBACK_MS 200

#endif
