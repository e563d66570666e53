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
 * that pipe_next tells a thread to do. A call whose caller may wait no longer
 * leaves (pipe_withdraw): queued, it is never written; out, its reply is read
 * and dropped when it comes, by whichever thread reads then, and the batch it
 * was part of still holds the next one back until it is answered or due.
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
    uint64_t number;             /* once sent: its place among the connection's commands */
    int64_t until_ms;            /* its caller waits for it no longer (monotonic ms; set by the
                                    caller, util/budget.h) */
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

/* A batch written and not fully answered yet. */
struct pipe_batch {
    uint64_t end;   /* the number its last command's successor would have */
    int64_t due_ms; /* its replies are due by then (monotonic ms) */
};

/* The shared connection's state; zero is a closed, idle pipe. */
struct pipe {
    enum pipe_conn_state conn;               /* the connection */
    struct pipe_queue queued;                /* waiting to be written, oldest first */
    struct pipe_queue sent;                  /* written and waited for, in the order their
                                                replies come (a withdrawn call leaves it) */
    struct pipe_batch out[PIPE_BATCHES_OUT]; /* the batches out, oldest first */
    unsigned batches_out;                    /* entries of out in use */
    uint64_t written;                        /* commands written on the connection */
    uint64_t answered;                       /* replies read on it */
    bool writing;                            /* a thread connects or writes */
    bool reading;                            /* a thread reads */
};

/* Whom a reply read goes to (pipe_reply). */
enum pipe_answer {
    PIPE_ANSWER_CALL,      /* the oldest call out: done now */
    PIPE_ANSWER_WITHDRAWN, /* a call withdrawn: the reply is the reader's to drop */
    PIPE_ANSWER_UNASKED    /* no command is out: the connection is confused */
};

/* Queues e (its command, len, run_id_at and until_ms set by the caller; the
 * rest is set here), owner (borrowed) being what wakes its thread. */
void pipe_push(struct pipe *p, struct pipe_entry *e, void *owner);

/* What e's thread must do now; reading or writing it is to do are taken by pipe_begin. */
enum pipe_action pipe_next(const struct pipe *p, const struct pipe_entry *e);

/* Takes the role of action (PIPE_CONNECT, PIPE_WRITE, PIPE_READ) for the calling thread. */
void pipe_begin(struct pipe *p, enum pipe_action action);

/* Ends the writing or the reading (action as given to pipe_begin). */
void pipe_end(struct pipe *p, enum pipe_action action);

/* After PIPE_WRITE: moves every queued entry to sent, as one batch whose
 * replies are due by due_ms (the connection's deadline: a server silent that
 * long after a batch was written is taken for gone; each caller waits no
 * longer than its entry's until_ms), and returns the first (the others follow
 * by next, *n in all). Their commands must be copied before the lock is let
 * go: a failure or a withdrawal may end them (and their callers' stacks)
 * while the batch is being written. */
struct pipe_entry *pipe_take(struct pipe *p, int64_t due_ms, size_t *n);

/* Counts reply, the next one read, and hands it to the call it answers: the
 * oldest entry out, now done (*to), unless that call was withdrawn or no
 * command is out (*to NULL; reply not kept). */
enum pipe_answer pipe_reply(struct pipe *p, void *reply, struct pipe_entry **to);

/* The oldest entry out, or NULL. */
const struct pipe_entry *pipe_oldest_sent(const struct pipe *p);

/* When the oldest batch out is due (one must be out). */
int64_t pipe_due_ms(const struct pipe *p);

/* True while the thread of e, reading, must read on: e is out, or queued
 * behind batches whose calls were all withdrawn, which must be answered before
 * the next batch goes. */
bool pipe_reads_on(const struct pipe *p, const struct pipe_entry *e);

/* Ends e, queued or out, with failure: its caller waits no longer. Queued, it
 * is never written, and its failure is marked not run (fg_not_run: Redis
 * cannot run it); out, its reply is dropped when it comes, and Redis may have
 * run it. */
void pipe_withdraw(struct pipe *p, struct pipe_entry *e, const struct fg_error *failure);

/* Fails every entry out with failure and marks the connection broken; returns
 * them (done), linked by next. Redis may have run them. */
struct pipe_entry *pipe_fail_sent(struct pipe *p, const struct fg_error *failure);

/* Fails every queued entry with failure, marked not run (fg_not_run: none of
 * them was written); returns them (done), linked by next. */
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
