/* SPDX-License-Identifier: Apache-2.0 */
/*
 * park.h - the park engine: one way for every request that waits (an acquire
 * of a lock or a semaphore, a lock set, a watch of a lease) to park in the
 * waiter registry, wake and be answered. Redis's blocked.c is the model: the
 * kinds of wait differ only in their hooks (a struct park_kind), and the
 * engine runs the one wake loop over them. It reads why a wait woke and
 * answers by one table (park.c): a retry that supersedes it, a drain and a
 * client's hang-up end every kind's wait the same way; so does an API key
 * that no longer allows the wait (a reload removed it, or took away a scope
 * the wait needs): 401 or 403 as a fresh request would get, after whatever
 * the wait holds is given back. A grant handed over in-process goes to the
 * kind's take-grant hook; a passed deadline to its give-up hook; anything else
 * (a doorbell, a timer) to its attempt, after which the wait parks again or is
 * answered. The key is checked before a woken wait does anything else, and
 * again once an attempt answers, so that no answer reaches a key revoked
 * meanwhile.
 *
 * A wait's state is its wait_state.h lifecycle, kept by the registry. The
 * engine speaks lease facts and problems, never HTTP: the kind's own struct
 * holds its answer, and the caller's problem (given to each run, so that a
 * parked wait carries none) the engine's.
 */
#ifndef FG_PARK_H
#define FG_PARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/lease_result.h"
#include "lease/waiter.h"
#include "util/error.h"

struct park;

/* Why a wait ends without an answer of its own kind (the give-up hook's reason). */
enum park_why {
    PARK_WHY_SUPERSEDED, /* a retry with the same request_id took the wait over */
    PARK_WHY_DRAIN,      /* the gateway is stopping */
    PARK_WHY_HANGUP,     /* the client closed its connection */
    PARK_WHY_KEY,        /* its API key no longer allows it: give back whatever it holds */
    PARK_WHY_DEADLINE,   /* wait_ms passed: the kind answers (it may keep a grant that came) */
};

/* What an attempt found. */
enum park_try {
    PARK_TRY_ANSWERED, /* the answer is known (the kind's, or *p->problem) */
    PARK_TRY_WAIT,     /* not yet: park until *next_check_ms */
    PARK_TRY_OUTAGE,   /* a backend is down: the place is kept; look again soon */
};

/* What the request does next. */
enum park_step {
    PARK_STEP_PARK,   /* suspend it until its waiter resumes it, then park_run */
    PARK_STEP_ANSWER, /* answer the run's problem if set, else the kind's answer */
    PARK_STEP_HANGUP, /* its client is gone: the answer is only logged, the connection closed */
};

/* A kind of wait: its hooks, called on its request's thread unless said otherwise. */
struct park_kind {
    /* Tries again at now_ms (monotonic). */
    enum park_try (*attempt)(struct park *p, int64_t now_ms, int64_t *next_check_ms);
    /* Gives up the wait for why; left: the janitor already took it out of its queue. Returns -1
     * with err set if giving up failed (that is the answer then); for PARK_WHY_DEADLINE, 0 means
     * the kind's answer is set. */
    int (*give_up)(struct park *p, enum park_why why, bool left, struct fg_error *err);
    /* Takes the grant handed over in-process (p->grant). Returns true if that answers the wait,
     * false to try again (a lock set's next lock). NULL: grants are only rung. */
    bool (*take_grant)(struct park *p);
    /* Janitor thread, the requests suspended: takes ps[0..n) (waits of this kind whose clients
     * hung up) out of their queues at once, setting left[i] for each it took out. NULL: each
     * leaves on its own as it wakes. */
    void (*leave_many)(struct park *const *ps, size_t n, bool *left);
    /* The request ends: frees the wait that embeds p; holds_place says it still holds a place in
     * a queue that it must give up first. */
    void (*release)(struct park *p, bool holds_place);
    /* Checks that key (its caller's key in force now, auth on) holds every scope the wait needs:
     * 0, or -1 with FG_ERR_FORBIDDEN naming the first it lacks. NULL: it needs none. */
    int (*permit)(struct park *p, const struct api_key *key, struct fg_error *err);
};

/* A grant handed over in-process: its lease is the waiter's own, by which the registry found it. */
struct park_grant {
    int64_t fence;         /* its fence */
    int64_t ttl_ms;        /* its lease length */
    int64_t expires_at_ms; /* Redis time of expiry */
};

/* A wait, embedded in its kind's own struct (found again with PARK_OWNER). */
struct park {
    struct waiter waiter;         /* registry entry: state, wake reasons, lease id, deadline */
    const struct park_kind *kind; /* its hooks */
    struct park_grant grant;      /* a grant handed over in-process (WAKE_DELIVERED) */
    bool rung;                    /* the last wake was a ring of the doorbell (WAKE_DOORBELL) */
    struct fg_error *problem;     /* while it runs: the caller's, for the engine's answer
                                     (superseded, drain, hang-up) or FG_OK; NULL when parked */
};

/* The struct of type `type` whose member `member` is the park p. */
#define PARK_OWNER(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))

/* The engine's clock (monotonic ms): util/clock.h's unless a test sets another. */
extern int64_t (*park_clock)(void);

/* Registers p (zeroed but for its kind's struct and p->waiter's lease id or watch) for
 * client, ending at deadline_ms; state WAIT_REGISTERING. Fails with
 * FG_ERR_TOO_MANY_WAITERS (then park_end still frees it). */
int park_register(struct park *p, const struct park_kind *kind, const struct waiter_client *client,
                  int64_t deadline_ms, struct fg_error *err) FG_WUR;

/* Parks the registered p until next_check_ms, or runs it at once if a wake came meanwhile
 * (its answer in *problem as in park_run). */
enum park_step park_wait(struct park *p, int64_t next_check_ms, struct fg_error *problem);

/* Runs p: just registered (its first look), or resumed. Returns once it is answered or parks;
 * answered, *problem is the engine's answer, or FG_OK when the answer is the kind's. */
enum park_step park_run(struct park *p, struct fg_error *problem);

/* The grant handed over to p, as a lease grant. */
struct lease_grant park_grant_of(const struct park *p);

/* Its request ends: unregisters p and frees it through the kind's release hook. */
void park_end(struct park *p);

#endif
