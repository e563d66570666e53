# SPDX-License-Identifier: Apache-2.0
"""Crash recovery: nothing that dies or walks away can wedge a lock.

- a holder that never releases: its lock passes to a queued waiter within the TTL plus a small margin,
  and not before the TTL;
- a waiter whose client closes its socket mid-wait: it leaves the queue, so the next waiter gets the lock
  right after the holder releases (not after the vanished waiter's TTL);
- many waiters whose clients close at once (the gateway takes them out of the queue together): all of
  them leave, on a lock and on a semaphore, and the live waiters among them keep their order;
- a waiter with a request_id whose client hangs up keeps its place for a retry of the request_id (through
  its gateway or another), which is then served before the waiters behind it; a place nobody comes back
  for is given back at its turn at once, and leaves its queue when limits.kept_place_ms is up;
- a gateway killed with SIGKILL while its waiters are queued: a waiter of another gateway queued behind
  them gets the lock within a few seconds of the release (the dead gateway's waiter lease), not stuck,
  and a client retrying through another gateway with the same request_id starts afresh; on a lock nobody
  touches afterwards, the queue's keys expire once the last waiter's wait_ms and waiter lease are over.

Owns: liveness of /v1/locks after crashes and hang-ups. Must not: weaken safety checks to make liveness
pass (a lock that is granted early is a failure too).
"""

import json
import os
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis  # noqa: E402
from lock_helpers import (acquire, raw_acquire, read_response, release, status, unique_name,  # noqa: E402
                          wait_for_waiting)


class Waiter(threading.Thread):
    """Acquires name through gw in the background (wait_ms as given); keeps the answer and its time."""

    def __init__(self, gw: Gateway, name: str, **fields):
        super().__init__(daemon=True)
        self.gw, self.name, self.fields = gw, name, fields
        self.response = None
        self.error: Exception | None = None
        self.done_at = 0.0

    def run(self) -> None:
        try:
            with self.gw.client(timeout=90) as c:
                self.response = acquire(c, self.name, **self.fields)
        except Exception as e:  # noqa: BLE001 - inspected by the test
            self.error = e
        self.done_at = time.monotonic()


