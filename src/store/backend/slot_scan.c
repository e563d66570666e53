/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slot_scan.c - finding which slots hold a per-slot key: one EXISTS per slot
 * through redis_batch. It must not read or change the keys it finds.
 */
#include "store/backend/slot_scan.h"

#include <stdlib.h>
#include <string.h>

#include "store/backend/redis.h"
#include "store/backend/shared_keys.h"

int slot_scan(const char *base, bool has[CLUSTER_SLOTS], struct fg_error *err)
{
    memset(has, 0, CLUSTER_SLOTS * sizeof has[0]);
    if (!shared_keys_per_slot()) {
        has[0] = true;
        return 0;
    }
    struct redis_batch_call *calls = calloc(CLUSTER_SLOTS, sizeof *calls);
    char(*keys)[SHARED_KEY_MAX] = malloc(CLUSTER_SLOTS * sizeof *keys);
    const char *(*args)[2] = malloc(CLUSTER_SLOTS * sizeof *args);
    FG_ASSERT(calls != NULL && keys != NULL && args != NULL);
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        shared_key(keys[s], base, s);
        args[s][0] = "EXISTS";
        args[s][1] = keys[s];
        calls[s] = (struct redis_batch_call){.argc = 2, .args = args[s]};
    }
    int rc = redis_batch(calls, CLUSTER_SLOTS, err);
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        has[s] = json_integer_value(calls[s].reply) > 0;
        json_decref(calls[s].reply);
    }
    free(args);
    free(keys);
    free(calls);
    return rc;
}
