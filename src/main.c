/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - start-up, signals and wiring. Reads the configuration, prepares the
 * backends (migrations, token secret, fence sequence), starts the janitor, the
 * doorbell and the HTTP server, then waits for SIGTERM or SIGINT and drains:
 * no new connections, waiters answer 503, in-flight requests finish, exit 0;
 * a drain out of time makes the Redis calls still to come fail at once, and
 * waits a request deadline more for the calls under way and every answer's
 * writing (the daemon's stop closes connections with their answers unsent).
 * SIGHUP re-reads the configuration and puts its API keys in force (a
 * configuration that does not load keeps the keys in force and is logged);
 * parked requests of keys it removed or changed check them again at once.
 * `fencegate migrate` applies the migrations and exits; `fencegate keys new`
 * makes an API key; `fencegate fence-column TABLE` moves a table's fences into
 * its fence_column. Under systemd (Type=notify) it reports READY=1 once it
 * serves and STOPPING=1 when it drains. Errors that stop start-up are logged as
 * JSON lines like everything else. The threads that ask the backends for
 * /readyz and /metrics (http/readiness.h) start before the HTTP server and
 * stop after it, before the backends close; with the janitor and the doorbell
 * they get a second to finish a backend call, else are left behind unjoined
 * and the backends are not closed, so a stalled backend does not hold the exit.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/keygen.h"
#include "auth/keyset.h"
#include "config.h"
#include "fglimits.h"
#include "gateway.h"
#include "http/readiness.h"
#include "http/routes.h"
#include "http/server.h"
#include "http/tls.h"
#include "janitor.h"
#include "lease/doorbell.h"
#include "lease/fence.h"
#include "lease/lease_keys.h"
#include "lease/lease_ops.h"
#include "lease/waiter.h"
#include "store/audit/audit_stream.h"
#include "store/backend/pg.h"
#include "store/backend/redis.h"
#include "store/backend/redis_url.h"
#include "store/backend/secret.h"
#include "store/fenced/fenced_pg.h"
#include "util/alarm.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/notify.h"
#include "util/procstat.h"

#define STARTUP_WAIT_MS 30000
#define DRAIN_WAIT_MS   10000
#define STOP_GRACE_MS   1000 /* after the drain, for the threads that call the backends */
#define FLUSH_WAIT_MS   500 /* past a cut-off drain's calls under way, for their answers' writing */

struct gateway gw;

static const char usage[] =
    "usage: fencegate [migrate | audit-dead-letters | fence-column TABLE |\n"
    "                  keys new --id ID --scope S ...]\n"
    "                 [-h | --help] [--version]\n"
    "\n"
    "Serves the fencegate HTTP API: leases and fencing tokens from Redis, fenced\n"
    "writes to Postgres and Redis, and the audit of rejected stale writes.\n"
    "\n"
    "  migrate     apply pending SQL migrations and exit\n"
    "  keys new    print a fresh API key once and its auth.keys entry (SHA-256 only)\n"
    "  audit-dead-letters\n"
    "              print the audit records Postgres refused (stream fg:audit:dead),\n"
    "              oldest first, one JSON object per line, and exit\n"
    "  fence-column TABLE\n"
    "              give TABLE its configured fence_column (a bigint, if missing) and\n"
    "              move its fences there from fencegate.resource_fences, then exit;\n"
    "              stop every gateway first (docs/operations.md)\n"
    "  -h, --help  show this text\n"
    "  --version   show the version\n"
    "\n"
    "Configuration (environment overrides the JSON file):\n"
    "  FENCEGATE_LISTEN      host:port to serve (default 127.0.0.1:8480)\n"
    "  FENCEGATE_PROBE_LISTEN  host:port of a second listener serving /healthz,\n"
    "                        /readyz and /metrics on a thread of their own (default none)\n"
    "  FENCEGATE_REDIS_URL   redis://[[user]:password@]host:port/db, or\n"
    "                        redis-sentinel://[[user]:password@]host:port,.../<master>[/db], or\n"
    "                        redis-cluster://[[user]:password@]host:port,... (Redis Cluster)\n"
    "  FENCEGATE_PG_DSN      libpq conninfo or URI; several hosts with\n"
    "                        target_session_attrs=read-write follow a promoted standby\n"
    "  FENCEGATE_CONFIG      path of the JSON configuration file\n"
    "  FENCEGATE_SECRET      token-signing key (default: generated, kept in Postgres)\n"
    "  FENCEGATE_SECRET_FILE JSON array of signing keys [{id, secret}]: the first signs,\n"
    "                        all verify (rotation); re-read on SIGHUP\n"
    "  FENCEGATE_LOG_LEVEL   debug, info, warn or error\n"
    "  FENCEGATE_TLS_CERT, FENCEGATE_TLS_KEY  PEM certificate and key: serve HTTPS;\n"
    "                        re-read on SIGHUP (new sessions get the new certificate)\n"
    "  FENCEGATE_TLS_PRIORITIES  GnuTLS priority string that tightens HTTPS\n"
    "                        (TLS 1.2 and 1.3 only, whatever it says)\n"
    "  FENCEGATE_AUTH_MODE   required or off (default: off on loopback, else required)\n"
    "  FENCEGATE_AUTH_KEYS_FILE  JSON array of API key entries, re-read on SIGHUP\n"
    "  FENCEGATE_HTTP_THREADS, FENCEGATE_PG_POOL_SIZE\n"
    "  FENCEGATE_REDIS_PIPELINE_FROM  0: every Redis call shares one pipelined\n"
    "                        connection; N: one made while fewer than N others are\n"
    "                        in flight goes on its thread's own connection\n"
    "\n"
    "The operator console is served at /ui/ (\"ui\": false in the file turns it off).\n"
    "\n"
    "Signals: SIGTERM/SIGINT drain and exit; SIGHUP re-reads the API keys and secrets.\n"
    "Logs are JSON lines on stderr. Under systemd (Type=notify) it sends READY=1 to\n"
    "$NOTIFY_SOCKET once it serves. See fencegate(8).\n";

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

/* Applies migrations, retrying while Postgres is still starting. */
static int migrate_when_ready(struct fg_error *err)
{
    int64_t deadline = clock_mono_ms() + STARTUP_WAIT_MS;
    bool told = false;
    for (;;) {
        if (pg_migrate(err) == 0)
            return 0;
        if (err->code != FG_ERR_BACKEND_UNAVAILABLE || clock_mono_ms() > deadline)
            return -1;
        if (!told)
            log_message(LOG_WARN, "backend_down", "waiting for postgres: %s", err->msg);
        told = true;
        clock_sleep_ms(250);
    }
}

/* Warns when Redis may evict keys, or when it would not say whether it may. */
static void warn_eviction_policy(void)
{
    char policy[64];
    struct fg_error err = {0};
    if (redis_eviction_policy(policy, sizeof policy, &err) != 0) {
        log_message(LOG_WARN, "eviction_policy_unknown", "%s", err.msg);
        return;
    }
    if (strcmp(policy, "noeviction") != 0)
        log_event(LOG_WARN, "eviction_policy_unsafe",
                  json_pack("{s:s, s:s}", "policy", policy, "detail", REDIS_EVICTION_RISK));
}

/* Says at start-up what keeps Redis from serving the gateway (it does not
 * answer, or refuses the gateway's credentials), as backend_down, else warns
 * of its eviction policy (which Redis cannot be asked about until then).
 * Start-up goes on either way: the gateway is unready until Redis answers. */
static void check_redis(void)
{
    struct fg_error err = {0};
    if (janitor_beat(&err) != 0) {
        log_message(LOG_WARN, "backend_down", "%s", err.msg);
        return;
    }
    warn_eviction_policy();
}

/* Warns when Postgres does not track its sessions' activity for the gateway's
 * connections: a revoke then cannot wait for the writes in flight at its
 * revocation (store/fenced/revocations.h revocation_drain). */
static void warn_untracked_activity(void)
{
    json_t *rows = NULL;
    struct fg_error err = {0};
    if (pg_query(NULL, "SELECT current_setting('track_activities') AS tracked", 0, NULL, &rows,
                 &err) != 0)
        return;
    const char *tracked = json_string_value(json_object_get(json_array_get(rows, 0), "tracked"));
    if (tracked != NULL && strcmp(tracked, "off") == 0)
        log_message(LOG_WARN, "track_activities_off",
                    "postgres does not track the gateway's sessions (track_activities is off): "
                    "a revoke cannot wait for the writes in flight, which may commit after it "
                    "answers; turn track_activities on");
    json_decref(rows);
}

/* Puts the token signing keys of cfg (or the one kept in Postgres) in force;
 * warns when the key is the database's, which is for a development run. */
static int secrets_take(const struct config *cfg, struct fg_error *err)
{
    struct token_keyring *ring = malloc(sizeof *ring);
    FG_ASSERT(ring != NULL);
    if (secret_load(cfg, ring, err) != 0) {
        free(ring);
        return -1;
    }
    if (cfg->keyring == NULL)
        log_event(LOG_WARN, "signing_key_in_database",
                  json_pack("{s:s}", "detail",
                            "tokens are signed with the key generated in fencegate.settings: "
                            "whoever reads that table can sign tokens; deployments name theirs in "
                            "secret_file (FENCEGATE_SECRET_FILE)"));
    secret_publish(ring);
    return 0;
}

/* Parses the Redis URL and puts in force the key layout it asks for: the keys
 * shared by all leases per hash slot on a Redis Cluster (docs/cluster.md),
 * once for the deployment otherwise; before any key is made. */
static int redis_take(const struct config *cfg, struct fg_error *err)
{
    struct redis_url url;
    if (redis_url_parse(cfg->redis_url, &url, err) != 0)
        return -1;
    lease_keys_set_layout(url.cluster ? LEASE_KEYS_PER_SLOT : LEASE_KEYS_ONE_REDIS);
    return redis_init(cfg, err);
}

static int prepare_backends(struct config *cfg, struct fg_error *err)
{
    if (redis_take(cfg, err) != 0 || pg_init(cfg, err) != 0 || migrate_when_ready(err) != 0 ||
        fenced_pg_init(cfg, err) != 0 || secrets_take(cfg, err) != 0)
        return -1;
    redis_set_connect_hook(fence_check_on_connect);
    check_redis();
    warn_untracked_activity();
    return 0;
}

/* Logs why the process stops before or instead of serving, as one JSON line:
 * {"event":"startup_failed","code":"config","detail":...}; code "config" exits 2. */
static void log_startup_failure(const struct fg_error *err)
{
    log_event(LOG_ERROR, "startup_failed",
              json_pack("{s:s, s:o}", "code", fg_code_name(err->code), "detail",
                        fgjson_string(err->msg)));
}

/* Warns whenever cfg turns auth off, loudly when a gateway reachable beyond
 * loopback lets anyone in (or, on its probe listener, read its metrics). */
static void warn_auth_off(const struct config *cfg)
{
    if (!cfg->keyset->required && cfg->probe_host != NULL &&
        !config_host_is_loopback(cfg->probe_host))
        log_event(LOG_WARN, "auth_off_beyond_loopback",
                  json_pack("{s:s, s:s}", "host", cfg->probe_host, "detail",
                            "auth.mode is off and the probe listener (probe_listen) listens beyond "
                            "loopback: anyone who reaches it may read /metrics"));
    if (!cfg->keyset->required && !config_host_is_loopback(cfg->listen_host))
        log_event(LOG_WARN, "auth_off_beyond_loopback",
                  json_pack("{s:s, s:s}", "host", cfg->listen_host, "detail",
                            "auth.mode is off and the gateway listens beyond loopback: anyone "
                            "who reaches it may take any lock and write any configured row or "
                            "key"));
    else if (!cfg->keyset->required)
        log_event(LOG_WARN, "auth_off",
                  json_pack("{s:s, s:s}", "host", cfg->listen_host, "detail",
                            cfg->keyset->mode_chosen
                                ? "auth.mode is off: every local process, and every client of a "
                                  "proxy on this host, may take any lock and write any "
                                  "configured row or key"
                                : "auth is off by default on loopback: every local process may "
                                  "take any lock and write any configured row or key; requests "
                                  "through a proxy (Forwarded, X-Forwarded-*, X-Real-IP) are "
                                  "refused until auth.mode is set"));
}

/* Puts cfg's API keys in force (cfg gives them up); a gateway about to serve
 * (serving) warns if auth is off, a command that serves nothing stays quiet. */
static void auth_take(struct config *cfg, bool serving)
{
    if (serving)
        warn_auth_off(cfg);
    auth_publish(cfg->keyset);
    cfg->keyset = NULL;
}

/* Loads the HTTPS certificate and key of cfg, if it names them; *out stays
 * NULL for plain HTTP. */
static int tls_load(const struct config *cfg, struct tls_identity **out, struct fg_error *err)
{
    *out = NULL;
    if (cfg->tls_cert_file == NULL)
        return 0;
    return tls_identity_load(cfg->tls_cert_file, cfg->tls_key_file, out, err);
}

/* The certificate of a reloaded configuration: a new one is checked, and
 * swapped in for new sessions; switching HTTPS on or off needs a restart. */
static int tls_reload(const struct config *cfg, struct tls_identity **out, struct fg_error *err)
{
    if ((cfg->tls_cert_file != NULL) != (tls_enabled() != 0))
        return fg_fail(err, FG_ERR_CONFIG,
                       "HTTPS can be switched on or off only by a restart (tls_cert_file)");
    return tls_load(cfg, out, err);
}

/* SIGHUP: loads the configuration again and puts its API keys and its token
 * signing keys in force (a gateway whose one secret lives in Postgres keeps it);
 * the parked requests of API keys it removed or changed are woken to check
 * theirs, so that none is granted or told anything more. */
static void reload(void)
{
    struct config fresh;
    struct fg_error err = {0};
    if (config_load(&fresh, env_lookup, &err) != 0) {
        log_message(LOG_ERROR, "reload_failed", "configuration kept as it was: %s", err.msg);
        config_free(&fresh);
        return;
    }
    struct tls_identity *tls = NULL;
    if (tls_reload(&fresh, &tls, &err) != 0 ||
        (fresh.keyring != NULL && secrets_take(&fresh, &err) != 0)) {
        log_message(LOG_ERROR, "reload_failed", "configuration kept as it was: %s", err.msg);
        tls_identity_free(tls);
        config_free(&fresh);
        return;
    }
    if (tls != NULL)
        tls_publish(tls);
    auth_take(&fresh, true);
    waiter_wake_keys(auth_current());
    const struct token_keyring *ring = secret_current();
    log_event(LOG_INFO, "reloaded",
              json_pack("{s:I, s:b, s:s, s:I}", "keys", (json_int_t)auth_current()->nkeys,
                        "auth_required", auth_current()->required, "signing_key", ring->keys[0].id,
                        "verifying_keys", (json_int_t)ring->nkeys));
    config_free(&fresh);
}

/* The waiter registry resumes the requests it parks through the HTTP server. */
static void resume_request(void *request)
{
    http_request_wake(request);
}

/* Wakes the parked requests to answer 503 until no request is in flight (each
 * answered and its answer written: the daemon's stop closes a connection
 * without writing what is queued on it), or until deadline_ms. True if none
 * is left. */
static bool drain_until(int64_t deadline_ms)
{
    while (http_server_in_flight(false) > 0 && clock_mono_ms() < deadline_ms) {
        waiter_wake_all(WAKE_DRAIN);
        clock_sleep_ms(10);
    }
    return http_server_in_flight(false) == 0;
}

static int serve(struct config *cfg, struct fg_error *err)
{
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    doorbell_on_orphan(LEASE_KIND_LOCK, lock_give_back_orphan);
    doorbell_on_orphan(LEASE_KIND_SEMAPHORE, sem_give_back_orphan);
    if (alarm_init(err) != 0 || waiter_registry_init(resume_request, err) != 0 ||
        redis_watch_start(err) != 0 || janitor_start(err) != 0 || doorbell_start(err) != 0 ||
        readiness_start(cfg->probe_timeout_ms, err) != 0 ||
        http_server_start(cfg, api_routes, err) != 0)
        return -1;
    log_event(LOG_INFO, "serving",
              json_pack("{s:s, s:i, s:s}", "host", cfg->listen_host, "port", cfg->listen_port,
                        "instance", gw.instance_id));
    if (cfg->probe_host != NULL)
        log_event(LOG_INFO, "serving_probes",
                  json_pack("{s:s, s:i, s:[s,s,s]}", "host", cfg->probe_host, "port",
                            cfg->probe_port, "routes", "/healthz", "/readyz", "/metrics"));
    if (notify_send("READY=1\nSTATUS=serving") < 0)
        log_message(LOG_WARN, "notify_failed", "could not send READY=1 to $NOTIFY_SOCKET");
    int sig = 0;
    while (sigwait(&signals, &sig) == 0 && sig == SIGHUP)
        reload();
    log_message(LOG_INFO, "draining", "signal %d", sig);
    (void)notify_send("STOPPING=1\nSTATUS=draining");
    atomic_store(&gw.draining, true);
    http_server_quiesce();
    if (!drain_until(clock_mono_ms() + DRAIN_WAIT_MS)) {
        redis_cut_off(); /* the give-ups left must not each wait for Redis */
        (void)drain_until(clock_mono_ms() + cfg->request_timeout_ms + FLUSH_WAIT_MS);
    }
    http_server_stop();
    return 0;
}

/* Stops the threads that call the backends, giving them until STOP_GRACE_MS
 * (request_timeout_ms if shorter) from now to finish the call they are in: one
 * still waiting for a stalled backend then is left behind, and the process
 * exits with it. Every thread is asked to end before any is joined, so that
 * each has the whole grace: a join that waits for a stalled one out must not
 * leave the next ones no time to see they were asked. The subscribers (the
 * doorbell's, the sentinel watcher), which wait for no answer, first. True if
 * every one ended. */
static bool stop_backend_threads(long long request_timeout_ms)
{
    int64_t until =
        clock_mono_ms() + (request_timeout_ms < STOP_GRACE_MS ? request_timeout_ms : STOP_GRACE_MS);
    doorbell_stop_ask();
    redis_watch_stop_ask();
    readiness_stop_ask();
    janitor_stop_ask();
    bool doorbell = doorbell_stop(until), watcher = redis_watch_stop(until),
         readiness = readiness_stop(until), janitor = janitor_stop(until);
    if (readiness && janitor && doorbell && watcher)
        return true;
    log_event(LOG_WARN, "exit_without_waiting",
              json_pack("{s:b, s:b, s:b, s:b, s:s}", "readiness", !readiness, "janitor", !janitor,
                        "doorbell", !doorbell, "sentinel_watcher", !watcher, "detail",
                        "threads still waiting for a backend are left behind: the process exits "
                        "without closing its backend connections"));
    return false;
}

/* Flushes standard output: returns exit status 0 if everything printed there
 * was written, else complains on stderr and returns 1 (a full disk, a closed
 * pipe: what the command printed is lost, so it did not succeed). */
static int stdout_done(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    fprintf(stderr, "fencegate: cannot write to standard output: %s\n", strerror(errno));
    return 1;
}

/* Complains about the command line (what is wrong with which argument) and
 * the usage on stderr; returns the exit status of a bad command line. */
static int usage_error(const char *what, const char *why)
{
    fprintf(stderr, "fencegate: %s: %s\n%s", what, why, usage);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "keys") == 0)
        return keygen_main(argc - 1, argv + 1, stdout, stderr);
    bool migrate_only = false, list_dead = false;
    const char *move_table = NULL; /* fence-column TABLE */
    const char *command = NULL;    /* the one command given, if any */
    procstat_init();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return stdout_done();
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("fencegate %s\n", FG_VERSION);
            return stdout_done();
        }
    }
    for (int i = 1; i < argc; i++) {
        bool known = strcmp(argv[i], "audit-dead-letters") == 0 ||
                     strcmp(argv[i], "fence-column") == 0 || strcmp(argv[i], "migrate") == 0;
        if (!known)
            return usage_error(argv[i], strcmp(argv[i], "keys") == 0
                                            ? "keys must come first (fencegate keys new ...)"
                                            : "unknown argument");
        if (command != NULL) /* one command per run: none of them is done half */
            return usage_error(argv[i], strcmp(argv[i], command) == 0 ? "given twice"
                                                                      : "one command at a time");
        command = argv[i];
        if (strcmp(argv[i], "audit-dead-letters") == 0) {
            list_dead = true;
        } else if (strcmp(argv[i], "migrate") == 0) {
            migrate_only = true;
        } else {
            if (i + 1 == argc || argv[i + 1][0] == '\0')
                return usage_error("fence-column needs a TABLE", "none given, or empty");
            move_table = argv[++i];
        }
    }
    static struct config cfg; /* static: what threads left behind at exit use stays reachable */
    struct fg_error err = {0};
    int status = 1;
    if (config_load(&cfg, env_lookup, &err) != 0) {
        log_startup_failure(&err);
        config_free(&cfg);
        return 2;
    }
    log_set_level(cfg.log_level);
    gw.cfg = &cfg;
    bool serving = !list_dead && !migrate_only && move_table == NULL;
    auth_take(&cfg, serving);
    struct tls_identity *tls = NULL;
    if (serving && tls_load(&cfg, &tls, &err) != 0) {
        log_startup_failure(&err);
        auth_shutdown();
        config_free(&cfg);
        return 2;
    }
    if (tls != NULL)
        tls_publish(tls);
    if (token_new_lease_id(gw.instance_id, &err) != 0)
        goto out;
    if (list_dead) {
        status = redis_take(&cfg, &err) == 0 &&
                         audit_stream_list_dead(AUDIT_DEAD_LETTERS_MAX, stdout, &err) == 0
                     ? 0
                     : 1;
        goto out;
    }
    if (migrate_only) {
        status = pg_init(&cfg, &err) == 0 && migrate_when_ready(&err) == 0 ? 0 : 1;
        goto out;
    }
    if (move_table != NULL) {
        long moved = 0;
        size_t table = 0; /* checked before any migration: a refused table changes nothing */
        status = fenced_pg_movable(&cfg, move_table, &table, &err) == 0 &&
                         pg_init(&cfg, &err) == 0 && migrate_when_ready(&err) == 0 &&
                         fenced_pg_move_fences(&cfg, move_table, &moved, &err) == 0
                     ? 0
                     : 1;
        if (status == 0)
            printf("fencegate: %s: %ld fences moved from fencegate.resource_fences\n", move_table,
                   moved);
        goto out;
    }
    if (prepare_backends(&cfg, &err) != 0 || serve(&cfg, &err) != 0)
        goto out;
    status = 0;
out:
    if (status == 0 && (list_dead || move_table != NULL) && stdout_done() != 0)
        status = 1; /* err stays empty: stdout_done said why */
    else if (status != 0)
        log_startup_failure(&err);
    if (stop_backend_threads(cfg.request_timeout_ms)) {
        redis_shutdown();
        fenced_pg_shutdown();
        pg_shutdown();
        auth_shutdown();
        secret_shutdown();
        tls_shutdown();
        config_free(&cfg);
    }
    return status == 0 ? 0 : (err.code == FG_ERR_CONFIG ? 2 : 1);
}
