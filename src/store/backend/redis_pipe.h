/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_pipe.h - the bookkeeping of the one Redis connection that every thread
 * shares (store/backend/redis.c): which commands wait to be written, which are out and
 * in what order their replies come back, and who does what next. Each call
 * queues an entry on its thread's stack; a thread that finds the writing free
 * takes every queued entry and writes them in one go (a batch), a thread that
 * finds the reading free reads replies and hands each, in order, to the oldest
 * entry out. Redis answers a connection's commands in the order it read them,
 * so the n-th reply is the n-th command's. Pure: no locks, no sockets, no
 * hiredis; the caller holds its own lock around every call and does the I/O
 * that pipe_next tells a thread to do.
 */
#ifndef FG_REDIS_PIPE_H
#define FG_REDIS_PIPE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Batches written and not yet fully answered, at most: a batch that waits for
 * the one before to be answered gathers every call that arrives meanwhile,
 * which Redis then reads and answers with one system call each way. */
#define PIPE_BATCHES_OUT 1

/* Where a call is. */
enum pipe_entry_state {
    PIPE_QUEUED, /* waits to be written */
    PIPE_SENT,   /* written, its reply not read yet */
    PIPE_DONE    /* reply or failure in */
};

/* Where the shared connection is. */
enum pipe_conn_state {
    PIPE_CLOSED,   /* none: the next writer connects */
    PIPE_OPEN,     /* takes batches */
    PIPE_RETIRING, /* takes no more; closed once its calls out are answered */
    PIPE_BROKEN    /* failed: closed as soon as nobody writes or reads on it */
};

/* What a thread must do next for its call (pipe_next). */
enum pipe_action {
    PIPE_WAIT,    /* sleep until woken */
    PIPE_CONNECT, /* make the connection (pipe_begin took the writing) */
    PIPE_WRITE,   /* write the batch pipe_take gives (pipe_begin took the writing) */
    PIPE_READ,    /* read replies (pipe_begin took the reading) */
    PIPE_FINISHED /* its outcome is in */
};

/* One call, on its caller's stack. */
struct pipe_entry {
    struct pipe_entry *next;     /* the next one in its queue */
    enum pipe_entry_state state; /* where it is */
    bool last_of_batch;          /* the last entry of its batch */
    int64_t due_ms;              /* once sent: its reply is due by then (monotonic ms) */
    const char *command;         /* its command in RESP; borrowed until done */
    size_t len;                  /* bytes of command */
    size_t run_id_at;        /* where the writer puts its connection's run_id in the copy of command
                                it writes (REDIS_RUN_ID_LEN bytes, store/backend/redis.h); 0: nowhere */
    void *reply;             /* when done: its reply (the caller's to free), or NULL */
    struct fg_error failure; /* when done without a reply */
    void *owner;             /* its caller's (to wake it); borrowed */
    atomic_int wakes_given;  /* wake-ups of its caller that other threads give after letting
                                their lock go (store/backend/redis.c): the entry, on its
                                caller's stack, must outlive them */
};

/* A FIFO of entries. */
struct pipe_queue {
    struct pipe_entry *head, *tail;
};

/* The shared connection's state; zero is a closed, idle pipe. */
struct pipe {
    enum pipe_conn_state conn; /* the connection */
    struct pipe_queue queued;  /* waiting to be written, oldest first */
    struct pipe_queue sent;    /* written, in the order their replies come */
    unsigned batches_out;      /* batches in sent */
    bool writing;              /* a thread connects or writes */
    bool reading;              /* a thread reads */
};

/* Queues e (its command and len set by the caller; the rest is set here),
 * owner (borrowed) being what wakes its thread. */
void pipe_push(struct pipe *p, struct pipe_entry *e, void *owner);

/* What e's thread must do now; reading or writing it is to do are taken by pipe_begin. */
enum pipe_action pipe_next(const struct pipe *p, const struct pipe_entry *e);

/* Takes the role of action (PIPE_CONNECT, PIPE_WRITE, PIPE_READ) for the calling thread. */
void pipe_begin(struct pipe *p, enum pipe_action action);

/* Ends the writing or the reading (action as given to pipe_begin). */
void pipe_end(struct pipe *p, enum pipe_action action);

/* After PIPE_WRITE: moves every queued entry to sent, as one batch whose
 * replies are due by due_ms (a deadline from the time it is sent, as for a
 * command on a connection of its own: time spent queued behind a slow batch
 * does not count), and returns the first (the others follow by next, *n in
 * all). Their commands
 * must be copied before the lock is let go: a failure may end them (and
 * their callers' stacks) while the batch is being written. */
struct pipe_entry *pipe_take(struct pipe *p, int64_t due_ms, size_t *n);

/* Hands reply to the oldest entry out and returns it (done), or NULL when no
 * entry is out: a reply nobody asked for. */
struct pipe_entry *pipe_reply(struct pipe *p, void *reply);

/* The oldest entry out, or NULL. */
const struct pipe_entry *pipe_oldest_sent(const struct pipe *p);

/* Fails every entry out with failure and marks the connection broken; returns
 * them (done), linked by next. */
struct pipe_entry *pipe_fail_sent(struct pipe *p, const struct fg_error *failure);

/* Fails every queued entry with failure; returns them (done), linked by next. */
struct pipe_entry *pipe_fail_queued(struct pipe *p, const struct fg_error *failure);

/* Marks the connection as taking no more batches (a failover, a server that
 * said it cannot take writes, a socket found closed). */
void pipe_retire(struct pipe *p);

/* True when the connection must be closed now: retired or broken, and nobody
 * writes or reads on it, and no call of a retired one is out. The caller
 * closes it and calls pipe_closed. */
bool pipe_must_close(const struct pipe *p);

/* The connection was closed (or could not be made). */
void pipe_closed(struct pipe *p);

/* The connection was made: it takes batches. */
void pipe_opened(struct pipe *p);

#endif
