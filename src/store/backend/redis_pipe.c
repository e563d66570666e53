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

/* Takes e, which is in q, out of it. */
static void queue_remove(struct pipe_queue *q, struct pipe_entry *e)
{
    struct pipe_entry *before = NULL;
    for (struct pipe_entry *at = q->head; at != e; at = at->next) {
        FG_ASSERT(at != NULL);
        before = at;
    }
    if (before != NULL)
        before->next = e->next;
    else
        q->head = e->next;
    if (q->tail == e)
        q->tail = before;
    e->next = NULL;
}

/* Ends e with failure (no reply). */
static void fail_entry(struct pipe_entry *e, const struct fg_error *failure)
{
    bool queued = e->state == PIPE_QUEUED;
    e->state = PIPE_DONE;
    e->reply = NULL;
    e->failure = *failure;
    if (queued) /* no byte of its command was written: Redis cannot run it */
        fg_not_run(&e->failure);
}

void pipe_push(struct pipe *p, struct pipe_entry *e, void *owner)
{
    e->state = PIPE_QUEUED;
    e->number = 0;
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
    if (p->conn == PIPE_OPEN && p->sent.head == NULL && !p->reading)
        return PIPE_READ; /* the batches out were all withdrawn: nobody else reads them */
    return PIPE_WAIT;     /* for the batch out, or for a retired connection to be closed */
}

bool pipe_reads_on(const struct pipe *p, const struct pipe_entry *e)
{
    if (e->state == PIPE_SENT)
        return true;
    return e->state == PIPE_QUEUED && p->conn == PIPE_OPEN && p->sent.head == NULL &&
           p->batches_out == PIPE_BATCHES_OUT;
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
    FG_ASSERT(p->batches_out < PIPE_BATCHES_OUT);
    for (struct pipe_entry *e = first; e != NULL; e = e->next) {
        e->state = PIPE_SENT;
        e->number = p->written++;
        (*n)++;
    }
    if (p->sent.tail != NULL)
        p->sent.tail->next = first;
    else
        p->sent.head = first;
    p->sent.tail = p->queued.tail;
    p->queued.head = p->queued.tail = NULL;
    p->out[p->batches_out++] = (struct pipe_batch){.end = p->written, .due_ms = due_ms};
    return first;
}

enum pipe_answer pipe_reply(struct pipe *p, void *reply, struct pipe_entry **to)
{
    *to = NULL;
    if (p->answered == p->written)
        return PIPE_ANSWER_UNASKED;
    uint64_t number = p->answered++;
    if (p->answered == p->out[0].end) {
        p->batches_out--;
        memmove(p->out, p->out + 1, p->batches_out * sizeof p->out[0]);
    }
    struct pipe_entry *e = p->sent.head;
    if (e == NULL || e->number != number)
        return PIPE_ANSWER_WITHDRAWN;
    queue_pop(&p->sent);
    e->state = PIPE_DONE;
    e->reply = reply;
    *to = e;
    return PIPE_ANSWER_CALL;
}

const struct pipe_entry *pipe_oldest_sent(const struct pipe *p)
{
    return p->sent.head;
}

int64_t pipe_due_ms(const struct pipe *p)
{
    FG_ASSERT(p->batches_out > 0);
    return p->out[0].due_ms;
}

void pipe_withdraw(struct pipe *p, struct pipe_entry *e, const struct fg_error *failure)
{
    FG_ASSERT(e->state != PIPE_DONE);
    queue_remove(e->state == PIPE_QUEUED ? &p->queued : &p->sent, e);
    fail_entry(e, failure);
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
    p->batches_out = 0; /* replies owed to withdrawn calls go with the connection */
    p->written = p->answered = 0;
}

void pipe_opened(struct pipe *p)
{
    p->conn = PIPE_OPEN;
}
