/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_attempt.h - the drop-and-retry rule of a write group (write_group.h):
 * what one attempt at committing a group leaves each of its writes with.
 * Nothing of a group is committed unless all of it is; a write whose own
 * statement failed is taken out and handed back to run alone (where its error
 * is reported as for any write) and the rest go again; a refused commit hands
 * every write back; a lost connection fails them all (whether the commit took
 * effect is unknown). Pure: write_group.c runs the attempts.
 */
#ifndef FG_WRITE_ATTEMPT_H
#define FG_WRITE_ATTEMPT_H

#include <stddef.h>

/* How one attempt at a group ended (a group of one runs as it would alone,
 * without BEGIN and COMMIT around it). */
enum write_attempt {
    WRITE_ATTEMPT_COMMITTED,     /* every statement ran and is committed */
    WRITE_ATTEMPT_STMT_FAILED,   /* one statement failed with a SQLSTATE: nothing committed */
    WRITE_ATTEMPT_NOT_COMMITTED, /* the COMMIT was refused: nothing committed */
    WRITE_ATTEMPT_LOST           /* the connection failed: the outcome is unknown */
};

/* What becomes of one write of the group. */
enum write_fate {
    WRITE_FATE_AGAIN,     /* in the group's next attempt */
    WRITE_FATE_COMMITTED, /* written: its statement's rows are its answer */
    WRITE_FATE_ALONE,     /* not written: run it on a connection of its own */
    WRITE_FATE_FAILED     /* the attempt's failure is its answer */
};

/*
 * Fills fates[0..n) for an attempt at the n (>= 1) writes of a group that
 * ended as attempt; failed: the index of the statement that failed
 * (WRITE_ATTEMPT_STMT_FAILED). Returns how many writes go again (those whose
 * fate is WRITE_FATE_AGAIN, fewer than n): 0 when the group is settled.
 */
size_t write_attempt_fates(enum write_attempt attempt, size_t failed, size_t n,
                           enum write_fate *fates);

#endif
