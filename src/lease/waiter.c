/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waiter.c - the registry of parked requests. Wakes come from four threads:
 * the doorbell (a grant was published), the janitor (timers, hang-ups), the
 * HTTP threads (a retry supersedes) and the main one (a drain, a reload that
 * removed or changed API keys). All of them go through wake()
 * under the registry lock, so a wake that races with parking is never lost:
 * waiter_park refuses to park while a reason is pending.
 *
 * Lookups are constant-time, since the registry may hold tens of thousands of
 * waiters and every lookup runs under its one lock: waiters sit in a hash
 * table of their lease ids (util/strmap.h), a hang-up is found by the socket's descriptor (an
 * array indexed by descriptor; the epoll event carries the descriptor and the
 * waiter's serial, so a late event for an earlier request on a reused
 * descriptor is ignored), and the parked ones sit in a binary heap by re-check
 * time (util/heap.h), from which the janitor's tick takes only those whose time came.
 * Watchers have no lease id and sit on a list of their own, which the news of
 * an ended lease walks.
 *
 * Hang-ups. Only a reset or a full close of the client's socket ends a wait; a
 * client that half-closes (sends its request, then shuts down its write side)
 * still waits for its answer. Both kinds of close arrive as the same FIN, and
 * only data tells them apart: a socket that its process closed answers data
 * with a reset, one that is only half-closed takes it. So a FIN makes the
 * gateway send one byte of TCP urgent data, which an HTTP client never reads
 * (without SO_OOBINLINE the byte is not part of the stream it reads), and
 * watch for the reset that a closed socket sends back. A reset ends the wait
 * at once. The janitor gathers the parked waiters whose clients reset in one
 * pass (up to HANGUP_BATCH) and lets their leave hook take them out of their
 * queues together (one script call per lock and batch, not one per waiter)
 * before it wakes them to answer.
 */
#include "lease/waiter.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway.h"
#include "lease/key_quota.h"
#include "store/backend/key_slot.h"
#include "util/alarm.h"

#define HANGUP_BATCH 256        /* epoll events taken at once */
#define ALARM_KEY    UINT64_MAX /* the epoll key of the alarm's descriptor (no waiter's) */

static struct {
    pthread_mutex_t lock;
    struct list_link waiters;  /* waiters (watch_kind 0) */
    struct list_link watchers; /* watchers (watch_kind set, no lease id) */
    struct strmap by_id;       /* waiters by lease id */
    struct waiter **by_fd;     /* parked client sockets: descriptor -> waiter */
    size_t nfds;               /* entries of by_fd */
    long count;                /* registered waiters and watchers */
    long watch_count;          /* of them, watchers */
    uint32_t next_serial;      /* serial of the next waiter */
    struct heap timers;        /* parked waiters by next_check_ms */
    struct strmap quotas;      /* struct key_quota by API key id, made on first use */
    int epoll_fd;
    waiter_resume_fn resume; /* resumes a parked request */
    pthread_cond_t left;     /* a batch of WAIT_LEAVING waiters is done */
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER,
         .left = PTHREAD_COND_INITIALIZER,
         .waiters = {&reg.waiters, &reg.waiters},
         .watchers = {&reg.watchers, &reg.watchers},
         .by_id = STRMAP_INIT,
         .timers = HEAP_INIT,
         .quotas = STRMAP_INIT,
         .epoll_fd = -1};

