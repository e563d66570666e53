/*
 * http_pairs.c - the HTTP side of the lock benchmark, as light a client as
 * raw_pairs.c is on the Redis side: N threads, one keep-alive connection each,
 * looping acquire -> release over HTTP/1.1 for a fixed time. "distinct" gives
 * each connection its own lock name, "shared" one name for all (acquires wait
 * in the gateway's queue). Prints pairs per second.
 *
 * usage: http_pairs PORT CONNECTIONS SECONDS distinct|shared PREFIX
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct bench {
    int port, seconds, shared;
    const char *prefix;
    atomic_long pairs, failures;
};

struct worker {
    struct bench *b;
    int id;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sends one POST and reads the reply into buf; returns the status or -1. */
static int post(int fd, const char *path, const char *body, char *buf, size_t cap)
{
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, strlen(body), body);
    if (write(fd, req, (size_t)n) != n)
        return -1;
    size_t got = 0;
    char *end = NULL;
    while (end == NULL) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    const char *cl = strcasestr(buf, "Content-Length:");
    size_t want = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
    while (got < want) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
    }
    return atoi(buf + 9);
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)b->port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("http_pairs: connect");
        exit(1);
    }
    char acquire[300], release[300], body[700], buf[8192];
    if (b->shared)
        snprintf(acquire, sizeof acquire, "/v1/locks/%s/acquire", b->prefix);
    else
        snprintf(acquire, sizeof acquire, "/v1/locks/%s-%d/acquire", b->prefix, w->id);
    snprintf(release, sizeof release, "%.*s/release", (int)(strlen(acquire) - 8), acquire);
    double end = now_s() + b->seconds;
    while (now_s() < end) {
        if (post(fd, acquire, "{\"ttl_ms\":10000,\"wait_ms\":60000}", buf, sizeof buf) != 200) {
            atomic_fetch_add(&b->failures, 1);
            continue;
        }
        const char *t = strstr(buf, "\"token\":\"");
        if (t == NULL)
            break;
        t += 9;
        snprintf(body, sizeof body, "{\"token\":\"%.*s\"}", (int)(strchr(t, '"') - t), t);
        if (post(fd, release, body, buf, sizeof buf) == 200)
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
        fprintf(stderr, "usage: http_pairs PORT CONNECTIONS SECONDS distinct|shared PREFIX\n");
        return 1;
    }
    struct bench b = {.port = atoi(argv[1]),
                      .seconds = atoi(argv[3]),
                      .shared = strcmp(argv[4], "shared") == 0,
                      .prefix = argv[5]};
    int n = atoi(argv[2]);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    struct worker *workers = calloc((size_t)n, sizeof *workers);
    double start = now_s();
    for (int i = 0; i < n; i++) {
        workers[i] = (struct worker){&b, i};
        pthread_create(&threads[i], NULL, run, &workers[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    double elapsed = now_s() - start;
    printf("%.0f pairs/s (%ld pairs, %ld failed calls, %.1f s)\n", (double)b.pairs / elapsed,
           (long)b.pairs, (long)b.failures, elapsed);
    free(threads);
    free(workers);
    return 0;
}
