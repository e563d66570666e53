/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pg_load.c - the HTTP side of the Postgres write benchmark, as light a client
 * as pgbench: N threads, one keep-alive connection each, sending fenced
 * PATCH /v1/pg/<table>/{key} writes under one Fence-Token for a fixed time
 * (table bench_rows unless TABLE is given).
 * "distinct" picks a random row among ROWS per write, "hot" always row "hot".
 * Prints "WRITES <2xx per second> <non-2xx> <errors> p99_ms=<p99 latency>".
 *
 * usage: pg_load PORT CONNECTIONS SECONDS distinct|hot ROWS TOKEN [TABLE]
 */
#include <pthread.h>
#include <stdatomic.h>

#include "http_client.h"

#define MAX_SAMPLES 400000 /* latencies kept per thread */

struct bench {
    int port, seconds, hot, rows;
    const char *token, *table;
    atomic_long ok, bad, errors;
};

struct worker {
    struct bench *b;
    unsigned seed;
    float *latency_ms; /* one entry per answered write */
    long nlatency;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    int fd = bench_connect(b->port);
    char headers[1024], path[128], body[128], buf[8192];
    snprintf(headers, sizeof headers, "Fence-Token: %s\r\n", b->token);
    double end = bench_now_s() + b->seconds;
    while (bench_now_s() < end) {
        if (b->hot)
            snprintf(path, sizeof path, "/v1/pg/%s/hot", b->table);
        else
            snprintf(path, sizeof path, "/v1/pg/%s/%d", b->table, rand_r(&w->seed) % b->rows);
        snprintf(body, sizeof body, "{\"set\":{\"n\":%d,\"note\":\"w\"}}", rand_r(&w->seed) % 1000000);
        double start = bench_now_s();
        int status = bench_request(fd, "PATCH", path, headers, body, buf, sizeof buf);
        if (status < 0) {
            atomic_fetch_add(&b->errors, 1);
            close(fd);
            fd = bench_connect(b->port);
            continue;
        }
        if (w->nlatency < MAX_SAMPLES)
            w->latency_ms[w->nlatency++] = (float)((bench_now_s() - start) * 1000.0);
        atomic_fetch_add(status / 100 == 2 ? &b->ok : &b->bad, 1);
    }
    close(fd);
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: pg_load PORT CONNECTIONS SECONDS distinct|hot ROWS TOKEN [TABLE]\n");
        return 1;
    }
    struct bench b = {.port = atoi(argv[1]),
                      .seconds = atoi(argv[3]),
                      .hot = strcmp(argv[4], "hot") == 0,
                      .rows = atoi(argv[5]),
                      .token = argv[6],
                      .table = argc == 8 ? argv[7] : "bench_rows"};
    int n = atoi(argv[2]);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    struct worker *workers = calloc((size_t)n, sizeof *workers);
    double start = bench_now_s();
    for (int i = 0; i < n; i++) {
        workers[i] = (struct worker){.b = &b, .seed = (unsigned)(i * 7919 + 17)};
        workers[i].latency_ms = malloc(MAX_SAMPLES * sizeof(float));
        pthread_create(&threads[i], NULL, run, &workers[i]);
    }
    long total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        total += workers[i].nlatency;
    }
    double elapsed = bench_now_s() - start;
    float *all = malloc((size_t)(total ? total : 1) * sizeof(float));
    long k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(all + k, workers[i].latency_ms, (size_t)workers[i].nlatency * sizeof(float));
        k += workers[i].nlatency;
        free(workers[i].latency_ms);
    }
    qsort(all, (size_t)total, sizeof(float), by_value);
    double p99 = total ? all[(long)((double)(total - 1) * 0.99)] : 0.0;
    printf("WRITES %.0f %ld %ld p99_ms=%.2f\n", (double)b.ok / elapsed, (long)b.bad, (long)b.errors,
           p99);
    free(all);
    free(threads);
    free(workers);
    return 0;
}
