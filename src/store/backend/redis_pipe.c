/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_pipe.c - who writes, who reads and whose reply comes next on the
 * shared Redis connection (redis_pipe.h): two FIFOs of callers' entries and
 * the two roles. Must not: lock, sleep, touch a socket or know hiredis.
 */
#include "store/backend/redis_pipe.h"

#include <string.h>

static void queue_append(struct pipe_queue *q, struct pipe_entry *e)
{
    e->next = NULL;
    if (q->tail != NULL)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
}

static struct pipe_entry *queue_pop(struct pipe_queue *q)
{
    struct pipe_entry *e = q->head;
    if (e == NULL)
        return NULL;
    q->head = e->next;
    if (q->head == NULL)
        q->tail = NULL;
    e->next = NULL;
    return e;
}

/* Ends e with failure (no reply). */
static void fail_entry(struct pipe_entry *e, const struct fg_error *failure)
{
    e->state = PIPE_DONE;
    e->reply = NULL;
    e->failure = *failure;
}

void pipe_push(struct pipe *p, struct pipe_entry *e, void *owner)
{
    e->state = PIPE_QUEUED;
    e->last_of_batch = false;
    e->due_ms = 0;
    e->reply = NULL;
    memset(&e->failure, 0, sizeof e->failure);
    e->owner = owner;
    atomic_init(&e->wakes_given, 0);
    queue_append(&p->queued, e);
}

enum pipe_action pipe_next(const struct pipe *p, const struct pipe_entry *e)
{
    switch (e->state) {
    case PIPE_DONE: return PIPE_FINISHED;
    case PIPE_SENT: return p->reading ? PIPE_WAIT : PIPE_READ;
    case PIPE_QUEUED: break;
    }
    if (p->writing)
        return PIPE_WAIT;
    if (p->conn == PIPE_CLOSED)
        return PIPE_CONNECT;
    if (p->conn == PIPE_OPEN && p->batches_out < PIPE_BATCHES_OUT)
        return PIPE_WRITE;
    return PIPE_WAIT; /* for the batch out, or for a retired connection to be closed */
}

void pipe_begin(struct pipe *p, enum pipe_action action)
{
    if (action == PIPE_READ)
        p->reading = true;
    else
        p->writing = true;
}

void pipe_end(struct pipe *p, enum pipe_action action)
{
    if (action == PIPE_READ)
        p->reading = false;
    else
        p->writing = false;
}

struct pipe_entry *pipe_take(struct pipe *p, int64_t due_ms, size_t *n)
{
    struct pipe_entry *first = p->queued.head;
    *n = 0;
    if (first == NULL)
        return NULL;
    for (struct pipe_entry *e = first; e != NULL; e = e->next) {
        e->state = PIPE_SENT;
        e->due_ms = due_ms;
        e->last_of_batch = e->next == NULL;
        (*n)++;
    }
    if (p->sent.tail != NULL)
        p->sent.tail->next = first;
    else
        p->sent.head = first;
    p->sent.tail = p->queued.tail;
    p->queued.head = p->queued.tail = NULL;
    p->batches_out++;
    return first;
}

struct pipe_entry *pipe_reply(struct pipe *p, void *reply)
{
    struct pipe_entry *e = queue_pop(&p->sent);
    if (e == NULL)
        return NULL;
    if (e->last_of_batch)
        p->batches_out--;
    e->state = PIPE_DONE;
    e->reply = reply;
    return e;
}

const struct pipe_entry *pipe_oldest_sent(const struct pipe *p)
{
    return p->sent.head;
}

/* Fails every entry of q; returns them linked by next. */
static struct pipe_entry *fail_all(struct pipe_queue *q, const struct fg_error *failure)
{
    struct pipe_entry *first = q->head;
    for (struct pipe_entry *e = first; e != NULL; e = e->next)
        fail_entry(e, failure);
    q->head = q->tail = NULL;
    return first;
}

struct pipe_entry *pipe_fail_sent(struct pipe *p, const struct fg_error *failure)
{
    p->conn = PIPE_BROKEN;
    p->batches_out = 0;
    return fail_all(&p->sent, failure);
}

struct pipe_entry *pipe_fail_queued(struct pipe *p, const struct fg_error *failure)
{
    return fail_all(&p->queued, failure);
}

void pipe_retire(struct pipe *p)
{
    if (p->conn == PIPE_OPEN)
        p->conn = PIPE_RETIRING;
}

bool pipe_must_close(const struct pipe *p)
{
    if (p->writing || p->reading)
        return false;
    return p->conn == PIPE_BROKEN || (p->conn == PIPE_RETIRING && p->sent.head == NULL);
}

void pipe_closed(struct pipe *p)
{
    p->conn = PIPE_CLOSED;
}

void pipe_opened(struct pipe *p)
{
    p->conn = PIPE_OPEN;
}
