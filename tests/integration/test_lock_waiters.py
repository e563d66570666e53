# SPDX-License-Identifier: Apache-2.0
"""Naming the waiters: GET /v1/locks/{name}?waiters=N (and on semaphores) lists the first N waiters in
queue order, each with its owner and since_ms, the Redis time it joined the queue.

Two waiters are queued one after the other behind a holder; the status read must list them in that order
with their owners, with a since that is not before the test began, not in the future, not decreasing
along the queue, and unchanged by the waiters' repeated acquire calls (each re-poll rewrites the waiter
record). Without the query the answer has no "waiters"; an out-of-range count is 400 invalid_field.
Broken variant caught (tried, then reverted): an acquire that stamps since afresh on every re-poll.

Owns: the waiters listing of the status reads. Must not: infer the grant order (test_lock_fifo.py does).
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway  # noqa: E402
from lock_helpers import assert_problem, unique_name  # noqa: E402

CONFIG = {"poll_ms": 100}
OWNERS = ["first <b>waiter</b>", "second \"waiter\""]


class WaitersTest(unittest.TestCase):
    def queue_two(self, gw: Gateway, route: str, body: dict) -> None:
        began_ms = time.time() * 1000
        with gw.client() as c:
            held = c.post(f"{route}/acquire", {**body, "ttl_ms": 30000, "owner": "holder"})
            self.assertEqual(held.status, 200, held)
            grants: list = []

            def waiter(owner: str) -> None:
                with gw.client(timeout=60) as w:
                    r = w.post(f"{route}/acquire", {**body, "ttl_ms": 30000, "wait_ms": 30000, "owner": owner},
                               timeout=60)
                    grants.append(r)
                    if r.status == 200:
                        w.post(f"{route}/release", {"token": r.body["token"]})

            threads = []
            for i, owner in enumerate(OWNERS):
                t = threading.Thread(target=waiter, args=(owner,), daemon=True)
                t.start()
                threads.append(t)
                deadline = time.monotonic() + 15
                while c.get(route).body["waiting"] != i + 1:
                    self.assertLess(time.monotonic(), deadline, "waiter never queued")
                    time.sleep(0.02)

            plain = c.get(route)
            self.assertEqual(plain.status, 200, plain)
            self.assertNotIn("waiters", plain.body)
            listed = c.get(f"{route}?waiters=10")
            self.assertEqual(listed.status, 200, listed)
            now_ms = time.time() * 1000
            waiters = listed.body["waiters"]
            self.assertEqual([w["owner"] for w in waiters], OWNERS, listed.body)
            since = [w["since_ms"] for w in waiters]
            for s in since:
                self.assertGreaterEqual(s, began_ms - 5, f"since before the test began: {since}, {began_ms}")
                self.assertLessEqual(s, now_ms + 5, f"since in the future: {since}, {now_ms}")
            self.assertLessEqual(since[0], since[1])

            time.sleep(0.4)  # several re-polls (poll_ms) rewrite each waiter's record
            again = c.get(f"{route}?waiters=1").body["waiters"]
            self.assertEqual(again, waiters[:1], "a re-poll moved the first waiter's since")
            assert_problem(self, c.get(f"{route}?waiters=101"), 400, "invalid_field")
            assert_problem(self, c.get(f"{route}?waiters=x"), 400, "invalid_field")

            self.assertEqual(c.post(f"{route}/release", {"token": held.body["token"]}).status, 200)
            for t in threads:
                t.join(60)
        self.assertEqual([g.status for g in grants], [200, 200], grants)

    def test_lock_waiters_named_in_queue_order(self):
        with Gateway(config=CONFIG) as gw:
            self.queue_two(gw, f"/v1/locks/{unique_name('waiters')}", {})

    def test_semaphore_waiters_named_in_queue_order(self):
        with Gateway(config=CONFIG) as gw:
            self.queue_two(gw, f"/v1/semaphores/{unique_name('waiters')}", {"limit": 1})


if __name__ == "__main__":
    unittest.main()
