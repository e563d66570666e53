/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pg_group.c - the ceiling of committing several requests' writes together,
 * measured without a gateway: WORKERS threads each send one fenced write at a
 * time (the direct fence-column statement of bench/pg_commits.sh, on a random
 * row) and wait for it to be committed, as HTTP threads would. A write joins
 * the group that collects while at most GROUPS others are being committed;
 * the first thread that finds a connection free takes the whole group to it
 * and sends it as one pipeline: BEGIN, a savepoint and the statement for each
 * write (in key order, so that two groups never wait for each other's rows),
 * COMMIT. It then wakes the group's other threads, each of which slept on a
 * condition variable of its own, and the oldest waiting writer, which takes
 * the next group. Prints writes per second and the mean group size.
 *
 * usage: pg_group DSN WORKERS SECONDS GROUPS
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_GROUPS 16
#define MAX_GROUP  256
#define ROWS       10000

static const char *const update_sql =
    "UPDATE bench_rows SET n = $1::bigint, note = 'w', lock_fence = 5 "
    "WHERE id = $2 AND lock_fence <= 5";

/* One write waiting to be committed, on its thread's stack. */
struct write {
    struct write *next; /* the writer that came before it */
    int row;
    bool done;
    pthread_cond_t wake;
};

static struct {
    const char *dsn;
    int seconds, groups;
    pthread_mutex_t lock;
    struct write *waiting; /* not yet in a group, newest first */
    PGconn *conns[MAX_GROUPS];
    bool busy[MAX_GROUPS];
    long writes, committed_groups;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int by_row(const void *a, const void *b)
{
    return (*(struct write *const *)a)->row - (*(struct write *const *)b)->row;
}

static void expect(PGconn *c, ExecStatusType want)
{
    for (;;) {
        PGresult *res = PQgetResult(c);
        if (res == NULL)
            continue; /* the end of one command's results */
        ExecStatusType got = PQresultStatus(res);
        PQclear(res);
        if (got == want)
            return;
        fprintf(stderr, "pg_group: %s\n", PQerrorMessage(c));
        exit(1);
    }
}

/* Commits the n writes of group on c in one transaction and one round trip. */
static void commit_group(PGconn *c, struct write **group, int n)
{
    qsort(group, (size_t)n, sizeof *group, by_row);
    PQsendQueryParams(c, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    for (int i = 0; i < n; i++) {
        char row[16];
        snprintf(row, sizeof row, "%d", group[i]->row);
        const char *params[2] = {row, row};
        PQsendQueryParams(c, "SAVEPOINT w", 0, NULL, NULL, NULL, NULL, 0);
        PQsendQueryPrepared(c, "update", 2, params, NULL, NULL, 0);
    }
    PQsendQueryParams(c, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    PQpipelineSync(c);
    for (int i = 0; i < 2 + 2 * n; i++)
        expect(c, PGRES_COMMAND_OK);
    expect(c, PGRES_PIPELINE_SYNC);
}

/* Takes the waiting writes to a free connection and commits them; called
 * locked, returns locked. */
static void lead(int k)
{
    struct write *group[MAX_GROUP];
    int n = 0;
    while (g.waiting != NULL && n < MAX_GROUP) {
        group[n++] = g.waiting;
        g.waiting = g.waiting->next;
    }
    g.busy[k] = true;
    pthread_mutex_unlock(&g.lock);
    commit_group(g.conns[k], group, n);
    pthread_mutex_lock(&g.lock);
    g.busy[k] = false;
    g.committed_groups++;
    for (int i = 0; i < n; i++) {
        group[i]->done = true;
        pthread_cond_signal(&group[i]->wake);
    }
    if (g.waiting != NULL)
        pthread_cond_signal(&g.waiting->wake);
}

static int free_conn(void)
{
    for (int k = 0; k < g.groups; k++)
        if (!g.busy[k])
            return k;
    return -1;
}

static void *writer(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg * 7919u + 1u;
    struct write me = {0};
    pthread_cond_init(&me.wake, NULL);
    long writes = 0;
    double end = now_s() + g.seconds;
    while (now_s() < end) {
        me.row = (int)(rand_r(&seed) % ROWS);
        me.done = false;
        pthread_mutex_lock(&g.lock);
        me.next = g.waiting;
        g.waiting = &me;
        while (!me.done) {
            int k = g.waiting != NULL ? free_conn() : -1;
            if (k >= 0)
                lead(k);
            else
                pthread_cond_wait(&me.wake, &g.lock);
        }
        pthread_mutex_unlock(&g.lock);
        writes++;
    }
    pthread_mutex_lock(&g.lock);
    g.writes += writes;
    pthread_mutex_unlock(&g.lock);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: pg_group DSN WORKERS SECONDS GROUPS\n");
        return 2;
    }
    g.dsn = argv[1];
    int workers = atoi(argv[2]);
    g.seconds = atoi(argv[3]);
    g.groups = atoi(argv[4]);
    if (workers < 1 || workers > 256 || g.groups < 1 || g.groups > MAX_GROUPS) {
        fprintf(stderr, "pg_group: 1-256 workers, 1-%d groups\n", MAX_GROUPS);
        return 2;
    }
    for (int k = 0; k < g.groups; k++) {
        g.conns[k] = PQconnectdb(g.dsn);
        if (PQstatus(g.conns[k]) != CONNECTION_OK) {
            fprintf(stderr, "pg_group: %s", PQerrorMessage(g.conns[k]));
            return 1;
        }
        PQclear(PQprepare(g.conns[k], "update", update_sql, 2, NULL));
        PQenterPipelineMode(g.conns[k]);
    }
    pthread_t threads[256];
    for (int i = 0; i < workers; i++)
        pthread_create(&threads[i], NULL, writer, (void *)(size_t)i);
    for (int i = 0; i < workers; i++)
        pthread_join(threads[i], NULL);
    printf("%.0f %.1f\n", (double)g.writes / g.seconds,
           (double)g.writes / (double)(g.committed_groups ? g.committed_groups : 1));
    for (int k = 0; k < g.groups; k++)
        PQfinish(g.conns[k]);
    return 0;
}
