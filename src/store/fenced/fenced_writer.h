/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_writer.h - who writes through either fenced store (fenced_pg for
 * Postgres rows, fenced_redis for Redis keys): the verified token's claims and
 * the request's origin. Pure: no I/O.
 */
#ifndef FG_FENCED_WRITER_H
#define FG_FENCED_WRITER_H

#include <stdint.h>

/* Who writes: the verified token's claims and the request's origin (borrowed). */
struct fenced_writer {
    int64_t fence;           /* the token's fence */
    const char *lock_name;   /* the lock (or semaphore) the token was issued for */
    const char *owner;       /* Fence-Owner header, or NULL */
    const char *client_addr; /* the client's address */
    const char *principal;   /* id of the writer's API key, or NULL (auth off) */
    const char *trace_id;    /* trace id of the request's traceparent, or NULL */
};

#endif
