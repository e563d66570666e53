/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis.h - the Redis module: the only code that speaks hiredis. Every thread's
 * calls share one connection to the primary (found through sentinels for a
 * redis-sentinel:// URL; with redis-cluster://, one connection per primary,
 * each script sent to the primary of its first key's slot), pipelined: the
 * calls of concurrent requests go out in one write and their replies come back
 * in one read. With redis_pipeline_from N above 0, a call made while fewer
 * than N others are in flight goes on its thread's own connection to the
 * primary instead (not in a cluster) and waits for nobody. Each connection is
 * made on first use and remade after an error, a failover, or a close noticed
 * while it was idle; a call blocks its thread until its reply or its deadline
 * (what the request it serves has left of request_timeout_ms, util/budget.h).
 * The Lua scripts of lua/ are Redis functions, called by enum fg_script with FCALL
 * (their library loaded again when Redis does not know them), with KEYS and
 * ARGV arrays indexed by the constants that lua_scripts.h generates from each
 * script's header; every script returns one text, JSON that arrives here as a
 * jansson value (redis_script) or, from the lease scripts, their own reply
 * handed over as text (redis_script_text): callers never see a hiredis type.
 */
#ifndef FG_REDIS_H
#define FG_REDIS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "lua_scripts.h"
#include "store/backend/slot_handover.h"
#include "util/error.h"

/* Called on the calling thread each time a new connection is made, before the
 * first queued command runs on it (the hook's own calls go to that connection
 * alone); a failure fails the command of the thread that made it (the
 * connection is kept, and the hook is not run again on it). */
typedef int (*redis_connect_hook)(struct fg_error *err);

/* Parses cfg->redis_url and computes the scripts' SHA1s. No connection yet. */
int redis_init(const struct config *cfg, struct fg_error *err) FG_WUR;

/* Sets the hook run on every new connection (fence recovery), or NULL; not
 * run on the nodes of a cluster. */
void redis_set_connect_hook(redis_connect_hook hook);

/*
 * Runs script (e.g. SCRIPT_LOCK_ACQUIRE, lua/lock_acquire.lua) with keys and
 * argv (borrowed), holding exactly the KEYS and ARGV its header declares:
 * <NAME>_NKEYS and <NAME>_NARGV entries, each at its <NAME>_KEY_* or
 * <NAME>_ARGV_* index (either may be NULL when its count is 0). Every entry
 * must be set. On success stores the decoded JSON result in *out (new
 * reference) and returns 0. A connection problem fails with
 * FG_ERR_BACKEND_UNAVAILABLE, marked not run (fg_not_run) when Redis answered
 * without running the script (CLUSTERDOWN, TRYAGAIN, a slot no primary
 * serves, READONLY, MASTERDOWN, LOADING, OOM) or the call was never written
 * (no connection could be made or set up: refused, not a primary, AUTH
 * refused; its deadline came while it waited its turn), or Redis answered
 * "Function not found" and the library could not be loaded; a script error
 * with FG_ERR_INTERNAL.
 */
int redis_script(enum fg_script script, const char *const *keys, const char *const *argv,
                 json_t **out, struct fg_error *err) FG_WUR;

/* Reads the answer text (len bytes) of script name; 0, or -1 with err. */
typedef int redis_answer_fn(const char *name, const char *text, size_t len, void *ctx,
                            struct fg_error *err);

/* redis_script for answers read on every request: hands the answer text to
 * read with ctx, without decoding it into JSON first, and returns what read
 * returns. It names the first nkeys of keys, at most <NAME>_NKEYS: a script
 * whose last keys serve a case the call is not (lease/lease_keys.h
 * lease_keys_of_request) is called without them. */
int redis_script_text(enum fg_script script, size_t nkeys, const char *const *keys,
                      const char *const *argv, redis_answer_fn *read, void *ctx,
                      struct fg_error *err) FG_WUR;

/* redis_script for a script whose last ARGV takes the rest ("ids..."): its
 * nmore values follow in more (borrowed). */
int redis_script_more(enum fg_script script, const char *const *keys, const char *const *argv,
                      const char *const *more, size_t nmore, json_t **out,
                      struct fg_error *err) FG_WUR;

/* One call of a batch (redis_batch): a script, or a command that names one
 * key (its first argument after the command's name). */
struct redis_batch_call {
    enum fg_script script;   /* with argc 0: the script, called as redis_script calls it */
    const char *const *keys; /* its KEYS and ARGV (borrowed, as redis_script takes them) */
    const char *const *argv;
    bool text;               /* the script's answer is text (redis_script_text), not JSON */
    int argc;                /* else: a command of argc (>= 2) arguments */
    const char *const *args; /* its arguments, args[1] its key (ZRANGEBYLEX, EXISTS, SADD, ...) */
    json_t *reply;       /* set by redis_batch: the answer (new reference), a script's decoded JSON
                            text (with text: its answer as one JSON string, unchecked), or a
                            command's reply as JSON (strings, integers, arrays, null); NULL when
                            the call failed */
    struct fg_error err; /* set by redis_batch: why reply is NULL */
};

/*
 * Runs the n calls of calls, each on the primary that owns the slot of its
 * key (its first KEY for a script); on one Redis all on its one connection.
 * The calls of one primary are queued together on its connection (so they
 * go out in one write and come back in one read, whatever other calls join
 * them) in the order given; the primaries are served one after another. A
 * call answered by a redirect (MOVED, ASK), by TRYAGAIN or CLUSTERDOWN, or by
 * a node that lacks its script's library is sent again alone, as
 * redis_script sends a script. Every call gets its own outcome, in reply or
 * err. Returns 0 when every call succeeded, else -1 with err the first
 * failure.
 */
int redis_batch(struct redis_batch_call *calls, size_t n, struct fg_error *err) FG_WUR;

/* request_timeout_ms: how long a call of a thread that serves no request may
 * wait for Redis (util/budget.h). */
int64_t redis_timeout_ms(void);

/* Bytes of a Redis run_id (40 hex digits). */
#define REDIS_RUN_ID_LEN 40

/*
 * An ARGV value that stands for the run_id of the Redis process a script runs
 * on: the call carries this text (REDIS_RUN_ID_LEN dashes, which no run_id
 * is) and the connection it is written on puts its own run_id in its place as
 * it writes it, read with INFO when the connection was
 * made. So a script always sees the run_id of the process that runs it,
 * whatever reconnection, MOVED or ASK came between the caller and the write;
 * it sees the dashes when that process would not say (INFO not allowed).
 */
extern const char redis_run_id_here[REDIS_RUN_ID_LEN + 1];

/* The text of redis_run_id_here. A script's per-slot fence limit key that
 * ends with it (KEY_FENCE_LIMIT ":{T}:" and this text: lease_keys.h, named
 * after the run_id it is read on) has it replaced the same way. */
#define REDIS_RUN_ID_PLACEHOLDER "----------------------------------------"

/* Reads the run_id of the Redis process the gateway talks to into out (cap
 * bytes): it changes whenever Redis restarts or another server answers. An
 * empty out means INFO named none; a Redis refusing INFO (a user without it)
 * or still loading its data fails with FG_ERR_BACKEND_UNAVAILABLE. In a
 * cluster: of one primary of the map. */
int redis_run_id(char *out, size_t cap, struct fg_error *err) FG_WUR;

/* On a cluster: the lowest slot served by the primary that serves slot, by the
 * slot map (fetched first when there is none), into *first; 0 on one Redis. */
int redis_home_slot(unsigned slot, unsigned *home, struct fg_error *err) FG_WUR;

/* On a cluster: fetches the slot map now (a script found it stale); a no-op
 * on one Redis. */
int redis_map_refresh(struct fg_error *err) FG_WUR;

/*
 * On a cluster: judges whether the keys of slot came whole by a live reshard
 * from the Redis process from (a run_id: the last the slot's fence sequence
 * was recovered on) to the process here (the run_id of the process that holds
 * them now), asking the nodes of the map (store/backend/slot_handover.h:
 * INFO of the slot's owner and of every node until one runs from, CLUSTER
 * NODES of that one). *why receives a static text naming the rule that
 * decided. HANDOVER_LOST on one Redis. -1 with err only when no map could be
 * had.
 */
int redis_slot_handover(unsigned slot, const char *from, const char *here,
                        enum handover_verdict *verdict, const char **why,
                        struct fg_error *err) FG_WUR;

/* PING on the shared connection; in a cluster, on every primary of the map. */
int redis_ping(struct fg_error *err) FG_WUR;

/* Reads CONFIG GET maxmemory-policy into out (cap bytes). In a cluster, of
 * every primary: "noeviction" when all have it, else the first other policy
 * with its node ("allkeys-lru (10.0.0.5:7000)"); a primary connected to later
 * (a promoted replica, a primary added) is checked when connected, and warned
 * about in the log. */
int redis_eviction_policy(char *out, size_t cap, struct fg_error *err) FG_WUR;

/* What the warning about a policy other than noeviction tells the operator. */
#define REDIS_EVICTION_RISK                                                                        \
    "Redis may evict lock keys and silently free held locks, or the fences of fenced Redis "       \
    "keys; set maxmemory-policy noeviction"

/* Message and (re)connection callbacks of redis_subscribe. */
struct redis_subscriber {
    const char *channel;                                            /* channel to follow */
    void (*on_message)(const char *payload, size_t len, void *ctx); /* each message */
    void (*on_subscribed)(void *ctx); /* after each (re)subscription: messages may be lost */
    void *ctx;                        /* passed back */
};

/*
 * Follows sub->channel on a dedicated connection until *stop becomes true,
 * reconnecting after errors. Blocks the calling thread, which sleeps until a
 * message comes; redis_subscribe_stop ends it. On a cluster it follows the
 * shard channels sub->channel ":{T(s)}" of every slot s instead (T: the slot
 * tags of store/backend/key_slot.h; SSUBSCRIBE on each slot's primary, a connection
 * per primary), and follows each slot to its new owner when a reshard or a
 * failover moves it; on_subscribed runs after each round of (re)subscriptions.
 */
void redis_subscribe(const struct redis_subscriber *sub, atomic_bool *stop);

/* Sets *stop and wakes the threads in redis_subscribe to see it. */
void redis_subscribe_stop(atomic_bool *stop);

/* With a redis-sentinel:// URL, starts the thread that follows +switch-master
 * (connections to a former primary are then dropped before their next
 * command); a no-op for redis://. */
int redis_watch_start(struct fg_error *err) FG_WUR;

/* Asks that thread to end, without waiting for it. */
void redis_watch_stop_ask(void);

/* Stops that thread (redis_watch_stop_ask) and joins it by until_ms
 * (clock_mono_ms); false if it is still in a call to a sentinel then, left
 * behind (true when it does not run). */
bool redis_watch_stop(int64_t until_ms);

/* Called by a thread that ends: closes its own connection to the primary, if
 * it made one (redis_pipeline_from). */
void redis_thread_done(void);

/* Makes every call on the pipelined connections made from now on end at once,
 * unanswered (503 backend_unavailable); calls under way keep their deadlines.
 * For a drain that ran out of time: the give-ups and requests still to run
 * must not each wait request_timeout_ms for a Redis that does not answer. */
void redis_cut_off(void);

/* Closes the shared connection and every thread's own, once the watcher was
 * stopped (redis_watch_stop). */
void redis_shutdown(void);

#endif
