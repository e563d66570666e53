/*
 * routes.c - the route table: method, pattern, handler, label. The first
 * matching entry wins, so fixed paths come before parameters that could
 * swallow them.
 */
#include "http/routes.h"

#include "http/handlers_locks.h"
#include "http/handlers_ops.h"

const struct route api_routes[] = {
    {HTTP_GET, "/healthz", handle_healthz, "healthz"},
    {HTTP_GET, "/readyz", handle_readyz, "readyz"},
    {HTTP_POST, "/v1/locks/{name*}/acquire", handle_lock_acquire, "lock_acquire"},
    {HTTP_POST, "/v1/locks/{name*}/renew", handle_lock_renew, "lock_renew"},
    {HTTP_POST, "/v1/locks/{name*}/release", handle_lock_release, "lock_release"},
    {HTTP_GET, "/v1/locks/{name*}", handle_lock_status, "lock_status"},
    {HTTP_GET, NULL, NULL, NULL},
};
