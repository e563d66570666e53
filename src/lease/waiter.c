/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waiter.c - the registry of parked requests. Wakes come from three threads:
 * the doorbell (a grant was published), the janitor (timers, hang-ups) and the
 * HTTP threads (a retry supersedes, a drain). All of them go through wake()
 * under the registry lock, so a wake that races with parking is never lost:
 * waiter_park refuses to park while a reason is pending.
 *
 * Hang-ups. Only a reset or a full close of the client's socket ends a wait; a
 * client that half-closes (sends its request, then shuts down its write side)
 * still waits for its answer. Both kinds of close arrive as the same FIN, and
 * only data tells them apart: a socket that its process closed answers data
 * with a reset, one that is only half-closed takes it. So a FIN makes the
 * gateway send one byte of TCP urgent data, which an HTTP client never reads
 * (without SO_OOBINLINE the byte is not part of the stream it reads), and
 * watch for the reset that a closed socket sends back. A reset ends the wait
 * at once.
 */
#include "lease/waiter.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway.h"
#include "http/server.h"

static struct {
    pthread_mutex_t lock;
    struct waiter *head;
    long count;
    uint64_t next_serial;
    int epoll_fd;
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER, .epoll_fd = -1};

int waiter_registry_init(struct fg_error *err)
{
    reg.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (reg.epoll_fd < 0)
        return fg_fail(err, FG_ERR_INTERNAL, "epoll_create1: %s", strerror(errno));
    return 0;
}

/* The one state transition function. Caller holds reg.lock. */
static void waiter_set_state(struct waiter *w, enum waiter_state to)
{
    enum waiter_state from = w->state;
    w->state = to;
    if (from == WAITER_PARKED && to == WAITER_RUNNING)
        http_request_wake(w->req);
}

/* Records reason and resumes w if parked. Caller holds reg.lock. */
static void wake(struct waiter *w, unsigned reason)
{
    w->wake_reasons |= reason;
    if (w->state == WAITER_PARKED)
        waiter_set_state(w, WAITER_RUNNING);
}

static void unlink_waiter(struct waiter *w)
{
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        reg.head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    w->next = w->prev = NULL;
    w->linked = false;
    if (w->fd >= 0)
        epoll_ctl(reg.epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
    reg.count--;
}

static struct waiter *find_locked(const char *lease_id)
{
    if (lease_id[0] == '\0')
        return NULL; /* watchers have no lease id */
    for (struct waiter *w = reg.head; w != NULL; w = w->next)
        if (strcmp(w->lease_id, lease_id) == 0)
            return w;
    return NULL;
}

/* Drops the registered waiter of lease_id other than keep, if any, and tells it a
 * retry took its wait over. Caller holds reg.lock. */
static void supersede_locked(const char *lease_id, const struct waiter *keep)
{
    struct waiter *old = find_locked(lease_id);
    if (old == NULL || old == keep)
        return;
    unlink_waiter(old);
    wake(old, WAKE_SUPERSEDED);
}

int waiter_add(struct waiter *w, struct http_request *req, int64_t deadline_ms,
               struct fg_error *err)
{
    pthread_mutex_lock(&reg.lock);
    if (reg.count >= gw.cfg->max_waiters) {
        pthread_mutex_unlock(&reg.lock);
        return fg_fail(err, FG_ERR_TOO_MANY_WAITERS, "this gateway has %lld waiters already",
                       gw.cfg->max_waiters);
    }
    supersede_locked(w->lease_id, NULL);
    w->req = req;
    w->deadline_ms = deadline_ms;
    w->next_check_ms = deadline_ms;
    w->wake_reasons = 0;
    w->state = WAITER_RUNNING;
    w->serial = ++reg.next_serial;
    w->fd = http_request_fd(req);
    w->prev = NULL;
    w->next = reg.head;
    if (reg.head != NULL)
        reg.head->prev = w;
    reg.head = w;
    w->linked = true;
    reg.count++;
    if (w->fd >= 0) {
        /* EPOLLHUP and EPOLLERR are always reported */
        struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = w->serial};
        epoll_ctl(reg.epoll_fd, EPOLL_CTL_ADD, w->fd, &ev);
    }
    pthread_mutex_unlock(&reg.lock);
    return 0;
}

