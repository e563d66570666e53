/* SPDX-License-Identifier: Apache-2.0 */
/*
 * published.c - objects put in force by one atomic store and kept until exit.
 */
#include "util/published.h"

#include <stdlib.h>

#include "util/error.h"

struct published_entry {
    void *obj;
    struct published_entry *older;
};

void published_set(struct published *p, void *obj)
{
    struct published_entry *e = malloc(sizeof *e);
    FG_ASSERT(e != NULL);
    pthread_mutex_lock(&p->lock);
    e->obj = obj;
    e->older = p->history;
    p->history = e;
    atomic_store(&p->current, obj);
    pthread_mutex_unlock(&p->lock);
}

void *published_get(struct published *p)
{
    return atomic_load(&p->current);
}

void published_clear(struct published *p)
{
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->current, NULL);
    while (p->history != NULL) {
        struct published_entry *e = p->history;
        p->history = e->older;
        p->free_fn(e->obj);
        free(e);
    }
    pthread_mutex_unlock(&p->lock);
}
