/* SPDX-License-Identifier: Apache-2.0 */
/*
 * alarm.c - the lease janitor's alarm clock (alarm.h): one eventfd and the
 * planned wake time as one atomic value, INT64_MAX while the janitor plans (any
 * due time wakes it), 0 while it is awake (none does). alarm_set lowers the
 * value to its due time with a compare-and-swap and writes the eventfd only
 * when it did, so that many threads setting due times cost one wake-up.
 */
#include "util/alarm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int ring_fd = -1;
static atomic_llong planned; /* the wake time the janitor sleeps towards (see above) */

int alarm_init(struct fg_error *err)
{
    ring_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ring_fd < 0)
        return fg_fail(err, FG_ERR_INTERNAL, "eventfd: %s", strerror(errno));
    return 0;
}

int alarm_fd(void)
{
    return ring_fd;
}

void alarm_set(int64_t at_ms)
{
    long long was = atomic_load(&planned);
    while (at_ms < was)
        if (atomic_compare_exchange_weak(&planned, &was, at_ms)) {
            uint64_t one = 1;
            (void)!write(ring_fd, &one, sizeof one);
            return;
        }
}

void alarm_plan(void)
{
    atomic_store(&planned, INT64_MAX);
}

int alarm_sleep_ms(int64_t at_ms, int64_t now_ms, int cap_ms)
{
    long long was = atomic_load(&planned);
    while (at_ms < was && !atomic_compare_exchange_weak(&planned, &was, at_ms))
        ;
    int64_t until = at_ms < was ? at_ms : was;
    if (until <= now_ms)
        return 0;
    return until - now_ms < cap_ms ? (int)(until - now_ms) : cap_ms;
}

void alarm_woken(bool rang)
{
    atomic_store(&planned, 0);
    uint64_t count;
    if (rang)
        (void)!read(ring_fd, &count, sizeof count);
}
