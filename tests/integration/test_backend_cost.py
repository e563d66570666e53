# SPDX-License-Identifier: Apache-2.0
"""What an uncontended lease costs Redis, counted: the commands its scripts run per acquire + release.

Redis runs every lease operation of every gateway on one thread, so the work per lease is the ceiling of a
whole deployment. This counts it as bench/backend_cost does, over many acquire + release pairs on fresh names
through one gateway, but from Redis's MONITOR stream instead of INFO commandstats deltas: there each script
call shows with the commands its script ran, so the calls the gateway's janitor makes by itself meanwhile are
left out by name (JANITOR_SCRIPTS) rather than as an idle rate measured apart, which a janitor pass inside the
window and not in the idle second upset on a loaded machine. A count, not a time: it is the same on any
machine.

- A lock pair runs at most LOCK_PAIR_COMMANDS commands inside its two script calls. (Caught: the scripts
  before the holder became one string read with the fence sequence in one MGET and released leases were
  kept in the holder key itself ran 21 per pair: the queue, released-lease and ended-lease sets, the
  watched mark and two TIME calls on every pair; and 9 while the release asked Redis the time for the
  end's record and the hold time in the metrics.)
- A semaphore pair (limit 5) runs at most SEMAPHORE_PAIR_COMMANDS. (Caught: the scripts before the
  release of the only holder kept the end of its lease in the limit key ran 25: a purge, the
  released-lease and ended-lease sets, the watched mark and a look at the queue on every release; and
  17 before the first holder was kept in the limit key as a lock's is: its record in the holders' hash
  and sorted set, and their times to live; and 10 while the release asked Redis the time.)
- Each pair is two script calls, one per transition.
- A pair with a request_id, as the Python, Go and TypeScript clients send on every acquire, is the first
  tries' too (lua/lock_acquire_fast.lua, lua/sem_acquire_fast.lua, FIRST_TRY_KEYS and FIRST_TRY_ARGS for a
  lock, one more key and argument for a semaphore), which keep the request_id beside the grant: at most
  RID_LOCK_PAIR_COMMANDS and RID_SEMAPHORE_PAIR_COMMANDS. (Caught: the full scripts for every acquire with a
  request_id, 17 and 37 commands a pair, a semaphore's in four script calls since its holder was then in the
  holders' keys, where the release's first two tries do not look; a grant that read the request_id's
  time once more after finding it lapsed, one command more; one that looked the request_id up, pruned and
  gave each key its time with a PEXPIREAT GT and NX on a name that had no request-id keys yet, 16 and 17;
  one that kept the id of a name used once in the request-id set, a hash and a sorted set with a
  PEXPIREAT each, 13 and 14; a semaphore's that asked whether the request-id set exists on its own, 11.)
- A semaphore pair beside another holder (the full scripts: a semaphore in use) runs at most
  IN_USE_SEMAPHORE_PAIR_COMMANDS. (Caught: an acquire that counted the holders and the queue again after
  grant_free had, and asked whether the semaphore it had just granted a slot of was idle: 23; a release
  that read the limit key's time to live although it set no expiry: 20.) Neither script reads an expiry
  back (ZRANGE ... WITHSCORES: a number Redis prints and Lua reads again, which costs more than two
  commands): it counts the holders, and those whose lease ran out. (Caught: an acquire that looked at the
  earliest expiry to learn whether any had run out.)
- An acquire beside other holders is one call of sem_acquire_more.lua, which names the MORE_KEYS keys and
  MORE_ARGS arguments it touches where the full script names 17 and 14 (Redis hands each to Lua at a
  price), and without a request_id none of the request ids' RID_KEYS keys, which every lean try of an
  acquire names last (caught: a gateway that named them for every acquire); the second holder's too, which it moves out of the limit key first. A release that leaves other
  holders is one call of sem_release_more.lua, RELEASE_MORE_KEYS and RELEASE_MORE_ARGS where the full
  script names 16 and 5. (Caught: a gateway that ran the full script once a first try had found the
  semaphore in use, for an acquire or a release; one that ran it after the lean acquire had met the first
  holder in the limit key.)
- A semaphore in use that goes idle and back (its last holder leaves, the next acquire comes) costs no call
  more: the try beside other holders takes the slot of a semaphore gone idle as the first try does, and
  the release beside others releases the last holder too, from the holders' keys or the limit key.
  (Caught: the lean tries that left either to the full script, whose "contended" answers kept the
  gateway's hint on the name at "queue": 4 calls a pair on a semaphore of limit 5 shared by 4 clients.)
- A lock set taken in one pass is one call a lock to acquire and one to release. (Caught: a set that renewed
  every lock it held as it took the last, to one expiry, where the leases ended within the milliseconds
  the pass took: 6 calls for a set of two.)
- A semaphore whose queue emptied, its hint still "queue", releases in the lean hand-over and grants a free
  slot in the lean queue join: one call each. (Caught: both left to the full scripts, 2.36 calls a pair
  with four clients on a semaphore of limit 2.)
- A semaphore's queue join, once a waiter has queued at the name, is one call of sem_acquire_queue.lua,
  which names the QUEUE_KEYS keys and QUEUE_ARGS arguments it touches where the full script names 17 and 14,
  and runs at most SEM_QUEUE_JOIN_COMMANDS. (Caught: a gateway that ran the full script for every waiter.)
- A semaphore's release that hands its slot to the oldest waiter, a waiter of the same gateway, once the
  gateway found a queue at the name, is one call of sem_release_handover.lua, which names the HAND_OVER_KEYS
  keys and HAND_OVER_ARGS arguments it touches where the full script names 16 and 5, and runs at most
  SEM_HAND_OVER_COMMANDS; the waiter is woken with the grant in hand, no claim call. (Caught: a gateway that
  ran the full script for every hand-over; one that did not hand the lean script's grant to its waiter,
  which then waited for its next look.)
- A lock or semaphore pair on a name used again runs at most REUSED_PAIR_COMMANDS more than on a fresh name:
  the first try moves the end of the lease before, which the release left in the holder or limit key, to a
  key of its own (lib_lease.lua end_move: a RENAME each pair), and writes no ended set; with a fresh
  request_id each time (the clients' invoice lock), REUSED_RID_COMMANDS more than a fresh name's pair with one:
  the one-id key's id, of the lease before, moves to a key of its own too (rid_take_first), and the new id
  takes the one-id key, with no request-id set. (Caught: the end copied into the ended set, end_bury, 3
  commands more a pair; the end written over, no RENAME; the new id put in the request-id set, 14 commands a
  lock pair.)
- A semaphore's release beside another holder (the full script) files its end in the ended set, which
  keeps only what is still to be kept: one end in 16 trims the ends whose time is past. (Caught: a trim on
  every such release, a ZREMRANGEBYSCORE each; no trim at all, an ended set as long as the name's history.)
- A contended lock's queue join runs at most QUEUE_JOIN_COMMANDS and a release that hands it over to the next
  waiter at most HAND_OVER_COMMANDS, one script call each; the join, once the gateway saw the lock held, is
  a call of lock_acquire_queue.lua with its LOCK_QUEUE_KEYS keys and LOCK_QUEUE_ARGS arguments where the full
  script names 15 and 15 (without a request_id, RID_KEYS keys fewer). (Caught: a join that looked its new lease id up in the queue, put the name in the
  listing index again and asked for its rank, 10 commands; a gateway that ran the full script for every join;
  a hand-over that wrote the end's record over the holder before writing the next holder there, peeked at the
  queue's head first, read the fence sequence apart and looked up the mark of its own gateway, the waiter's,
  16; one that filed the end in a released and an ended set, 12.) The join's bound is 8 where it was 7: it reads
  the queue's time to live (PTTL), which must last until its deadline and a waiter lease have passed, so that a
  queue whose waiters' gateway was killed goes by itself instead of staying in Redis, and in status, forever;
  a join that finds it shorter gives the queue's three keys a waiter lease more with a PEXPIRE each, which the
  joins after then need not for a waiter lease (a minute here), so none of the QUEUED joins counted does.
  (Caught: three PEXPIREs on every join, 10.)
- A fenced Redis write or read is one script call of a handful of commands: a PUT and the DELETE of what
  it wrote at most PUT_DELETE_COMMANDS together (each looks at the key's type once before it writes, the
  PUT with STRLEN, the DELETE with TYPE: a key of another type is refused, not replaced or deleted), a read
  of a string STRING_READ_COMMANDS, a PATCH of two fields of a hash PATCH_COMMANDS. (Caught: a PUT that set
  the fence and the value with a SET each and a DELETE that asked EXISTS before its DEL, 11 commands with
  those looks; a read of a string that asked TYPE, GET, STRLEN and GET, 4; a PATCH that asked TYPE and an
  HEXISTS per field, 9.)
- The renewal of a lock's holder, and of a semaphore's only holder, runs RENEWAL_COMMANDS, one script call
  each. (Caught: a semaphore's renewal that moved its first holder out of the limit key, where the first
  try keeps it, into the holders' keys: 12 commands the first time and 6 each time after.) With a
  request_id, RID_RENEWAL_COMMANDS: its time moves with the lease's. (Caught: a renewal that pruned the
  request ids, mapped the request_id again and read its time first, 9; a semaphore's that moved a first
  holder with a request_id into the holders' keys, 12; one that moved the id's time in the request-id set,
  a ZADD GT and a PEXPIREAT GT for each of its two keys, 6.) A lock lease granted to a waiter with a
  request_id, WAITER_RID_RENEWAL_COMMANDS: the id is in the request-id set. (Caught: a renewal that pruned
  the set and mapped the id again, 11.)
- A lock's queue leaves nothing behind once its last waiter is gone, granted or given up: the arrival
  tickets, which tell an acquire in its first read that somebody waits, go with it, so the lock costs an
  uncontended pair again. (Caught: the tickets kept after a waiter left.)
- A first try that finds the block of fences reserved in Postgres run out answers "nofence", which says
  nothing of the name: the gateway reserves the next block and runs the first try again, and the name's
  next pair is the first tries too. (Caught: a first try that answered "contended", which sent the name's
  pairs to three or four script calls for a second; the full script run after "nofence", whose grant of a
  semaphore's slot only the full release takes.)

Owns: these bounds. Must not: depend on timing. Besides the operation counted, a window can hold:
- the janitor's calls (src/janitor.c), left out: the gateway's liveness mark every third of waiter_lease_ms
  (TIME, ZREMRANGEBYSCORE, ZADD), the audit stream's read every 500 ms (XRANGE), and every 5 s the listing
  indexes' prune, which looks at up to 500 names each with a GET and a ZCARD or more (and a PTTL for one
  held): on a Redis other tests used, dozens of commands in one window;
- the re-checks of waiters parked on the gateway, kept out: none looks again before poll_ms or its wait_ms
  (a minute), nor before the lease of the holder it queued behind ends (the first three look then), HELD_MS;
- work of the operation that depends on its pace, counted to the nearest whole one per call: a lock queue's
  time to live lengthened once a waiter lease (three PEXPIREs; a waiter lease of a minute here), the ended
  set trimmed one end in 16, and a name's contention hint (src/lease/contention.h), which lapses a second
  after the last sign of contention, so that a call coming later tries the first-try script first (one or
  two calls more: a join or pair that took over a second, or one a second after a semaphore in use was
  last found so).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import unittest
import uuid
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, Monitor, Redis, skip_in_cluster, wait_for  # noqa: E402
from lock_helpers import Waiter  # noqa: E402

PAIRS = 300
LOCK_PAIR_COMMANDS = 8
SEMAPHORE_PAIR_COMMANDS = 9
IN_USE_SEMAPHORE_PAIR_COMMANDS = 19
REUSED_PAIR_COMMANDS = 1  # a RENAME
REUSED_RID_COMMANDS = 1  # and with a request_id each time, a RENAME of the one-id key
# With a request_id on a fresh name: the pair's, and the SET of the name's one-id key, read in the first MGET
# (lib_lease.lua rid_take), and for a lock a PEXPIRETIME (no request-id set), which a semaphore asks in the
# EXISTS of its holders and queue (lib_lease.lua rid_busy_look)
RID_LOCK_PAIR_COMMANDS = 10
RID_SEMAPHORE_PAIR_COMMANDS = 10
FIRST_TRY_KEYS, FIRST_TRY_ARGS = 8, 4  # lua/lock_acquire_fast.lua's; lua/sem_acquire_fast.lua one more each
# The request ids' keys, which the lean tries of an acquire name last, and only for a request with a request_id
# (src/lease/lease_keys.h lease_keys_of_request): a first try's three (not the request-id hash, where it never
# maps an id), the others' four
FIRST_TRY_RID_KEYS, RID_KEYS = 3, 4
QUEUE_JOIN_COMMANDS = 8  # 7, and the queue's PTTL (lib_lease.lua queue_keep)
HAND_OVER_COMMANDS = 10
QUEUED = 12
PUT_DELETE_COMMANDS = 9  # MGET, SMISMEMBER, STRLEN, MSET; MGET, SMISMEMBER, TYPE, DEL, SET
STRING_READ_COMMANDS = 3  # TYPE, STRLEN, MGET
PATCH_COMMANDS = 5  # MGET, SMISMEMBER, HLEN, SET, HSET
RENEWAL_COMMANDS = 3  # GET, TIME, PEXPIRE
RID_RENEWAL_COMMANDS = 5  # and the request_id's in the name's one-id key: GET, PEXPIREAT GT
# A lock lease granted to a waiter with a request_id, whose id the request-id set keeps: the renewal's, the
# one-id key's GET, and the id's time moved in the set (lib_lease.lua rid_extend_set: ZADD GT, a PEXPIREAT
# GT of each key)
WAITER_RID_RENEWAL_COMMANDS = 7
MORE_KEYS, MORE_ARGS = 13, 8  # lua/sem_acquire_more.lua's KEYS and ARGV
RELEASE_MORE_KEYS, RELEASE_MORE_ARGS = 9, 2  # lua/sem_release_more.lua's
QUEUE_KEYS, QUEUE_ARGS = 13, 8  # lua/sem_acquire_queue.lua's
HAND_OVER_KEYS, HAND_OVER_ARGS = 13, 4  # lua/sem_release_handover.lua's
SEM_HAND_OVER_COMMANDS = 16
LOCK_QUEUE_KEYS, LOCK_QUEUE_ARGS = 9, 9  # lua/lock_acquire_queue.lua's
SEM_QUEUE_JOIN_COMMANDS = 9
# A claim of a grant another gateway made (lua/lock_claim.lua, lua/sem_claim.lua): the holder and, for a waiter
# with a request_id, the request ids' two; a semaphore's keys besides. A lock's GET, TIME, SET; a semaphore's HGET,
# TIME, ZSCORE, HSET, ZADD and the limit key's PTTL (lib_sem_life.lua keep_alive), and the six keys' times to live
# when they have less than the lease's
LOCK_CLAIM_KEYS, SEM_CLAIM_KEYS = 1, 6
LOCK_CLAIM_COMMANDS, SEM_CLAIM_COMMANDS = 3, 13
# A queue join's request_id kept in the name's request-id set (a waiter's id goes there, never into the one-id
# key): PEXPIRETIME, ZADD NX (the look and the add), ZRANGEBYSCORE, HSET, and the hash's PEXPIREAT (a join that
# lengthens the keys gives them a grace more, which the joins after need not)
RID_JOIN_COMMANDS = 5
HELD_MS = 600000  # the lease of a holder waiters queue behind: it outlasts their poll_ms and wait_ms
CROSSED = 50  # hand-overs from a holder on one gateway to the only waiter, on the other, one at a time
# Commands that are neither a script call nor run by one: the connections' set-up and this test's reads
# (zlexcount, which no script runs).
NOT_SCRIPTS = {"select", "role", "ping", "hello", "client|setname", "client|setinfo", "function|load",
               "function|list", "zlexcount"}
SCRIPT_CALLS = {"fcall", "fcall_ro", "evalsha", "eval"}
# The functions the janitor calls by itself, on its own clock (src/janitor.c): the liveness mark, the audit
# stream's drain and the listing indexes' prune. None is called by an operation counted here.
JANITOR_SCRIPTS = {"fg_instance_beat", "fg_rw_audit_read", "fg_rw_audit_ack", "fg_rw_audit_dead", "fg_lease_list"}


def ran(step) -> Counter:
    """The commands Redis ran for step(), by name: its script calls and the commands their scripts ran, and
    any other command but set-up and this test's reads; the janitor's calls (JANITOR_SCRIPTS) left out."""
    with Monitor() as mon:
        step()
    counts = Counter()
    for call in mon.calls:
        name = call.args[0].lower()
        if name in ("client", "function") and len(call.args) > 1:
            name += "|" + call.args[1].lower()
        if name in NOT_SCRIPTS or call.function in JANITOR_SCRIPTS:
            continue
        counts[name] += 1
        counts.update(command[0].lower() for command in call.ran)
    return counts


@skip_in_cluster("it watches the one test Redis with MONITOR; the cluster's cost per pair is "
                 "bench/cluster_cpu.py's")
class BackendCost(GatewayTest):
    # poll_ms: no waiter looks again by itself while a queue's commands are counted; waiter_lease_ms: a lock
    # queue's time to live, which joins lengthen once a waiter lease, is not lengthened while they are
    gateway_config = {"poll_ms": 60000, "waiter_lease_ms": 60000, "redis_prefixes": ["costw:"]}

    def counted(self, pair, times: int = PAIRS, prime=None) -> tuple[float, float, dict]:
        """(commands run by scripts, script calls) per call of pair, over `times` calls, and the commands per
        call by name (ran). prime, if given, runs uncounted right before the calls: what they need that may
        have lapsed since (the gateway's contention hint)."""
        if prime is not None:
            prime()

        def every():
            for _ in range(times):
                pair()
        net = {n: c / times for n, c in ran(every).items()}
        # Each command is counted per call to the nearest whole one: what the pace of the calls adds (a
        # contention hint that lapsed, a trim one end in 16) is a fraction of a call per pair.
        commands = sum(round(c) for n, c in net.items() if n not in SCRIPT_CALLS)
        calls = sum(round(c) for n, c in net.items() if n in SCRIPT_CALLS)
        return commands, calls, {n: round(c, 2) for n, c in net.items() if c >= 0.01}

    def pair_of(self, kind: str, extra: dict, request_id: bool = False):
        """A pair on a fresh name with the fields extra, and a fresh request_id if asked; run 20 times."""
        c = self.c

        def pair():
            name = f"cost:{uuid.uuid4().hex}"
            rid = {"request_id": uuid.uuid4().hex} if request_id else {}
            got = c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **extra, **rid})
            self.assertEqual(got.status, 200, got)
            done = c.post(f"/v1/{kind}/{name}/release", {"token": got.body["token"]})
            self.assertEqual(done.status, 200, done)
        for _ in range(20):  # scripts loaded, fences reserved
            pair()
        return pair

    def test_lock_pair_runs_a_handful_of_commands(self):
        pair = self.pair_of("locks", {})
        commands, calls, by_name = self.counted(pair)
        print(f"lock pair: {commands:.2f} commands, {calls:.2f} script calls: {by_name}", file=sys.stderr)
        self.assertLessEqual(commands, LOCK_PAIR_COMMANDS, by_name)
        # Without a request_id the first try names none of the request ids' keys.
        calls_made = self.fcalls_of("cost:", pair)
        self.assertEqual(calls_made[0], ("fg_lock_acquire_fast", FIRST_TRY_KEYS - FIRST_TRY_RID_KEYS, FIRST_TRY_ARGS),
                         calls_made)
        self.assertAlmostEqual(calls, 2.0, delta=0.1, msg=by_name)

    def test_semaphore_pair_runs_a_handful_of_commands(self):
        commands, calls, by_name = self.counted(self.pair_of("semaphores", {"limit": 5}))
        print(f"semaphore pair: {commands:.2f} commands, {calls:.2f} script calls: {by_name}", file=sys.stderr)
        self.assertLessEqual(commands, SEMAPHORE_PAIR_COMMANDS, by_name)
        self.assertAlmostEqual(calls, 2.0, delta=0.1, msg=by_name)

    def test_a_pair_with_a_request_id_is_the_first_tries(self):
        for kind, bound, extra in (("locks", RID_LOCK_PAIR_COMMANDS, {}),
                                   ("semaphores", RID_SEMAPHORE_PAIR_COMMANDS, {"limit": 5})):
            with self.subTest(kind=kind):
                pair = self.pair_of(kind, extra, request_id=True)
                commands, calls, by_name = self.counted(pair)
                print(f"{kind} pair with a request_id: {commands:.2f} commands, {calls:.2f} script calls: "
                      f"{by_name}", file=sys.stderr)
                self.assertLessEqual(commands, bound, by_name)
                self.assertAlmostEqual(calls, 2.0, delta=0.1, msg=by_name)
                calls = self.fcalls_of("cost:", pair)
                prefix, more = ("fg_lock", 0) if kind == "locks" else ("fg_sem", 1)
                self.assertEqual(calls, [(prefix + "_acquire_fast", FIRST_TRY_KEYS + more, FIRST_TRY_ARGS + more),
                                         (prefix + "_release_fast", *calls[1][1:])], calls)

    def semaphore_in_use(self):
        """A pair on a fresh semaphore of limit 5 that holds another lease, done once, and a call that
        releases that lease."""
        self.in_use_name = f"cost:{uuid.uuid4().hex}"
        route = f"/v1/semaphores/{self.in_use_name}"
        other = self.c.post(route + "/acquire", {"ttl_ms": 60000, "limit": 5})
        self.assertEqual(other.status, 200, other)

        def pair():
            got = self.c.post(route + "/acquire", {"ttl_ms": 30000, "limit": 5})
            self.assertEqual(got.status, 200, got)
            self.assertEqual(self.c.post(route + "/release", {"token": got.body["token"]}).status, 200)
            # A release in the same millisecond as the one before gives the ended set the very expiry it has, which
            # PEXPIREAT GT refuses, so a second PEXPIREAT follows: pairs that close together would count a
            # command more on a fast machine than on a slow one. Two milliseconds apart, the count is the design's.
            time.sleep(0.002)

        def let_go():
            self.assertEqual(self.c.post(route + "/release", {"token": other.body["token"]}).status, 200)
        pair()
        return pair, let_go

    def test_a_semaphore_pair_beside_another_holder(self):
        pair, let_go = self.semaphore_in_use()
        commands, calls, by_name = self.counted(pair, 100)
        print(f"semaphore pair in use: {commands} commands, {calls} script calls: {by_name}", file=sys.stderr)
        self.assertLessEqual(commands, IN_USE_SEMAPHORE_PAIR_COMMANDS, by_name)
        self.assertAlmostEqual(calls, 2.0, delta=0.1, msg=by_name)
        self.assertNotIn("zrange", by_name, "an expiry read back")
        let_go()

    def three_holders_and_two_releases(self, name: str) -> None:
        tokens = []
        for _ in range(3):
            got = self.c.post(f"/v1/semaphores/{name}/acquire", {"ttl_ms": 30000, "limit": 5})
            self.assertEqual(got.status, 200, got)
            tokens.append(got.body["token"])
        for token in tokens[:0:-1]:
            done = self.c.post(f"/v1/semaphores/{name}/release", {"token": token})
            self.assertEqual(done.status, 200, done)

    def fcalls_of(self, name: str, step) -> list[tuple[str, int, int]]:
        """The script calls step() makes on keys naming name, oldest first: (function less its hash, keys,
        arguments)."""
        with Monitor() as mon:
            step()
        return [(c.function, int(c.args[2]), len(c.args) - 3 - int(c.args[2]))
                for c in mon.calls if c.args[0].upper() == "FCALL" and any(name in a for a in c.args[3:])]

    def test_a_pair_beside_other_holders_names_the_keys_it_touches(self):
        self.three_holders_and_two_releases(f"cost:{uuid.uuid4().hex}")  # every script loaded
        name = f"cost:{uuid.uuid4().hex}"
        calls = self.fcalls_of(name, lambda: self.three_holders_and_two_releases(name))
        self.assertEqual(calls, [("fg_sem_acquire_fast", FIRST_TRY_KEYS + 1 - FIRST_TRY_RID_KEYS, FIRST_TRY_ARGS + 1),
                                 ("fg_sem_acquire_fast", FIRST_TRY_KEYS + 1 - FIRST_TRY_RID_KEYS, FIRST_TRY_ARGS + 1),
                                 ("fg_sem_acquire_more", MORE_KEYS - RID_KEYS, MORE_ARGS),
                                 ("fg_sem_acquire_more", MORE_KEYS - RID_KEYS, MORE_ARGS),
                                 ("fg_sem_release_more", RELEASE_MORE_KEYS, RELEASE_MORE_ARGS),
                                 ("fg_sem_release_more", RELEASE_MORE_KEYS, RELEASE_MORE_ARGS)], calls)

    def test_a_semaphore_gone_idle_and_back_is_one_lean_call_a_step(self):
        self.three_holders_and_two_releases(f"cost:{uuid.uuid4().hex}")  # every script loaded
        name = f"cost:{uuid.uuid4().hex}"
        route = f"/v1/semaphores/{name}"

        def held() -> str:
            got = self.c.post(route + "/acquire", {"ttl_ms": 30000, "limit": 5})
            self.assertEqual(got.status, 200, got)
            return got.body["token"]

        def released(token: str) -> None:
            self.assertEqual(self.c.post(route + "/release", {"token": token}).status, 200)

        def idle_and_back():
            for token in reversed([held(), held()]):
                released(token)
            released(held())  # the name went idle with the gateway's hint still "in use"
        calls = [f for f, _, _ in self.fcalls_of(name, idle_and_back)]
        self.assertEqual(calls, ["fg_sem_acquire_fast", "fg_sem_acquire_fast", "fg_sem_acquire_more",
                                 "fg_sem_release_more", "fg_sem_release_more",
                                 "fg_sem_acquire_more", "fg_sem_release_more"], calls)

    def test_a_lock_set_taken_in_one_pass_is_a_call_a_lock(self):
        for _ in range(2):  # the first loads the scripts
            name = f"cost:{uuid.uuid4().hex}"

            def pair():
                got = self.c.post("/v1/locksets/acquire", {"names": [name + "-a", name + "-b"], "ttl_ms": 30000})
                self.assertEqual(got.status, 200, got)
                done = self.c.post("/v1/locksets/release", {"tokens": [x["token"] for x in got.body["locks"]]})
                self.assertEqual(done.status, 200, done)
            calls = [f for f, _, _ in self.fcalls_of(name, pair)]
        self.assertEqual(calls, ["fg_lock_acquire_fast", "fg_lock_acquire_fast", "fg_lock_release_fast",
                                 "fg_lock_release_fast"], calls)

    def test_a_semaphore_queue_emptied_is_one_lean_call_a_step(self):
        name = f"cost:{uuid.uuid4().hex}"
        route = f"/v1/semaphores/{name}"
        holders = [self.c.post(route + "/acquire", {"ttl_ms": HELD_MS, "limit": 2}) for _ in range(2)]
        self.assertEqual([h.status for h in holders], [200, 200], holders)
        busy = self.c.post(route + "/acquire", {"limit": 2})  # the hint: "queue"
        self.assertEqual(busy.status, 409, busy)

        def release_and_acquire():
            self.assertEqual(self.c.post(route + "/release", {"token": holders[0].body["token"]}).status, 200)
            got = self.c.post(route + "/acquire", {"ttl_ms": 30000, "limit": 2, "wait_ms": 5000})
            self.assertEqual(got.status, 200, got)
        calls = [f for f, _, _ in self.fcalls_of(name, release_and_acquire)]
        self.assertEqual(calls, ["fg_sem_release_handover", "fg_sem_acquire_queue"], calls)

    def contend(self, route: str, body: dict, gateways: list, rounds: int = 200, per_gateway: int = 2) -> None:
        """per_gateway clients on each of gateways, each running rounds acquire + release pairs on route (body the
        acquire's; /v1/locksets: a lock set's), acquiring again right after its release. A client's failed
        check fails the test."""
        failures: list[Exception] = []

        def client(gw):
            try:
                with gw.client(timeout=30) as c:
                    for _ in range(rounds):
                        got = c.post(route + "/acquire", {"ttl_ms": 30000, "wait_ms": 10000, **body})
                        self.assertEqual(got.status, 200, got)
                        release = ({"tokens": [x["token"] for x in got.body["locks"]]} if "locks" in got.body
                                   else {"token": got.body["token"]})
                        self.assertEqual(c.post(route + "/release", release).status, 200)
            except Exception as e:  # noqa: BLE001 - raised again in the test's thread
                failures.append(e)
        threads = [threading.Thread(target=client, args=(gw,)) for gw in gateways for _ in range(per_gateway)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertFalse(any(t.is_alive() for t in threads), "a contending client did not finish")
        if failures:
            raise failures[0]

    def hand_overs_across(self, route: str, body: dict, queue: str, gateways: list, rounds: int = CROSSED) -> None:
        """rounds hand-overs between the two gateways, one at a time: a client on each takes its turn at one slot of
        route (body the acquire's; /v1/locksets: a lock set's), and the holder on one gateway releases only once
        the acquire through the other waits in queue, the only waiter; the limit's other slots are held
        throughout. So every release grants a waiter of the other gateway, whatever the pace of the clients."""
        def let_go(c, got) -> None:
            release = ({"tokens": [x["token"] for x in got.body["locks"]]} if "locks" in got.body
                       else {"token": got.body["token"]})
            self.assertEqual(c.post(route + "/release", release).status, 200)

        clients = [gw.client(timeout=30) for gw in gateways]
        try:
            kept = [clients[0].post(route + "/acquire", {"ttl_ms": HELD_MS, **body})
                    for _ in range(body.get("limit", 1) - 1)]
            held, at = clients[0].post(route + "/acquire", {"ttl_ms": 30000, **body}), 0
            self.assertEqual([g.status for g in kept + [held]], [200] * len(kept + [held]))
            with Redis() as r:
                for _ in range(rounds):
                    waiter = Waiter(gateways[1 - at], route + "/acquire", {"ttl_ms": 30000, "wait_ms": 60000, **body})
                    waiter.start()
                    wait_for(lambda: r.cmd("ZLEXCOUNT", queue, "-", "+") == 1, interval=0.01,
                             what="the waiter queued")
                    let_go(clients[at], held)
                    waiter.join(60)
                    self.assertEqual(getattr(waiter.response, "status", None), 200, waiter.response)
                    held, at = waiter.response, 1 - at
            let_go(clients[at], held)
            for got in kept:
                let_go(clients[0], got)
        finally:
            for c in clients:
                c.close()

    def looked_again(self, calls: list, function: str) -> list:
        """The full acquires (function) among calls that an attempt looking again made (wait "again", the
        seventh argument of lua/lock_acquire.lua and lua/sem_acquire.lua)."""
        return [c for c in calls if c.function == function and c.args[3 + int(c.args[2]) + 6] == "again"]

    def test_a_grant_before_its_waiter_registered_costs_no_call(self):
        """Four clients on one semaphore of limit 2, each acquiring again right after its release: acquires
        join the queue and releases hand their slot over. A hand-over often grants a waiter whose queue join
        has answered but whose request has not registered it yet; the grant is kept for it
        (src/lease/doorbell.c) and answers it as it registers, as an in-process hand-over would. No waiter
        looks again (sem_acquire.lua with wait "again"): poll_ms and the holders' leases outlast the test.
        Broken variant caught: the kept grant only rung, so the waiter looked again (45 times in 800 pairs)."""
        name = f"cost:{uuid.uuid4().hex}"
        route = f"/v1/semaphores/{name}"
        self.contend(route, {"limit": 2}, [self.gw], per_gateway=4)  # the hint "queue" set, the scripts loaded
        with Monitor() as mon:
            self.contend(route, {"limit": 2}, [self.gw], per_gateway=4)
        calls = Counter(c.function for c in mon.calls if any(name in a for a in c.args[3:]))
        self.assertEqual(len(self.looked_again(mon.calls, "fg_sem_acquire")), 0, calls)
        self.assertGreaterEqual(calls["fg_sem_acquire_queue"], 400, calls)

    def test_a_grant_from_another_gateway_is_claimed_by_a_lean_call(self):
        """Two gateways with two clients each on one lock, on one semaphore of limit 2, then on a lock set of one
        lock: a release on one gateway grants a waiter of the other for the claim window and rings it, and the
        waiter claims the grant with the lean script (lua/lock_claim.lua, lua/sem_claim.lua: the keys a claim
        touches, two arguments, CLAIM_COMMANDS commands at most), not the full acquire looking again. How many
        of those clients' grants cross between the gateways is the scheduler's to say (a waiter of the releasing
        gateway is handed its grant in process, and the clients' order in the queue follows their pace: on a
        loaded machine 17 grants of a semaphore's 800 once crossed), so CROSSED hand-overs made across by
        construction (hand_overs_across) follow, each claimed by exactly one lean call. Broken variant caught:
        rung waiters looking again with the full script (621 full acquires of a lock, 414 of a semaphore in 800
        pairs; a lock set's lock 420; none claimed of the CROSSED)."""
        with Gateway(config=self.gateway_config) as other:
            for kind, body, full, claim, nkeys, most in (
                    ("locks", {}, "fg_lock_acquire", "fg_lock_claim", LOCK_CLAIM_KEYS, LOCK_CLAIM_COMMANDS),
                    ("semaphores", {"limit": 2}, "fg_sem_acquire", "fg_sem_claim", SEM_CLAIM_KEYS,
                     SEM_CLAIM_COMMANDS),
                    ("locksets", None, "fg_lock_acquire", "fg_lock_claim", LOCK_CLAIM_KEYS, LOCK_CLAIM_COMMANDS)):
                with self.subTest(kind=kind):
                    name = f"cost:{uuid.uuid4().hex}"
                    route = f"/v1/{kind}/{name}" if body is not None else "/v1/locksets"
                    queue = f"fg:{'sm' if kind == 'semaphores' else 'lk'}:{{{name}}}:q"
                    body = body if body is not None else {"names": [name]}
                    self.contend(route, body, [self.gw, other], rounds=20)  # hints set, scripts loaded
                    with Monitor() as contended:
                        self.contend(route, body, [self.gw, other])
                    with Monitor() as crossed:
                        self.hand_overs_across(route, body, queue, [self.gw, other])
                    for mon, crossings in ((contended, None), (crossed, CROSSED)):
                        mine = [c for c in mon.calls if any(name in a for a in c.args[3:])]
                        calls = Counter(c.function for c in mine)
                        self.assertEqual(len(self.looked_again(mine, full)), 0, calls)
                        claims = [c for c in mine if c.function == claim]
                        if crossings is not None:
                            self.assertEqual(len(claims), crossings, calls)
                        for c in claims:
                            self.assertEqual((int(c.args[2]), len(c.args) - 3 - int(c.args[2])), (nkeys, 2), c.args)
                            self.assertLessEqual(len(c.ran), most, c.ran)

    def test_a_semaphore_queue_join_names_the_keys_it_touches(self):
        name = f"cost:{uuid.uuid4().hex}"
        route = f"/v1/semaphores/{name}"
        queue = f"fg:sm:{{{name}}}:q"
        holders = [self.c.post(route + "/acquire", {"ttl_ms": HELD_MS, "limit": 2}) for _ in range(2)]
        self.assertEqual([h.status for h in holders], [200, 200], holders)
        waiters: list[Waiter] = []
        with Redis() as r:
            def join():
                waiters.append(Waiter(self.gw, route + "/acquire", {"ttl_ms": 30000, "limit": 2, "wait_ms": 60000}))
                waiters[-1].start()
                wait_for(lambda: r.cmd("ZLEXCOUNT", queue, "-", "+") == len(waiters), what="the waiter queued")

            join()  # the full script queues the first waiter: from then on the name is known to have a queue
            join()  # the lean script loaded (the first call of a function Redis lacks fails, and is made again)
            self.assertEqual(self.fcalls_of(name, join),
                             [("fg_sem_acquire_queue", QUEUE_KEYS - RID_KEYS, QUEUE_ARGS)])
            commands, calls, by_name = self.counted(join, QUEUED)
            print(f"semaphore queue join: {commands} commands, {calls} script calls: {by_name}", file=sys.stderr)
            self.assertLessEqual(commands, SEM_QUEUE_JOIN_COMMANDS, by_name)
            self.assertAlmostEqual(calls, 1.0, delta=0.1, msg=by_name)
        tokens = [h.body["token"] for h in holders]
        while tokens:  # each release hands its slot to the oldest waiter, whose lease is let go in turn
            self.assertEqual(self.c.post(route + "/release", {"token": tokens.pop(0)}).status, 200)
            if waiters:
                got = waiters.pop(0)
                got.join(20)
                self.assertEqual(got.response.status, 200, got.response)
                tokens.append(got.response.body["token"])

    def test_a_queue_join_with_a_request_id_is_the_lean_one(self):
        for kind, extra, keys, args, bound in (
                ("locks", {}, LOCK_QUEUE_KEYS, LOCK_QUEUE_ARGS, QUEUE_JOIN_COMMANDS + RID_JOIN_COMMANDS),
                ("semaphores", {"limit": 1}, QUEUE_KEYS, QUEUE_ARGS, SEM_QUEUE_JOIN_COMMANDS + RID_JOIN_COMMANDS)):
            name = f"cost:{uuid.uuid4().hex}"
            route = f"/v1/{kind}/{name}"
            prefix = "lk" if kind == "locks" else "sm"
            queue = f"fg:{prefix}:{{{name}}}:q"
            holder = self.c.post(route + "/acquire", {"ttl_ms": HELD_MS, **extra})
            self.assertEqual(holder.status, 200, holder)
            waiters: list[Waiter] = []
            with Redis() as r:
                def join():
                    body = {"ttl_ms": 30000, "wait_ms": 60000, "request_id": uuid.uuid4().hex, **extra}
                    waiters.append(Waiter(self.gw, route + "/acquire", body))
                    waiters[-1].start()
                    wait_for(lambda: r.cmd("ZLEXCOUNT", queue, "-", "+") == len(waiters), what="the waiter queued")

                join()  # the full script queues the first waiter: from then on the name is known to have a queue
                join()  # the lean join loaded (the first call of a function Redis lacks fails, and is made again)
                function = "fg_lock_acquire_queue" if kind == "locks" else "fg_sem_acquire_queue"
                self.assertEqual(self.fcalls_of(name, join), [(function, keys, args)])
                commands, calls, by_name = self.counted(join, QUEUED)
                print(f"{kind} queue join with a request_id: {commands} commands, {calls} script calls: {by_name}",
                      file=sys.stderr)
                self.assertLessEqual(commands, bound, by_name)
                self.assertAlmostEqual(calls, 1.0, delta=0.1, msg=by_name)
            token = holder.body["token"]
            while True:  # each release hands the lease to the oldest waiter, which lets it go in turn
                self.assertEqual(self.c.post(route + "/release", {"token": token}).status, 200)
                if not waiters:
                    break
                got = waiters.pop(0)
                got.join(20)
                self.assertEqual(got.response.status, 200, got.response)
                token = got.response.body["token"]

    def test_a_semaphore_hand_over_names_the_keys_it_touches(self):
        name = f"cost:{uuid.uuid4().hex}"
        route = f"/v1/semaphores/{name}"
        queue = f"fg:sm:{{{name}}}:q"
        holders = [self.c.post(route + "/acquire", {"ttl_ms": 30000, "limit": 2}) for _ in range(2)]
        self.assertEqual([h.status for h in holders], [200, 200], holders)
        tokens = [h.body["token"] for h in holders]
        waiters: list[Waiter] = []
        with Redis() as r:
            for _ in range(QUEUED + 2):
                waiters.append(Waiter(self.gw, route + "/acquire", {"ttl_ms": 30000, "limit": 2, "wait_ms": 60000}))
                waiters[-1].start()
                wait_for(lambda: r.cmd("ZLEXCOUNT", queue, "-", "+") == len(waiters), what="the waiter queued")

        def hand_over():
            """The oldest holder releases; the oldest waiter, handed its slot in-process, holds it."""
            done = self.c.post(route + "/release", {"token": tokens.pop(0)})
            self.assertEqual(done.status, 200, done)
            got = waiters.pop(0)
            got.join(20)
            self.assertEqual(got.response.status, 200, got.response)
            tokens.append(got.response.body["token"])

        def queue_hint():
            """An acquire answered busy: the gateway's hint for the name says "queue" (src/lease/contention.h),
            so its releases run the lean hand-over first."""
            busy = self.c.post(route + "/acquire", {"ttl_ms": 30000, "limit": 2, "wait_ms": 0})
            self.assertEqual(busy.status, 409, busy)

        queue_hint()
        hand_over()  # the lean script loaded (the first call of a function Redis lacks fails, and is made again)
        queue_hint()
        self.assertEqual(self.fcalls_of(name, hand_over), [("fg_sem_release_handover", HAND_OVER_KEYS,
                                                             HAND_OVER_ARGS)])
        commands, calls, by_name = self.counted(hand_over, QUEUED, queue_hint)
        print(f"semaphore hand-over: {commands} commands, {calls} script calls: {by_name}", file=sys.stderr)
        self.assertLessEqual(commands, SEM_HAND_OVER_COMMANDS, by_name)
        self.assertAlmostEqual(calls, 1.0, delta=0.1, msg=by_name)
        for token in tokens:
            self.assertEqual(self.c.post(route + "/release", {"token": token}).status, 200)

    def test_fenced_writes_and_reads_run_a_handful_of_commands(self):
        lock = self.c.post(f"/v1/locks/cost:{uuid.uuid4().hex}/acquire", {"ttl_ms": 600000})
        self.assertEqual(lock.status, 200, lock)
        token = {"Fence-Token": lock.body["token"]}
        key, hash_key = f"costw:{uuid.uuid4().hex}", f"costw:{uuid.uuid4().hex}"

        def answered(r, status=200):
            self.assertEqual(r.status, status, r)

        def put_delete():
            answered(self.c.request("PUT", f"/v1/redis/{key}", {"value": "v" * 100}, token))
            answered(self.c.request("DELETE", f"/v1/redis/{key}", None, token))

        def read():
            answered(self.c.get(f"/v1/redis/{key}"))

        def patch():
            answered(self.c.request("PATCH", f"/v1/redis/{hash_key}", {"fields": {"a": "1", "b": "2"}}, token))
        for op, bound, calls_per_op in ((put_delete, PUT_DELETE_COMMANDS, 2.0), (read, STRING_READ_COMMANDS, 1.0),
                                        (patch, PATCH_COMMANDS, 1.0)):
            if op is read:
                answered(self.c.request("PUT", f"/v1/redis/{key}", {"value": "v" * 100}, token))
            for _ in range(5):  # scripts loaded
                op()
            commands, calls, by_name = self.counted(op, 100)
            print(f"{op.__name__}: {commands:.2f} commands, {calls:.2f} script calls: {by_name}", file=sys.stderr)
            self.assertLessEqual(commands, bound, (op.__name__, by_name))
            self.assertAlmostEqual(calls, calls_per_op, delta=0.1, msg=(op.__name__, by_name))

    def test_a_renewal_runs_a_handful_of_commands(self):
        self.pair_of("semaphores", {"limit": 5})  # scripts loaded, fences reserved
        for kind, extra, bound in (("locks", {}, RENEWAL_COMMANDS), ("semaphores", {"limit": 5}, RENEWAL_COMMANDS),
                                   ("locks", {"request_id": "r"}, RID_RENEWAL_COMMANDS),
                                   ("semaphores", {"limit": 5, "request_id": "r"}, RID_RENEWAL_COMMANDS)):
            route = f"/v1/{kind}/cost:{uuid.uuid4().hex}"
            got = self.c.post(route + "/acquire", {"ttl_ms": 30000, **extra})
            self.assertEqual(got.status, 200, got)

            def renew():
                done = self.c.post(route + "/renew", {"token": got.body["token"], "ttl_ms": 30000})
                self.assertEqual(done.status, 200, done)
                # A renewal in the same millisecond as the one before moves no expiry, which PEXPIRE GT
                # refuses, so a second PEXPIRE follows (lib_lease.lua renew_expiry): renewals that close
                # together would count a command more on a fast machine than on a slow one.
                time.sleep(0.002)
            commands, calls, by_name = self.counted(renew, 100)
            print(f"{kind} renewal {extra}: {commands:.2f} commands, {calls:.2f} script calls: {by_name}",
                  file=sys.stderr)
            self.assertLessEqual(commands, bound, (kind, extra, by_name))
            self.assertAlmostEqual(calls, 1.0, delta=0.1, msg=(kind, by_name))
            self.assertEqual(self.c.post(route + "/release", {"token": got.body["token"]}).status, 200)

    def test_a_renewal_of_a_waiter_granted_with_a_request_id(self):
        route = f"/v1/locks/cost:{uuid.uuid4().hex}"
        held = self.c.post(route + "/acquire", {"ttl_ms": 30000})
        self.assertEqual(held.status, 200, held)
        waiter = Waiter(self.gw, route + "/acquire", {"ttl_ms": 30000, "wait_ms": 60000, "request_id": "w"})
        waiter.start()
        wait_for(lambda: self.c.get(route).body["waiting"] == 1, what="the waiter queued")
        self.assertEqual(self.c.post(route + "/release", {"token": held.body["token"]}).status, 200)
        waiter.join(20)
        self.assertEqual(waiter.response.status, 200, waiter.response)
        token = waiter.response.body["token"]
        with Redis() as r:
            self.assertIsNotNone(r.cmd("ZSCORE", f"fg:lk:{{{route.rsplit('/', 1)[1]}}}:e", "w"),
                                 "the waiter's request_id not in the request-id set")

        def renew():
            done = self.c.post(route + "/renew", {"token": token, "ttl_ms": 30000})
            self.assertEqual(done.status, 200, done)
            time.sleep(0.002)  # see test_a_renewal_runs_a_handful_of_commands
        commands, calls, by_name = self.counted(renew, 100)
        print(f"renewal of a waiter's grant with a request_id: {commands:.2f} commands: {by_name}", file=sys.stderr)
        self.assertLessEqual(commands, WAITER_RID_RENEWAL_COMMANDS, by_name)
        self.assertAlmostEqual(calls, 1.0, delta=0.1, msg=by_name)
        self.assertEqual(self.c.post(route + "/release", {"token": token}).status, 200)

    def test_a_pair_on_a_name_used_again(self):
        for kind, fresh_commands, extra, ended, rid in (
                ("locks", LOCK_PAIR_COMMANDS, {}, "fg:lk:{%s}:n", False),
                ("semaphores", SEMAPHORE_PAIR_COMMANDS, {"limit": 5}, "fg:sm:{%s}:n", False),
                ("locks", RID_LOCK_PAIR_COMMANDS, {}, "fg:lk:{%s}:n", True),
                ("semaphores", RID_SEMAPHORE_PAIR_COMMANDS, {"limit": 5}, "fg:sm:{%s}:n", True)):
            route = f"/v1/{kind}/cost:{uuid.uuid4().hex}"

            def pair():
                ids = {"request_id": uuid.uuid4().hex} if rid else {}
                got = self.c.post(route + "/acquire", {"ttl_ms": 30000, **extra, **ids})
                self.assertEqual(got.status, 200, got)
                self.assertEqual(self.c.post(route + "/release", {"token": got.body["token"]}).status, 200)
            pair()
            commands, calls, by_name = self.counted(pair)
            print(f"{kind} pair, one name{', request ids' if rid else ''}: {commands} commands, {calls} script calls:"
                  f" {by_name}", file=sys.stderr)
            moves = REUSED_PAIR_COMMANDS + (REUSED_RID_COMMANDS if rid else 0)
            self.assertLessEqual(commands, fresh_commands + moves, (kind, rid, by_name))
            self.assertAlmostEqual(by_name.get("rename", 0), moves, delta=0.05, msg=(kind, rid, by_name))
            self.assertAlmostEqual(calls, 2.0, delta=0.1, msg=(kind, rid, by_name))
            with Redis() as r:
                name = route.rsplit("/", 1)[1]
                self.assertEqual(r.cmd("EXISTS", ended % name, ended[:-1] % name + "e"), 0, (kind, rid))

    def test_a_semaphore_release_beside_another_holder_trims_one_end_in_16(self):
        pair, let_go = self.semaphore_in_use()
        ended = f"fg:sm:{{{self.in_use_name}}}:n"
        with Redis() as r:
            r.cmd("ZADD", ended, "-1", "1|released")  # kept until 1 ms past the epoch
            r.cmd("ZADD", ended, "-2", "2|revoked")  # a gateway from before the one set: scored by -fence

            def pairs():
                for _ in range(64):
                    pair()
            trims = ran(pairs)["zremrangebyscore"]
            self.assertLessEqual(trims, 64 // 16 + 2, "the ended set trimmed on every release")
            self.assertEqual(r.cmd("ZMSCORE", ended, "1|released", "2|revoked"), [None, None])
            seconds, micros = r.cmd("TIME")
            now = int(seconds) * 1000 + int(micros) // 1000
            kept = r.cmd("ZRANGE", ended, "0", "-1", "WITHSCORES")
        self.assertTrue(kept and all(-float(s) > now for s in kept[1::2]), kept)
        let_go()

    def test_a_lock_queue_join_and_hand_over_run_a_handful_of_commands(self):
        name = f"cost:{uuid.uuid4().hex}"
        queue = f"fg:lk:{{{name}}}:q"
        holder = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": HELD_MS})
        self.assertEqual(holder.status, 200, holder)
        waiters: list[Waiter] = []
        with Redis() as r:
            def join():
                waiters.append(Waiter(self.gw, f"/v1/locks/{name}/acquire", {"ttl_ms": 30000, "wait_ms": 60000}))
                waiters[-1].start()
                wait_for(lambda: r.cmd("ZLEXCOUNT", queue, "-", "+") == len(waiters), what="the waiter queued")

            join()  # its first try finds the lock held: from then on the name is known contended
            join()  # the lean queue join loaded (the first call of a function Redis lacks fails, and is made again)
            self.assertEqual(self.fcalls_of(name, join),
                             [("fg_lock_acquire_queue", LOCK_QUEUE_KEYS - RID_KEYS, LOCK_QUEUE_ARGS)])
            commands, calls, by_name = self.counted(join, QUEUED)
            print(f"lock queue join: {commands} commands, {calls} script calls: {by_name}", file=sys.stderr)
            self.assertLessEqual(commands, QUEUE_JOIN_COMMANDS, by_name)
            self.assertAlmostEqual(calls, 1.0, delta=0.1, msg=by_name)

            token = [holder.body["token"]]

            def hand_over():
                """The holder releases; the oldest waiter, handed the lock, holds it."""
                done = self.c.post(f"/v1/locks/{name}/release", {"token": token[0]})
                self.assertEqual(done.status, 200, done)
                got = waiters.pop(0)
                got.join(20)
                self.assertEqual(got.response.status, 200, got.response)
                token[0] = got.response.body["token"]

            commands, calls, by_name = self.counted(hand_over, QUEUED)
            print(f"lock hand-over: {commands} commands, {calls} script calls: {by_name}", file=sys.stderr)
            self.assertLessEqual(commands, HAND_OVER_COMMANDS, by_name)
            self.assertAlmostEqual(calls, 1.0, delta=0.1, msg=by_name)
            while waiters:
                hand_over()
            self.assertEqual(self.c.post(f"/v1/locks/{name}/release", {"token": token[0]}).status, 200)

    def test_an_emptied_queue_leaves_no_tickets(self):
        name = f"cost:{uuid.uuid4().hex}"
        tickets = f"fg:lk:{{{name}}}:t"
        held = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000})
        self.assertEqual(held.status, 200, held)
        with Redis() as r, self.gw.client() as w:
            gave_up = w.post(f"/v1/locks/{name}/acquire", {"wait_ms": 300})
            self.assertEqual(gave_up.status, 409, gave_up)
            self.assertEqual(r.cmd("EXISTS", tickets), 0, "a waiter that gave up left its ticket behind")
            done = []
            waiter = threading.Thread(target=lambda: done.append(w.post(f"/v1/locks/{name}/acquire",
                                                                        {"wait_ms": 20000})), daemon=True)
            waiter.start()
            wait_for(lambda: r.cmd("EXISTS", tickets) == 1, what="the waiter queued")
            self.assertEqual(self.c.post(f"/v1/locks/{name}/release", {"token": held.body["token"]}).status, 200)
            waiter.join(30)
            self.assertEqual(done[0].status, 200, done)
            self.assertEqual(r.cmd("EXISTS", tickets), 0, "the last waiter's grant left its ticket behind")
            self.assertEqual(self.c.post(f"/v1/locks/{name}/release", {"token": done[0].body["token"]}).status, 200)

    def test_a_fence_block_run_out_is_no_contention(self):
        """Fences are issued from a block reserved in Postgres (src/lease/fence.c, 10,000 at a time). A first
        try that finds the block run out answers "nofence"; the gateway has the next block reserved and runs
        the first try again, which grants: the pair stays on the first tries, and its name is not noted as
        contended, so the next pair is the first tries as well. (Caught: a first try that answered
        "contended", so the name was noted in use for a second and every lock pair on it ran three script
        calls meanwhile, a waiting acquire's queue join, its full acquire and the full release, and semaphore
        pairs four; the full script run after "nofence" instead of the first try again, whose grant kept a
        semaphore's holder where only the full release reads it: the release noted the name in use.)"""
        for kind, extra, prefix in (("locks", {"wait_ms": 5000}, "fg_lock"), ("locks", {}, "fg_lock"),
                                    ("semaphores", {"limit": 5, "wait_ms": 5000}, "fg_sem")):
            with self.subTest(kind=kind, extra=extra):
                def pair():
                    got = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **extra})
                    self.assertEqual(got.status, 200, got)
                    done = self.c.post(f"/v1/{kind}/{name}/release", {"token": got.body["token"]})
                    self.assertEqual(done.status, 200, done)
                    return got.body["fence"]
                name = f"cost:{uuid.uuid4().hex}"
                pair()  # scripts loaded, fences reserved
                name = f"cost:{uuid.uuid4().hex}"
                with Redis() as r:
                    r.cmd("SET", "fg:fence_limit", r.cmd("GET", "fg:fence"))  # every fence reserved is issued
                    fences = []
                    first = self.fcalls_of(name, lambda: fences.append(pair()))
                    self.assertGreater(int(r.cmd("GET", "fg:fence_limit")), fences[0], "no block reserved")
                self.assertEqual([f for f, _, _ in first],
                                 [prefix + "_acquire_fast", prefix + "_acquire_fast", prefix + "_release_fast"], first)
                again = self.fcalls_of(name, pair)
                self.assertEqual([f for f, _, _ in again], [prefix + "_acquire_fast", prefix + "_release_fast"],
                                 again)

if __name__ == "__main__":
    unittest.main()
