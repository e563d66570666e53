/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat.h - what the process itself uses (CPU time, memory, file
 * descriptors), read from getrusage, getrlimit and /proc/self at the moment of
 * a /metrics scrape, for the standard process_* metrics.
 */
#ifndef FG_PROCSTAT_H
#define FG_PROCSTAT_H

#include "util/metrics.h"

/* Remembers the wall-clock start time of the process; call once early in main. */
void procstat_init(void);

/* Fills *out with the process's figures now; a figure that cannot be read is -1. */
void procstat_read(struct metrics_process *out);

#endif