void waiter_rekey(struct waiter *w, const char *lease_id)
{
    pthread_mutex_lock(&reg.lock);
    supersede_locked(lease_id, w);
    snprintf(w->lease_id, sizeof w->lease_id, "%s", lease_id);
    pthread_mutex_unlock(&reg.lock);
}

void waiter_remove(struct waiter *w)
{
    pthread_mutex_lock(&reg.lock);
    if (w->linked)
        unlink_waiter(w);
    w->state = WAITER_GONE;
    pthread_mutex_unlock(&reg.lock);
}

unsigned waiter_take_reasons(struct waiter *w)
{
    pthread_mutex_lock(&reg.lock);
    unsigned reasons = w->wake_reasons;
    w->wake_reasons = 0;
    pthread_mutex_unlock(&reg.lock);
    return reasons;
}

bool waiter_park(struct waiter *w, int64_t next_check_ms)
{
    pthread_mutex_lock(&reg.lock);
    bool parked = w->wake_reasons == 0;
    if (parked) {
        w->next_check_ms = next_check_ms < w->deadline_ms ? next_check_ms : w->deadline_ms;
        waiter_set_state(w, WAITER_PARKED);
    }
    pthread_mutex_unlock(&reg.lock);
    return parked;
}

bool waiter_ring(const char *lease_id)
{
    pthread_mutex_lock(&reg.lock);
    struct waiter *w = find_locked(lease_id);
    if (w != NULL)
        wake(w, WAKE_DOORBELL);
    pthread_mutex_unlock(&reg.lock);
    return w != NULL;
}

bool waiter_deliver(const char *lease_id, void (*deliver)(struct waiter *w, void *ctx), void *ctx)
{
    pthread_mutex_lock(&reg.lock);
    struct waiter *w = find_locked(lease_id);
    if (w != NULL) {
        deliver(w, ctx);
        wake(w, WAKE_DOORBELL);
    }
    pthread_mutex_unlock(&reg.lock);
    return w != NULL;
}

void waiter_ring_watchers(char kind, const char *name, int64_t fence)
{
    pthread_mutex_lock(&reg.lock);
    for (struct waiter *w = reg.head; w != NULL; w = w->next)
        if (w->watch_kind == kind && w->watch_fence == fence && strcmp(w->watch_name, name) == 0)
            wake(w, WAKE_DOORBELL);
    pthread_mutex_unlock(&reg.lock);
}

void waiter_wake_all(unsigned reason)
{
    pthread_mutex_lock(&reg.lock);
    for (struct waiter *w = reg.head; w != NULL; w = w->next)
        wake(w, reason);
    pthread_mutex_unlock(&reg.lock);
}

void waiter_tick(int64_t now_ms)
{
    pthread_mutex_lock(&reg.lock);
    for (struct waiter *w = reg.head; w != NULL; w = w->next)
        if (w->state == WAITER_PARKED && now_ms >= w->next_check_ms)
            wake(w, WAKE_TIMER);
    pthread_mutex_unlock(&reg.lock);
}

/* The client of w sent a FIN: probe whether it still holds its socket (one
 * urgent byte, which a closed socket answers with a reset), and watch only for
 * that reset. Caller holds reg.lock. */
static void probe_half_close(struct waiter *w)
{
    static const char probe = 0;
    if (send(w->fd, &probe, 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        wake(w, WAKE_HANGUP);
        return;
    }
    struct epoll_event ev = {.events = EPOLLONESHOT, .data.u64 = w->serial};
    epoll_ctl(reg.epoll_fd, EPOLL_CTL_MOD, w->fd, &ev);
}

void waiter_watch_hangups(int timeout_ms)
{
    struct epoll_event events[64];
    int n = epoll_wait(reg.epoll_fd, events, 64, timeout_ms);
    if (n <= 0)
        return;
    pthread_mutex_lock(&reg.lock);
    for (int i = 0; i < n; i++)
        for (struct waiter *w = reg.head; w != NULL; w = w->next) {
            if (w->serial != events[i].data.u64)
                continue;
            if (events[i].events & (EPOLLHUP | EPOLLERR))
                wake(w, WAKE_HANGUP);
            else
                probe_half_close(w);
        }
    pthread_mutex_unlock(&reg.lock);
}

long waiter_count(void)
{
    pthread_mutex_lock(&reg.lock);
    long n = reg.count;
    pthread_mutex_unlock(&reg.lock);
    return n;
}