int waiter_registry_init(waiter_resume_fn resume, struct fg_error *err)
{
    reg.resume = resume;
    reg.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (reg.epoll_fd < 0)
        return fg_fail(err, FG_ERR_INTERNAL, "epoll_create1: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = ALARM_KEY};
    if (epoll_ctl(reg.epoll_fd, EPOLL_CTL_ADD, alarm_fd(), &ev) != 0)
        return fg_fail(err, FG_ERR_INTERNAL, "epoll_ctl: %s", strerror(errno));
    return 0;
}

static struct waiter *waiter_of_timer(struct heap_node *node)
{
    return (struct waiter *)(void *)((char *)node - offsetof(struct waiter, timer));
}

static struct waiter *waiter_of_id(struct strmap_node *node)
{
    return STRMAP_ENTRY(node, struct waiter, by_id);
}

/* True while w is registered (superseded waiters are not, though their waits go on). */
static bool registered(const struct waiter *w)
{
    return w->link.next != NULL && w->link.next != &w->link;
}

static void unlink_waiter(struct waiter *w);

/* The one transition function of a wait (wait_state.h): a parked wait is in
 * the timer heap, one that runs again after its suspension is resumed, and one
 * that is answered or gone leaves the registry. Caller holds reg.lock. */
static void step_locked(struct waiter *w, enum wait_event ev)
{
    enum wait_state from = w->state;
    enum wait_state to = (enum wait_state)fsm_step(&wait_lifecycle, (int)from, (int)ev);
    w->state = to;
    if (from == WAIT_PARKED)
        heap_remove(&reg.timers, &w->timer);
    if (to == WAIT_PARKED) {
        heap_add(&reg.timers, &w->timer, w->next_check_ms);
        if (w->timer.slot == 0)
            alarm_set(w->next_check_ms);
    }
    if (wait_state_suspended(from) && !wait_state_suspended(to) && to != WAIT_GONE)
        reg.resume(w->request);
    if ((to == WAIT_ANSWERED || to == WAIT_GONE) && registered(w))
        unlink_waiter(w);
}

/* Records reason and resumes w if parked. Caller holds reg.lock. */
static void wake(struct waiter *w, unsigned reason)
{
    w->wake_reasons |= reason;
    if (w->state == WAIT_PARKED)
        step_locked(w, WAIT_EV_WAKE);
}

/* What w's epoll event carries: its serial and its descriptor. */
static uint64_t epoll_key(const struct waiter *w)
{
    return (uint64_t)w->serial << 32 | (uint32_t)w->fd;
}

/* Remembers that fd belongs to w, growing the table to fit. */
static void fd_insert(struct waiter *w)
{
    if ((size_t)w->fd >= reg.nfds) {
        size_t n = reg.nfds ? reg.nfds : 1024;
        while (n <= (size_t)w->fd)
            n *= 2;
        struct waiter **grown = realloc(reg.by_fd, n * sizeof *grown);
        FG_ASSERT(grown != NULL);
        memset(grown + reg.nfds, 0, (n - reg.nfds) * sizeof *grown);
        reg.by_fd = grown;
        reg.nfds = n;
    }
    reg.by_fd[w->fd] = w;
}

static void unlink_waiter(struct waiter *w)
{
    list_unlink(&w->link);
    if (w->watch_kind == 0)
        strmap_remove(&reg.by_id, &w->by_id);
    if (w->fd >= 0) {
        epoll_ctl(reg.epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
        if ((size_t)w->fd < reg.nfds && reg.by_fd[w->fd] == w)
            reg.by_fd[w->fd] = NULL;
    }
    if (w->quota != NULL)
        w->quota->count--;
    reg.count--;
    reg.watch_count -= w->watch_kind != 0;
}

static struct waiter *find_locked(const char *lease_id)
{
    if (lease_id[0] == '\0')
        return NULL; /* watchers have no lease id */
    struct strmap_node *node = strmap_find(&reg.by_id, lease_id);
    return node != NULL ? waiter_of_id(node) : NULL;
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

/* True if ks (NULL: none) no longer lets w wait as it was admitted: it requires a key and w
 * came without one (auth was off), or w's key is removed or has other scopes. */
static bool key_changed(const struct waiter *w, const struct keyset *ks)
{
    const struct api_key *now;
    struct fg_error refused;
    if (keyset_key_in_force(ks, w->key, &now, &refused) != 0)
        return true;
    return now != NULL && now != w->key && !api_key_same_scopes(now, w->key);
}

int waiter_add(struct waiter *w, const struct waiter_client *client, int64_t deadline_ms,
               struct fg_error *err)
{
    pthread_mutex_lock(&reg.lock);
    if (reg.count >= gw.cfg->max_waiters) {
        pthread_mutex_unlock(&reg.lock);
        return fg_fail(err, FG_ERR_TOO_MANY_WAITERS, "this gateway has %lld waiters already",
                       gw.cfg->max_waiters);
    }
    w->quota = key_quota_of(&reg.quotas, client->key != NULL ? client->key->id : NULL);
    if (w->quota != NULL && w->quota->count >= gw.cfg->max_waiters_per_key) {
        pthread_mutex_unlock(&reg.lock);
        return fg_fail(err, FG_ERR_TOO_MANY_WAITERS,
                       "API key '%s' keeps %lld acquires and watches parked already "
                       "(limits.max_waiters_per_key)",
                       client->key->id, gw.cfg->max_waiters_per_key);
    }
    if (w->quota != NULL)
        w->quota->count++;
    supersede_locked(w->lease_id, NULL);
    w->request = client->request;
    w->key = client->key;
    w->deadline_ms = deadline_ms;
    w->next_check_ms = deadline_ms;
    /* a reload between the request's admission and here woke nobody for it: it looks now */
    w->wake_reasons = key_changed(w, auth_current()) ? WAKE_KEYS : 0;
    w->state = WAIT_REGISTERING;
    w->serial = ++reg.next_serial;
    w->fd = client->fd;
    list_push(w->watch_kind != 0 ? &reg.watchers : &reg.waiters, &w->link);
    reg.count++;
    reg.watch_count += w->watch_kind != 0;
    if (w->watch_kind == 0)
        strmap_add(&reg.by_id, &w->by_id, w->lease_id);
    if (w->fd >= 0) {
        fd_insert(w);
        /* EPOLLHUP and EPOLLERR are always reported */
        struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = epoll_key(w)};
        epoll_ctl(reg.epoll_fd, EPOLL_CTL_ADD, w->fd, &ev);
    }
    pthread_mutex_unlock(&reg.lock);
    return 0;
}

void waiter_set_slot(struct waiter *w, int slot)
{
    pthread_mutex_lock(&reg.lock);
    w->slot = slot;
    pthread_mutex_unlock(&reg.lock);
}

size_t waiter_slots(unsigned char *seen, size_t nslots)
{
    size_t added = 0;
    pthread_mutex_lock(&reg.lock);
    for (struct list_link *l = reg.waiters.next; l != &reg.waiters; l = l->next)
        added += slot_seen(seen, nslots, LIST_ENTRY(l, struct waiter, link)->slot);
    pthread_mutex_unlock(&reg.lock);
    return added;
}

void waiter_rekey(struct waiter *w, const char *lease_id)
{
    pthread_mutex_lock(&reg.lock);
    supersede_locked(lease_id, w);
    bool hashed = registered(w) && w->watch_kind == 0;
    if (hashed)
        strmap_remove(&reg.by_id, &w->by_id);
    snprintf(w->lease_id, sizeof w->lease_id, "%s", lease_id);
    if (hashed)
        strmap_add(&reg.by_id, &w->by_id, w->lease_id);
    w->wake_reasons &= ~(unsigned)WAKE_DELIVERED;
    pthread_mutex_unlock(&reg.lock);
}

void waiter_step(struct waiter *w, enum wait_event ev)
{
    pthread_mutex_lock(&reg.lock);
    step_locked(w, ev);
    pthread_mutex_unlock(&reg.lock);
}

enum wait_state waiter_end(struct waiter *w)
{
    pthread_mutex_lock(&reg.lock);
    while (w->state == WAIT_LEAVING)
        pthread_cond_wait(&reg.left, &reg.lock);
    enum wait_state from = w->state;
    if (registered(w))
        unlink_waiter(w);
    step_locked(w, WAIT_EV_END);
    pthread_mutex_unlock(&reg.lock);
    return from;
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
        step_locked(w, WAIT_EV_PARK);
    } else
        step_locked(w, WAIT_EV_WAKE);
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

bool waiter_deliver(const char *lease_id, const void *news)
{
    pthread_mutex_lock(&reg.lock);
    struct waiter *w = find_locked(lease_id);
    if (w != NULL) {
        if (w->deliver != NULL)
            w->deliver(w, news);
        wake(w, w->deliver != NULL ? WAKE_DELIVERED : WAKE_DOORBELL);
    }
    pthread_mutex_unlock(&reg.lock);
    return w != NULL;
}

void waiter_ring_watchers(char kind, const char *name, int64_t fence)
{
    pthread_mutex_lock(&reg.lock);
    for (struct list_link *l = reg.watchers.next; l != &reg.watchers; l = l->next) {
        struct waiter *w = LIST_ENTRY(l, struct waiter, link);
        if (w->watch_kind == kind && w->watch_fence == fence && strcmp(w->watch_name, name) == 0)
            wake(w, WAKE_DOORBELL);
    }
    pthread_mutex_unlock(&reg.lock);
}

void waiter_wake_all(unsigned reason)
{
    pthread_mutex_lock(&reg.lock);
    for (struct list_link *l = reg.waiters.next; l != &reg.waiters; l = l->next)
        wake(LIST_ENTRY(l, struct waiter, link), reason);
    for (struct list_link *l = reg.watchers.next; l != &reg.watchers; l = l->next)
        wake(LIST_ENTRY(l, struct waiter, link), reason);
    pthread_mutex_unlock(&reg.lock);
}

void waiter_wake_keys(const struct keyset *ks)
{
    if (!ks->required)
        return;
    struct list_link *lists[] = {&reg.waiters, &reg.watchers};
    pthread_mutex_lock(&reg.lock);
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        for (struct list_link *l = lists[i]->next; l != lists[i]; l = l->next) {
            struct waiter *w = LIST_ENTRY(l, struct waiter, link);
            if (key_changed(w, ks))
                wake(w, WAKE_KEYS);
        }
    pthread_mutex_unlock(&reg.lock);
}

int64_t waiter_tick(int64_t now_ms)
{
    pthread_mutex_lock(&reg.lock);
    struct heap_node *first;
    while ((first = heap_min(&reg.timers)) != NULL && first->key <= now_ms)
        wake(waiter_of_timer(first), WAKE_TIMER);
    int64_t next_ms = first != NULL ? first->key : INT64_MAX;
    pthread_mutex_unlock(&reg.lock);
    return next_ms;
}

/* The waiter an epoll event is about, if it is still the one registered. */
static struct waiter *hung_up(uint64_t data)
{
    uint32_t fd = (uint32_t)data, serial = (uint32_t)(data >> 32);
    struct waiter *w = fd < reg.nfds ? reg.by_fd[fd] : NULL;
    return w != NULL && w->serial == serial ? w : NULL;
}

/* The peer of fd sent a FIN: sends it one urgent byte, which a socket its
 * process closed answers with a reset and a half-closed one takes. Returns
 * false if the byte could not be sent (the peer is gone). */
static bool probe(int fd)
{
    static const char byte = 0;
    return send(fd, &byte, 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) == 1;
}

/* The client of w sent a FIN: probe whether it still holds its socket, and
 * watch only for the reset of a closed one. Caller holds reg.lock. */
static void probe_half_close(struct waiter *w)
{
    if (!probe(w->fd)) {
        wake(w, WAKE_HANGUP);
        return;
    }
    struct epoll_event ev = {.events = EPOLLONESHOT, .data.u64 = epoll_key(w)};
    epoll_ctl(reg.epoll_fd, EPOLL_CTL_MOD, w->fd, &ev);
}

/* Runs the leave hooks of ws[0..n) (all WAIT_LEAVING), each once per batch
 * of the waiters that share it, then wakes them all with WAKE_HANGUP, left or
 * stayed. Called without reg.lock. */
static void leave_all(struct waiter **ws, size_t n)
{
    bool left[HANGUP_BATCH] = {false};
    for (size_t done = 0; done < n;) {
        waiter_leave_fn leave = ws[done]->leave;
        size_t same = done;
        for (size_t i = done; i < n; i++) {
            if (ws[i]->leave != leave)
                continue;
            struct waiter *w = ws[i];
            ws[i] = ws[same];
            ws[same++] = w;
        }
        leave(ws + done, same - done, left + done);
        done = same;
    }
    pthread_mutex_lock(&reg.lock);
    for (size_t i = 0; i < n; i++) {
        ws[i]->wake_reasons |= WAKE_HANGUP;
        step_locked(ws[i], left[i] ? WAIT_EV_LEFT : WAIT_EV_STAYED);
    }
    pthread_cond_broadcast(&reg.left);
    pthread_mutex_unlock(&reg.lock);
}

bool waiter_watch_hangups(int timeout_ms)
{
    struct epoll_event events[HANGUP_BATCH];
    int n = epoll_wait(reg.epoll_fd, events, HANGUP_BATCH, timeout_ms);
    if (n <= 0)
        return false;
    struct waiter *leaving[HANGUP_BATCH];
    size_t nleaving = 0;
    bool rang = false;
    pthread_mutex_lock(&reg.lock);
    for (int i = 0; i < n; i++) {
        rang = rang || events[i].data.u64 == ALARM_KEY;
        struct waiter *w = hung_up(events[i].data.u64);
        if (w == NULL)
            continue;
        if (!(events[i].events & (EPOLLHUP | EPOLLERR)))
            probe_half_close(w);
        else if (w->state == WAIT_PARKED && w->leave != NULL) {
            step_locked(w, WAIT_EV_LEAVE);
            leaving[nleaving++] = w;
        } else
            wake(w, WAKE_HANGUP);
    }
    pthread_mutex_unlock(&reg.lock);
    leave_all(leaving, nleaving);
    return rang;
}

bool waiter_client_gone(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLRDHUP};
    if (fd < 0 || poll(&pfd, 1, 0) <= 0)
        return false;
    if (pfd.revents & (POLLHUP | POLLERR))
        return true;
    /* A FIN: a closed socket answers the probe with a reset, on loopback before send returns. */
    if (!probe(fd))
        return true;
    pfd.revents = 0;
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR));
}

long waiter_count(void)
{
    pthread_mutex_lock(&reg.lock);
    long n = reg.count - reg.watch_count;
    pthread_mutex_unlock(&reg.lock);
    return n;
}

long waiter_watch_count(void)
{
    pthread_mutex_lock(&reg.lock);
    long n = reg.watch_count;
    pthread_mutex_unlock(&reg.lock);
    return n;
}
