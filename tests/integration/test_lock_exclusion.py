# SPDX-License-Identifier: Apache-2.0
"""Mutual exclusion of locks under contention, observed from outside the gateway.

24 clients, each on its own kept-alive connection, contend for one lock through two gateways. Each
holder stays inside for 20-50 ms while the others are queued with wait_ms and re-check every poll_ms
(50 ms), so waiters are woken again and again while a holder is inside; a few clients also barge in with
wait_ms 0. Entry and exit are recorded by the clients themselves: a Python record guarded by a mutex and
a Redis counter (INCR on entry, DECR on exit) that only the clients touch. Any overlap, or a fence that
does not grow from one holder to the next, fails the test.

Owns: the mutual-exclusion property of /v1/locks. Must not: rely on the gateway's own bookkeeping (its
status endpoint) to decide whether two holders overlapped.
"""

import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis  # noqa: E402
from lock_helpers import Recorder, acquire, release, unique_name  # noqa: E402

CLIENTS = 24
BARGERS = 4  # of the clients, these try once (wait_ms 0) and retry after a pause
TARGET_ENTRIES = 300
DEADLINE_S = 120.0  # the run stops at TARGET_ENTRIES; this only bounds a loaded machine's pace
CONFIG = {"poll_ms": 50}


class MutualExclusionTest(unittest.TestCase):
    def test_no_two_holders_overlap(self):
        name = unique_name("mutex")
        counter_key = f"test:mutex-counter:{name}"
        record = Recorder()
        failures: list[str] = []
        stop = threading.Event()
        with Gateway(config=CONFIG) as gw_a, Gateway(config=CONFIG) as gw_b:

            def worker(index: int) -> None:
                gw = gw_a if index % 2 == 0 else gw_b
                who = f"client-{index}"
                barger = index < BARGERS
                rng = random.Random(index)
                try:
                    with gw.client(timeout=30) as c, Redis(timeout=30) as r:
                        while not stop.is_set():
                            body = {"ttl_ms": 10000, "wait_ms": 0 if barger else 20000, "owner": who}
                            resp = acquire(c, name, **body)
                            if resp.status == 409 and resp.body.get("type") == "/problems/lock_busy":
                                time.sleep(rng.uniform(0.005, 0.03))
                                continue
                            if resp.status != 200:
                                failures.append(f"{who}: acquire answered {resp.status} {resp.body}")
                                return
                            record.enter(who, resp.body["fence"])
                            n = r.cmd("INCR", counter_key)
                            if n != 1:
                                failures.append(f"{who}: Redis counter was {n} on entry")
                            time.sleep(rng.uniform(0.02, 0.05))
                            n = r.cmd("DECR", counter_key)
                            if n != 0:
                                failures.append(f"{who}: Redis counter was {n} on exit")
                            record.leave(who)
                            rel = release(c, name, resp.body["token"])
                            if rel.status != 200:
                                failures.append(f"{who}: release answered {rel.status} {rel.body}")
                                return
                            if record.entries >= TARGET_ENTRIES:
                                stop.set()
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(f"{who}: {type(e).__name__}: {e}")
                    stop.set()

            threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(CLIENTS)]
            started = time.monotonic()
            for t in threads:
                t.start()
            stop.wait(DEADLINE_S)
            stop.set()
            for t in threads:
                t.join(40)
            elapsed = time.monotonic() - started
            with Redis() as r:
                r.cmd("DEL", counter_key)

        self.assertEqual(record.overlaps, [], "critical sections overlapped")
        self.assertEqual(failures, [])
        self.assertGreaterEqual(record.entries, TARGET_ENTRIES,
                                f"only {record.entries} entries in {elapsed:.1f}s")


if __name__ == "__main__":
    unittest.main()
