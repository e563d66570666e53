/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.h - the time the request a thread serves may still spend waiting
 * for Redis. The HTTP server gives each run of a handler request_timeout_ms
 * (budget_start) and takes it back when the handler returns (budget_end); the
 * Redis client gives each call it makes meanwhile what is left as its
 * deadline, whatever the call waits for (its turn behind calls already out,
 * a connection being made, its reply), and charges the call's time to it. So
 * a request waits for Redis request_timeout_ms at most in all, however many
 * calls it makes. A thread that serves no request (the janitors, the clean-up
 * after an answer) gives each call a deadline of its own, and so does a
 * clean-up inside a handler between budget_set_aside and budget_restore (a
 * wait giving up its place, a lock set giving back the locks it took, once a
 * call spent the request's time: given none, their cancels would never be
 * written). A doorbell follower gives the slot map lookup of each of its
 * rounds a budget as a request's (store/backend/redis.c shard_round), so
 * that the nodes it asks take a round's time in all; so do the lease
 * janitor's liveness beat (janitor.c beat: until its next beat) and the audit
 * stream's sweep of every slot (store/audit/audit_stream.c sweep: a second,
 * request_timeout_ms if less, so that a sweep under way at SIGTERM ends
 * before the exit stops waiting for the backend janitor). A stale slot map
 * fetched again in passing, which the map in force stands in for meanwhile,
 * takes a second at most of whatever the thread has (budget_cap,
 * store/backend/redis_route.c ensure_map). Postgres draws nothing from it: a
 * statement cut short by the client may still commit, so its deadlines stay
 * its own (pg.h). Per thread, no locks.
 */
#ifndef FG_BUDGET_H
#define FG_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

/* The calling thread now serves a request that may wait ms for Redis. */
void budget_start(int64_t ms);

/* The calling thread serves no request now. */
void budget_end(void);

/* When a call made at now_ms (monotonic) must be done: what the thread's
 * request has left after now_ms, none when it is spent; call_ms after now_ms
 * for a thread that serves no request. */
int64_t budget_until_ms(int64_t now_ms, int64_t call_ms);

/* Until budget_restore, the calling thread's calls get deadlines of their own
 * and charge nothing, as for no request. Returns what budget_restore takes. */
bool budget_set_aside(void);

/* Ends budget_set_aside (was: what it returned): the request's budget, if
 * any, counts again from where it was. */
void budget_restore(bool was);

/* Charges spent_ms, the time a call took, to the thread's request (if any). */
void budget_spend(int64_t spent_ms);

/* What budget_cap keeps of the thread's budget for budget_uncap. */
struct budget_capped {
    bool on;          /* the thread served a request */
    int64_t left_ms;  /* what it had left */
    int64_t given_ms; /* what the cap gave */
};

/* Until budget_uncap, the calling thread's calls share ms at most in all:
 * what its request has left, if less, or ms for a thread that serves no
 * request. Returns what budget_uncap takes. */
struct budget_capped budget_cap(int64_t ms);

/* Ends budget_cap: the request's budget, if any, is charged what the calls
 * spent meanwhile; a thread that served no request serves none again. */
void budget_uncap(struct budget_capped capped);

#endif
