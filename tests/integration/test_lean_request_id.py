# SPDX-License-Identifier: Apache-2.0
"""The lean tries of an acquire with a request_id, as the Python, Go and TypeScript clients send one on every
acquire: the first try (lua/lock_acquire_fast.lua, lua/sem_acquire_fast.lua) takes a free lock or an idle
semaphore's first slot, and the try beside other holders (lua/sem_acquire_more.lua) a free slot of a
semaphore in use, as the full script would, and keep the request_id for as long as the lease and
REQUEST_ID_GRACE_MS more; the lean queue join (lua/lock_acquire_queue.lua, lua/sem_acquire_queue.lua) queues
as the full script would and keeps the request_id until its wait and lease could have ended. Both leave a
request_id that still names a lease to the full script, which answers the retry with that lease or takes
the waiter's place over.

Caught (each tried): no request_id kept at the grant (a retry while held answered 409 lock_busy, or a second
slot); no look at the request_id before the grant (a retry after the release answered 200 with a new lease,
where it must answer 410 lease_lost); the request_id kept until the lease's expiry alone (its time in the
rid_until set short of the grace); the same two beside another holder of a semaphore
(lua/sem_acquire_more.lua); a retry's answer to the gateway taken for a name in use (the next request
ran the full script after the first try); no request_id kept at a lean queue join (a retry queued a second waiter
behind the first, which waited on); no look at it there (the same); once a name's request-id keys
exist: no prune of lapsed ids, no time given to a hash made anew (it stayed forever), no lengthening of
the keys' time (by a grace more) for an id that outlives them, no new time for a lapsed id taken again
(pruned at once).

Owns: the lean tries' request_id. Must not: test the full script's retries (test_lock_api.py,
test_sem_limits.py) or what the lean tries cost (test_backend_cost.py).
"""

import os
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (Gateway, GatewayTest, Monitor, Redis, cluster_mode, request_id_kept, same_slot,  # noqa: E402
                     skip_in_cluster)
from lock_helpers import assert_problem  # noqa: E402

REQUEST_ID_GRACE_MS = 60_000  # src/fglimits.h: a request_id outlives its lease so long
TTL_MS = 30_000
CONTENTION_HINT_S = 1.1  # past src/lease/contention.h CONTENTION_HINT_MS
KINDS = {"locks": "lk", "semaphores": "sm"}  # route -> the kind's key prefix (src/store/backend/redis_keys.h)
FIRST_TRY = {"locks": "fg_lock_acquire_fast", "semaphores": "fg_sem_acquire_fast"}  # its function, less the hash


def lease_of(token: str) -> str:
    """The lease id a token names (src/auth/token.c: fgt2.<key>.<kind>.<fence>.<lease>.<name>.<mac>)."""
    return token.split(".")[4]


