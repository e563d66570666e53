/*
 * routes.c - the route table: method, pattern, handler, label. The first
 * matching entry wins, so fixed paths come before parameters that could
 * swallow them. The last member is the scope an API key needs (router.h):
 * pg_batch checks the write scope of every table it names in its handler.
 */
#include "http/routes.h"

#include "http/handlers_audit.h"
#include "http/handlers_locks.h"
#include "http/handlers_locksets.h"
#include "http/handlers_meta.h"
#include "http/handlers_ops.h"
#include "http/handlers_pg.h"
#include "http/handlers_redis.h"
#include "http/handlers_semaphores.h"

const struct route api_routes[] = {
    {HTTP_GET, "/healthz", handle_healthz, "healthz", SCOPE_OPEN},
    {HTTP_GET, "/readyz", handle_readyz, "readyz", SCOPE_OPEN},
    {HTTP_GET, "/metrics", handle_metrics, "metrics", SCOPE_METRICS},
    {HTTP_GET, "/v1/openapi.json", handle_openapi, "openapi", SCOPE_KEY},
    {HTTP_POST, "/v1/locks/{name*}/acquire", handle_lock_acquire, "lock_acquire", SCOPE_LOCK},
    {HTTP_POST, "/v1/locks/{name*}/renew", handle_lock_renew, "lock_renew", SCOPE_LOCK},
    {HTTP_POST, "/v1/locks/{name*}/release", handle_lock_release, "lock_release", SCOPE_LOCK},
    {HTTP_POST, "/v1/locks/{name*}/revoke", handle_lock_revoke, "lock_revoke", SCOPE_ADMIN},
    {HTTP_GET, "/v1/locks/{name*}", handle_lock_status, "lock_status", SCOPE_LOCK},
    {HTTP_POST, "/v1/locksets/acquire", handle_lockset_acquire, "lockset_acquire", SCOPE_KEY},
    {HTTP_POST, "/v1/locksets/renew", handle_lockset_renew, "lockset_renew", SCOPE_KEY},
    {HTTP_POST, "/v1/locksets/release", handle_lockset_release, "lockset_release", SCOPE_KEY},
    {HTTP_POST, "/v1/semaphores/{name*}/acquire", handle_sem_acquire, "sem_acquire",
     SCOPE_SEMAPHORE},
    {HTTP_POST, "/v1/semaphores/{name*}/renew", handle_sem_renew, "sem_renew", SCOPE_SEMAPHORE},
    {HTTP_POST, "/v1/semaphores/{name*}/release", handle_sem_release, "sem_release",
     SCOPE_SEMAPHORE},
    {HTTP_POST, "/v1/semaphores/{name*}/revoke", handle_sem_revoke, "sem_revoke", SCOPE_ADMIN},
    {HTTP_GET, "/v1/semaphores/{name*}", handle_sem_status, "sem_status", SCOPE_SEMAPHORE},
    {HTTP_PUT, "/v1/redis/{key*}", handle_redis_put, "redis_put", SCOPE_REDIS_WRITE},
    {HTTP_PATCH, "/v1/redis/{key*}", handle_redis_patch, "redis_patch", SCOPE_REDIS_WRITE},
    {HTTP_DELETE, "/v1/redis/{key*}", handle_redis_delete, "redis_delete", SCOPE_REDIS_WRITE},
    {HTTP_GET, "/v1/redis/{key*}", handle_redis_get, "redis_get", SCOPE_REDIS_READ},
    {HTTP_POST, "/v1/pg/batch", handle_pg_batch, "pg_batch", SCOPE_KEY},
    {HTTP_POST, "/v1/pg/{table}", handle_pg_post, "pg_post", SCOPE_PG_WRITE},
    {HTTP_GET, "/v1/pg/{table}/{key*}", handle_pg_get, "pg_get", SCOPE_PG_READ},
    {HTTP_PATCH, "/v1/pg/{table}/{key*}", handle_pg_patch, "pg_patch", SCOPE_PG_WRITE},
    {HTTP_PUT, "/v1/pg/{table}/{key*}", handle_pg_put, "pg_put", SCOPE_PG_WRITE},
    {HTTP_DELETE, "/v1/pg/{table}/{key*}", handle_pg_delete, "pg_delete", SCOPE_PG_WRITE},
    {HTTP_GET, "/v1/audit/rejections", handle_audit_rejections, "audit_rejections",
     SCOPE_AUDIT_READ},
    {HTTP_GET, NULL, NULL, NULL, SCOPE_ADMIN},
};
