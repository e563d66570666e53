/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_attempt.c - the drop-and-retry rule of a write group: from how an
 * attempt ended to the fate of each write. It must not run statements.
 */
#include "store/fenced/write_attempt.h"

#include <stdbool.h>

#include "util/error.h"

/* Per way an attempt ends: the fate of every write it does not single out. */
static const enum write_fate fate_of[] = {
    [WRITE_ATTEMPT_COMMITTED] = WRITE_FATE_COMMITTED,
    [WRITE_ATTEMPT_STMT_FAILED] = WRITE_FATE_AGAIN, /* the writes besides the failed one */
    [WRITE_ATTEMPT_NOT_COMMITTED] = WRITE_FATE_ALONE,
    [WRITE_ATTEMPT_LOST] = WRITE_FATE_FAILED,
};

size_t write_attempt_fates(enum write_attempt attempt, size_t failed, size_t n,
                           enum write_fate *fates)
{
    FG_ASSERT(n >= 1 && (attempt != WRITE_ATTEMPT_STMT_FAILED || failed < n));
    size_t again = 0;
    for (size_t i = 0; i < n; i++) {
        bool singled_out = attempt == WRITE_ATTEMPT_STMT_FAILED && i == failed;
        fates[i] = singled_out ? WRITE_FATE_ALONE : fate_of[attempt];
        again += fates[i] == WRITE_FATE_AGAIN;
    }
    return again;
}
