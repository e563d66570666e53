/* SPDX-License-Identifier: Apache-2.0 */
/*
 * published.h - an immutable object put in force whole and replaced whole
 * (the API keys, the token signing keys: both re-read on SIGHUP). Readers take
 * the current object with one atomic load and may keep using it for as long as
 * they run: a replaced object is kept until published_clear at exit, so no
 * reader ever needs a lock or a reference count. Replacements are rare (a
 * signal), so what they keep is small.
 */
#ifndef FG_PUBLISHED_H
#define FG_PUBLISHED_H

#include <pthread.h>
#include <stdatomic.h>

struct published_entry;

struct published {
    _Atomic(void *) current;         /* the object in force, or NULL */
    struct published_entry *history; /* every object ever published, newest first */
    pthread_mutex_t lock;            /* guards history */
    void (*free_fn)(void *obj);      /* frees one object at published_clear */
};

#define PUBLISHED_INIT(free_fn)                                                                    \
    {                                                                                              \
        NULL, NULL, PTHREAD_MUTEX_INITIALIZER, free_fn                                             \
    }

/* Puts obj (owned from now on) in force. */
void published_set(struct published *p, void *obj);

/* The object in force (borrowed), or NULL. */
void *published_get(struct published *p);

/* Frees every object ever published. No reader may be running. */
void published_clear(struct published *p);

#endif
