/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_group.c - grouped commits of one-statement writes (write_group.h).
 * A write queues itself on its own thread's stack. Up to GROUPS_AT_ONCE groups
 * are committed at a time; a thread that finds room takes every queued write
 * (at most GROUP_MAX) to a pooled connection, sorts them by row and runs them
 * with pg_exec_group, then wakes their threads, each of which sleeps on a
 * condition variable of its own, and the oldest queued write's thread, which
 * leads the next group. Groups lock their rows in the one order of
 * write_order.h (a row's every spelling is one canonical key; a row's creates
 * before its other writes), so two of them never wait for each other, or for
 * a batch, in a cycle. What an attempt at a group leaves each
 * write with is write_attempt.h's rule: a statement that fails is taken out
 * and handed back to run alone, where its error is reported as for any write,
 * and the rest of its group runs again without it; a refused commit hands
 * every write back. A write handed back as a deadlock's victim says so
 * (WRITE_GROUP_DEADLOCKED), for its thread to let the other write go first.
 */
#include "store/fenced/write_group.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend/pg.h"
#include "store/backend/sqlstate.h"
#include "store/fenced/write_attempt.h"
#include "store/fenced/write_order.h"
#include "util/metrics.h"

#define GROUPS_AT_ONCE 2  /* groups being committed at a time */
#define GROUP_MAX      32 /* writes in one group */

/* A write waiting for its group, on its thread's stack. */
struct member {
    struct member *next;                 /* queued after it */
    const struct write_group_stmt *stmt; /* borrowed */
    bool done;                           /* its outcome is in */
    int rc;                              /* 0, or -1 with failure */
    enum write_group_result result;      /* when rc is 0 */
    json_t *rows;                        /* when committed */
    long count;                          /* likewise: the rows its command touched */
    struct fg_error failure;             /* when rc is -1 */
    pthread_cond_t *wake;                /* its thread's condition variable */
};

static struct {
    pthread_mutex_t lock;
    struct member *head, *tail; /* queued, oldest first */
    int committing;             /* groups being committed */
} wg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local pthread_cond_t thread_wake = PTHREAD_COND_INITIALIZER;

/* qsort's comparator of members: the lock order (write_order.h). */
static int by_row(const void *a, const void *b)
{
    return write_order_compare((*(struct member *const *)a)->stmt,
                               (*(struct member *const *)b)->stmt);
}

/* Takes up to GROUP_MAX queued writes into group; returns how many. Called locked. */
static size_t take_queued(struct member **group)
{
    size_t n = 0;
    while (wg.head != NULL && n < GROUP_MAX) {
        group[n++] = wg.head;
        wg.head = wg.head->next;
    }
    if (wg.head == NULL)
        wg.tail = NULL;
    return n;
}

/* Settles m; answer: its statement as run, with its rows and count, when committed. */
static void settle(struct member *m, int rc, enum write_group_result result,
                   const struct pg_group_stmt *answer, const struct fg_error *err)
{
    m->rc = rc;
    m->result = result;
    m->rows = answer != NULL ? answer->rows : NULL;
    m->count = answer != NULL ? answer->count : -1;
    if (err != NULL)
        m->failure = *err;
}

/* One attempt at group[0..n) on c: a group of one runs as it would alone,
 * without BEGIN and COMMIT around it; a larger one in one transaction.
 * Committed, answers[i] holds statement i with its rows and count; a failed
 * statement's index goes to *failed; a lost connection's failure to *err. */
static enum write_attempt attempt(struct pg_conn *c, struct member *const *group, size_t n,
                                  struct pg_group_stmt *answers, size_t *failed,
                                  struct fg_error *err)
{
    if (n == 1) {
        answers[0] = group[0]->stmt->stmt;
        *failed = 0;
        if (pg_exec_stmt(c, &answers[0], err) == 0)
            return WRITE_ATTEMPT_COMMITTED;
        return pg_last_sqlstate(c)[0] != '\0' ? WRITE_ATTEMPT_STMT_FAILED : WRITE_ATTEMPT_LOST;
    }
    for (size_t i = 0; i < n; i++)
        answers[i] = group[i]->stmt->stmt;
    enum pg_group_outcome outcome;
    if (pg_exec_group(c, answers, n, &outcome, failed, err) != 0)
        return WRITE_ATTEMPT_LOST;
    return outcome == PG_GROUP_COMMITTED     ? WRITE_ATTEMPT_COMMITTED
           : outcome == PG_GROUP_STMT_FAILED ? WRITE_ATTEMPT_STMT_FAILED
                                             : WRITE_ATTEMPT_NOT_COMMITTED;
}

