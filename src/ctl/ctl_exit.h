/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_exit.h - fencectl's exit statuses: what a gateway answer, a failure to
 * reach the gateway, or the end of COMMAND turns into. Pure.
 */
#ifndef FG_CTL_EXIT_H
#define FG_CTL_EXIT_H

enum ctl_exit {
    CTL_EXIT_OK = 0,
    CTL_EXIT_USAGE = 1,
    CTL_EXIT_BUSY = 2,        /* 409 lock_busy, 429 too_many_waiters */
    CTL_EXIT_LEASE_LOST = 3,  /* 410 lease_lost, or a lease that could not be kept */
    CTL_EXIT_UNREACHABLE = 4, /* no answer, or 502/503/504 (a backend is down) */
    CTL_EXIT_ERROR = 5,       /* any other refusal or failure */
};

#define CTL_EXIT_NOT_EXECUTABLE 126 /* COMMAND exists but could not be run */
#define CTL_EXIT_NOT_FOUND      127 /* COMMAND was not found */

/*
 * The exit status for a gateway answer: status is the HTTP status (0 when no
 * answer arrived), problem the problem code of an error answer ("lock_busy"),
 * or NULL.
 */
enum ctl_exit ctl_exit_for(int status, const char *problem);

/* fencectl's exit status for COMMAND's wait status (as from waitpid): its exit
 * code, or 128 + the signal that killed it. */
int ctl_exit_of_child(int wait_status);

#endif
