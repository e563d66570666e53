/*
 * redis.c - hiredis connections, script calls and the doorbell subscription.
 * Connections are per thread (a pthread key frees them when the thread ends),
 * so no lock is ever held across a round trip. Script SHA1s are computed locally
 * at start-up; a NOSCRIPT reply (a restarted or flushed Redis) loads the script
 * and retries once. Script results are JSON texts, decoded here.
 */
#include "store/redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "embedded.h"
#include "util/log.h"
#include "util/metrics.h"

#define MAX_SCRIPTS 64
#define MAX_ARGS    32

static struct {
    char host[256];
    int port;
    int db;
    char user[256];     /* ACL user of redis://user:password@..., "" for the default user */
    char password[256]; /* password of the URL, "" for none */
    long long timeout_ms;
    char shas[MAX_SCRIPTS][41];
    char *sources[MAX_SCRIPTS];
    size_t nscripts;
    redis_connect_hook hook;
    pthread_key_t conn_key;
    bool initialized; /* redis_init ran: conn_key exists */
} rds;

static void free_context(void *ctx)
{
    redisFree(ctx);
}

static int parse_url(const char *url, struct fg_error *err)
{
    const char *p = url + strlen("redis://");
    const char *at = strrchr(p, '@');
    rds.user[0] = rds.password[0] = '\0';
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        if (colon != NULL)
            snprintf(rds.user, sizeof rds.user, "%.*s", (int)(colon - p), p);
        snprintf(rds.password, sizeof rds.password, "%.*s", (int)(at - pw), pw);
        p = at + 1;
    }
    const char *slash = strchr(p, '/');
    const char *colon = memchr(p, ':', slash ? (size_t)(slash - p) : strlen(p));
    const char *host_end = colon ? colon : (slash ? slash : p + strlen(p));
    snprintf(rds.host, sizeof rds.host, "%.*s", (int)(host_end - p), p);
    rds.port = colon ? atoi(colon + 1) : 6379;
    rds.db = slash && slash[1] ? atoi(slash + 1) : 0;
    if (rds.host[0] == '\0' || rds.port <= 0 || rds.port > 65535 || rds.db < 0)
        return fg_fail(err, FG_ERR_CONFIG, "redis_url: cannot parse '%s'", url);
    return 0;
}

static const char *library_source(const char *name, size_t len)
{
    for (size_t j = 0; embedded_lua[j].name != NULL; j++)
        if (strlen(embedded_lua[j].name) == len && strncmp(embedded_lua[j].name, name, len) == 0)
            return embedded_lua[j].source;
    return NULL;
}

/* The source sent to Redis for script i: the file itself, preceded by the
 * libraries its first line names, in order ("-- uses: lib_a.lua lib_b.lua"). */
static int script_source(size_t i, struct fg_error *err)
{
    static const char marker[] = "-- uses: ";
    const char *src = embedded_lua[i].source;
    size_t size = strlen(src) + 1;
    const char *libs = strncmp(src, marker, sizeof marker - 1) == 0 ? src + sizeof marker - 1 : "";
    size_t libs_len = strcspn(libs, "\r\n");
    for (size_t at = 0; at < libs_len;) {
        size_t len = strcspn(libs + at, " \r\n");
        const char *lib = library_source(libs + at, len);
        if (len > 0 && lib == NULL)
            return fg_fail(err, FG_ERR_INTERNAL, "lua/%s uses unknown library %.*s",
                           embedded_lua[i].name, (int)len, libs + at);
        size += len > 0 ? strlen(lib) + 1 : 0;
        at += len + 1;
    }
    rds.sources[i] = malloc(size);
    FG_ASSERT(rds.sources[i] != NULL);
    rds.sources[i][0] = '\0';
    for (size_t at = 0; at < libs_len;) {
        size_t len = strcspn(libs + at, " \r\n");
        if (len > 0) {
            strcat(rds.sources[i], library_source(libs + at, len));
            strcat(rds.sources[i], "\n");
        }
        at += len + 1;
    }
    strcat(rds.sources[i], src);
    return 0;
}

int redis_init(const struct config *cfg, struct fg_error *err)
{
    if (parse_url(cfg->redis_url, err) != 0)
        return -1;
    rds.timeout_ms = cfg->request_timeout_ms;
    for (rds.nscripts = 0; embedded_lua[rds.nscripts].name != NULL; rds.nscripts++) {
        FG_ASSERT(rds.nscripts < MAX_SCRIPTS);
        if (script_source(rds.nscripts, err) != 0)
            return -1;
        const char *src = rds.sources[rds.nscripts];
        unsigned char digest[SHA_DIGEST_LENGTH];
        SHA1((const unsigned char *)src, strlen(src), digest);
        for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
            snprintf(rds.shas[rds.nscripts] + 2 * i, 3, "%02x", digest[i]);
    }
    if (pthread_key_create(&rds.conn_key, free_context) != 0)
        return fg_fail(err, FG_ERR_INTERNAL, "pthread_key_create failed");
    rds.initialized = true;
    return 0;
}

