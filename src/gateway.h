/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gateway.h - the process-wide facts every module may read after start-up: the
 * configuration, this process's instance id and whether the
 * process is draining. Written once by main.c before the server starts.
 */
#ifndef FG_GATEWAY_H
#define FG_GATEWAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "auth/token.h"
#include "config.h"

struct gateway {
    const struct config *cfg;           /* the immutable configuration */
    char instance_id[LEASE_ID_LEN + 1]; /* random id of this process, for waiter liveness */
    atomic_bool draining;               /* SIGTERM received: waiters answer 503 */
};

extern struct gateway gw;

#endif
