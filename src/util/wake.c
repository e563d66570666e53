/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wake.c - sleepers on a socket that can be woken (wake.h): a list of joined
 * slots under one lock, each with an eventfd whose count keeps a wake until
 * its sleeper reads it. A sleep is one poll of the socket and the slot's
 * descriptor, without a timeout, so an idle follower does not wake at all.
 */
#include "util/wake.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

static struct {
    pthread_mutex_t lock;
    struct wake_slot head; /* sentinel of a circular list */
} joined = {.lock = PTHREAD_MUTEX_INITIALIZER, .head = {-1, &joined.head, &joined.head}};

void wake_join(struct wake_slot *slot)
{
    slot->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_lock(&joined.lock);
    slot->prev = joined.head.prev;
    slot->next = &joined.head;
    joined.head.prev->next = slot;
    joined.head.prev = slot;
    pthread_mutex_unlock(&joined.lock);
}

void wake_leave(struct wake_slot *slot)
{
    pthread_mutex_lock(&joined.lock);
    slot->prev->next = slot->next;
    slot->next->prev = slot->prev;
    pthread_mutex_unlock(&joined.lock);
    if (slot->fd >= 0)
        close(slot->fd);
    slot->fd = -1;
}

void wake_all(void)
{
    uint64_t one = 1;
    pthread_mutex_lock(&joined.lock);
    for (struct wake_slot *s = joined.head.next; s != &joined.head; s = s->next)
        if (s->fd >= 0)
            (void)!write(s->fd, &one, sizeof one);
    pthread_mutex_unlock(&joined.lock);
}

bool wake_wait(struct wake_slot *slot, int fd)
{
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = slot->fd, .events = POLLIN}};
    int n = poll(p, slot->fd >= 0 ? 2 : 1, slot->fd >= 0 ? -1 : WAKE_FALLBACK_MS);
    if (n <= 0)
        return false;
    if (p[1].revents != 0) {
        uint64_t count;
        (void)!read(slot->fd, &count, sizeof count);
        return false;
    }
    return p[0].revents != 0;
}

bool wake_nap(struct wake_slot *slot, int ms)
{
    struct pollfd p = {.fd = slot->fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0 || p.revents == 0)
        return false;
    uint64_t count;
    (void)!read(slot->fd, &count, sizeof count);
    return true;
}