/* Commits members[0..n) on c, attempt after attempt, as write_attempt.h's rule
 * says; settles every member. A write handed back from an attempt that
 * Postgres rolled back as a deadlock's victim is settled
 * WRITE_GROUP_DEADLOCKED. */
static void commit_on(struct pg_conn *c, struct member *const *members, size_t n)
{
    struct member *group[GROUP_MAX];
    memcpy(group, members, n * sizeof *group);
    while (n > 0) {
        struct pg_group_stmt answers[GROUP_MAX];
        enum write_fate fates[GROUP_MAX];
        size_t failed = 0, again = 0;
        struct fg_error err = {0};
        enum write_attempt ended = attempt(c, group, n, answers, &failed, &err);
        size_t next = write_attempt_fates(ended, failed, n, fates);
        enum write_group_result alone =
            ended != WRITE_ATTEMPT_LOST && sqlstate_deadlock(pg_last_sqlstate(c))
                ? WRITE_GROUP_DEADLOCKED
                : WRITE_GROUP_ALONE;
        for (size_t i = 0; i < n; i++) {
            switch (fates[i]) {
            case WRITE_FATE_AGAIN: group[again++] = group[i]; break;
            case WRITE_FATE_COMMITTED:
                settle(group[i], 0, WRITE_GROUP_COMMITTED, &answers[i], NULL);
                break;
            case WRITE_FATE_ALONE: settle(group[i], 0, alone, NULL, NULL); break;
            case WRITE_FATE_FAILED: settle(group[i], -1, WRITE_GROUP_ALONE, NULL, &err); break;
            }
        }
        FG_ASSERT(again == next);
        n = again;
    }
}

static void count_committed(struct member *const *group, size_t n)
{
    size_t committed = 0;
    for (size_t i = 0; i < n; i++)
        committed += group[i]->rc == 0 && group[i]->result == WRITE_GROUP_COMMITTED;
    if (committed > 0)
        metrics_write_group(committed);
}

/* Commits the queued writes as one group. Called locked, returns locked. */
static void lead(void)
{
    struct member *group[GROUP_MAX];
    size_t n = take_queued(group);
    wg.committing++;
    pthread_mutex_unlock(&wg.lock);
    qsort(group, n, sizeof *group, by_row);
    struct fg_error err = {0};
    struct pg_conn *c = pg_acquire(&err);
    if (c == NULL) {
        for (size_t i = 0; i < n; i++)
            settle(group[i], -1, WRITE_GROUP_ALONE, NULL, &err);
    } else {
        commit_on(c, group, n);
        pg_release(c);
        count_committed(group, n);
    }
    pthread_mutex_lock(&wg.lock);
    wg.committing--;
    pthread_cond_t *wakes[GROUP_MAX + 1];
    size_t nwakes = 0;
    for (size_t i = 0; i < n; i++) {
        group[i]->done = true;
        wakes[nwakes++] = group[i]->wake;
    }
    if (wg.head != NULL)
        wakes[nwakes++] = wg.head->wake; /* it leads the next group */
    pthread_mutex_unlock(&wg.lock);
    for (size_t i = 0; i < nwakes; i++)
        if (wakes[i] != &thread_wake)
            pthread_cond_signal(wakes[i]);
    pthread_mutex_lock(&wg.lock);
}

int write_group_run(struct write_group_stmt *stmt, enum write_group_result *result,
                    struct fg_error *err)
{
    struct member me = {.stmt = stmt, .wake = &thread_wake};
    pthread_mutex_lock(&wg.lock);
    if (wg.tail != NULL)
        wg.tail->next = &me;
    else
        wg.head = &me;
    wg.tail = &me;
    while (!me.done) {
        if (wg.committing < GROUPS_AT_ONCE && wg.head != NULL)
            lead();
        else
            pthread_cond_wait(me.wake, &wg.lock);
    }
    pthread_mutex_unlock(&wg.lock);
    if (me.rc != 0) {
        *err = me.failure;
        return -1;
    }
    *result = me.result;
    stmt->stmt.rows = me.rows;
    stmt->stmt.count = me.count;
    return 0;
}
