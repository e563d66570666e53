/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_run.h - `fencectl lock` and `fencectl sem`: hold a lease for as long as a
 * command runs. The process supervision (fork, signals, renewals, termination
 * of a command whose lease is lost) lives here and nowhere else.
 */
#ifndef FG_CTL_RUN_H
#define FG_CTL_RUN_H

#include "ctl/ctl_args.h"

/*
 * Acquires the lease a describes for owner, runs a->argv with FENCE_TOKEN, FENCE
 * and FENCEGATE_URL in its environment, renews the lease every third of its TTL,
 * releases it when the command exits. Returns fencectl's exit status: the
 * command's, or an enum ctl_exit value when the lease could not be had or kept.
 */
int ctl_run(const struct ctl_args *a, const char *owner);

#endif