class LeanRequestIdTest(GatewayTest):
    # poll_ms: no waiter looks again by itself (through the full script) while a test arranges the queue
    gateway_config = {"poll_ms": 60000}

    def acquire(self, kind: str, name: str, c=None, **fields):
        body = {"ttl_ms": TTL_MS, **fields}
        if kind == "semaphores":
            body.setdefault("limit", 1)
        return (c or self.c).post(f"/v1/{kind}/{name}/acquire", body)

    def waiting(self, kind: str, name: str) -> int:
        got = self.c.get(f"/v1/{kind}/{name}")
        self.assertEqual(got.status, 200, got)
        return got.body["waiting"]

    def queue(self, kind: str, name: str, out: list, count: int, **fields) -> threading.Thread:
        """An acquire of name that waits, on a connection of its own, its answer to go to out; returns once the
        queue is count long."""
        def run():
            with self.gw.client(timeout=60) as c:
                out.append(self.acquire(kind, name, c, wait_ms=20000, **fields))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        deadline = time.monotonic() + 15
        while self.waiting(kind, name) != count:
            self.assertLess(time.monotonic(), deadline, f"{name} never had {count} waiting")
            time.sleep(0.02)
        return t

    def release(self, kind: str, name: str, token: str):
        return self.c.post(f"/v1/{kind}/{name}/release", {"token": token})

    def acquire_seen(self, kind: str, name: str, **fields):
        """An acquire of name, and the scripts it ran on name's keys, oldest first (their functions less the
        hash, read from the one Redis's MONITOR stream; None on a Redis Cluster)."""
        if cluster_mode():
            return self.acquire(kind, name, **fields), None
        with Monitor() as mon:
            got = self.acquire(kind, name, **fields)
        return got, [c.function for c in mon.calls
                     if c.args[0].upper() == "FCALL" and any(name in a for a in c.args[3:])]

    def fresh_name(self, kind: str) -> str:
        """A name no call used, in a slot whose fences are reserved (a slot's first lease after its fence
        sequence was recovered is the full script's), so that its first acquire is the first try's."""
        warm, name = same_slot(f"rid-warm-{kind}", f"rid-{kind}")
        got = self.acquire(kind, warm)
        self.assertEqual(got.status, 200, got)
        self.assertEqual(self.release(kind, warm, got.body["token"]).status, 200)
        return name

    def test_a_request_id_granted_by_the_first_try_answers_its_retries(self):
        for kind, prefix in KINDS.items():
            with self.subTest(kind=kind):
                name, rid = self.fresh_name(kind), uuid.uuid4().hex
                got = self.acquire(kind, name, request_id=rid)
                self.assertEqual(got.status, 200, got)
                with Redis() as r:
                    if kind == "semaphores":
                        self.assertTrue(r.cmd("GET", f"fg:sm:{{{name}}}:l").startswith("="),
                                        "not the first try's holder")
                    # A name's first id is kept in its one-id key alone, for as long as the key lives.
                    one = f"fg:{prefix}:{{{name}}}:i"
                    self.assertEqual(r.cmd("GET", one), lease_of(got.body["token"]) + " " + rid)
                    self.assertEqual(r.cmd("PEXPIRETIME", one), got.body["expires_at_ms"] + REQUEST_ID_GRACE_MS)
                    self.assertEqual(r.cmd("EXISTS", f"fg:{prefix}:{{{name}}}:r", f"fg:{prefix}:{{{name}}}:e"), 0)
                # A retry while the lease holds is answered with it.
                again = self.acquire(kind, name, request_id=rid)
                self.assertEqual(again.status, 200, again)
                self.assertEqual((again.body["token"], again.body["fence"]), (got.body["token"], got.body["fence"]))
                # Another request is another acquire: the lock or the one slot is taken.
                other = self.acquire(kind, name, request_id=uuid.uuid4().hex)
                assert_problem(self, other, 409, "lock_busy")
                self.assertEqual(self.release(kind, name, got.body["token"]).status, 200)

    def test_a_retry_after_the_lease_ended_takes_no_second_lease(self):
        """The name is free again and no call found it contended (the gateway's hint would send the retry to
        the full script at once): the first try itself must tell the retry by its request_id."""
        for kind in KINDS:
            with self.subTest(kind=kind):
                name, rid = self.fresh_name(kind), uuid.uuid4().hex
                got = self.acquire(kind, name, request_id=rid)
                self.assertEqual(got.status, 200, got)
                self.assertEqual(self.release(kind, name, got.body["token"]).status, 200)
                late = self.acquire(kind, name, request_id=rid)
                assert_problem(self, late, 410, "lease_lost")
                # A new request takes the free lease, by the first try: the retry did not find the name in use.
                new, calls = self.acquire_seen(kind, name, request_id=uuid.uuid4().hex)
                if calls is not None:
                    self.assertEqual(calls, [FIRST_TRY[kind]])
                self.assertEqual(new.status, 200, new)
                self.assertGreater(new.body["fence"], got.body["fence"])
                self.assertEqual(self.release(kind, name, new.body["token"]).status, 200)

    def test_an_id_that_comes_while_the_one_id_key_lives_moves_the_one_before(self):
        """A name keeps one request id in its one-id key. A first try grants only on a free lock or an idle
        semaphore, so an id the key still holds is of a lease that is over: the next id moves it, with its
        time, to a key of its own ("i:<id>", lib_lease.lua rid_take_first) and takes the one-id key, with no
        request-id set; each answers its own retries, the first's once its lease is over (410), the
        second's while it holds (its lease), through the first try and the full script; a repeat the first
        try answers writes nothing. Caught: a first try that took the one-id key without moving what it held
        (the first id lost: its late retry taken for a new request, 409 lock_busy), and a look that did not
        read the moved key (the first try's: the retry granted a second lease; the full script's: refused as
        busy, not 410). The queue joins: test_a_queue_join_finds_an_id_moved_away."""
        for kind, prefix in KINDS.items():
            with self.subTest(kind=kind):
                name = self.fresh_name(kind)
                b = f"fg:{prefix}:{{{name}}}:"
                first = self.acquire(kind, name, request_id="rid-first")
                self.assertEqual(first.status, 200, first)
                self.assertEqual(self.release(kind, name, first.body["token"]).status, 200)
                with Redis() as r:
                    first_till = r.cmd("PEXPIRETIME", b + "i")
                second = self.acquire(kind, name, request_id="rid-second")
                self.assertEqual(second.status, 200, second)
                again = self.acquire(kind, name, request_id="rid-second")
                self.assertEqual((again.status, again.body.get("token")), (200, second.body["token"]), again)
                with Redis() as r:
                    self.assertEqual(r.cmd("GET", b + "i"), lease_of(second.body["token"]) + " rid-second")
                    self.assertEqual(r.cmd("GET", b + "i:rid-first"), lease_of(first.body["token"]) + " rid-first")
                    self.assertEqual(r.cmd("PEXPIRETIME", b + "i:rid-first"), first_till)
                    self.assertEqual(r.cmd("EXISTS", b + "r", b + "e"), 0, "a request-id set made")
                late = self.acquire(kind, name, request_id="rid-first")  # the full script: the name is held
                assert_problem(self, late, 410, "lease_lost")
                self.assertEqual(self.release(kind, name, second.body["token"]).status, 200)
                time.sleep(CONTENTION_HINT_S)  # the retries had the gateway send the name to the full script
                freed, calls = self.acquire_seen(kind, name, request_id="rid-first")  # a free name: the first try
                assert_problem(self, freed, 410, "lease_lost")
                if calls is not None:
                    self.assertEqual(calls[0], FIRST_TRY[kind], calls)
                with Redis() as r:  # the first try's repeat wrote nothing: no id moved again
                    self.assertEqual(r.cmd("GET", b + "i"), lease_of(second.body["token"]) + " rid-second")
                    self.assertEqual(r.cmd("EXISTS", b + "i:rid-second"), 0)

    def test_a_queue_join_finds_an_id_moved_away(self):
        """A queue join (lua/lock_acquire_queue.lua, lua/sem_acquire_queue.lua), which an acquire that waits
        runs first on a name seen held or queued for, looks for its request's id in the key a first try
        moved it to too: the late retry of an id whose lease is over answers 410, not a place in the queue.
        Caught (each kind): a join that looked at the one-id key and the set alone (the retry queued)."""
        for kind, prefix in KINDS.items():
            with self.subTest(kind=kind):
                name = self.fresh_name(kind)
                b = f"fg:{prefix}:{{{name}}}:"
                limit = {"limit": 2} if kind == "semaphores" else {}
                first = self.acquire(kind, name, request_id="rid-first", **limit)
                self.assertEqual(self.release(kind, name, first.body["token"]).status, 200)
                held = [self.acquire(kind, name, request_id="rid-second", **limit)]
                if kind == "semaphores":
                    held.append(self.acquire(kind, name, **limit))  # the second slot, beside it
                for got in held:
                    self.assertEqual(got.status, 200, got)
                with Redis() as r:
                    self.assertEqual(r.cmd("GET", b + "i:rid-first"), lease_of(first.body["token"]) + " rid-first")
                waiter = []
                thread = self.queue(kind, name, waiter, 1, **limit)  # the name seen queued for
                late, calls = self.acquire_seen(kind, name, request_id="rid-first", wait_ms=2000, **limit)
                assert_problem(self, late, 410, "lease_lost")
                if calls is not None:
                    self.assertEqual(calls[0], f"fg_{'lock' if kind == 'locks' else 'sem'}_acquire_queue", calls)
                self.assertEqual(self.waiting(kind, name), 1)
                for got in held:
                    self.assertEqual(self.release(kind, name, got.body["token"]).status, 200)
                thread.join(30)
                self.assertEqual(waiter[0].status, 200, waiter)
                self.assertEqual(self.release(kind, name, waiter[0].body["token"]).status, 200)

    def test_the_try_beside_holders_finds_an_id_moved_away(self):
        """The try beside a semaphore's holders (lua/sem_acquire_more.lua) looks for its request's id in the key
        a first try moved it to too, where the one-id key is free (its own id's time up sooner): the late
        retry of an id whose lease is over answers 410. Caught: a try that looked at the one-id key and the
        set alone (the retry granted a second lease)."""
        name = self.fresh_name("semaphores")
        b = f"fg:sm:{{{name}}}:"

        def acquire(**fields):
            return self.c.post(f"/v1/semaphores/{name}/acquire", {"ttl_ms": TTL_MS, "limit": 2, **fields})
        first = acquire(request_id="rid-first")
        self.assertEqual(self.release("semaphores", name, first.body["token"]).status, 200)
        second = acquire(request_id="rid-second")
        self.assertEqual(second.status, 200, second)
        with Redis() as r:
            self.assertEqual(r.cmd("GET", b + "i:rid-first"), lease_of(first.body["token"]) + " rid-first")
            self.assertEqual(r.cmd("DEL", b + "i"), 1)  # rid-second's time is up
        late, calls = self.acquire_seen("semaphores", name, request_id="rid-first", limit=2)
        assert_problem(self, late, 410, "lease_lost")
        if calls is not None:
            self.assertIn("fg_sem_acquire_more", calls)
        self.assertEqual(self.release("semaphores", name, second.body["token"]).status, 200)

    def test_a_live_id_in_the_set_is_found_while_the_one_id_key_is_free(self):
        """The one-id key goes when its own id's time is up, and the set keeps waiters' ids and those that
        came beside a holder (or from a gateway of the layout before): a live id of the set is then still a
        retry, not a new request, and the free key takes the next new id. Caught: a first try that looked at
        the one-id key alone (the late retry of the id in the set answered 200 with a second lease); a
        semaphore's that took the set's keys for a semaphore in use (the next acquire left to the full
        script)."""
        for kind, prefix in KINDS.items():
            with self.subTest(kind=kind):
                name = self.fresh_name(kind)
                one = f"fg:{prefix}:{{{name}}}:i"
                first = self.acquire(kind, name, request_id="rid-a")
                self.assertEqual(self.release(kind, name, first.body["token"]).status, 200)
                with Redis() as r:
                    till = int(r.cmd("TIME")[0]) * 1000 + 600_000
                    r.cmd("ZADD", f"fg:{prefix}:{{{name}}}:e", till, "rid-b")  # a lease over, its id kept
                    r.cmd("HSET", f"fg:{prefix}:{{{name}}}:r", "rid-b", "ab" * 16)
                    for key in "er":
                        r.cmd("PEXPIREAT", f"fg:{prefix}:{{{name}}}:{key}", till)
                    self.assertEqual(r.cmd("DEL", one), 1)  # rid-a's time is up
                late = self.acquire(kind, name, request_id="rid-b")
                assert_problem(self, late, 410, "lease_lost")
                third, calls = self.acquire_seen(kind, name, request_id="rid-c")
                self.assertEqual(third.status, 200, third)
                if calls is not None:
                    self.assertEqual(calls, [FIRST_TRY[kind]])
                with Redis() as r:
                    self.assertEqual(r.cmd("GET", one), lease_of(third.body["token"]) + " rid-c")
                    self.assertIsNone(r.cmd("HGET", f"fg:{prefix}:{{{name}}}:r", "rid-c"), "rid-c kept twice")
                self.assertEqual(self.release(kind, name, third.body["token"]).status, 200)

    def test_a_semaphore_in_use_is_told_from_its_request_id_set(self):
        """A semaphore's first try asks in one EXISTS whether its holders' or queue's keys exist and, for a
        request_id while the one-id key is free, whether the request-id set does: where it counts one, it must
        tell which. A holder kept in the holders' keys (moved there by another gateway's full script) and a
        limit key gone (an operator's DEL) leave the holders' keys alone to say the one slot is taken. Caught: a
        count of one taken for the set (a second holder of the one slot: 200)."""
        name, rid = self.fresh_name("semaphores"), uuid.uuid4().hex
        with Gateway() as other, other.client() as c2:  # this gateway saw nothing of the name: it tries first
            held = self.acquire("semaphores", name, c2)
            self.assertEqual(held.status, 200, held)
            moved = c2.post(f"/v1/semaphores/{name}/acquire", {"limit": 2, "wait_ms": 0})
            self.assertEqual(moved.status, 409, moved)
            with Redis() as r:
                self.assertEqual(r.cmd("ZCARD", f"fg:sm:{{{name}}}:h"), 1, "the holder not in the holders' keys")
                self.assertEqual(r.cmd("DEL", f"fg:sm:{{{name}}}:l"), 1)
                self.assertEqual(r.cmd("EXISTS", *(f"fg:sm:{{{name}}}:{k}" for k in "qrei")), 0)
            second, calls = self.acquire_seen("semaphores", name, request_id=rid)
            assert_problem(self, second, 409, "lock_busy")
            if calls is not None:
                self.assertEqual(calls[0], FIRST_TRY["semaphores"], calls)
            self.assertEqual(c2.post(f"/v1/semaphores/{name}/release", {"token": held.body["token"]}).status, 200)

    @skip_in_cluster("it calls the script with the one-Redis key names")
    def test_the_try_beside_holders_tells_its_queue_from_the_request_id_set(self):
        """The try beside a semaphore's holders (lua/sem_acquire_more.lua) asks in one EXISTS whether anybody
        queues and, for a request_id while the one-id key is free, whether the request-id set exists; where
        it counts one, a second EXISTS tells which. A queue, with or without the set, leaves the call to the
        full script; a set alone is looked into. The states are made in Redis and the script called as the
        gateway calls it, since a queue with a slot free lasts only between two calls. Caught (each tried): a
        count of one taken for the set (queued over: granted), any count taken for a queue (a live id's retry
        and a new request both left to the full script)."""
        b = lambda name: f"fg:sm:{{{name}}}:"  # noqa: E731
        libs = None

        def held_at_limit_2(name):  # the first try's first holder
            got = self.c.post(f"/v1/semaphores/{name}/acquire", {"ttl_ms": TTL_MS, "limit": 2})
            self.assertEqual(got.status, 200, got)

        def more(r, name, rid):
            keys = ([b(name) + k for k in "hdqwlt"] + ["fg:fence", "fg:fence_limit", "fg:idx:sm"]
                    + [b(name) + k for k in "rei"] + [b(name) + "i:" + rid])
            lease, inst, attach = uuid.uuid4().hex, "ab" * 16, "cd" * 16
            tail = f',"claimed":1,"rid":"{rid}","inst":"{inst}","attach":"{attach}","owner":""}}'
            first_tail = f"{lease} 30000 600000 1 {inst} {attach} {len(rid)} {rid}"
            return r.cmd("FCALL", libs[0], len(keys), *keys, name, lease, "30000", "600000", "2", tail, rid,
                         first_tail)

        with Redis() as r:
            libs = [lib[1] for lib in r.cmd("FUNCTION", "LIST", "LIBRARYNAME", "fg_sem_acquire_more_*")]
            if not libs:  # loaded at its first use: a second acquire of a semaphore its first try found in use
                name = self.fresh_name("semaphores")
                for _ in range(2):
                    held_at_limit_2(name)
                libs = [lib[1] for lib in r.cmd("FUNCTION", "LIST", "LIBRARYNAME", "fg_sem_acquire_more_*")]
            self.assertEqual(len(libs), 1, libs)
            for state, queue, ids, answer in (("a queue", True, (), "contended"),
                                              ("a queue and the set", True, ("other",), "contended"),
                                              ("the set, the id live there", False, ("rid", "other"), "repeat"),
                                              ("the set without the id", False, ("other",), "granted")):
                with self.subTest(state=state):
                    name = self.fresh_name("semaphores")
                    held_at_limit_2(name)
                    if queue:
                        r.cmd("ZADD", b(name) + "q", "1", "a-waiter")
                    for rid in ids:
                        r.cmd("ZADD", b(name) + "e", int(r.cmd("TIME")[0]) * 1000 + 600_000, rid)
                        r.cmd("HSET", b(name) + "r", rid, "a-lease")
                    got = more(r, name, "rid")
                    self.assertTrue(got.startswith(answer), (state, got))
                    holders = r.cmd("ZCARD", b(name) + "h")
                    self.assertEqual((holders, r.cmd("EXISTS", b(name) + "i")),
                                     (2, 1) if answer == "granted" else (0, 0), state)

    def test_a_renewal_keeps_the_first_try_request_id_as_long_as_its_lease(self):
        for kind in KINDS:
            with self.subTest(kind=kind):
                name, rid = self.fresh_name(kind), uuid.uuid4().hex
                got = self.acquire(kind, name, request_id=rid)
                self.assertEqual(got.status, 200, got)
                renewed = self.c.post(f"/v1/{kind}/{name}/renew", {"token": got.body["token"], "ttl_ms": 600_000})
                self.assertEqual(renewed.status, 200, renewed)
                with Redis() as r:
                    kept = request_id_kept(r, kind, name, rid)
                self.assertEqual(kept, (lease_of(got.body["token"]), renewed.body["expires_at_ms"] + REQUEST_ID_GRACE_MS))
                again = self.acquire(kind, name, request_id=rid)
                self.assertEqual((again.status, again.body.get("fence")), (200, got.body["fence"]), again)
                self.assertEqual(self.release(kind, name, got.body["token"]).status, 200)

    def test_a_renewal_whose_request_id_set_went_gives_it_a_time(self):
        """A renewal moves its request_id's time with a PEXPIREAT GT a key, which gives no time to a key that
        has none: where the set went (a waiter granted after its id's time passed finds it so) and the renewal
        makes it anew, the set must get a time, not stay forever."""
        for kind, prefix in KINDS.items():
            with self.subTest(kind=kind):
                name, rid = self.fresh_name(kind), uuid.uuid4().hex
                got = self.acquire(kind, name, request_id=rid)
                self.assertEqual(got.status, 200, got)
                until = f"fg:{prefix}:{{{name}}}:e"
                with Redis() as r:
                    r.cmd("DEL", until, f"fg:{prefix}:{{{name}}}:r", f"fg:{prefix}:{{{name}}}:i")
                renewed = self.c.post(f"/v1/{kind}/{name}/renew", {"token": got.body["token"], "ttl_ms": 600_000})
                self.assertEqual(renewed.status, 200, renewed)
                kept = renewed.body["expires_at_ms"] + REQUEST_ID_GRACE_MS
                with Redis() as r:
                    self.assertEqual(int(r.cmd("ZSCORE", until, rid)), kept)
                    self.assertEqual(r.cmd("PEXPIRETIME", until), kept)
                self.assertEqual(self.release(kind, name, got.body["token"]).status, 200)

    def test_a_request_id_granted_beside_another_holder_answers_its_retries(self):
        """A semaphore in use takes a second holder by the lean try beside the holders there are
        (lua/sem_acquire_more.lua): it keeps the request_id as the first try does, and leaves its retries,
        while held and once over, to the full script."""
        name, rid = self.fresh_name("semaphores"), uuid.uuid4().hex
        body = {"ttl_ms": TTL_MS, "limit": 3}  # a slot still free for the retry: the lean try must look
        first = self.c.post(f"/v1/semaphores/{name}/acquire", body)
        self.assertEqual(first.status, 200, first)
        got = self.c.post(f"/v1/semaphores/{name}/acquire", {**body, "request_id": rid})
        self.assertEqual(got.status, 200, got)
        with Redis() as r:
            self.assertEqual(r.cmd("ZCARD", f"fg:sm:{{{name}}}:h"), 2, "not two holders in the holders' keys")
            kept = got.body["expires_at_ms"] + REQUEST_ID_GRACE_MS
            self.assertEqual(request_id_kept(r, "semaphores", name, rid), (lease_of(got.body["token"]), kept))
        again = self.c.post(f"/v1/semaphores/{name}/acquire", {**body, "request_id": rid})
        self.assertEqual((again.status, again.body.get("fence")), (200, got.body["fence"]), again)
        self.assertEqual(self.release("semaphores", name, got.body["token"]).status, 200)
        late = self.c.post(f"/v1/semaphores/{name}/acquire", {**body, "request_id": rid})
        assert_problem(self, late, 410, "lease_lost")
        self.assertEqual(self.release("semaphores", name, first.body["token"]).status, 200)

    def test_a_request_id_queued_by_the_lean_join_is_taken_over_by_its_retry(self):
        """The first waiter joins through the full script (the gateway had not seen the name queued for); the
        second, with a request_id, through the lean join. Its retry, from another connection, must find the
        request_id and take its place over: the first connection is answered 409 conflict, the queue stays
        two long, and the retry is granted in the second place."""
        for kind, prefix in KINDS.items():
            with self.subTest(kind=kind):
                name, rid = self.fresh_name(kind), uuid.uuid4().hex
                held = self.acquire(kind, name)
                self.assertEqual(held.status, 200, held)
                first: list = []
                t1 = self.queue(kind, name, first, 1)
                second: list = []
                t2 = self.queue(kind, name, second, 2, request_id=rid)
                with Redis() as r:  # a waiter's request_id is kept in the request-id set
                    lease = r.cmd("HGET", f"fg:{prefix}:{{{name}}}:r", rid)
                    self.assertIsNotNone(lease, "the lean join kept no request_id in the set")
                    self.assertIsNone(r.cmd("GET", f"fg:{prefix}:{{{name}}}:i"), "a waiter's request_id in the one-id key")
                    self.assertIsNotNone(r.cmd("ZSCORE", f"fg:{prefix}:{{{name}}}:q", lease), "not the waiter")
                retry: list = []
                t3 = self.queue(kind, name, retry, 2, request_id=rid)
                t2.join(10)
                self.assertEqual(len(second), 1, "the wait the retry took over was not answered")
                assert_problem(self, second[0], 409, "conflict")
                self.assertEqual(self.waiting(kind, name), 2)
                self.assertEqual(self.release(kind, name, held.body["token"]).status, 200)
                t1.join(10)
                self.assertEqual(first[0].status, 200, first)
                self.assertEqual(self.release(kind, name, first[0].body["token"]).status, 200)
                t3.join(10)
                self.assertEqual(retry[0].status, 200, retry)
                self.assertEqual(lease_of(retry[0].body["token"]), lease)
                self.assertEqual(self.release(kind, name, retry[0].body["token"]).status, 200)


    def test_a_name_used_again_keeps_its_request_ids_and_their_keys_alive(self):
        """While the name's one-id key holds the live id of a lease that holds, the next ids go into the
        request-id set: a semaphore's try beside its holders (lua/sem_acquire_more.lua; a lock's queue join
        keeps a waiter's id by the same upkeep, lib_lease.lua rid_take_set). Once its keys exist, the lean
        tries add an id before they prune the lapsed ones, so the set is never emptied, and lengthen the keys'
        time only where the new id outlives it, then by a grace more for the name's next ids; the hash, whose
        time is never past the set's, gets the set's. A set that has no time (made by another gateway) or a
        hash made anew without one must come out of a grant with a time, never kept forever."""
        kind, prefix = "semaphores", KINDS["semaphores"]
        name = self.fresh_name(kind)
        rids, until = f"fg:{prefix}:{{{name}}}:r", f"fg:{prefix}:{{{name}}}:e"

        def acquire(**fields):  # of two slots: one beside `long`
            return self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": TTL_MS, "limit": 2, **fields})
        long = acquire(request_id="rid-long", ttl_ms=600_000)
        self.assertEqual(long.status, 200, long)
        long_till = long.body["expires_at_ms"] + REQUEST_ID_GRACE_MS
        with Redis() as r:
            self.assertEqual(r.cmd("GET", f"fg:{prefix}:{{{name}}}:i"),
                             lease_of(long.body["token"]) + " rid-long")
            past = int(r.cmd("TIME")[0]) * 1000 - 1000
            r.cmd("ZADD", until, past, "rid-dead")  # a set kept as long as the one-id key
            r.cmd("PEXPIREAT", until, long_till)
            r.cmd("HSET", rids, "rid-dead", "a-lease")
            r.cmd("PERSIST", rids)  # a hash made anew, with no time yet
        short = acquire(request_id="rid-short", ttl_ms=1_000)
        self.assertEqual(short.status, 200, short)
        with Redis() as r:
            self.assertEqual(r.cmd("HGET", rids, "rid-short"), lease_of(short.body["token"]))
            self.assertEqual(int(r.cmd("ZSCORE", until, "rid-short")),
                             short.body["expires_at_ms"] + REQUEST_ID_GRACE_MS)
            self.assertEqual(request_id_kept(r, kind, name, "rid-long"),
                             (lease_of(long.body["token"]), long_till))
            self.assertIsNone(r.cmd("ZSCORE", until, "rid-dead"), "a lapsed id was not pruned")
            self.assertIsNone(r.cmd("HGET", rids, "rid-dead"), "a lapsed id's lease was not pruned")
            for key in (rids, until):
                self.assertGreaterEqual(r.cmd("PEXPIRETIME", key), long_till, key)
        self.assertEqual(self.release(kind, name, short.body["token"]).status, 200)
        with Redis() as r:
            r.cmd("PERSIST", until)  # a set another gateway made without a time
            r.cmd("ZADD", until, past, "rid-lapsed")
            r.cmd("HSET", rids, "rid-lapsed", "a-lease")
        later = acquire(request_id="rid-lapsed", ttl_ms=1_200_000)
        self.assertEqual(later.status, 200, later)  # its time passed: a new request, not a retry
        later_till = later.body["expires_at_ms"] + REQUEST_ID_GRACE_MS
        with Redis() as r:
            self.assertEqual(r.cmd("HGET", rids, "rid-lapsed"), lease_of(later.body["token"]))
            self.assertEqual(int(r.cmd("ZSCORE", until, "rid-lapsed")), later_till)
            for key in (rids, until):  # and a grace more, for the next ids of the name
                self.assertEqual(r.cmd("PEXPIRETIME", key), later_till + REQUEST_ID_GRACE_MS, key)
        self.assertEqual(self.release(kind, name, later.body["token"]).status, 200)
        # Last: a retry, which the lean try leaves to the full script, has the gateway send the
        # name's next acquires there for a while.
        late = acquire(request_id="rid-short", ttl_ms=1_000)
        assert_problem(self, late, 410, "lease_lost")
        self.assertEqual(self.release(kind, name, long.body["token"]).status, 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
