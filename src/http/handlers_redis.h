/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_redis.h - HTTP handlers of /v1/redis/{key}: fenced PUT (string),
 * PATCH (hash fields) and DELETE, and GET of a key with its highest fence.
 */
#ifndef FG_HANDLERS_REDIS_H
#define FG_HANDLERS_REDIS_H

#include <stdbool.h>

#include "config.h"
#include "http/server.h"

enum handler_result handle_redis_put(struct http_request *req, struct http_reply *reply);
enum handler_result handle_redis_patch(struct http_request *req, struct http_reply *reply);
enum handler_result handle_redis_delete(struct http_request *req, struct http_reply *reply);
enum handler_result handle_redis_get(struct http_request *req, struct http_reply *reply);

/* The entry of cfg's redis_prefixes that key lies under (the longest prefix
 * that fits), or NULL if none does or key is one of the gateway's own "fg:"
 * keys. Pure. */
const struct redis_prefix_config *redis_key_prefix(const struct config *cfg, const char *key);

/* True iff redis_key_prefix finds an entry for key. Pure. */
bool redis_key_writable(const struct config *cfg, const char *key);

#endif
