/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_outcome.h - what came of a fenced write, in either store (its whole
 * result: fenced_result.h), and the reason a refusal is audited and answered
 * with. Pure: no I/O.
 */
#ifndef FG_FENCED_OUTCOME_H
#define FG_FENCED_OUTCOME_H

/* What came of a fenced write, in either store. */
enum fenced_outcome {
    FENCED_APPLIED, /* the write and the new highest fence are stored */
    FENCED_STALE,   /* refused: a higher fence is stored; nothing changed */
    FENCED_REVOKED, /* refused: the token's lease was revoked; nothing changed */
    FENCED_EXPIRED  /* refused before writing: the lease a live_lease guard needs is over */
};

/* The reason a refusal is audited and answered with ("stale_fence", "revoked",
 * "lease_expired"), or NULL for FENCED_APPLIED. */
const char *fenced_outcome_reason(enum fenced_outcome outcome);

#endif
