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
 * request_id, as the client libraries send.
 *
 * usage: [BENCH_KEY=key] [BENCH_SEMAPHORE_LIMIT=n] [BENCH_RATE=n] [BENCH_REQUEST_IDS=1]
 *        http_pairs PORT CONNECTIONS SECONDS distinct|shared|random PREFIX
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "http_client.h"

struct bench {
    int port, seconds, shared, random, request_ids;
    long rate; /* pairs a second per connection; 0: as fast as it can */
    const char *prefix;
    const char *kind;       /* "locks" or "semaphores" */
    char acquire_body[100]; /* the JSON body of every acquire */
    char headers[1200];     /* extra request headers: the Authorization line, or "" */
    atomic_long pairs, failures;
};

struct worker {
    struct bench *b;
    int id;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    int fd = bench_connect(b->port);
    char acquire[300], release[300], body[700], with_id[160], buf[8192];
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
        const char *acquire_body = b->acquire_body;
        if (b->request_ids) { /* the body less its closing brace, and a fresh id */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            snprintf(with_id, sizeof with_id, "%.*s,\"request_id\":\"%d-%016llx\"}",
                     (int)strlen(b->acquire_body) - 1, b->acquire_body, w->id,
                     (unsigned long long)x);
            acquire_body = with_id;
        }
        if (bench_request(fd, "POST", acquire, b->headers, acquire_body, buf, sizeof buf) != 200) {
            atomic_fetch_add(&b->failures, 1);
            continue;
        }
        const char *t = strstr(buf, "\"token\":\"");
        if (t == NULL)
            break;
        t += 9;
        snprintf(body, sizeof body, "{\"token\":\"%.*s\"}", (int)(strchr(t, '"') - t), t);
        if (bench_request(fd, "POST", release, b->headers, body, buf, sizeof buf) == 200)
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
        fprintf(stderr, "usage: http_pairs PORT CONNECTIONS SECONDS distinct|shared|random PREFIX\n");
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
