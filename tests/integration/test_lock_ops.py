# SPDX-License-Identifier: Apache-2.0
"""The lock side of operations: SIGTERM drains waiters with 503 and exits 0, without waiting for a request
whose body stopped arriving; the fence sequence stays above every fence storage has seen after Redis loses
its data; /readyz follows Redis going down and coming back; a parked watch stays parked through a Redis
outage.

Owns: those behaviours. Must not: leave Redis stopped or Postgres holding test fences (each test
restores what it changed).
"""

import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, flush_redis, metric, psql, services, skip_in_cluster, wait_for  # noqa: E402
from lock_helpers import acquire, assert_problem, release, status, unique_name, wait_for_waiting  # noqa: E402


class DrainTest(unittest.TestCase):
    def test_sigterm_answers_waiters_503_and_exits_zero(self):
        name = unique_name("drain")
        with Gateway() as other:
            gw = Gateway()
            with gw.client() as c:
                held = acquire(c, name, ttl_ms=30000)
                self.assertEqual(held.status, 200, held)
            out: list = []

            def wait():
                with gw.client(timeout=30) as c:
                    out.append(acquire(c, name, wait_ms=60000))

            t = threading.Thread(target=wait, daemon=True)
            t.start()
            with other.client() as watcher:
                wait_for_waiting(watcher, name, 1)
                started = time.monotonic()
                code = gw.stop(timeout=15)
                t.join(10)
                self.assertEqual(code, 0)
                self.assertLess(time.monotonic() - started, 10, "the drain took too long")
                self.assertEqual(len(out), 1)
                assert_problem(self, out[0], 503, "backend_unavailable")
                st = status(watcher, name)
                self.assertEqual((st["held"], st["waiting"]), (True, 0), "the drained waiter stayed queued")
                self.assertEqual(release(watcher, name, held.body["token"]).status, 200)

    def test_a_request_whose_body_stalls_does_not_hold_the_drain(self):
        """Headers with a Content-Length, part of the body, then nothing while the connection stays open
        (a proxy whose client went away mid-request): the drain waited for it until its 10 s cap, and the
        gateway exited past the 10 s a supervisor gives it. Now a connection awaiting its request, or the
        rest of one, is closed once nothing arrives on it for a moment of the drain."""
        gw = Gateway()
        with socket.create_connection(("127.0.0.1", gw.port), timeout=15) as s:
            s.sendall(b"POST /v1/locks/stalled/renew HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"token\"")
            # The stalled request is in flight beside the /metrics request asking.
            wait_for(lambda: metric(gw, "fencegate_http_requests_in_flight") >= 2, timeout=5,
                     what="the stalled request in flight")
            started = time.monotonic()
            code = gw.stop(timeout=15)
            self.assertEqual(code, 0)
            self.assertLess(time.monotonic() - started, 5, "the drain waited for the stalled body")
            self.assertEqual(s.recv(4096), b"", "the stalled request was answered")


class FenceRecoveryTest(unittest.TestCase):
    RESOURCE = "test:lock-fence-recovery"

    def tearDown(self):
        psql("DELETE FROM fencegate.resource_fences WHERE resource = :'r'", {"r": self.RESOURCE})

    def test_fences_stay_above_stored_fences_after_flushall(self):
        with Gateway() as gw, gw.client() as c:
            name = unique_name("fence")
            first = acquire(c, name)
            self.assertEqual(first.status, 200, first)
            self.assertEqual(release(c, name, first.body["token"]).status, 200)
            stored = first.body["fence"] + 1_000_000
            psql("INSERT INTO fencegate.resource_fences (resource, fence) VALUES (:'r', :'f')",
                 {"r": self.RESOURCE, "f": stored})
            flush_redis()
            after = acquire(c, name)
            self.assertEqual(after.status, 200, after)
            self.assertGreater(after.body["fence"], stored)
            again = acquire(c, unique_name("fence"))
            self.assertGreater(again.body["fence"], after.body["fence"])
            self.assertEqual(release(c, name, after.body["token"]).status, 200)


