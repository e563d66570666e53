/*
 * fence.c - fence sequence recovery: read the highest stored fence from
 * Postgres, raise the Redis sequence to it in one script (never lowering it).
 */
#include "lease/fence.h"

#include <inttypes.h>
#include <stdio.h>

#include "store/pg.h"
#include "store/redis.h"
#include "util/log.h"

int fence_recover(struct fg_error *err)
{
    int64_t floor = 0;
    if (pg_max_fence(&floor, err) != 0)
        return -1;
    char floor_text[24];
    snprintf(floor_text, sizeof floor_text, "%" PRId64, floor);
    const char *argv[] = {"fg:fence", floor_text};
    json_t *out = NULL;
    if (redis_script("fence_raise.lua", 1, argv, 2, &out, err) != 0)
        return -1;
    log_event(LOG_DEBUG, "fence_recovered",
              json_pack("{s:I, s:O}", "floor", (json_int_t)floor, "fence",
                        json_object_get(out, "fence")));
    json_decref(out);
    return 0;
}
