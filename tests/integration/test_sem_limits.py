# SPDX-License-Identifier: Apache-2.0
"""Semaphores under concurrency: never more than `limit` holders, strict FIFO among waiters, limit_mismatch,
fail-fast busy, the waiter cap and idempotent request_id.

Owns: the concurrency contract of /v1/semaphores. The holder count is measured independently of the
gateway: client processes INCR a counter key in Redis right after a grant and DECR it right before the
release, keeping the highest value INCR returned. Must not: test lease expiry and renewal (see
test_sem_leases.py).
"""

import json
import multiprocessing as mp
import os
import re
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (Client, Gateway, GatewayTest, Redis, lease_keys, skip_in_cluster, slot_key,  # noqa: E402
                     warm_semaphore_slot)

SEM = "/v1/semaphores/"


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns()}"


def acquire(c: Client, name: str, **fields):
    return c.post(SEM + name + "/acquire", fields)


def release(c: Client, name: str, token: str):
    return c.post(SEM + name + "/release", {"token": token})


def status(c: Client, name: str) -> dict:
    r = c.get(SEM + name)
    assert r.status == 200, r
    return r.body


def wait_for_waiting(c: Client, name: str, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while status(c, name)["waiting"] < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: fewer than {n} waiters after {timeout}s: {status(c, name)}")
        time.sleep(0.01)


def sem_script(r: Redis, script: str, name: str, *argv: str):
    """Calls lease script `script` (the one build under test loaded into the one test Redis) on semaphore
    `name` with its keys (lua/lib_sem.lua) as a gateway names them, and argv; returns its answer."""
    libs = [lib[1] for lib in r.cmd("FUNCTION", "LIST", "LIBRARYNAME", f"fg_{script}_*")
            if re.fullmatch(f"fg_{script}_[0-9a-f]{{12}}", lib[1])]
    assert len(libs) == 1, libs
    keys = lease_keys("semaphores", name, argv[2] if script == "sem_acquire" else None)  # ARGV: name lease request_id
    return r.cmd("FCALL", libs[0], len(keys), *keys, *argv)


def holder_process(base: str, name: str, limit: int, jobs: int, threads: int, counter: str, out: mp.Queue):
    """One client process: `threads` workers each do `jobs` acquire/hold/release cycles, counting holders
    in Redis key `counter`. Puts (highest count seen, errors) on out."""
    highest, errors = [0], []
    lock = threading.Lock()

    def worker():
        r = Redis()
        with Client(base, timeout=60) as c:
            for _ in range(jobs):
                g = acquire(c, name, limit=limit, wait_ms=30000, ttl_ms=10000)
                if g.status != 200:
                    errors.append(f"acquire: {g}")
                    return
                n = r.cmd("INCR", counter)
                with lock:
                    highest[0] = max(highest[0], n)
                time.sleep(0.003)
                r.cmd("DECR", counter)
                rel = release(c, name, g.body["token"])
                if rel.status != 200:
                    errors.append(f"release: {rel}")
                    return
        r.close()

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((highest[0], errors))


class SemaphoreLimitTest(GatewayTest):
    gateway_config = {"limits": {"max_waiters_per_lock": 20}}

    def test_never_more_than_limit_holders_across_processes(self):
        name, counter, limit = unique("sem-limit"), unique("test-holders"), 3
        out: mp.Queue = mp.Queue()
        procs = [mp.Process(target=holder_process, args=(self.gw.base, name, limit, 12, 4, counter, out))
                 for _ in range(3)]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join()
        errors = [e for _, errs in results for e in errs]
        self.assertEqual(errors, [])
        highest = max(h for h, _ in results)
        self.assertLessEqual(highest, limit, "more holders than the limit at once")
        self.assertEqual(highest, limit, "the limit was never reached: the test did not contend")
        self.assertEqual(status(self.c, name), {"semaphore": name, "limit": None, "holders": 0, "waiting": 0})

    def test_waiters_are_granted_in_arrival_order(self):
        name, limit = unique("sem-fifo"), 2
        first = [acquire(self.c, name, limit=limit).body for _ in range(limit)]
        grants, clients, threads = {}, [], []
        for i in range(6):
            c = self.gw.client(timeout=60)
            clients.append(c)

            def wait(i=i, c=c):
                g = acquire(c, name, limit=limit, wait_ms=20000)
                grants[i] = g
                time.sleep(0.02)
                release(c, name, g.body["token"])

            t = threading.Thread(target=wait)
            t.start()
            threads.append(t)
            wait_for_waiting(self.c, name, i + 1)  # queued in this order
        for holder in first:
            self.assertEqual(release(self.c, name, holder["token"]).status, 200)
        for t in threads:
            t.join(30)
        for c in clients:
            c.close()
        self.assertEqual(sorted(grants), list(range(6)))
        fences = [grants[i].body["fence"] for i in range(6)]
        self.assertEqual(fences, sorted(fences), "grants (fence order) must follow arrival order")
        self.assertGreater(fences[0], max(h["fence"] for h in first))

    def test_a_new_acquirer_does_not_overtake_the_queue(self):
        name = unique("sem-no-overtake")
        a = acquire(self.c, name, limit=1).body
        out = []
        with self.gw.client(timeout=30) as wc:
            t = threading.Thread(target=lambda: out.append(acquire(wc, name, limit=1, wait_ms=10000)))
            t.start()
            wait_for_waiting(self.c, name, 1)
            self.assertEqual(release(self.c, name, a["token"]).status, 200)
            # The slot went to the waiter in the release itself: a newcomer finds it taken.
            r = acquire(self.c, name, limit=1)
            self.assertEqual(r.status, 409, r)
            self.assertEqual(r.body["type"], "/problems/lock_busy")
            t.join(10)
        self.assertEqual(out[0].status, 200, out)
        self.assertEqual(release(self.c, name, out[0].body["token"]).status, 200)

    def test_limit_mismatch_while_in_use_and_free_to_change_when_idle(self):
        name = unique("sem-mismatch")
        a = acquire(self.c, name, limit=2)
        self.assertEqual(a.status, 200, a)
        r = acquire(self.c, name, limit=3)
        self.assertEqual(r.status, 409, r)
        self.assertEqual(r.body["type"], "/problems/limit_mismatch")
        self.assertEqual(r.body["limit"], 2)
        self.assertEqual(status(self.c, name)["limit"], 2)
        self.assertEqual(release(self.c, name, a.body["token"]).status, 200)
        b = acquire(self.c, name, limit=3)
        self.assertEqual(b.status, 200, b)
        self.assertEqual(status(self.c, name), {"semaphore": name, "limit": 3, "holders": 1, "waiting": 0})
        self.assertEqual(release(self.c, name, b.body["token"]).status, 200)

    def test_wait_zero_fails_fast_with_queue_length(self):
        name = unique("sem-busy")
        a = acquire(self.c, name, limit=1).body
        out = []
        with self.gw.client(timeout=30) as wc:
            # Its wait outlasts the look below at the queue, however loaded the machine.
            t = threading.Thread(target=lambda: out.append(acquire(wc, name, limit=1, wait_ms=5000)))
            t.start()
            wait_for_waiting(self.c, name, 1)
            started = time.monotonic()
            r = acquire(self.c, name, limit=1, wait_ms=0)
            self.assertLess(time.monotonic() - started, 1.0)
            self.assertEqual(r.status, 409, r)
            self.assertEqual(r.body["type"], "/problems/lock_busy")
            self.assertEqual(r.body["waiting"], 1)
            t.join(10)
        self.assertEqual(out[0].status, 409, out)  # its own wait_ms passed
        self.assertEqual(status(self.c, name)["waiting"], 0)
        self.assertEqual(release(self.c, name, a["token"]).status, 200)

    def test_request_id_retry_returns_the_same_lease(self):
        name = unique("sem-rid")
        a = acquire(self.c, name, limit=1, request_id="r-1")
        b = acquire(self.c, name, limit=1, request_id="r-1")
        self.assertEqual((a.status, b.status), (200, 200))
        self.assertEqual((a.body["token"], a.body["fence"]), (b.body["token"], b.body["fence"]))
        self.assertEqual(status(self.c, name)["holders"], 1)
        # A queued retry keeps its place and is granted once.
        out = []
        with self.gw.client(timeout=30) as w1:
            t = threading.Thread(target=lambda: out.append(
                acquire(w1, name, limit=1, wait_ms=200, request_id="r-2")))
            t.start()
            t.join(10)
            self.assertEqual(out[0].status, 409)  # timed out, left the queue
        self.assertEqual(release(self.c, name, a.body["token"]).status, 200)
        again = acquire(self.c, name, limit=1, request_id="r-1")
        self.assertEqual(again.status, 410, again)  # that lease is over: never a second one
        self.assertEqual(again.body["type"], "/problems/lease_lost")

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_a_retry_takes_a_held_slot_over_from_the_attempt_before(self):
        """A request retried with its request_id (say from another connection, its client having given up on
        the first) finds its lease holding a slot and takes it over: a give-up of the attempt before (its
        client gone: sem_cancel.lua, mode drop, with that attempt's attach) answers superseded and leaves the
        slot held. Caught: a retry that keeps the first attempt's attach (that give-up then releases the slot
        the retry was answered 200 for)."""
        name = unique("sem-retry-over")
        data = f"fg:sm:{{{name}}}:d"
        # The gateway loads a script at its first use: a waiter whose wait_ms passes loads sem_cancel.lua.
        busy = unique("sem-retry-load")
        held = acquire(self.c, busy, limit=1, ttl_ms=30000)
        self.assertEqual(acquire(self.c, busy, limit=1, wait_ms=100).status, 409)
        self.assertEqual(release(self.c, busy, held.body["token"]).status, 200)
        with Redis() as r:
            first = self.moved_holder(name, limit=2, ttl_ms=30000, wait_ms=1000, request_id="sem-retry-over-1")
            [lease, record] = r.cmd("HGETALL", data)
            before = json.loads(record)["attach"]
            self.assertEqual(len(before), 32, "an attempt that may wait has an attach id")
            with self.gw.client() as other:
                again = acquire(other, name, limit=2, ttl_ms=30000, wait_ms=1000, request_id="sem-retry-over-1")
            self.assertEqual((again.status, again.body["fence"]), (200, first.body["fence"]), again)
            self.assertNotEqual(json.loads(r.cmd("HGET", data, lease))["attach"], before,
                                "the retry did not take it over")
            self.assertEqual(sem_script(r, "sem_cancel", name, name, lease, before, "drop", "30000", "600000",
                                        "600000", "00"), "superseded")
            self.assertEqual(status(self.c, name)["holders"], 1)
            taken = json.loads(r.cmd("HGET", data, lease))["attach"]
            # The attempt before looks again (it names the lease its request_id has): it leaves the slot to
            # the retry. Caught: a look again that takes the slot back (its give-up would then release it).
            look = sem_script(r, "sem_acquire", name, name, lease, "sem-retry-over-1", "30000", "1800000", "",
                              "1", "ef" * 16, before, "3000", "1000", "60000", "2", "")
            self.assertTrue(str(look).startswith("superseded"), look)
            self.assertEqual(json.loads(r.cmd("HGET", data, lease))["attach"], taken)
        self.assertEqual(self.c.post(SEM + name + "/renew", {"token": again.body["token"]}).status, 200)
        self.assertEqual(release(self.c, name, again.body["token"]).status, 200)

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_a_release_passes_over_the_waiter_of_a_dead_gateway(self):
        """A release hands the slot to the oldest waiter whose gateway is alive (lib_lease.lua
        next_live_waiter): a waiter of the releasing gateway needs no look at its gateway's mark, a waiter of
        another does. Caught: no look at all (the dead gateway's waiter granted, the slot idle until that grant's
        claim window passes)."""
        name = unique("sem-deadq")
        held = acquire(self.c, name, limit=1, ttl_ms=30000)
        # The gateway loads a script at its first use: a waiter whose wait_ms passes loads sem_acquire.lua.
        self.assertEqual(acquire(self.c, name, limit=1, wait_ms=100).status, 409)
        dead = "ab" * 16
        with Redis() as r:
            queued = sem_script(r, "sem_acquire", name, name, dead, "", "30000", "30000", "", "1", "ef" * 16,
                                "cd" * 16, "600", "100", "60000", "1", "")
            self.assertTrue(queued.startswith("queued"), queued)
            out = []
            with self.gw.client(timeout=30) as w:
                t = threading.Thread(target=lambda: out.append(acquire(w, name, limit=1, wait_ms=20000)))
                t.start()
                wait_for_waiting(self.c, name, 2)
                self.assertEqual(release(self.c, name, held.body["token"]).status, 200)
                self.assertIsNone(r.cmd("HGET", f"fg:sm:{{{name}}}:d", dead), "a dead gateway's waiter was granted")
                t.join(10)
        self.assertEqual(out[0].status, 200, out)
        self.assertEqual(release(self.c, name, out[0].body["token"]).status, 200)

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_a_queued_answer_counts_a_grant_made_in_the_same_call(self):
        """A queueing acquire answers how long until the earliest holder lease ends (holder_pttl, when its
        waiter looks again), known from its look for expired holders and the grants it makes on the way
        (lua/lib_sem.lua purge_count, set_expiry). A free slot with a waiter, as a release that may issue no
        fence leaves it, goes to the waiter at the next call: to a waiter of another gateway for the claim
        window only. Caught: an answer that does not count that grant (the earliest lease before, 30 s)."""
        name = unique("sem-pttl")
        # The gateway loads a script at its first use: an acquire with a request_id runs sem_acquire.lua.
        warm = acquire(self.c, unique("sem-pttl-load"), limit=1, request_id=unique("sem-pttl-load"))
        self.assertEqual(warm.status, 200, warm)
        x, y, z = "a1" * 16, "b2" * 16, "c3" * 16

        def call(lease: str, inst: str) -> str:
            return sem_script(r, "sem_acquire", name, name, lease, "", "30000", "30000", "", "1", inst, "cd" * 16,
                              "700", "100", "60000", "2", "")

        with Redis() as r:
            now_ms = int(r.cmd("TIME")[0]) * 1000
            r.cmd("ZADD", "fg:gateways", str(now_ms + 60000), y)  # the waiter's gateway is alive
            self.assertTrue(call("1" * 32, x).startswith("granted"))
            self.assertTrue(call("2" * 32, x).startswith("granted"))
            self.assertTrue(call("3" * 32, y).startswith("queued"))
            r.cmd("ZREM", f"fg:sm:{{{name}}}:h", "2" * 32)  # the slot freed, nothing granted yet
            r.cmd("HDEL", f"fg:sm:{{{name}}}:d", "2" * 32)
            queued = call("4" * 32, z)
            self.assertTrue(queued.startswith("queued"), queued)
            self.assertIsNotNone(r.cmd("HGET", f"fg:sm:{{{name}}}:d", "3" * 32), "the waiter was not granted")
            self.assertLessEqual(int(queued.split()[-1]), 700, queued)

    def test_a_semaphore_held_again_after_its_holder_expired_is_listed(self):
        """The listing drops from its index a name it finds with neither a live holder nor a waiter
        (lua/lease_list.lua); an acquire that finds either leaves the index be (lua/sem_acquire.lua), so the
        first live holder after none must put the name back. Here the only holder expires unreleased: the
        semaphore's keys stay, the listing drops its name, and the next grant (the full script, with a limit
        in force) adds it back. Caught: that grant not adding it (a semaphore held and not listed)."""
        prefix = unique("sem-relist") + "-"
        name = prefix + "s"
        first = acquire(self.c, name, limit=2, ttl_ms=200, request_id=prefix + "1")
        self.assertEqual(first.status, 200, first)
        time.sleep(0.4)
        self.assertEqual(self.c.get("/v1/semaphores?prefix=" + prefix).body["items"], [])
        with Redis() as r:
            self.assertIsNone(r.cmd("ZSCORE", slot_key("fg:idx:sm", name), name), "the listing kept an idle name")
        second = acquire(self.c, name, limit=2, ttl_ms=30000, request_id=prefix + "2")
        self.assertEqual(second.status, 200, second)
        [item] = self.c.get("/v1/semaphores?prefix=" + prefix).body["items"]
        self.assertEqual((item["semaphore"], item["holders"]), (name, 1), item)
        self.assertEqual(release(self.c, name, second.body["token"]).status, 200)

    def test_waiter_cap_and_hangup_leaves_the_queue(self):
        name = unique("sem-cap")
        a = acquire(self.c, name, limit=1).body
        socks = []
        for _ in range(20):
            c = self.gw.client(timeout=30)
            c._connection(30).sock.sendall(  # send and do not wait: the waiter parks
                b"POST " + (SEM + name).encode() + b"/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 33\r\n\r\n"
                b'{"limit": 1, "wait_ms": 30000}   ')
            socks.append(c)
        wait_for_waiting(self.c, name, 20)
        r = acquire(self.c, name, limit=1, wait_ms=1000)
        self.assertEqual(r.status, 429, r)
        self.assertEqual(r.body["type"], "/problems/too_many_waiters")
        for c in socks:
            c.close()  # hang up: each waiter leaves the queue
        deadline = time.monotonic() + 10
        while status(self.c, name)["waiting"] > 0:
            self.assertLess(time.monotonic(), deadline, status(self.c, name))
            time.sleep(0.02)
        self.assertEqual(release(self.c, name, a["token"]).status, 200)
        self.assertEqual(status(self.c, name)["holders"], 0, "a slot was granted to a waiter that left")

    def test_every_key_of_a_semaphore_in_use_has_a_time_to_live(self):
        """An abandoned semaphore must leave Redis, and one in use must not: each of its keys lives at least
        keep (600 s) past its last holder lease and at most 1.5 x keep. The scripts set the times to live only
        when they may have made a key anew or a lease outlives them; this catches a key made without one (the
        queue of a first waiter, the holders of a slot granted after the last holder left) and keys that a
        longer renewal would outlive, whichever way the scripts decide."""
        name = unique("sem-ttl")
        keys = [f"fg:sm:{{{name}}}:{suffix}" for suffix in "hdqwlt"]
        keep = 600_000
        r = Redis()

        def check(step: str, lease_left_ms: int) -> None:
            present = [k for k in keys if r.cmd("EXISTS", k)]
            self.assertIn(keys[0], present, step)
            for k in present:
                pttl = r.cmd("PTTL", k)
                self.assertTrue(keep + lease_left_ms - 10_000 <= pttl <= keep * 3 // 2 + lease_left_ms + 1_000,
                                (step, k, pttl))

        # The first holder, kept in the limit key alone (lua/lib_sem.lua), which expires with its lease.
        first = self.first_holder(name, limit=1, ttl_ms=30000, max_hold_ms=7_200_000)
        self.assertEqual([k for k in keys if r.cmd("EXISTS", k)], [keys[4]], "first holder")
        self.assertTrue(20_000 <= r.cmd("PTTL", keys[4]) <= 30_000, r.cmd("PTTL", keys[4]))
        renewed = self.c.post(SEM + name + "/renew", {"token": first.body["token"], "ttl_ms": 3_600_000})
        self.assertEqual(renewed.status, 200, renewed)
        # Renewed where it is: the limit key alone, expiring with the lease.
        self.assertEqual([k for k in keys if r.cmd("EXISTS", k)], [keys[4]], "first holder renewed")
        self.assertTrue(3_590_000 <= r.cmd("PTTL", keys[4]) <= 3_600_000, r.cmd("PTTL", keys[4]))
        out: list = []

        def wait():
            with self.gw.client(timeout=30) as c:
                out.append(acquire(c, name, limit=1, ttl_ms=30000, wait_ms=20000))

        t = threading.Thread(target=wait)
        t.start()
        wait_for_waiting(self.c, name, 1)
        check("first waiter", 3_600_000)
        self.assertEqual(release(self.c, name, first.body["token"]).status, 200)
        t.join(10)
        self.assertEqual(out[0].status, 200, out)
        check("slot handed to the waiter", 30_000)
        t = threading.Thread(target=wait)
        t.start()
        wait_for_waiting(self.c, name, 1)
        check("a waiter after the queue had emptied", 30_000)
        self.assertEqual(release(self.c, name, out[0].body["token"]).status, 200)
        t.join(10)
        # Idle: none of its keys is left (the released set answers a retried release).
        self.assertEqual(release(self.c, name, out[1].body["token"]).status, 200)
        self.assertEqual([k for k in keys if r.cmd("EXISTS", k)], [], "an idle semaphore keeps keys")
        self.assertEqual(release(self.c, name, out[1].body["token"]).status, 200)
        self.assertIsNone(r.cmd("ZSCORE", slot_key("fg:idx:sm", name), name), "an idle semaphore stays listed")
        # The gateway runs the first tries (lua/sem_*_fast.lua, whose idle state is checked below) only once
        # the name has not been seen contended for CONTENTION_HINT_MS (1 s, src/lease/contention.h); the
        # hand-overs above were such signs.
        time.sleep(1.2)
        last = self.first_holder(name, limit=1, ttl_ms=30000)
        self.assertEqual(release(self.c, name, last.body["token"]).status, 200)
        # Idle: only the record of the last release is left, in the limit key, until it runs out (a retried
        # release still answers 200 meanwhile).
        self.assertEqual([k for k in keys if r.cmd("EXISTS", k)], [keys[4]], "an idle semaphore keeps keys")
        self.assertTrue(r.cmd("GET", keys[4]).startswith("~"), "an idle semaphore keeps its limit")
        self.assertTrue(0 < r.cmd("PTTL", keys[4]) <= 600_000, r.cmd("PTTL", keys[4]))
        self.assertEqual(release(self.c, name, last.body["token"]).status, 200)
        self.assertIsNone(r.cmd("ZSCORE", slot_key("fg:idx:sm", name), name), "an idle semaphore stays listed")

    def test_a_slot_handed_on_beside_a_holder_keeps_the_keys_past_the_new_lease(self):
        """A release sets the keys' times to live only when it may have made a key anew or set an expiry:
        a slot it hands on beside another holder makes no key, but the new lease may outlive the keys. Here
        the waiter asks for an hour, longer than keep and the other holder's lease: every key must live keep
        past it. Caught: a release that kept the keys alive only when it made one (about 930 s)."""
        name = unique("sem-ttl-beside")
        keys = [f"fg:sm:{{{name}}}:{suffix}" for suffix in "hdqwlt"]
        keep, hour = 600_000, 3_600_000
        staying = acquire(self.c, name, limit=2, ttl_ms=30000)
        leaving = acquire(self.c, name, limit=2, ttl_ms=30000)
        self.assertEqual([staying.status, leaving.status], [200, 200], (staying, leaving))
        out: list = []

        def wait():
            with self.gw.client(timeout=30) as c:
                out.append(acquire(c, name, limit=2, ttl_ms=hour, wait_ms=20000))

        t = threading.Thread(target=wait)
        t.start()
        wait_for_waiting(self.c, name, 1)
        self.assertEqual(release(self.c, name, leaving.body["token"]).status, 200)
        t.join(10)
        self.assertEqual(out[0].status, 200, out)
        with Redis() as r:
            present = [k for k in keys if r.cmd("EXISTS", k)]
            self.assertIn(keys[0], present)
            for k in present:
                self.assertGreaterEqual(r.cmd("PTTL", k), keep + hour - 10_000, k)
        for token in (staying.body["token"], out[0].body["token"]):
            self.assertEqual(release(self.c, name, token).status, 200)

    def test_an_acquire_without_a_limit_in_redis_still_counts_the_holders(self):
        """An acquire of an idle semaphore takes the first slot by a shortcut; it must tell idle from in use by
        the holders and the queue, not by the limit key alone. With the limit key gone (a partial restore, an
        operator's DEL) while a holder holds, a second acquire at limit 1 must not be granted. Caught: a
        shortcut taken on a missing limit key alone (two holders of one slot)."""
        name = unique("sem-nolimit")
        first = self.moved_holder(name, limit=1, ttl_ms=30000)
        r = Redis()
        self.assertEqual(r.cmd("DEL", f"fg:sm:{{{name}}}:l"), 1)
        second = acquire(self.c, name, limit=1, wait_ms=0)
        self.assertEqual(second.status, 409, second)
        self.assertEqual(status(self.c, name)["holders"], 1)
        self.assertEqual(release(self.c, name, first.body["token"]).status, 200)
        third = acquire(self.c, name, limit=1, wait_ms=0)
        self.assertEqual(third.status, 200, third)
        self.assertGreater(third.body["fence"], first.body["fence"])
        self.assertEqual(release(self.c, name, third.body["token"]).status, 200)
        r.close()

    def test_a_release_reads_the_holders_own_numbers_whatever_its_owner_or_record_layout(self):
        """A release reads the fence, ttl and grant time off the holder's record text where the scripts wrote
        them, and decodes a record of any other layout. An owner made to look like those fields must change
        nothing: it is kept as given, the end is told under the holder's own fence (a watch answers
        "released", not "expired") and the hold time recorded is the real one (seconds, not the 55 years
        since a granted_at of 3). Caught: an owner written into the record unescaped (its fields then come
        first), and a release that cannot read a record in another order (500)."""
        decoy = '","fence":1,"ttl":1,"max_hold":2,"granted_at":3,"x":"\\"'
        r = Redis()

        def hold_seconds() -> float:
            text = self.c.get("/metrics").body
            line = [ln for ln in text.splitlines()
                    if ln.startswith("fencegate_hold_seconds_sum") and 'kind="semaphore"' in ln]
            return float(line[0].split()[-1])

        for layout in ("first holder", "as written", "reordered"):
            name = unique("sem-record")
            if layout == "first holder":  # the first try's, in the limit key, the owner last
                slot = self.first_holder(name, limit=2, owner=decoy, ttl_ms=30000)
                self.assertTrue(r.cmd("GET", f"fg:sm:{{{name}}}:l").endswith(" " + decoy))
            else:  # in the holders' keys
                slot = self.moved_holder(name, limit=2, owner=decoy, ttl_ms=30000, request_id="rec-" + name)
                data = f"fg:sm:{{{name}}}:d"
                lease = r.cmd("HKEYS", data)[0]
                record = json.loads(r.cmd("HGET", data, lease))
                self.assertEqual((record["owner"], record["fence"]), (decoy, slot.body["fence"]))
                if layout == "reordered":
                    r.cmd("HSET", data, lease, json.dumps(dict(reversed(list(record.items())))))
            before = hold_seconds()
            self.assertEqual(release(self.c, name, slot.body["token"]).status, 200, layout)
            held = hold_seconds() - before
            self.assertTrue(0 <= held < 60, (layout, held))
            w = self.c.get(f"{SEM}{name}?watch=true&fence={slot.body['fence']}")
            self.assertEqual((w.status, w.body["held"], w.body["reason"]), (200, False, "released"), (layout, w))
        r.close()

    def moved_holder(self, name: str, **fields):
        """An acquire whose holder is kept in the holders' keys (lua/lib_sem.lua): the first try's, moved
        there by the full script's look at the semaphore (an acquire of another limit, refused)."""
        got = acquire(self.c, name, **fields)
        self.assertEqual(got.status, 200, got)
        self.assertEqual(acquire(self.c, name, limit=fields["limit"] + 1, wait_ms=0).status, 409)
        with Redis() as r:
            self.assertEqual(r.cmd("GET", f"fg:sm:{{{name}}}:l"), str(fields["limit"]), "not moved")
        return got

    def first_holder(self, name: str, **fields):
        """An acquire that the first try grants, its holder kept alone in the limit key (lua/lib_sem.lua)."""
        warm_semaphore_slot(self.c, name)
        got = acquire(self.c, name, **fields)
        self.assertEqual(got.status, 200, got)
        with Redis() as r:
            self.assertTrue(r.cmd("GET", f"fg:sm:{{{name}}}:l").startswith("="), "not the first try's holder")
        return got

    def test_a_first_holder_in_the_limit_key_counts_for_every_call(self):
        """The first try keeps an idle semaphore's first holder in its limit key; every other call must see
        it there: a status and a watch read it where it is, an acquire, renew and revoke move it into the
        holders' keys first. Caught (each tried): an acquire that does not move it (a second holder of a
        one-slot semaphore, and no limit_mismatch), a revoke that does not (answers gone, the holder keeps
        its slot), a renew that does not (410), a status or watch that does not read it (0 holders, not
        held)."""
        name = unique("sem-first")
        a = self.first_holder(name, limit=1, ttl_ms=30000, owner="first").body
        self.assertEqual(status(self.c, name), {"semaphore": name, "limit": 1, "holders": 1, "waiting": 0})
        w = self.c.get(f"{SEM}{name}?watch=true&fence={a['fence']}&wait_ms=0")
        self.assertEqual((w.status, w.body["held"]), (200, True), w)
        self.assertTrue(0 < w.body["expires_in_ms"] <= 30000, w)
        busy = acquire(self.c, name, limit=1, wait_ms=0)
        self.assertEqual((busy.status, busy.body["type"]), (409, "/problems/lock_busy"), busy)
        self.assertEqual(status(self.c, name)["holders"], 1)
        self.assertEqual(release(self.c, name, a["token"]).status, 200)

        name = unique("sem-first")
        a = self.first_holder(name, limit=2, ttl_ms=30000).body
        other = acquire(self.c, name, limit=3, wait_ms=0)
        self.assertEqual((other.status, other.body["type"]), (409, "/problems/limit_mismatch"), other)
        self.assertEqual(status(self.c, name)["holders"], 1)

        name = unique("sem-first")
        a = self.first_holder(name, limit=2, ttl_ms=30000).body
        renewed = self.c.post(SEM + name + "/renew", {"token": a["token"], "ttl_ms": 60000})
        self.assertEqual(renewed.status, 200, renewed)
        self.assertEqual(renewed.body["fence"], a["fence"])
        self.assertEqual(status(self.c, name)["holders"], 1)
        self.assertEqual(release(self.c, name, a["token"]).status, 200)
        self.assertEqual(status(self.c, name)["holders"], 0)

        name = unique("sem-first")
        a = self.first_holder(name, limit=1, ttl_ms=30000).body
        r = self.c.post(f"{SEM}{name}/revoke", {"fence": a["fence"]})
        self.assertEqual((r.status, r.body), (200, {"revoked_fence": a["fence"]}), r)
        self.assertEqual(status(self.c, name)["holders"], 0)
        w = self.c.get(f"{SEM}{name}?watch=true&fence={a['fence']}&wait_ms=0")
        self.assertEqual((w.status, w.body["held"], w.body["reason"]), (200, False, "revoked"), w)
        b = acquire(self.c, name, limit=1, wait_ms=0)
        self.assertEqual(b.status, 200, b)
        self.assertEqual(release(self.c, name, b.body["token"]).status, 200)

    def test_a_first_holder_record_of_the_layout_before_is_still_read(self):
        """Gateways before the record's fence-first layout wrote a first holder's lease first
        (lua/lib_holder.lua); a slot granted by one and still held after it was replaced must stay held: status
        and another acquire count it, its renewal (which moves it into the holders' keys) and its release (the
        first try's) work. Caught: a reader of the new layout alone (the holder then reads as none: 0 holders,
        a second grant of a one-slot semaphore), a renewal that left it in the limit key unread (410)."""
        for then in ("acquire", "renew", "release"):
            name = unique("sem-before")
            key = f"fg:sm:{{{name}}}:l"
            a = self.first_holder(name, limit=1, ttl_ms=30000, owner="before").body
            with Redis() as r:
                limit, fence, granted_at, lease, ttl, max_hold, rest = r.cmd("GET", key).split(" ", 6)
                self.assertEqual((limit, fence, len(lease)), ("=1", str(a["fence"]), 32))
                before = " ".join((limit, lease, fence, ttl, max_hold, granted_at, rest))
                self.assertEqual(r.cmd("SET", key, before, "KEEPTTL"), "OK")
            self.assertEqual(status(self.c, name), {"semaphore": name, "limit": 1, "holders": 1, "waiting": 0})
            if then == "acquire":  # the full script, which moves the holder out of the limit key first
                self.assertEqual(acquire(self.c, name, limit=1, wait_ms=0).status, 409)
                self.assertEqual(status(self.c, name)["holders"], 1)
            if then == "renew":
                renewed = self.c.post(SEM + name + "/renew", {"token": a["token"], "ttl_ms": 60000})
                self.assertEqual((renewed.status, renewed.body.get("fence")), (200, a["fence"]), renewed)
                self.assertEqual(status(self.c, name)["holders"], 1)
            self.assertEqual(release(self.c, name, a["token"]).status, 200, then)
            self.assertEqual(status(self.c, name)["holders"], 0, then)

    def test_a_first_holder_ended_through_a_gateway_that_saw_contention(self):
        """A gateway that saw the name contended in the last second runs the full scripts at once
        (src/lease/contention.c), so with two gateways a first holder that one granted by its first try may
        be released, or given up, through the full script of the other. Caught (each tried): a full release
        that does not move the holder out of the limit key first (410, and the holder's key dropped), and one
        that moves it only for its own lease (a retried release of the lease before drops the holder)."""
        with Gateway() as other, other.client() as c2:
            for end in ("release", "renew then release"):
                name = unique("sem-two")
                x = acquire(c2, name, limit=1).body
                self.assertEqual(acquire(c2, name, limit=1, wait_ms=0).status, 409)  # the other gateway's hint
                self.assertEqual(release(c2, name, x["token"]).status, 200)
                a = acquire(self.c, name, limit=1, ttl_ms=30000)
                self.assertEqual(a.status, 200, a)
                with Redis() as r:
                    self.assertTrue(r.cmd("GET", f"fg:sm:{{{name}}}:l").startswith("="), "not the first try's")
                # A retried release of the lease before, through the full script, leaves the holder be.
                self.assertEqual(release(c2, name, x["token"]).status, 200)
                self.assertEqual(status(self.c, name)["holders"], 1, end)
                if end == "renew then release":
                    renewed = c2.post(SEM + name + "/renew", {"token": a.body["token"]})
                    self.assertEqual(renewed.status, 200, renewed)
                self.assertEqual(release(c2, name, a.body["token"]).status, 200, end)
                self.assertEqual(status(self.c, name)["holders"], 0, end)
                self.assertEqual(release(self.c, name, a.body["token"]).status, 200, end)  # retried

    @skip_in_cluster("it calls the scripts with the one-Redis key names")
    def test_a_cancel_or_leave_of_another_lease_leaves_a_first_holder_be(self):
        """A cancel or a leave names a lease that queued, but may arrive once the semaphore went idle and a
        first try granted its first holder, kept in the limit key (lua/lib_sem.lua): a script that then finds
        no holder nor waiter in the holders' keys forgets the semaphore's keys, and must move that holder out
        of the limit key first. Caught (each tried): a cancel or a leave that does not (the holder's key
        dropped: 0 holders, its release answers 410)."""
        gone, attach = "ab" * 16, "cd" * 16
        # The gateway loads a script at its first use: a waiter that gives up (a cancel) and one that hangs up
        # (a leave) load both.
        busy = unique("sem-load")
        held = acquire(self.c, busy, limit=1).body
        self.assertEqual(acquire(self.c, busy, limit=1, wait_ms=200).status, 409)
        c = self.gw.client(timeout=30)
        c._connection(30).sock.sendall(
            b"POST " + (SEM + busy).encode() + b"/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 33\r\n\r\n"
            b'{"limit": 1, "wait_ms": 30000}   ')
        wait_for_waiting(self.c, busy, 1)
        c.close()
        deadline = time.monotonic() + 10
        while status(self.c, busy)["waiting"] > 0:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        self.assertEqual(release(self.c, busy, held["token"]).status, 200)
        with Redis() as r:
            for script, argv in (("sem_cancel", lambda name: [name, gone, attach, "drop", "30000", "600000",
                                                                "600000", "00"]),
                                 ("sem_leave", lambda name: ["600000", gone + attach])):
                name = unique("sem-stale")
                a = self.first_holder(name, limit=1, ttl_ms=30000)
                sem_script(r, script, name, *argv(name))
                self.assertEqual(status(self.c, name)["holders"], 1, script)
                self.assertEqual(release(self.c, name, a.body["token"]).status, 200, script)

    def test_bad_input_is_a_problem_never_a_500(self):
        name = unique("sem-bad")
        cases = [({}, "invalid_field"), ({"limit": 0}, "invalid_field"), ({"limit": 100001}, "invalid_field"),
                 ({"limit": "5"}, "invalid_field"), ({"limit": 2, "ttl_ms": 5}, "invalid_field"),
                 ("{not json", "invalid_json")]
        for body, code in cases:
            r = acquire(self.c, name, **body) if isinstance(body, dict) else self.c.post(SEM + name + "/acquire", body)
            self.assertEqual(r.status, 400, (body, r))
            self.assertEqual(r.body["type"], "/problems/" + code, (body, r))
        r = self.c.post(SEM + "bad%20name/acquire", {"limit": 1})
        self.assertEqual((r.status, r.body["type"]), (400, "/problems/invalid_name"))
        lock = self.c.post("/v1/locks/" + name + "/acquire", {}).body
        r = release(self.c, name, lock["token"])  # a lock's token is not a semaphore's
        self.assertEqual((r.status, r.body["type"]), (403, "/problems/invalid_fence_token"))
        r = self.c.post(SEM + name + "/renew", {"token": "fgt1.s.1.x.y.z"})
        self.assertEqual((r.status, r.body["type"]), (403, "/problems/invalid_fence_token"))
        self.assertEqual(status(self.c, "never-used"), {"semaphore": "never-used", "limit": None, "holders": 0,
                                                         "waiting": 0})


if __name__ == "__main__":
    unittest.main()