class ReadinessTest(unittest.TestCase):
    @skip_in_cluster("it stops the one test Redis; the cluster lab kills primaries itself")
    def test_readyz_follows_redis(self):
        with Gateway() as gw, gw.client(timeout=15) as c:
            self.assertEqual(c.get("/readyz").status, 200)
            services("stop-redis")
            try:
                r = wait_for(lambda: (lambda x: x if x.status == 503 else None)(c.get("/readyz")),
                             timeout=10, what="/readyz 503 while Redis is down")
                problem = assert_problem(self, r, 503, "backend_unavailable")
                self.assertEqual(problem.get("redis"), "down")
                assert_problem(self, acquire(c, unique_name()), 503, "backend_unavailable")
            finally:
                services("start-redis")
            wait_for(lambda: c.get("/readyz").status == 200, timeout=15, what="/readyz 200 after Redis is back")
            name = unique_name()
            r = acquire(c, name)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(release(c, name, r.body["token"]).status, 200)


class WatchOutageTest(unittest.TestCase):
    @skip_in_cluster("it stops the one test Redis; cluster.split parks a watch through a split slot")
    def test_a_parked_watch_stays_parked_through_a_redis_outage(self):
        """A watch that has seen its lease is not answered 503 by a look that meets Redis down (with poll_ms
        100 it looks about every 100 ms, then every 200 ms while Redis is down); it is told the lease's end
        once Redis is back. A watch whose deadline falls in the outage answers 503 then, not before; a new
        watch answers 503 at once. Broken variant caught: a watch answering every failed look (the first
        look's rule) answered 503 within 0.1 s of the stop."""
        with Gateway(config={"poll_ms": 100}) as gw, gw.client(timeout=30) as c:
            name = unique_name("watch-outage")
            held = acquire(c, name, ttl_ms=60000)
            self.assertEqual(held.status, 200, held)
            path = f"/v1/locks/{name}?watch=true&fence={held.body['fence']}"
            told: dict[str, tuple] = {}

            def watch(key: str, wait_ms: int) -> threading.Thread:
                def run():
                    started = time.monotonic()
                    with gw.client(timeout=60) as wc:
                        r = wc.get(f"{path}&wait_ms={wait_ms}")
                    told[key] = (r, time.monotonic() - started)
                thread = threading.Thread(target=run, daemon=True)
                thread.start()
                return thread

            long_watch, short_watch = watch("long", 30000), watch("short", 4000)
            wait_for(lambda: metric(gw, "fencegate_watches") == 2, what="both watches parked")
            services("stop-redis")
            try:
                time.sleep(1.0)
                # Stopping Redis may take seconds on a loaded machine: the short watch's deadline may have come.
                early = {key: waited for key, (_, waited) in list(told.items()) if key == "long" or waited < 3.9}
                self.assertEqual(early, {}, "a parked watch was answered while Redis was down")
                started = time.monotonic()
                assert_problem(self, c.get(f"{path}&wait_ms=5000"), 503, "backend_unavailable")
                self.assertLess(time.monotonic() - started, 2, "a new watch did not answer the outage at once")
                short_watch.join(10)
                r, waited = told.pop("short")
                assert_problem(self, r, 503, "backend_unavailable")
                self.assertGreaterEqual(waited, 3.9, "the watch with wait_ms 4000 answered before its deadline")
                self.assertEqual(told, {}, "the long watch was answered while Redis was down")
            finally:
                services("start-redis")
            wait_for(lambda: c.get("/readyz").status == 200, timeout=15, what="/readyz 200 after Redis is back")
            self.assertEqual(release(c, name, held.body["token"]).status, 200)
            long_watch.join(10)
            r, _ = told.pop("long")
            self.assertEqual((r.status, r.body.get("held"), r.body.get("reason")), (200, False, "released"), r)


if __name__ == "__main__":
    unittest.main()
