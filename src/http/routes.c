/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes.c - the route table: method, pattern, handler, label, the scope an
 * API key needs (router.h; pg_batch checks the write scope of every table it
 * names in its handler), and the body members and query parameters the route
 * accepts (anything else answers 400 before the handler runs). The listings
 * show only the names the key's scopes match, and the console's page and
 * /v1/whoami are open (the page's API calls carry the key). The first
 * matching entry wins, so fixed paths come before parameters that could
 * swallow them.
 */
#include "http/routes.h"

#include "http/handlers_audit.h"
#include "http/handlers_list.h"
#include "http/handlers_locks.h"
#include "http/handlers_locksets.h"
#include "http/handlers_meta.h"
#include "http/handlers_ops.h"
#include "http/handlers_pg.h"
#include "http/handlers_redis.h"
#include "http/handlers_semaphores.h"
#include "http/handlers_ui.h"

/* What the bodies and queries of the routes may hold (NULL-terminated). */
static const char *const lock_acquire_body[] = {"ttl_ms",     "wait_ms",     "owner",
                                                "request_id", "max_hold_ms", NULL};
static const char *const sem_acquire_body[] = {"ttl_ms",      "wait_ms", "owner", "request_id",
                                               "max_hold_ms", "limit",   NULL};
static const char *const renew_body[] = {"token", "ttl_ms", NULL};
static const char *const release_body[] = {"token", NULL};
static const char *const redis_put_body[] = {"value", NULL};
static const char *const redis_patch_body[] = {"fields", NULL};
static const char *const pg_set_body[] = {"set", NULL};
static const char *const pg_row_body[] = {"row", NULL};
static const char *const pg_batch_body[] = {"ops", NULL};
static const char *const lock_revoke_body[] = {"reason", NULL};
static const char *const sem_revoke_body[] = {"fence", "reason", NULL};
static const char *const watch_query[] = {"watch", "fence", "wait_ms", NULL};
static const char *const lockset_acquire_body[] = {"names",      "ttl_ms",      "wait_ms", "owner",
                                                   "request_id", "max_hold_ms", NULL};
static const char *const lockset_renew_body[] = {"tokens", "ttl_ms", NULL};
static const char *const lockset_release_body[] = {"tokens", NULL};
static const char *const audit_query[] = {"resource", "lock",  "since_ms", "limit",
                                          "after_id", "owner", "until_ms", NULL};
static const char *const audit_summary_query[] = {"since_ms", "until_ms", NULL};
static const char *const list_query[] = {"prefix", "limit", "cursor", NULL};

const struct route api_routes[] = {
    {HTTP_GET, "/healthz", handle_healthz, "healthz", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, "/readyz", handle_readyz, "readyz", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, "/metrics", handle_metrics, "metrics", SCOPE_METRICS, NULL, NULL},
    {HTTP_GET, "/v1/openapi.json", handle_openapi, "openapi", SCOPE_KEY, NULL, NULL},
    {HTTP_GET, "/v1/locks", handle_lock_list, "lock_list", SCOPE_KEY, NULL, list_query},
    {HTTP_POST, "/v1/locks/{name*}/acquire", handle_lock_acquire, "lock_acquire", SCOPE_LOCK,
     lock_acquire_body, NULL},
    {HTTP_POST, "/v1/locks/{name*}/renew", handle_lock_renew, "lock_renew", SCOPE_LOCK, renew_body,
     NULL},
    {HTTP_POST, "/v1/locks/{name*}/release", handle_lock_release, "lock_release", SCOPE_LOCK,
     release_body, NULL},
    {HTTP_POST, "/v1/locks/{name*}/revoke", handle_lock_revoke, "lock_revoke", SCOPE_ADMIN,
     lock_revoke_body, NULL},
    {HTTP_GET, "/v1/locks/{name*}", handle_lock_status, "lock_status", SCOPE_LOCK, NULL,
     watch_query},
    {HTTP_POST, "/v1/locksets/acquire", handle_lockset_acquire, "lockset_acquire", SCOPE_KEY,
     lockset_acquire_body, NULL},
    {HTTP_POST, "/v1/locksets/renew", handle_lockset_renew, "lockset_renew", SCOPE_KEY,
     lockset_renew_body, NULL},
    {HTTP_POST, "/v1/locksets/release", handle_lockset_release, "lockset_release", SCOPE_KEY,
     lockset_release_body, NULL},
    {HTTP_GET, "/v1/semaphores", handle_sem_list, "sem_list", SCOPE_KEY, NULL, list_query},
    {HTTP_POST, "/v1/semaphores/{name*}/acquire", handle_sem_acquire, "sem_acquire",
     SCOPE_SEMAPHORE, sem_acquire_body, NULL},
    {HTTP_POST, "/v1/semaphores/{name*}/renew", handle_sem_renew, "sem_renew", SCOPE_SEMAPHORE,
     renew_body, NULL},
    {HTTP_POST, "/v1/semaphores/{name*}/release", handle_sem_release, "sem_release",
     SCOPE_SEMAPHORE, release_body, NULL},
    {HTTP_POST, "/v1/semaphores/{name*}/revoke", handle_sem_revoke, "sem_revoke", SCOPE_ADMIN,
     sem_revoke_body, NULL},
    {HTTP_GET, "/v1/semaphores/{name*}", handle_sem_status, "sem_status", SCOPE_SEMAPHORE, NULL,
     watch_query},
    {HTTP_PUT, "/v1/redis/{key*}", handle_redis_put, "redis_put", SCOPE_REDIS_WRITE, redis_put_body,
     NULL},
    {HTTP_PATCH, "/v1/redis/{key*}", handle_redis_patch, "redis_patch", SCOPE_REDIS_WRITE,
     redis_patch_body, NULL},
    {HTTP_DELETE, "/v1/redis/{key*}", handle_redis_delete, "redis_delete", SCOPE_REDIS_WRITE, NULL,
     NULL},
    {HTTP_GET, "/v1/redis/{key*}", handle_redis_get, "redis_get", SCOPE_REDIS_READ, NULL, NULL},
    {HTTP_POST, "/v1/pg/batch", handle_pg_batch, "pg_batch", SCOPE_KEY, pg_batch_body, NULL},
    {HTTP_POST, "/v1/pg/{table}", handle_pg_post, "pg_post", SCOPE_PG_WRITE, pg_row_body, NULL},
    {HTTP_GET, "/v1/pg/{table}/{key*}", handle_pg_get, "pg_get", SCOPE_PG_READ, NULL, NULL},
    {HTTP_PATCH, "/v1/pg/{table}/{key*}", handle_pg_patch, "pg_patch", SCOPE_PG_WRITE, pg_set_body,
     NULL},
    {HTTP_PUT, "/v1/pg/{table}/{key*}", handle_pg_put, "pg_put", SCOPE_PG_WRITE, pg_row_body, NULL},
    {HTTP_DELETE, "/v1/pg/{table}/{key*}", handle_pg_delete, "pg_delete", SCOPE_PG_WRITE, NULL,
     NULL},
    {HTTP_GET, "/v1/audit/rejections", handle_audit_rejections, "audit_rejections",
     SCOPE_AUDIT_READ, NULL, audit_query},
    {HTTP_GET, "/v1/audit/summary", handle_audit_summary, "audit_summary", SCOPE_AUDIT_READ, NULL,
     audit_summary_query},
    {HTTP_GET, "/v1/whoami", handle_whoami, "whoami", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, "/ui", handle_ui_page, "ui", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, "/ui/", handle_ui_page, "ui", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, "/ui/{file}", handle_ui_file, "ui", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, NULL, NULL, NULL, SCOPE_ADMIN, NULL, NULL},
};