void redis_set_connect_hook(redis_connect_hook hook)
{
    rds.hook = hook;
}

static struct timeval ms_to_timeval(long long ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* Runs one command on ctx and checks for a transport error. Returns the reply or NULL. */
static redisReply *command_argv(redisContext *ctx, int argc, const char **argv, const size_t *lens,
                                struct fg_error *err)
{
    redisReply *reply = redisCommandArgv(ctx, argc, argv, lens);
    if (reply == NULL) {
        metrics_backend_error(METRIC_BACKEND_REDIS);
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s", ctx->errstr);
    }
    return reply;
}

/* Opens an authenticated connection on the right database; NULL on failure. */
static redisContext *connect_new(long long timeout_ms, struct fg_error *err)
{
    struct timeval tv = ms_to_timeval(1000);
    redisContext *ctx = redisConnectWithTimeout(rds.host, rds.port, tv);
    if (ctx == NULL || ctx->err) {
        metrics_backend_error(METRIC_BACKEND_REDIS);
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: cannot connect to %s:%d: %s", rds.host,
                rds.port, ctx ? ctx->errstr : "out of memory");
        redisFree(ctx);
        return NULL;
    }
    redisSetTimeout(ctx, ms_to_timeval(timeout_ms));
    redisEnableKeepAlive(ctx);
    char db[16];
    snprintf(db, sizeof db, "%d", rds.db);
    const char *auth_default[] = {"AUTH", rds.password};
    const char *auth_user[] = {"AUTH", rds.user, rds.password};
    const char *select[] = {"SELECT", db};
    redisReply *r;
    if (rds.password[0] != '\0') {
        r = rds.user[0] != '\0' ? command_argv(ctx, 3, auth_user, NULL, err)
                                : command_argv(ctx, 2, auth_default, NULL, err);
        bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
        if (r != NULL && !ok)
            fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: AUTH refused: %.120s", r->str);
        freeReplyObject(r);
        if (!ok)
            goto fail;
    }
    r = command_argv(ctx, 2, select, NULL, err);
    bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    freeReplyObject(r);
    if (!ok)
        goto fail;
    metrics_backend_connect(METRIC_BACKEND_REDIS);
    return ctx;
fail:
    if (err->code != FG_ERR_BACKEND_UNAVAILABLE)
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: authentication or SELECT failed");
    redisFree(ctx);
    return NULL;
}

/* The calling thread's connection, connecting (and running the hook) if needed. */
static redisContext *thread_conn(struct fg_error *err)
{
    redisContext *ctx = pthread_getspecific(rds.conn_key);
    if (ctx != NULL)
        return ctx;
    ctx = connect_new(rds.timeout_ms, err);
    if (ctx == NULL)
        return NULL;
    pthread_setspecific(rds.conn_key, ctx);
    if (rds.hook != NULL && rds.hook(err) != 0) {
        redis_thread_done();
        return NULL;
    }
    return ctx;
}

void redis_shutdown(void)
{
    redis_thread_done();
    for (size_t i = 0; i < rds.nscripts; i++)
        free(rds.sources[i]);
    rds.nscripts = 0;
}

void redis_thread_done(void)
{
    if (!rds.initialized)
        return;
    redisContext *ctx = pthread_getspecific(rds.conn_key);
    pthread_setspecific(rds.conn_key, NULL);
    redisFree(ctx);
}

/* Runs argv on this thread's connection; drops the connection after an I/O error. */
static redisReply *thread_command(int argc, const char **argv, const size_t *lens,
                                  struct fg_error *err)
{
    redisContext *ctx = thread_conn(err);
    if (ctx == NULL)
        return NULL;
    redisReply *reply = command_argv(ctx, argc, argv, lens, err);
    if (reply == NULL)
        redis_thread_done();
    return reply;
}

