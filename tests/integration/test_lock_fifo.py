# SPDX-License-Identifier: Apache-2.0
"""Strict FIFO: waiters are granted the lock in the order Redis saw them arrive.

A holder takes the lock; then waiters are started one at a time, alternating between two gateways, each
only after GET status shows the previous one queued (waiting == n), so the arrival order at Redis is
known. When the holder releases, each waiter records the moment it got the lock in its own record, holds
briefly and releases; the grant order must equal the arrival order.

A lock whose holder ran out while others wait is not free for a newcomer: the first waiter gets it, even
when its gateway is too busy to look just then. (Caught: an acquire that took a lock it found without a
holder without asking whether anybody waits.) Nor is a lock released while somebody waits: the release hands
it to the first waiter in the same step, even when the waiter's gateway looks at nothing just then. (Caught:
a first try of the release that ended the lease without asking whether anybody waits.)

Lock sets wait in the same queues: waiters that alternate between a single lock, a set whose first lock is
the queue's and a set that holds another lock first are granted in arrival order too. (Caught: a set's
re-check that asked as a fresh attempt, which queued the set again at the back.)

Owns: the FIFO property of /v1/locks and of the sets' turns in its queues, across gateways. Must not: infer the order from the gateway's
status endpoint (it only gates when to start the next waiter).
"""

import contextlib
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, wait_for  # noqa: E402
from lock_helpers import acquire, release, status, unique_name, wait_for_waiting  # noqa: E402

WAITERS = 10
CONFIG = {"poll_ms": 100}


class FifoTest(unittest.TestCase):
    def run_queue(self, gateways: list, sets: bool = False) -> None:
        """sets: every second and third waiter asks for a lock set instead: the queue's lock and one of
        its own, which comes after it in the global order or (every third) before it."""
        name = unique_name("fifo")
        order: list[int] = []
        order_lock = threading.Lock()
        failures: list[str] = []
        with gateways[0].client() as holder_client, gateways[0].client() as watcher:
            held = acquire(holder_client, name, ttl_ms=30000)
            self.assertEqual(held.status, 200, held)

            def take(c, index: int):
                """The waiter's acquire; returns its answer and the call that gives it back."""
                body = {"ttl_ms": 30000, "wait_ms": 40000, "owner": f"w{index}"}
                if not sets or index % 3 == 0:
                    r = acquire(c, name, **body)
                    return r, lambda: release(c, name, r.body["token"])
                own = f"{name}-{index}" if index % 3 == 1 else unique_name("0set")
                r = c.post("/v1/locksets/acquire", {"names": [name, own], **body})
                return r, lambda: c.post("/v1/locksets/release",
                                         {"tokens": [x["token"] for x in r.body["locks"]]})

            def waiter(index: int) -> None:
                try:
                    with gateways[index % len(gateways)].client(timeout=60) as c:
                        r, give_back = take(c, index)
                        if r.status != 200:
                            failures.append(f"waiter {index}: {r.status} {r.body}")
                            return
                        with order_lock:
                            order.append(index)
                        time.sleep(0.03)
                        rel = give_back()
                        if rel.status != 200:
                            failures.append(f"waiter {index}: release {rel.status} {rel.body}")
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(f"waiter {index}: {type(e).__name__}: {e}")

            threads = []
            for i in range(WAITERS):
                t = threading.Thread(target=waiter, args=(i,), daemon=True)
                t.start()
                threads.append(t)
                wait_for_waiting(watcher, name, i + 1)
            time.sleep(0.5)  # every waiter re-checks a few times (poll_ms) while the holder holds
            self.assertEqual(release(holder_client, name, held.body["token"]).status, 200)
            for t in threads:
                t.join(60)
        self.assertEqual(failures, [])
        self.assertEqual(order, list(range(WAITERS)), "grants out of arrival order")

    def test_fifo_one_gateway(self):
        with Gateway(config=CONFIG) as gw:
            self.run_queue([gw])

    def test_fifo_across_gateways(self):
        with Gateway(config=CONFIG) as gw_a, Gateway(config=CONFIG) as gw_b:
            self.run_queue([gw_a, gw_b])

    def test_fifo_with_lock_sets_among_the_waiters(self):
        with Gateway(config=CONFIG) as gw_a, Gateway(config=CONFIG) as gw_b:
            self.run_queue([gw_a, gw_b], sets=True)

    @contextlib.contextmanager
    def waiter_on_a_stopped_gateway(self, name: str, holder_ttl_ms: int):
        """A holder of lock name (lease holder_ttl_ms) through one gateway and a waiter queued through a
        second one, which is stopped (SIGSTOP) while the block runs, so it looks at nothing meanwhile: only
        a script run by somebody else can grant its waiter the lock. Yields a client of the first gateway
        and the holder's answer; afterwards the waiter must have got the lock."""
        config = {"poll_ms": 100, "waiter_lease_ms": 10000}
        with Gateway(config=config) as gw_a, Gateway(config=config) as gw_b, gw_a.client() as c:
            held = acquire(c, name, ttl_ms=holder_ttl_ms)
            self.assertEqual(held.status, 200, held)
            got: list = []

            def wait() -> None:
                with gw_b.client(timeout=60) as w:
                    got.append(acquire(w, name, wait_ms=30000, ttl_ms=30000))

            waiter = threading.Thread(target=wait, daemon=True)
            waiter.start()
            wait_for_waiting(c, name, 1)
            gw_b.signal(signal.SIGSTOP)
            try:
                yield c, held
            finally:
                gw_b.signal(signal.SIGCONT)
            waiter.join(30)
            self.assertEqual(got[0].status, 200, got)
            self.assertEqual(release(c, name, got[0].body["token"]).status, 200)

    def test_expired_holder_goes_to_the_waiter_not_to_a_newcomer(self):
        name = unique_name("fifo-expired")
        # The holder's lease outlasts the waiter's queueing through the second gateway, however loaded the machine.
        with self.waiter_on_a_stopped_gateway(name, 3000) as (c, held), Redis() as r:
            def redis_ms() -> int:
                seconds, micros = r.cmd("TIME")
                return int(seconds) * 1000 + int(micros) // 1000

            # the holder's lease ran out, on Redis's clock
            wait_for(lambda: redis_ms() > held.body["expires_at_ms"] + 300, what="the holder's lease to run out")
            self.assertEqual(acquire(c, name).status, 409, "a newcomer took the lock its waiter was due")
            self.assertTrue(status(c, name)["held"], "the waiter was not granted the lock")

    def test_release_hands_the_lock_to_the_waiter_in_the_same_step(self):
        name = unique_name("fifo-release")
        with self.waiter_on_a_stopped_gateway(name, 30000) as (c, held):
            self.assertEqual(release(c, name, held.body["token"]).status, 200)
            self.assertTrue(status(c, name)["held"], "the release left the lock free with a waiter queued")
            self.assertEqual(acquire(c, name).status, 409, "a newcomer took the lock its waiter was due")

if __name__ == "__main__":
    unittest.main()