def wait_for(check, what: str, timeout: float = 30.0) -> None:
    """Polls check() until it is true; fails naming what after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        time.sleep(0.02)


class CrashRecoveryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway()
        cls.client = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.gw.stop()

    def test_holder_that_never_releases_expires_within_ttl(self):
        name = unique_name("expire")
        ttl_ms = 1500
        held = acquire(self.client, name, ttl_ms=ttl_ms)
        self.assertEqual(held.status, 200, held)
        w = Waiter(self.gw, name, ttl_ms=5000, wait_ms=20000)
        w.start()
        w.join(30)
        self.assertIsNone(w.error)
        self.assertEqual(w.response.status, 200, w.response)
        # On Redis's clock, which both leases are timed by: the holder's answer may reach this client late on a
        # loaded machine, so its arrival is no bound on when its lease ends.
        waited = (w.response.body["expires_at_ms"] - w.response.body["ttl_ms"] - held.body["expires_at_ms"]) / 1000
        self.assertGreaterEqual(waited, 0, "granted before the holder's TTL ran out")
        self.assertLess(waited, 1.5, "the expired holder kept the waiter out too long")
        self.assertGreater(w.response.body["fence"], held.body["fence"])
        self.assertEqual(release(self.client, name, held.body["token"]).status, 410)
        self.assertEqual(release(self.client, name, w.response.body["token"]).status, 200)

    def test_a_chain_of_holders_that_never_release_hands_on_at_each_expiry(self):
        """A holder and six waiters, each of which, once granted, never releases (clients that crash holding
        the lock): every lease ends by running out, and each next waiter is granted within a second of the
        lease before it ending, on a lock and on a semaphore of limit 1, though poll_ms is 6 s. The first
        three waiters look again when the holder's lease ends; a grant made at such a look rings the waiter it
        makes third. Caught (before): the waiter that had been fourth learnt its turn only at its poll, 4-6 s
        late, every third grant."""
        ttl_ms, n = 400, 6
        with Gateway(config={"poll_ms": 6000}) as gw, gw.client() as c:
            for kind, extra in (("locks", {}), ("semaphores", {"limit": 1})):
                with self.subTest(kind=kind):
                    name = unique_name("chain")
                    path = f"/v1/{kind}/{name}"
                    held = c.post(f"{path}/acquire", {"ttl_ms": 3000, **extra})  # the queue forms meanwhile
                    self.assertEqual(held.status, 200, held)
                    answers: list = [None] * n

                    def wait(i: int) -> None:
                        with gw.client(timeout=60) as wc:
                            answers[i] = wc.post(f"{path}/acquire", {"ttl_ms": ttl_ms, "wait_ms": 30000, **extra})
                    threads = []
                    for i in range(n):
                        threads.append(threading.Thread(target=wait, args=(i,), daemon=True))
                        threads[-1].start()
                        wait_for(lambda: c.get(path).body["waiting"] == i + 1, what=f"waiter {i} queued")
                    for t in threads:
                        t.join(30)
                    self.assertEqual([a.status for a in answers], [200] * n, answers)
                    fences = [a.body["fence"] for a in answers]
                    self.assertEqual(fences, sorted(fences), "granted out of order")
                    for before, after in zip([held] + answers, answers):
                        waited = after.body["expires_at_ms"] - after.body["ttl_ms"] - before.body["expires_at_ms"]
                        self.assertGreaterEqual(waited, 0, "granted before the lease before it ended")
                        self.assertLess(waited, 1000, (kind, [a.body["expires_at_ms"] for a in answers]))

    def test_waiter_that_hangs_up_leaves_the_queue(self):
        name = unique_name("hangup")
        held = acquire(self.client, name, ttl_ms=30000)
        self.assertEqual(held.status, 200, held)
        gone = raw_acquire(self.gw.port, name, {"ttl_ms": 30000, "wait_ms": 60000}, timeout=10)
        wait_for_waiting(self.client, name, 1)
        w = Waiter(self.gw, name, ttl_ms=30000, wait_ms=20000)
        w.start()
        wait_for_waiting(self.client, name, 2)
        gone.close()
        wait_for_waiting(self.client, name, 1, timeout=3)  # the vanished waiter left the queue
        released_at = time.monotonic()
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
        w.join(30)
        self.assertIsNone(w.error)
        self.assertEqual(w.response.status, 200, f"the next waiter did not get the lock: {w.response}")
        self.assertLess(w.done_at - released_at, 2.0, "the vanished waiter delayed the next one")
        st = status(self.client, name)
        self.assertEqual((st["held"], st["fence"], st["waiting"]), (True, w.response.body["fence"], 0))
        self.assertEqual(release(self.client, name, w.response.body["token"]).status, 200)

    def test_waiters_that_hang_up_together_leave_and_the_rest_keep_their_order(self):
        name = unique_name("hangups")
        held = acquire(self.client, name, ttl_ms=60000)
        self.assertEqual(held.status, 200, held)
        body = {"ttl_ms": 30000, "wait_ms": 60000}
        first = [raw_acquire(self.gw.port, name, body) for _ in range(40)]
        wait_for_waiting(self.client, name, 40)
        a = Waiter(self.gw, name, ttl_ms=30000, wait_ms=60000)
        a.start()
        wait_for_waiting(self.client, name, 41)
        second = [raw_acquire(self.gw.port, name, body) for _ in range(40)]
        wait_for_waiting(self.client, name, 81)
        b = Waiter(self.gw, name, ttl_ms=30000, wait_ms=60000)
        b.start()
        wait_for_waiting(self.client, name, 82)
        for s in first + second:
            s.close()
        wait_for_waiting(self.client, name, 2, timeout=30)  # the 80 vanished waiters left, a and b stay
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
        a.join(30)
        self.assertIsNone(a.error)
        self.assertEqual(a.response.status, 200, f"the first live waiter did not get the lock: {a.response}")
        self.assertTrue(b.is_alive(), "the second live waiter was answered before the first released")
        self.assertEqual(release(self.client, name, a.response.body["token"]).status, 200)
        b.join(30)
        self.assertIsNone(b.error)
        self.assertEqual(b.response.status, 200, b.response)
        self.assertGreater(b.response.body["fence"], a.response.body["fence"])
        self.assertEqual(release(self.client, name, b.response.body["token"]).status, 200)

    def test_semaphore_waiters_that_hang_up_together_leave(self):
        name = unique_name("sem-hangups")
        path = f"/v1/semaphores/{name}"
        held = self.client.post(path + "/acquire", {"limit": 1, "ttl_ms": 60000})
        self.assertEqual(held.status, 200, held)
        body = {"limit": 1, "ttl_ms": 30000, "wait_ms": 60000}
        socks = [raw_acquire(self.gw.port, name, body, kind="semaphores") for _ in range(50)]
        wait_for(lambda: self.client.get(path).body["waiting"] == 50, "50 semaphore waiters queued")
        for s in socks:
            s.close()
        wait_for(lambda: self.client.get(path).body["waiting"] == 0, "the semaphore's queue emptied")
        st = self.client.get(path).body
        self.assertEqual((st["holders"], st["waiting"]), (1, 0))
        self.assertEqual(self.client.post(path + "/release", {"token": held.body["token"]}).status, 200)
        self.assertEqual(self.client.get(path).body["holders"], 0)

    def kept_place_then_retry(self, retry_gw: Gateway, kind: str = "locks", hang_gw: Gateway | None = None,
                              linger: float = 0.5) -> None:
        """A waiter with a request_id hangs up (queued through hang_gw) between the holder and a second
        waiter; its retry (through retry_gw, waiting linger seconds before the holder releases) must get the
        lock or slot first, the second waiter after it."""
        hang_gw = hang_gw or self.gw
        name = unique_name("kept-" + kind)
        path = f"/v1/{kind}/{name}"
        extra = {"limit": 1} if kind == "semaphores" else {}
        held = self.client.post(path + "/acquire", {"ttl_ms": 30000, **extra})
        self.assertEqual(held.status, 200, held)
        waiting = (lambda: self.client.get(path).body["waiting"])
        rid = unique_name("rid")
        gone = raw_acquire(hang_gw.port, name, {"ttl_ms": 30000, "wait_ms": 30000, "request_id": rid, **extra},
                           kind=kind)
        wait_for(lambda: waiting() == 1, "the first waiter queued")
        behind = Waiter(self.gw, name, ttl_ms=30000, wait_ms=40000) if kind == "locks" else None
        behind_sock = None
        if behind:
            behind.start()
        else:
            behind_sock = raw_acquire(self.gw.port, name, {"ttl_ms": 30000, "wait_ms": 40000, **extra}, kind=kind)
        wait_for(lambda: waiting() == 2, "the second waiter queued")
        gone.close()
        time.sleep(1.0)  # a hang-up is seen within milliseconds: a place not kept is gone by now
        self.assertEqual(waiting(), 2, "the waiter that hung up left its place")
        with retry_gw.client(timeout=60) as c:
            retry = {}
            t = threading.Thread(target=lambda: retry.update(
                r=c.post(path + "/acquire", {"ttl_ms": 30000, "wait_ms": 30000, "request_id": rid, **extra})),
                daemon=True)
            t.start()
            time.sleep(linger)
            self.assertEqual(waiting(), 2, "the retry did not take the kept place over")
            self.assertEqual(self.client.post(path + "/release", {"token": held.body["token"]}).status, 200)
            t.join(30)
            self.assertEqual(retry["r"].status, 200, f"the retry was not served first: {retry['r']}")
            self.assertGreater(retry["r"].body["fence"], held.body["fence"])
            if behind:
                self.assertTrue(behind.is_alive(), "the waiter behind was served before the kept place")
            self.assertEqual(self.client.post(path + "/release", {"token": retry["r"].body["token"]}).status, 200)
        if behind:
            behind.join(30)
            self.assertEqual(behind.response.status, 200, behind.response)
            self.assertGreater(behind.response.body["fence"], retry["r"].body["fence"])
            self.assertEqual(release(self.client, name, behind.response.body["token"]).status, 200)
        else:
            status_code, raw = read_response(behind_sock)
            self.assertEqual(status_code, 200, raw)
            token = json.loads(raw.partition(b"\r\n\r\n")[2])["token"]
            self.assertEqual(self.client.post(path + "/release", {"token": token}).status, 200)
            behind_sock.close()

    def test_retry_after_a_hang_up_keeps_its_place(self):
        """API.md: the same request_id retried after a timeout keeps its place in the queue. Caught: a waiter
        that left its queue as its client hung up (the waiter behind it was served first)."""
        self.kept_place_then_retry(self.gw)

    def test_retry_through_another_gateway_keeps_its_place(self):
        """The retry through another gateway outlives the place's time on the first, whose reap must leave
        the place the retry took over alone. Caught: a reap that dropped whatever waited in the place."""
        hang, other = Gateway(config={"limits": {"kept_place_ms": 1500}}), Gateway()
        try:
            self.kept_place_then_retry(other, hang_gw=hang, linger=3.0)
        finally:
            hang.stop()
            other.stop()

    def test_a_semaphore_waiter_keeps_its_place_for_a_retry(self):
        self.kept_place_then_retry(self.gw, kind="semaphores")

    def test_a_kept_place_nobody_comes_back_for_is_given_back_at_its_turn(self):
        """The turn of a kept place whose client never came back goes to the waiter behind it at once (the
        grant finds no waiter and is given back), not after the lease's TTL; a retry after that starts
        afresh. Caught: a kept place whose grant was held for the retry (the waiter behind waited 30 s)."""
        name = unique_name("kept-turn")
        held = acquire(self.client, name, ttl_ms=30000)
        rid = unique_name("rid")
        gone = raw_acquire(self.gw.port, name, {"ttl_ms": 30000, "wait_ms": 30000, "request_id": rid})
        wait_for_waiting(self.client, name, 1)
        behind = Waiter(self.gw, name, ttl_ms=30000, wait_ms=40000)
        behind.start()
        wait_for_waiting(self.client, name, 2)
        gone.close()
        time.sleep(0.5)
        wait_for_waiting(self.client, name, 2, timeout=1)
        released_at = time.monotonic()
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
        behind.join(30)
        self.assertEqual(behind.response.status, 200, behind.response)
        self.assertLess(behind.done_at - released_at, 3.0, "the kept place held the lock up")
        late = acquire(self.client, name, ttl_ms=30000, request_id=rid)
        self.assertEqual((late.status, late.body["type"]), (409, "/problems/lock_busy"), late)
        self.assertEqual(release(self.client, name, behind.response.body["token"]).status, 200)

    def test_a_retry_through_another_gateway_keeps_the_grant_it_was_answered(self):
        """A grant that comes to a kept place as its client goes is given back only from its own attempt: a
        retry through another gateway that took the place over and was granted at once keeps its lease.
        Caught: the hung-up wait's give-back, 200 ms later, freeing the retry's grant (a fresh acquire then
        got the lock, and the retry's renewal answered 410)."""
        other = Gateway()
        try:
            with other.client(timeout=60) as oc:
                name = unique_name("kept-grant")
                held = acquire(oc, name, ttl_ms=30000)
                rid = unique_name("rid")
                gone = raw_acquire(self.gw.port, name, {"ttl_ms": 30000, "wait_ms": 30000, "request_id": rid})
                wait_for_waiting(self.client, name, 1)
                gone.close()
                time.sleep(0.03)
                retry = {}
                t = threading.Thread(target=lambda: retry.update(r=acquire(
                    other.client(timeout=60), name, ttl_ms=30000, wait_ms=30000, request_id=rid)), daemon=True)
                t.start()
                time.sleep(0.04)
                self.assertEqual(release(oc, name, held.body["token"]).status, 200)
                t.join(30)
                self.assertEqual(retry["r"].status, 200, retry["r"])
                time.sleep(0.6)  # past the hung-up wait's give-back
                late = acquire(self.client, name, ttl_ms=30000)
                self.assertEqual(late.status, 409, f"the retry's lock was given back: {late}")
                renewed = oc.post(f"/v1/locks/{name}/renew", {"token": retry["r"].body["token"]})
                self.assertEqual(renewed.status, 200, renewed)
                self.assertEqual(release(oc, name, retry["r"].body["token"]).status, 200)
        finally:
            other.stop()

    def test_a_kept_place_beside_a_lock_set_that_hangs_up_is_kept(self):
        """A lock set's waiter, which leaves, and a waiter with a request_id, which keeps its place and leaves
        when its time is up, hang up together. (Whether their resets come in one batch of the janitor is
        the machine's timing; unit.park hang_up_beside_another_kind holds the batch's answers apart.)"""
        gw = Gateway(config={"limits": {"kept_place_ms": 1000}})
        try:
            with gw.client() as c:
                x, y = unique_name("kept-x"), unique_name("kept-y")
                hx, hy = acquire(c, x, ttl_ms=30000), acquire(c, y, ttl_ms=30000)
                body = json.dumps({"names": [y], "ttl_ms": 30000, "wait_ms": 30000}).encode()
                set_sock = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
                set_sock.sendall(f"POST /v1/locksets/acquire HTTP/1.1\r\nHost: 127.0.0.1:{gw.port}\r\n"
                                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                                 + body)
                kept = raw_acquire(gw.port, x, {"ttl_ms": 30000, "wait_ms": 30000, "request_id": unique_name("rid")})
                wait_for_waiting(c, y, 1)
                wait_for_waiting(c, x, 1)
                for s in (set_sock, kept):  # reset both at once: one batch
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.close()
                wait_for_waiting(c, y, 0, timeout=5)
                wait_for_waiting(c, x, 0, timeout=10)  # the kept place left when its time was up
                for name, h in ((x, hx), (y, hy)):
                    self.assertEqual(release(c, name, h.body["token"]).status, 200)
        finally:
            gw.stop()

    def test_a_kept_place_leaves_when_its_time_is_up(self):
        """limits.kept_place_ms bounds how long a place waits for its retry, also when a retry that would not
        wait (wait_ms 0) came meanwhile; 0 keeps none. Caught: a kept place that stayed queued past its
        time, and one a wait_ms 0 retry left in the queue for good."""
        for kept_ms, retry_at_once in ((1500, False), (1500, True), (0, False)):
            with self.subTest(kept_place_ms=kept_ms, retry_at_once=retry_at_once):
                gw = Gateway(config={"limits": {"kept_place_ms": kept_ms}})
                try:
                    with gw.client() as c:
                        name = unique_name("kept-time")
                        held = acquire(c, name, ttl_ms=30000)
                        rid = unique_name("rid")
                        gone = raw_acquire(gw.port, name, {"ttl_ms": 30000, "wait_ms": 30000, "request_id": rid})
                        wait_for_waiting(c, name, 1)
                        gone.close()
                        closed_at = time.monotonic()
                        if retry_at_once:
                            time.sleep(0.3)
                            busy = acquire(c, name, ttl_ms=30000, request_id=rid)
                            self.assertEqual(busy.status, 409, busy)
                        wait_for_waiting(c, name, 0, timeout=10)
                        left_after = time.monotonic() - closed_at
                        if kept_ms:
                            self.assertGreater(left_after, 1.2, "the place was not kept")
                        else:
                            self.assertLess(left_after, 1.0, "a place was kept with kept_place_ms 0")
                        self.assertEqual(release(c, name, held.body["token"]).status, 200)
                finally:
                    gw.stop()

    def test_killed_gateway_does_not_wedge_the_queue(self):
        name = unique_name("killed")
        held = acquire(self.client, name, ttl_ms=30000)
        self.assertEqual(held.status, 200, held)
        doomed = Gateway(config={"waiter_lease_ms": 1000})  # its waiters count as dead 1 s after its last beat
        dead_waiters = [Waiter(doomed, name, ttl_ms=30000, wait_ms=60000) for _ in range(4)]
        for i, d in enumerate(dead_waiters):
            d.start()
            wait_for_waiting(self.client, name, i + 1)
        w = Waiter(self.gw, name, ttl_ms=30000, wait_ms=40000)
        w.start()
        wait_for_waiting(self.client, name, len(dead_waiters) + 1)
        doomed.kill()
        released_at = time.monotonic()
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
        w.join(60)
        self.assertIsNone(w.error)
        self.assertEqual(w.response.status, 200, f"the live waiter did not get the lock: {w.response}")
        # the dead gateway's waiter lease (1 s) + one poll (2 s) + margin for a loaded machine
        self.assertLess(w.done_at - released_at, 8.0, "the dead gateway's waiters wedged the queue")
        self.assertEqual(release(self.client, name, w.response.body["token"]).status, 200)
        for d in dead_waiters:
            d.join(5)

    def test_retry_after_its_gateway_died_starts_afresh(self):
        """A request_id queued on a gateway that died, and dropped from the queue for it, never got a
        lease: its retry through another gateway is a new acquire, not 410 lease_lost."""
        name = unique_name("retry-dead")
        held = acquire(self.client, name, ttl_ms=30000)
        doomed = Gateway(config={"waiter_lease_ms": 1000})
        d = Waiter(doomed, name, ttl_ms=30000, wait_ms=60000, request_id="crash-retry")
        d.start()
        wait_for_waiting(self.client, name, 1)
        doomed.kill()
        time.sleep(2.0)  # past the dead gateway's waiter lease (1 s), with a second to spare
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)  # drops the dead waiter
        retry = acquire(self.client, name, request_id="crash-retry")
        self.assertEqual(retry.status, 200, retry)
        self.assertGreater(retry.body["fence"], held.body["fence"])
        again = acquire(self.client, name, request_id="crash-retry")
        self.assertEqual((again.status, again.body["token"]), (200, retry.body["token"]))
        self.assertEqual(release(self.client, name, retry.body["token"]).status, 200)
        d.join(5)


    def test_a_killed_gateway_leaves_no_queue_behind(self):
        """A gateway killed with SIGKILL while its waiters are queued, on a lock nobody touches afterwards: every key
        of the lock has a time to live, the queue's (the queue, its waiters' records, its tickets) lasting until the
        last waiter's wait_ms and the waiter lease of its gateway are over, and at most a waiter lease more, so
        status and listings stop showing the dead waiters then. Two waiters: the first joins through the full
        acquire script, the second, on a name its gateway saw held, through the lean queue join, and waits longer,
        so its join must lengthen the queue's life. (Before the fix the queue's keys had no time to live: status
        answered waiting 2 until somebody next acquired the lock.)"""
        name = unique_name("dead-queue")
        # The holder outlives both joins even on a loaded machine (a 1 s lease ran out before the second, which
        # was then granted, not queued), and its key is gone well within the look for every key below.
        held = acquire(self.client, name, ttl_ms=3000)
        self.assertEqual(held.status, 200, held)
        keys = [f"fg:lk:{{{name}}}:{suffix}" for suffix in "hqwtrenv"]
        queue_keys = keys[1:4]
        doomed = Gateway(config={"waiter_lease_ms": 1000})
        try:
            dead = Waiter(doomed, name, ttl_ms=5000, wait_ms=500)
            dead.start()
            wait_for_waiting(self.client, name, 1)
            sent = time.monotonic()
            longer = Waiter(doomed, name, ttl_ms=5000, wait_ms=2000)
            longer.start()
            wait_for_waiting(self.client, name, 2)
        finally:
            doomed.kill()
        with Redis() as r:
            ttls = {k: r.cmd("PTTL", k) for k in keys if r.cmd("EXISTS", k) == 1}
            looked = time.monotonic()
            self.assertTrue(set(queue_keys) <= ttls.keys(), ttls)
            self.assertTrue(all(ttl > 0 for ttl in ttls.values()), f"keys of {name} without a time to live: {ttls}")
            # The longer wait and the waiter lease from the second join on, on Redis's clock, and at most a waiter
            # lease more; the join came after `sent` and the look before `looked`.
            for k in queue_keys:
                self.assertGreaterEqual(ttls[k], 2000 + 1000 - (looked - sent) * 1000, (k, ttls))
                self.assertLessEqual(ttls[k], 2000 + 2 * 1000, (k, ttls))
            wait_for(lambda: not any(r.cmd("EXISTS", k) for k in keys), what=f"every key of {name} gone",
                     timeout=10.0)
        self.assertEqual(status(self.client, name)["waiting"], 0)
        listed = self.client.get(f"/v1/locks?prefix={name}")
        self.assertEqual(listed.status, 200, listed)
        self.assertEqual(listed.body["items"], [], listed)
        dead.join(5)
        longer.join(5)


if __name__ == "__main__":
    unittest.main()
