/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_result.c - running lease scripts: the keys every one of them gets,
 * and the one retry after a "nofence" or "norevoked" answer. Reading the
 * answers is lease_answer.c's.
 */
#include "lease/lease_result.h"

#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "lease/fence.h"
#include "lease/lease_answer.h"
#include "store/redis.h"
#include "store/revocations.h"

void lease_common_keys_init(struct lease_common_keys *k, const char *base, const char *index)
{
    k->index = index;
    snprintf(k->rids, sizeof k->rids, "%sr", base);
    snprintf(k->rid_until, sizeof k->rid_until, "%se", base);
    snprintf(k->released, sizeof k->released, "%sx", base);
    snprintf(k->ended, sizeof k->ended, "%sn", base);
}

void lease_common_keys_put(const struct lease_common_keys *k, const char **out)
{
    out[0] = FENCE_KEY;
    out[1] = FENCE_LIMIT_KEY;
    out[2] = GATEWAYS_KEY;
    out[3] = k->rids;
    out[4] = k->rid_until;
    out[5] = k->released;
    out[6] = k->index;
    out[7] = k->ended;
    out[8] = REVOCATIONS_SET;
}

const char *lease_cancel_mode_name(enum lease_cancel_mode mode)
{
    static const char *const names[] = {
        [LEASE_CANCEL_TAKE] = "take",
        [LEASE_CANCEL_DROP] = "drop",
        [LEASE_CANCEL_ORPHAN] = "orphan",
    };
    return names[mode];
}

int lease_script_run(const char *script, size_t nkeys, const char *const *argv, size_t argc,
                     struct lease_result *res, struct fg_error *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        json_t *out = NULL;
        if (redis_script(script, nkeys, argv, argc, &out, err) != 0)
            return -1;
        enum lease_retry retry = LEASE_RETRY_NONE;
        int rc = lease_answer_read(script, out, res, &retry, err);
        json_decref(out);
        if (rc != 0 || retry == LEASE_RETRY_NONE)
            return rc;
        if ((retry == LEASE_RETRY_NOFENCE ? fence_recover(err) : revocations_restore(err)) != 0)
            return -1;
    }
    return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "no fence could be reserved");
}

int lease_watch_run(const char *script, size_t nkeys, const char *const *argv, size_t argc,
                    struct lease_watch *out, struct fg_error *err)
{
    json_t *raw = NULL;
    if (redis_script(script, nkeys, argv, argc, &raw, err) != 0)
        return -1;
    lease_answer_watch(raw, out);
    json_decref(raw);
    return 0;
}