static long script_index(const char *name)
{
    for (size_t i = 0; i < rds.nscripts; i++)
        if (strcmp(embedded_lua[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* True if the error reply says that Redis refuses writes for lack of memory
 * (maxmemory with noeviction). */
static bool is_oom(const redisReply *reply)
{
    return strncmp(reply->str, "OOM ", 4) == 0 || strstr(reply->str, " OOM ") != NULL;
}

#define OOM_LOG_EVERY_MS 60000

/* Counts a refusal for memory and logs it once a minute at most, so that a
 * full Redis does not flood the log with one line per request. */
static void note_oom(void)
{
    static atomic_llong next_log_ms;
    metrics_redis_oom();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    long long due = atomic_load(&next_log_ms);
    if (now < due || !atomic_compare_exchange_strong(&next_log_ms, &due, now + OOM_LOG_EVERY_MS))
        return;
    log_message(LOG_ERROR, "redis_out_of_memory",
                "redis refuses writes: used memory is over maxmemory; writes answer 503 until "
                "memory is freed or maxmemory raised");
}

static int decode_result(const redisReply *reply, const char *name, json_t **out,
                         struct fg_error *err)
{
    if (reply->type == REDIS_REPLY_ERROR && is_oom(reply)) {
        note_oom();
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis is out of memory");
    }
    if (reply->type == REDIS_REPLY_ERROR)
        return fg_fail(err, FG_ERR_INTERNAL, "redis script %s: %s", name, reply->str);
    if (reply->type != REDIS_REPLY_STRING)
        return fg_fail(err, FG_ERR_INTERNAL, "redis script %s: reply is not a JSON text", name);
    json_error_t jerr;
    *out = json_loadb(reply->str, reply->len, JSON_DECODE_ANY, &jerr);
    if (*out != NULL)
        return 0;
    if (json_error_code(&jerr) == json_error_invalid_utf8)
        return fg_fail(err, FG_ERR_CONFLICT, "the stored value is not UTF-8 text");
    return fg_fail(err, FG_ERR_INTERNAL, "redis script %s: bad JSON: %s", name, jerr.text);
}

int redis_script(const char *name, size_t nkeys, const char *const *argv, size_t argc, json_t **out,
                 struct fg_error *err)
{
    long index = script_index(name);
    FG_ASSERT(index >= 0 && argc + 3 <= MAX_ARGS);
    const char *cmd[MAX_ARGS];
    char numkeys[16];
    snprintf(numkeys, sizeof numkeys, "%zu", nkeys);
    cmd[0] = "EVALSHA";
    cmd[1] = rds.shas[index];
    cmd[2] = numkeys;
    for (size_t i = 0; i < argc; i++)
        cmd[3 + i] = argv[i];
    redisReply *reply = thread_command((int)argc + 3, cmd, NULL, err);
    if (reply == NULL)
        return -1;
    if (reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(reply);
        cmd[0] = "EVAL";
        cmd[1] = rds.sources[index];
        reply = thread_command((int)argc + 3, cmd, NULL, err);
        if (reply == NULL)
            return -1;
    }
    int rc = decode_result(reply, name, out, err);
    freeReplyObject(reply);
    return rc;
}

/* Runs a command whose reply must be a status or string, copying it into out. */
static int simple_command(int argc, const char **argv, char *out, size_t cap, struct fg_error *err)
{
    redisReply *reply = thread_command(argc, argv, NULL, err);
    if (reply == NULL)
        return -1;
    int rc = 0;
    if (reply->type == REDIS_REPLY_ERROR)
        rc = fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s", reply->str);
    else if (out != NULL &&
             (reply->type == REDIS_REPLY_STATUS || reply->type == REDIS_REPLY_STRING))
        snprintf(out, cap, "%s", reply->str);
    else if (out != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
             reply->element[1]->type == REDIS_REPLY_STRING)
        snprintf(out, cap, "%s", reply->element[1]->str);
    else if (out != NULL)
        snprintf(out, cap, "%s", "");
    freeReplyObject(reply);
    return rc;
}

int redis_ping(struct fg_error *err)
{
    const char *argv[] = {"PING"};
    return simple_command(1, argv, NULL, 0, err);
}

int redis_eviction_policy(char *out, size_t cap, struct fg_error *err)
{
    const char *argv[] = {"CONFIG", "GET", "maxmemory-policy"};
    return simple_command(3, argv, out, cap, err);
}

/* Reads messages from a subscribed connection until an error or *stop. */
static void follow_messages(redisContext *ctx, const struct redis_subscriber *sub,
                            const volatile bool *stop)
{
    while (!*stop) {
        void *raw = NULL;
        if (redisGetReply(ctx, &raw) != REDIS_OK) {
            if (ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                ctx->err = 0;
                ctx->errstr[0] = '\0';
                continue;
            }
            return;
        }
        redisReply *r = raw;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[2]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "message") == 0)
            sub->on_message(r->element[2]->str, r->element[2]->len, sub->ctx);
        freeReplyObject(r);
    }
}

void redis_subscribe(const struct redis_subscriber *sub, const volatile bool *stop)
{
    bool warned = false;
    while (!*stop) {
        struct fg_error err = {0};
        redisContext *ctx = connect_new(200, &err);
        redisReply *r = NULL;
        if (ctx != NULL) {
            const char *argv[] = {"SUBSCRIBE", sub->channel};
            r = command_argv(ctx, 2, argv, NULL, &err);
        }
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            if (!warned)
                log_message(LOG_WARN, "doorbell_down", "%s", err.msg);
            warned = true;
            freeReplyObject(r);
            redisFree(ctx);
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        freeReplyObject(r);
        if (warned)
            log_message(LOG_INFO, "doorbell_up", "subscribed to %s", sub->channel);
        warned = false;
        sub->on_subscribed(sub->ctx);
        follow_messages(ctx, sub, stop);
        redisFree(ctx);
    }
}
