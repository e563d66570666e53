/* SPDX-License-Identifier: Apache-2.0 */
/*
 * instances.c - lists the gateway processes whose liveness mark in
 * KEY_GATEWAYS lasts now (lua/instance_list.lua) and marks the calling one.
 * It must not renew or prune marks: the janitor's instance beat does.
 */
#include "lease/instances.h"

#include <string.h>

#include "store/backend/redis.h"
#include "store/backend/redis_keys.h"

int lease_instances(const char *self_id, json_t **out, struct fg_error *err)
{
    const char *keys[INSTANCE_LIST_NKEYS] = {[INSTANCE_LIST_KEY_GATEWAYS] = KEY_GATEWAYS};
    json_t *answer = NULL;
    if (redis_script(SCRIPT_INSTANCE_LIST, keys, NULL, &answer, err) != 0)
        return -1;
    json_t *list = json_array(), *item;
    size_t i;
    json_array_foreach(json_object_get(answer, "gateways"), i, item)
    {
        const char *id = json_string_value(json_object_get(item, "id"));
        json_array_append_new(list,
                              json_pack("{s:s, s:O, s:b}", "id", id != NULL ? id : "",
                                        "alive_until_ms", json_object_get(item, "alive_until_ms"),
                                        "self", id != NULL && strcmp(id, self_id) == 0));
    }
    *out = json_pack("{s:o, s:O}", "gateways", list, "now_ms", json_object_get(answer, "now_ms"));
    json_decref(answer);
    return 0;
}
