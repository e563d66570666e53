/* SPDX-License-Identifier: Apache-2.0 */
/*
 * janitor.c - periodic maintenance. One loop: wait up to one tick for hang-ups
 * of parked clients, wake waiters whose re-check or deadline time came, give
 * back orphaned grants, copy the audit stream of stale Redis writes into
 * Postgres (store/audit_stream.c, backing off while that fails), prune audit
 * records past their retention, close connections whose headers are late, and every
 * third of a waiter lease renew the key that tells other gateways this process
 * and its waiters are alive; every few seconds drop a bounded batch of idle
 * names from the lease listing index (lease/lease_list.h), so names whose
 * last lease expired unreleased do not pile up.
 */
#include "janitor.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "gateway.h"
#include "http/server.h"
#include "lease/doorbell.h"
#include "lease/lease_list.h"
#include "lease/waiter.h"
#include "store/audit_stream.h"
#include "store/redis.h"
#include "util/log.h"

#define TICK_MS        5
#define INDEX_PRUNE_MS 5000 /* between two pruning passes over the listing index */

static struct {
    pthread_t thread;
    bool started;
    volatile bool stop;
} jan;

int janitor_beat(struct fg_error *err)
{
    char key[64], lease[24];
    snprintf(key, sizeof key, "fg:inst:%s", gw.instance_id);
    snprintf(lease, sizeof lease, "%lld", gw.cfg->waiter_lease_ms);
    const char *argv[] = {key, lease};
    json_t *out = NULL;
    if (redis_script("instance_beat.lua", 1, argv, 2, &out, err) != 0)
        return -1;
    json_decref(out);
    return 0;
}

/* Walks each listing index one bounded batch further, starting over at its end. */
static void prune_indexes(void)
{
    static char after[2][NAME_MAX_LEN + 1];
    static const enum lease_list_kind kinds[2] = {LEASE_LIST_LOCKS, LEASE_LIST_SEMAPHORES};
    for (int i = 0; i < 2; i++) {
        struct lease_page page;
        struct fg_error err = {0};
        if (lease_list_prune(kinds[i], after[i], &page, &err) == 0)
            snprintf(after[i], sizeof after[i], "%s", page.more ? page.next : "");
    }
}

static void *janitor_main(void *arg)
{
    (void)arg;
    int64_t next_beat = 0, next_prune = 0;
    bool beat_failing = false;
    while (!jan.stop) {
        waiter_watch_hangups(TICK_MS);
        int64_t now = http_now_ms();
        waiter_tick(now);
        doorbell_reap_orphans(now);
        audit_stream_tick(now);
        audit_retention_tick(now, gw.cfg->audit_retention_days);
        http_server_reap_slow(now);
        if (now >= next_prune) {
            prune_indexes();
            next_prune = now + INDEX_PRUNE_MS;
        }
        if (now < next_beat)
            continue;
        struct fg_error err = {0};
        bool ok = janitor_beat(&err) == 0;
        if (!ok && !beat_failing)
            log_message(LOG_WARN, "backend_down", "redis: %s", err.msg);
        if (ok && beat_failing)
            log_message(LOG_INFO, "backend_up", "redis answers again");
        beat_failing = !ok;
        next_beat = now + (ok ? gw.cfg->waiter_lease_ms / 3 : 200);
    }
    redis_thread_done();
    return NULL;
}

int janitor_start(struct fg_error *err)
{
    if (pthread_create(&jan.thread, NULL, janitor_main, NULL) != 0)
        return fg_fail(err, FG_ERR_INTERNAL, "cannot start the janitor thread");
    jan.started = true;
    return 0;
}

void janitor_stop(void)
{
    if (!jan.started)
        return;
    jan.stop = true;
    pthread_join(jan.thread, NULL);
    jan.started = false;
}
