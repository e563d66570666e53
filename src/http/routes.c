/*
 * routes.c - the route table: method, pattern, handler, label. The first
 * matching entry wins, so fixed paths come before parameters that could
 * swallow them.
 */
#include "http/routes.h"

#include "http/handlers_audit.h"
#include "http/handlers_locks.h"
#include "http/handlers_meta.h"
#include "http/handlers_ops.h"
#include "http/handlers_pg.h"
#include "http/handlers_redis.h"
#include "http/handlers_semaphores.h"

const struct route api_routes[] = {
    {HTTP_GET, "/healthz", handle_healthz, "healthz"},
    {HTTP_GET, "/readyz", handle_readyz, "readyz"},
    {HTTP_GET, "/metrics", handle_metrics, "metrics"},
    {HTTP_GET, "/v1/openapi.json", handle_openapi, "openapi"},
    {HTTP_POST, "/v1/locks/{name*}/acquire", handle_lock_acquire, "lock_acquire"},
    {HTTP_POST, "/v1/locks/{name*}/renew", handle_lock_renew, "lock_renew"},
    {HTTP_POST, "/v1/locks/{name*}/release", handle_lock_release, "lock_release"},
    {HTTP_POST, "/v1/locks/{name*}/revoke", handle_lock_revoke, "lock_revoke"},
    {HTTP_GET, "/v1/locks/{name*}", handle_lock_status, "lock_status"},
    {HTTP_POST, "/v1/semaphores/{name*}/acquire", handle_sem_acquire, "sem_acquire"},
    {HTTP_POST, "/v1/semaphores/{name*}/renew", handle_sem_renew, "sem_renew"},
    {HTTP_POST, "/v1/semaphores/{name*}/release", handle_sem_release, "sem_release"},
    {HTTP_POST, "/v1/semaphores/{name*}/revoke", handle_sem_revoke, "sem_revoke"},
    {HTTP_GET, "/v1/semaphores/{name*}", handle_sem_status, "sem_status"},
    {HTTP_PUT, "/v1/redis/{key*}", handle_redis_put, "redis_put"},
    {HTTP_PATCH, "/v1/redis/{key*}", handle_redis_patch, "redis_patch"},
    {HTTP_DELETE, "/v1/redis/{key*}", handle_redis_delete, "redis_delete"},
    {HTTP_GET, "/v1/redis/{key*}", handle_redis_get, "redis_get"},
    {HTTP_POST, "/v1/pg/batch", handle_pg_batch, "pg_batch"},
    {HTTP_POST, "/v1/pg/{table}", handle_pg_post, "pg_post"},
    {HTTP_GET, "/v1/pg/{table}/{key*}", handle_pg_get, "pg_get"},
    {HTTP_PATCH, "/v1/pg/{table}/{key*}", handle_pg_patch, "pg_patch"},
    {HTTP_PUT, "/v1/pg/{table}/{key*}", handle_pg_put, "pg_put"},
    {HTTP_DELETE, "/v1/pg/{table}/{key*}", handle_pg_delete, "pg_delete"},
    {HTTP_GET, "/v1/audit/rejections", handle_audit_rejections, "audit_rejections"},
    {HTTP_GET, NULL, NULL, NULL},
};
