/* SPDX-License-Identifier: Apache-2.0 */
/*
 * instances.h - the gateway processes alive now, as their liveness marks in
 * Redis say (the mark each process's janitor renews, which keeps its waiters
 * in the queues). Read-only: one script call (lua/instance_list.lua).
 */
#ifndef FG_INSTANCES_H
#define FG_INSTANCES_H

#include <jansson.h>

#include "util/error.h"

/*
 * Stores {"gateways": [{"id", "alive_until_ms", "self"}], "now_ms"} in *out
 * (new reference): every process whose mark lasts at Redis time now_ms, self
 * true for self_id (this process's id, borrowed), soonest to lapse first.
 */
int lease_instances(const char *self_id, json_t **out, struct fg_error *err) FG_WUR;

#endif
