/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waiter.h - the registry of requests parked while they wait for a lock or a
 * semaphore slot. A waiter lives inside its handler's request state; the
 * registry finds it by lease id (doorbell: a hash table), by deadline or
 * re-check time (janitor ticks: a heap of the parked waiters by time) and by
 * socket hang-up (an epoll set of the parked clients' sockets, found again by
 * descriptor), and wakes the parked request with the reason. One mutex guards
 * it; no lookup walks all waiters, so ten thousand of them cost a doorbell or
 * a hang-up no more than ten. Watchers of a lease (GET ...?watch=true) are
 * waiters too: they have no lease id of their own, live on a list of their
 * own and are found by the lease they watch (kind, name, fence).
 *
 * Each waiter's state is its wait's lifecycle (wait_state.h), which the
 * registry moves in one function under its lock, whichever thread the event
 * comes from. The registry knows a parked request only as an opaque pointer
 * and a socket: it resumes it through the callback given at
 * waiter_registry_init (the HTTP server's), so lease/ never calls into http/.
 */
#ifndef FG_WAITER_H
#define FG_WAITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/keyset.h"
#include "auth/token.h"
#include "lease/wait_state.h"
#include "util/error.h"
#include "util/heap.h"
#include "util/list.h"
#include "util/strmap.h"

struct waiter;
struct key_quota;

/*
 * Takes waiters ws[0..n) whose clients hung up out of their queues, many at
 * once, and sets left[i] for each it took out. The janitor calls it outside
 * the registry lock with waiters that share this hook, all WAIT_LEAVING: a
 * request that ends meanwhile (its connection closes in the one event-loop
 * round before its suspension) waits in waiter_end before it frees its
 * waiter. The waiters are then woken with WAKE_HANGUP, left or not (a waiter
 * it could not take out leaves on its own as it wakes).
 */
typedef void (*waiter_leave_fn)(struct waiter *const *ws, size_t n, bool *left);

/* Stores news handed over in-process (a grant) in the state of the request that owns w; called
 * under the registry lock, so it must not block or call back into the registry. */
typedef void (*waiter_deliver_fn)(struct waiter *w, const void *news);

enum waiter_wake {
    WAKE_DOORBELL = 1 << 0,   /* the lease may have been granted */
    WAKE_TIMER = 1 << 1,      /* re-check or deadline time reached */
    WAKE_HANGUP = 1 << 2,     /* the client closed or reset its connection (not a half-close) */
    WAKE_DRAIN = 1 << 3,      /* the gateway is stopping */
    WAKE_SUPERSEDED = 1 << 4, /* a retry of the same request took over */
    WAKE_DELIVERED = 1 << 5,  /* a grant was handed over in-process (the deliver hook has it) */
    WAKE_KEYS = 1 << 6,       /* a reload removed or changed its API key: it checks it again */
};

struct waiter {
    char lease_id[LEASE_ID_LEN + 1]; /* key of the registry */
    char watch_kind;                 /* watchers: kind of the watched lease ('l', 's'), else 0 */
    int fd;                          /* the client's socket, watched for hang-up */
    struct key_quota *quota;         /* the parked waiters of its API key; NULL: no key */
    const struct api_key *key;       /* its caller's API key as admitted (borrowed, lives until
                                        exit); NULL: auth was off */
    uint32_t serial;                 /* tells this waiter from an earlier one on the same fd */
    enum wait_state state;           /* its wait's (wait_state.h); guarded by the registry lock */
    unsigned wake_reasons;           /* enum waiter_wake bits not yet seen */
    void *request;                   /* the parked request (borrowed, opaque here) */
    int64_t deadline_ms;             /* monotonic time the wait ends */
    int64_t next_check_ms;           /* monotonic time of the next backstop re-check */
    int64_t watch_fence;             /* watchers: fence of the watched lease */
    const char *watch_name;          /* watchers: its lock or semaphore (borrowed) */
    int slot;                        /* cluster: hash slot of the queue it waits in (its
                                        gateway's mark is renewed there); -1: none. Set before
                                        waiter_add, later through waiter_set_slot */
    struct list_link link;           /* on the list of waiters, or of watchers, while registered */
    struct strmap_node by_id;        /* waiters: in the table by lease id */
    struct heap_node timer;          /* parked: in the heap by next_check_ms */
    waiter_leave_fn leave;           /* leaves many at once after hang-ups; NULL: on its own */
    waiter_deliver_fn deliver;       /* takes a grant handed over in-process; NULL: only rung */
};

/* A parked request as the registry knows it. */
struct waiter_client {
    void *request;             /* the request (opaque here), resumed through waiter_resume_fn */
    int fd;                    /* its client's socket, watched for hang-ups; -1: none */
    const struct api_key *key; /* its caller's API key (borrowed, lives until exit; its id counts
                                  for limits.max_waiters_per_key); NULL: auth off */
};

/* Resumes a parked request (any thread; a resume that comes before the
 * suspension took effect is kept). */
typedef void (*waiter_resume_fn)(void *request);

/* Creates the epoll set; resume is how parked requests are resumed. */
int waiter_registry_init(waiter_resume_fn resume, struct fg_error *err) FG_WUR;

/* Registers w (state WAIT_REGISTERING) for client (its key is kept). Fails with
 * FG_ERR_TOO_MANY_WAITERS when this process already has max_waiters, or that key
 * max_waiters_per_key (limits.max_waiters_per_key). A waiter with the same lease id is superseded:
 * woken with WAKE_SUPERSEDED and dropped from the registry; a watcher (empty lease id, watch_kind
 * set) supersedes nobody. */
int waiter_add(struct waiter *w, const struct waiter_client *client, int64_t deadline_ms,
               struct fg_error *err) FG_WUR;

/* Sets the hash slot of the queue w (registered) waits in now (struct waiter). */
void waiter_set_slot(struct waiter *w, int slot);

/* Sets seen[s] to 1 for the slot s (< nslots) of every registered waiter's queue; returns how many
 * entries it set that were 0. */
size_t waiter_slots(unsigned char *seen, size_t nslots);

/* Changes w's lease id (a retried request_id found its earlier lease; a lock
 * set moved on to its next lock). A waiter still registered under that id,
 * the earlier attempt, is superseded as in waiter_add: the retry takes its
 * place. A grant delivered under the old id and not yet taken is dropped: it
 * was for the lease w no longer waits for (a lock set that found that grant
 * by its own acquire took it already). */
void waiter_rekey(struct waiter *w, const char *lease_id);

/* Moves w's wait to the state that follows ev (wait_state.h); an event its
 * state never meets is a bug. Answered, it leaves the registry. */
void waiter_step(struct waiter *w, enum wait_event ev);

/* Its request ends: unregisters w (no-op if already gone) once no leave hook
 * works on it (WAIT_LEAVING), so the janitor cannot take it up after, and
 * moves it to WAIT_GONE. Returns the state it was in before. */
enum wait_state waiter_end(struct waiter *w);

/* Returns and clears the wake reasons seen by w. */
unsigned waiter_take_reasons(struct waiter *w);

/* Parks w until next_check_ms (capped by its deadline). Returns false without
 * parking if a wake arrived meanwhile (w is WAIT_AWAKE): it must read why at
 * once. */
bool waiter_park(struct waiter *w, int64_t next_check_ms);

/* Doorbell: wakes the waiter of lease_id. Returns false if there is none. */
bool waiter_ring(const char *lease_id);

/* Doorbell with the news in hand: gives news to the waiter of lease_id
 * through its deliver hook under the registry lock (so the handler reads it
 * after waiter_take_reasons), then wakes it with WAKE_DELIVERED; a waiter
 * without the hook is only rung and fetches the news itself. Returns false if
 * there is none. */
bool waiter_deliver(const char *lease_id, const void *news);

/* The lease with fence on name (kind 'l' or 's') ended: wakes its watchers. */
void waiter_ring_watchers(char kind, const char *name, int64_t fence);

/* Wakes every waiter with reason (resubscription, drain). */
void waiter_wake_all(unsigned reason);

/* The key set ks was put in force (SIGHUP): wakes with WAKE_KEYS the waiters and watchers whose key
 * ks no longer holds as they were admitted with it, removed or with other scopes, so that they
 * check it again at once (lease/park.h) instead of holding their place until their deadline. A key
 * whose text alone changed (a rotation) keeps its waiters parked; so does a set with auth off. */
void waiter_wake_keys(const struct keyset *ks);

/* Janitor: wakes waiters whose re-check or deadline time has come. Returns the
 * next such time (INT64_MAX: none parked). A waiter parked with an earlier
 * time than any other sets the janitor's alarm (util/alarm.h). */
int64_t waiter_tick(int64_t now_ms);

/* Janitor: waits up to timeout_ms for hang-ups of parked clients and wakes them
 * (a reset or a close at once; a half-close never); parked waiters with a
 * leave hook are first taken out of their queues by it, many per call. The
 * alarm's descriptor is watched too: returns true if it rang. */
bool waiter_watch_hangups(int timeout_ms);

/* True if the client of socket fd is gone, told the way the janitor tells a hang-up: a reset
 * or a close, not a half-close (a FIN is probed with one urgent byte, which a closed socket
 * answers with a reset). A reset that reaches the gateway only after this look is not seen. */
bool waiter_client_gone(int fd);

/* Waiters registered now (parked acquires, not watchers). */
long waiter_count(void);

/* Watchers registered now. */
long waiter_watch_count(void);

#endif
