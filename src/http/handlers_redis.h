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

/* True iff key lies under one of cfg's redis_prefixes and outside the
 * gateway's own "fg:" keys. Pure. */
bool redis_key_writable(const struct config *cfg, const char *key);

#endif
