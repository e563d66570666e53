/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_exit.c - the table from gateway answers to fencectl exit statuses (the
 * problem code decides first, then the HTTP status), and the shell convention
 * for the status of a child process.
 */
#include "ctl/ctl_exit.h"

#include <stddef.h>
#include <string.h>
#include <sys/wait.h>

static const struct {
    const char *problem;
    enum ctl_exit exit;
} by_problem[] = {
    {"lock_busy", CTL_EXIT_BUSY},
    {"too_many_waiters", CTL_EXIT_BUSY},
    {"lease_lost", CTL_EXIT_LEASE_LOST},
    {"max_hold_exceeded", CTL_EXIT_LEASE_LOST},
    {"backend_unavailable", CTL_EXIT_UNREACHABLE},
};

static const struct {
    int status;
    enum ctl_exit exit;
} by_status[] = {
    {0, CTL_EXIT_UNREACHABLE},   {410, CTL_EXIT_LEASE_LOST},  {429, CTL_EXIT_BUSY},
    {502, CTL_EXIT_UNREACHABLE}, {503, CTL_EXIT_UNREACHABLE}, {504, CTL_EXIT_UNREACHABLE},
};

enum ctl_exit ctl_exit_for(int status, const char *problem)
{
    if (status >= 200 && status < 300)
        return CTL_EXIT_OK;
    for (size_t i = 0; problem != NULL && i < sizeof by_problem / sizeof by_problem[0]; i++)
        if (strcmp(problem, by_problem[i].problem) == 0)
            return by_problem[i].exit;
    for (size_t i = 0; i < sizeof by_status / sizeof by_status[0]; i++)
        if (status == by_status[i].status)
            return by_status[i].exit;
    return CTL_EXIT_ERROR;
}

int ctl_exit_of_child(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return CTL_EXIT_ERROR;
}
