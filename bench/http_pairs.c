/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_pairs.c - the HTTP side of the lock benchmark, as light a client as
 * raw_pairs.c is on the Redis side: N threads, one keep-alive connection each,
 * looping acquire -> release over HTTP/1.1 for a fixed time. "distinct" gives
 * each connection its own lock name, "shared" one name for all (acquires wait
 * in the gateway's queue), "random" a new random name to every pair (spread
 * over a Redis Cluster's slots: bench/cluster_cpu.py). Prints pairs per
 * second. With BENCH_KEY set, every request carries it as a bearer API key
 * (bench/auth.sh); with BENCH_SEMAPHORE_LIMIT=N the pairs are semaphore
 * acquires (limit N) and releases instead (bench/lease_scripts.sh); with
 * BENCH_RATE=N each connection keeps to N pairs a second (unset or 0: as fast
 * as it can); with BENCH_REQUEST_IDS=1 every acquire carries a fresh
 * request_id, as the client libraries send; with BENCH_LOCKSET=N (2 to
 * LOCKSET_MAX) the pairs are lock sets of N locks, named after the name
 * a pair would take ("<name>-0" ...), acquired and released together.
 *
 * usage: [BENCH_KEY=key] [BENCH_SEMAPHORE_LIMIT=n] [BENCH_RATE=n] [BENCH_REQUEST_IDS=1]
 *        [BENCH_LOCKSET=n] http_pairs PORT CONNECTIONS SECONDS distinct|shared|random PREFIX
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "http_client.h"

#define LOCKSET_MAX 4

struct bench {
    int port, seconds, shared, random, request_ids;
    int lockset; /* locks a set; 0: single leases */
    long rate;   /* pairs a second per connection; 0: as fast as it can */
    const char *prefix;
    const char *kind;       /* "locks" or "semaphores" */
    char acquire_body[100]; /* the JSON body of every acquire (a lock set's: its fields after the
                               names) */
    char headers[1200];     /* extra request headers: the Authorization line, or "" */
    atomic_long pairs, failures;
};

struct worker {
    struct bench *b;
    int id;
};

/* The body of a lock set's acquire whose locks are named after the lock of acquire (a single
 * lease's path, "/v1/locks/<name>/acquire"), written into out. */
static const char *lockset_body(const struct bench *b, const char *acquire, char *out, size_t size)
{
    const char *name = acquire + strlen("/v1/locks/");
    int len = (int)(strlen(name) - strlen("/acquire"));
    size_t at = (size_t)snprintf(out, size, "{\"names\":[");
    for (int i = 0; i < b->lockset; i++)
        at +=
            (size_t)snprintf(out + at, size - at, "%s\"%.*s-%d\"", i > 0 ? "," : "", len, name, i);
    snprintf(out + at, size - at, "],%s", b->acquire_body + 1);
    return out;
}

/* body (a JSON object) with a "request_id" of id, written into out (not body). */
static const char *with_request_id(const char *body, const char *id, char *out, size_t size)
{
    snprintf(out, size, "%.*s,\"request_id\":\"%s\"}", (int)strlen(body) - 1, body, id);
    return out;
}

/* The body of the release of what the acquire answered in reply: its token, or a lock set's
 * tokens; -1 where reply holds fewer. */
static int release_body(const struct bench *b, const char *reply, char *out, size_t size)
{
    int n = b->lockset > 0 ? b->lockset : 1;
    size_t at = (size_t)snprintf(out, size, b->lockset > 0 ? "{\"tokens\":[" : "{\"token\":");
    const char *t = reply;
    for (int i = 0; i < n; i++) {
        t = strstr(t, "\"token\":\"");
        const char *end = t != NULL ? strchr(t + 9, '"') : NULL;
        if (end == NULL)
            return -1;
        at += (size_t)snprintf(out + at, size - at, "%s%.*s", i > 0 ? "," : "",
                               (int)(end + 1 - (t + 8)), t + 8);
        t = end;
    }
    snprintf(out + at, size - at, b->lockset > 0 ? "]}" : "}");
    return 0;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    int fd = bench_connect(b->port);
    char acquire[300], release[300], body[2400], with_id[2500], buf[8192];
    if (b->shared)
        snprintf(acquire, sizeof acquire, "/v1/%s/%s/acquire", b->kind, b->prefix);
    else
        snprintf(acquire, sizeof acquire, "/v1/%s/%s-%d/acquire", b->kind, b->prefix, w->id);
    snprintf(release, sizeof release, "%.*s/release", (int)(strlen(acquire) - 8), acquire);
    uint64_t x = 0x9E3779B97F4A7C15u * (uint64_t)(w->id + 1) ^ (uint64_t)getpid();
    double end = bench_now_s() + b->seconds, due = bench_now_s();
    while (bench_now_s() < end) {
        if (b->rate > 0) {
            double early = due - bench_now_s();
            if (early > 0)
                nanosleep(&(struct timespec){.tv_sec = (time_t)early,
                                             .tv_nsec = (long)((early - (double)(time_t)early) * 1e9)},
                          NULL);
            due += 1.0 / (double)b->rate;
        }
        if (b->random) { /* xorshift64: a new name each pair */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            snprintf(acquire, sizeof acquire, "/v1/%s/%s-%016llx/acquire", b->kind, b->prefix,
                     (unsigned long long)x);
            snprintf(release, sizeof release, "%.*s/release", (int)(strlen(acquire) - 8), acquire);
        }
        const char *acquire_body = b->acquire_body, *acquire_path = acquire,
                   *release_path = release;
        if (b->lockset > 0) {
            acquire_body = lockset_body(b, acquire, body, sizeof body);
            acquire_path = "/v1/locksets/acquire";
            release_path = "/v1/locksets/release";
        }
        if (b->request_ids) { /* the body less its closing brace, and a fresh id */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char id[40];
            snprintf(id, sizeof id, "%d-%016llx", w->id, (unsigned long long)x);
            acquire_body = with_request_id(acquire_body, id, with_id, sizeof with_id);
        }
        if (bench_request(fd, "POST", acquire_path, b->headers, acquire_body, buf, sizeof buf) !=
            200) {
            atomic_fetch_add(&b->failures, 1);
            continue;
        }
        if (release_body(b, buf, body, sizeof body) != 0)
            break;
        if (bench_request(fd, "POST", release_path, b->headers, body, buf, sizeof buf) == 200)
            atomic_fetch_add(&b->pairs, 1);
        else
            atomic_fetch_add(&b->failures, 1);
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr,
                "usage: http_pairs PORT CONNECTIONS SECONDS distinct|shared|random PREFIX\n");
        return 1;
    }
    struct bench b = {.port = atoi(argv[1]),
                      .seconds = atoi(argv[3]),
                      .shared = strcmp(argv[4], "shared") == 0,
                      .random = strcmp(argv[4], "random") == 0,
                      .prefix = argv[5],
                      .kind = "locks"};
    snprintf(b.acquire_body, sizeof b.acquire_body, "{\"ttl_ms\":10000,\"wait_ms\":60000}");
    const char *limit = getenv("BENCH_SEMAPHORE_LIMIT");
    if (limit != NULL && limit[0] != '\0') {
        b.kind = "semaphores";
        snprintf(b.acquire_body, sizeof b.acquire_body,
                 "{\"ttl_ms\":10000,\"wait_ms\":60000,\"limit\":%d}", atoi(limit));
    }
    const char *lockset = getenv("BENCH_LOCKSET");
    b.lockset = lockset != NULL ? atoi(lockset) : 0;
    if (b.lockset == 1 || b.lockset < 0 || b.lockset > LOCKSET_MAX ||
        (b.lockset > 0 && strcmp(b.kind, "locks") != 0)) {
        fprintf(stderr, "http_pairs: BENCH_LOCKSET must be 2 to %d, without a semaphore limit\n",
                LOCKSET_MAX);
        return 1;
    }
    const char *request_ids = getenv("BENCH_REQUEST_IDS");
    b.request_ids = request_ids != NULL && strcmp(request_ids, "1") == 0;
    const char *rate = getenv("BENCH_RATE");
    b.rate = rate != NULL ? atol(rate) : 0;
    const char *key = getenv("BENCH_KEY");
    if (key != NULL && key[0] != '\0')
        snprintf(b.headers, sizeof b.headers, "Authorization: Bearer %.1000s\r\n", key);
    int n = atoi(argv[2]);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    struct worker *workers = calloc((size_t)n, sizeof *workers);
    double start = bench_now_s();
    for (int i = 0; i < n; i++) {
        workers[i] = (struct worker){&b, i};
        pthread_create(&threads[i], NULL, run, &workers[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    double elapsed = bench_now_s() - start;
    printf("%.0f pairs/s (%ld pairs, %ld failed calls, %.1f s)\n", (double)b.pairs / elapsed,
           (long)b.pairs, (long)b.failures, elapsed);
    free(threads);
    free(workers);
    return 0;
}
