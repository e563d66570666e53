/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_exit.c - the table from gateway answers to fencectl exit statuses (the
 * problem code decides first, then the HTTP status), and the shell convention
 * for the status of a child process. Problem codes are the gateway's own
 * (FG_CODES, util/error.h), read back from their names.
 */
#include "ctl/ctl_exit.h"

#include <stddef.h>
#include <sys/wait.h>

#include "util/error.h"

static const struct {
    enum fg_code problem;
    enum ctl_exit exit;
} by_problem[] = {
    {FG_ERR_LOCK_BUSY, CTL_EXIT_BUSY},
    {FG_ERR_TOO_MANY_WAITERS, CTL_EXIT_BUSY},
    {FG_ERR_LEASE_LOST, CTL_EXIT_LEASE_LOST},
    {FG_ERR_MAX_HOLD_EXCEEDED, CTL_EXIT_LEASE_LOST},
    {FG_ERR_BACKEND_UNAVAILABLE, CTL_EXIT_UNREACHABLE},
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
    enum fg_code code = fg_code_of_name(problem);
    for (size_t i = 0; code != FG_OK && i < sizeof by_problem / sizeof by_problem[0]; i++)
        if (code == by_problem[i].problem)
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
