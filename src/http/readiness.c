/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readiness.c - whether the backends answer, for /readyz and /metrics
 * (readiness.h). One thread a backend (an asker) calls it when a probe wants
 * to know and keeps what it answered; a probe waits for the answer to an ask
 * made after it came, at most probe_timeout_ms, and counts a backend that has
 * not answered by then as down. Probes that come while an ask is under way
 * share the next one, so a stalled backend costs one call in flight, not one
 * per probe. It must not make a probe wait for a backend's deadline: only the
 * askers ever do.
 */
#include "http/readiness.h"

#include <pthread.h>
#include <stdio.h>

#include "lease/fence.h"
#include "store/backend/pg.h"
#include "store/backend/redis.h"
#include "util/clock.h"
#include "util/join.h"

/* What one ask of a backend found. */
struct answer {
    bool up;               /* the backend answered */
    int64_t headroom;      /* fences left to issue (Redis, when asked); -1: not read */
    struct fg_error error; /* why it is down */
};

/* A backend and the thread that asks it; every field but the first three under rd.lock. */
struct asker {
    const char *name;                               /* "redis", "postgres" */
    void (*ask)(bool headroom, struct answer *out); /* the call, on the asker's thread */
    pthread_t thread;                               /* the asker */
    bool running;                                   /* thread was started */
    uint64_t wanted;                                /* asks made so far, numbered from 1 */
    uint64_t answered;     /* the highest ask whose answer is in: last answers it and all before */
    bool headroom;         /* the next call reads the fences left too */
    struct answer last;    /* the latest answer */
    int64_t read_headroom; /* the headroom of the latest call that read it (-1: not read), which
                              a later call that did not read it leaves as it is */
};

static void ask_redis(bool headroom, struct answer *out);
static void ask_pg(bool headroom, struct answer *out);

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* an ask made, an answer in, or stop */
    long long timeout_ms;   /* probe_timeout_ms */
    bool stop;              /* readiness_stop was called */
    struct asker redis, pg;
} rd = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .changed = PTHREAD_COND_INITIALIZER,
    .redis = {.name = "redis", .ask = ask_redis, .read_headroom = -1},
    .pg = {.name = "postgres", .ask = ask_pg, .read_headroom = -1},
};

/* PING, then (with headroom, while Redis answers) the fences left to issue. */
static void ask_redis(bool headroom, struct answer *out)
{
    out->up = redis_ping(&out->error) == 0;
    struct fg_error ignored = {0};
    if (out->up && headroom && fence_headroom(&out->headroom, &ignored) != 0)
        out->headroom = -1;
}

static void ask_pg(bool headroom, struct answer *out)
{
    (void)headroom;
    out->up = pg_ping(&out->error) == 0;
}

/* The asker's loop (arg: its struct asker): calls the backend whenever an
 * ask is not answered yet, for every ask made until the call starts. */
static void *asker_main(void *arg)
{
    struct asker *a = arg;
    pthread_mutex_lock(&rd.lock);
    for (;;) {
        while (!rd.stop && a->answered == a->wanted)
            pthread_cond_wait(&rd.changed, &rd.lock);
        if (rd.stop)
            break;
        uint64_t upto = a->wanted;
        bool headroom = a->headroom;
        a->headroom = false;
        pthread_mutex_unlock(&rd.lock);
        struct answer found = {.up = false, .headroom = -1};
        a->ask(headroom, &found);
        pthread_mutex_lock(&rd.lock);
        a->last = found;
        if (headroom)
            a->read_headroom = found.headroom;
        a->answered = upto;
        pthread_cond_broadcast(&rd.changed);
    }
    pthread_mutex_unlock(&rd.lock);
    redis_thread_done();
    return NULL;
}

int readiness_start(long long timeout_ms, struct fg_error *err)
{
    rd.timeout_ms = timeout_ms;
    rd.stop = false;
    struct asker *askers[] = {&rd.redis, &rd.pg};
    for (size_t i = 0; i < sizeof askers / sizeof askers[0]; i++) {
        if (pthread_create(&askers[i]->thread, NULL, asker_main, askers[i]) != 0) {
            (void)readiness_stop(INT64_MAX);
            return fg_fail(err, FG_ERR_INTERNAL, "cannot start the %s readiness thread",
                           askers[i]->name);
        }
        askers[i]->running = true;
    }
    return 0;
}

/* Fills *up and *why from a's answer to ask number ask, or says it did not
 * come in time. Called with rd.lock held. */
static void answer_of(const struct asker *a, uint64_t ask, bool *up, struct fg_error *why)
{
    if (a->answered >= ask) {
        *up = a->last.up;
        *why = a->last.error;
        return;
    }
    *up = false;
    fg_fail(why, FG_ERR_BACKEND_UNAVAILABLE, "%s: no answer within %lld ms (probe_timeout_ms)",
            a->name, rd.timeout_ms);
}

void readiness_check(bool headroom, struct readiness *out)
{
    int64_t deadline = clock_mono_ms() + rd.timeout_ms;
    pthread_mutex_lock(&rd.lock);
    uint64_t redis_ask = ++rd.redis.wanted, pg_ask = ++rd.pg.wanted;
    rd.redis.headroom = rd.redis.headroom || headroom;
    pthread_cond_broadcast(&rd.changed);
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if ((rd.redis.answered >= redis_ask && rd.pg.answered >= pg_ask) || left <= 0 || rd.stop)
            break;
        struct timespec until = clock_mono_at(deadline);
        (void)pthread_cond_clockwait(&rd.changed, &rd.lock, CLOCK_MONOTONIC, &until);
    }
    *out = (struct readiness){.fence_headroom = -1};
    answer_of(&rd.redis, redis_ask, &out->redis_up, &out->redis_error);
    answer_of(&rd.pg, pg_ask, &out->pg_up, &out->pg_error);
    if (out->redis_up && headroom)
        out->fence_headroom = rd.redis.read_headroom;
    pthread_mutex_unlock(&rd.lock);
}

void readiness_stop_ask(void)
{
    pthread_mutex_lock(&rd.lock);
    rd.stop = true;
    pthread_cond_broadcast(&rd.changed);
    pthread_mutex_unlock(&rd.lock);
}

bool readiness_stop(int64_t until_ms)
{
    readiness_stop_ask();
    bool ended = true;
    struct asker *askers[] = {&rd.redis, &rd.pg};
    for (size_t i = 0; i < sizeof askers / sizeof askers[0]; i++) {
        if (askers[i]->running && !join_by(askers[i]->thread, until_ms))
            ended = false;
        askers[i]->running = false;
    }
    return ended;
}
