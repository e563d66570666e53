# SPDX-License-Identifier: Apache-2.0
"""The lease janitor through a Redis outage: the give-backs it owes Redis wait for Redis, not its other work.

The lease janitor gives back orphaned grants and the leases of acquires that got no reply, and takes places
kept for a retry out of their queues, one script call each; between those it wakes parked waiters whose
deadline came. A Redis that stops answering (SIGSTOP) costs each of those calls a whole request_timeout_ms.
Here twelve acquires (wait_ms 0, no request_id) answer 503 while Redis is stopped, each leaving a lease Redis
may still grant, while a waiter parked before the stop reaches its wait_ms. Once Redis runs again, the late
acquires it then grants are given back. And a place kept for a retry whose time runs out while Redis is
stopped leaves its queue once Redis runs again. A request's own give-back that gets no reply (a grant whose
client has gone) is left to the janitor, which gives it back once Redis answers.

Broken variants caught: a janitor that gave back every due lease in turn spent twelve deadlines on them,
and the parked waiter was answered after about 13 s where its wait_ms was 3 s; a give-back that met the
outage was logged and forgotten, and the twelve locks Redis granted once it ran again stayed held for their
60 s ttl_ms, and the kept place stayed in its queue, counted in `waiting`, until its wait_ms; a grant whose
client had gone, and whose give-back got no reply, stayed held to its ttl_ms.

Owns: the lease janitor's give-backs while Redis is silent. Must not: test one request's time on a silent
Redis (test_redis_deadline.py) or an idle janitor's sleep (test_janitor_sleep.py).
"""

import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Client, Gateway, private_backends, skip_in_cluster, wait_for  # noqa: E402
from lock_helpers import raw_acquire, unique_name  # noqa: E402
from test_grant_delivery import raw_post, reset  # noqa: E402
from test_redis_deadline import gateway_behind_proxy, process_id  # noqa: E402

TIMEOUT_MS = 1000
UNANSWERED = 12  # acquires answered 503 while Redis is stopped: each leaves a lease to give back
WAIT_MS = 3000  # the parked waiter's wait, which ends while Redis is stopped
KEPT_MS = 1000  # limits.kept_place_ms: a kept place's time runs out while Redis is stopped
# The waiter's answer may take beyond its wait_ms: the janitor's liveness beat and one give-back that are
# under way as its deadline comes, its own cancel, each a deadline on a silent Redis, and a loaded machine
LATE_S = 3 * TIMEOUT_MS / 1000 + 2.0


CONFIG = {"request_timeout_ms": TIMEOUT_MS, "redis_pipeline_from": 0, "limits": {"kept_place_ms": KEPT_MS}}


@skip_in_cluster("it stops the one Redis of its own")
class JanitorOutageTest(unittest.TestCase):
    def test_give_backs_wait_for_redis_not_the_waiters(self):
        """A lock held and a waiter parked on it (WAIT_MS); Redis stopped; UNANSWERED acquires of other locks
        answer 503. The waiter answers 503 within LATE_S of its wait_ms, and once Redis runs again every lock
        it granted to those acquires late is free within seconds."""
        backends = private_backends(self, "janitor")
        with Gateway(env_overrides=backends.env, config=CONFIG) as gw:
            c = gw.client(timeout=60)
            held = unique_name("outage-held")
            self.assertEqual(c.post(f"/v1/locks/{held}/acquire", {"ttl_ms": 60000}).status, 200)
            waiter = Client(gw.url(""), timeout=60)
            waited = []

            def wait():
                started = time.monotonic()
                r = waiter.post(f"/v1/locks/{held}/acquire", {"wait_ms": WAIT_MS, "ttl_ms": 60000})
                waited.append((r, time.monotonic() - started))

            waiting = threading.Thread(target=wait)
            waiting.start()
            wait_for(lambda: c.get(f"/v1/locks/{held}").body["waiting"] == 1, what="the waiter parked")
            names = [unique_name(f"outage-{i}") for i in range(UNANSWERED)]
            clients = [Client(gw.url(""), timeout=60) for _ in names]
            for client in clients:
                self.assertEqual(client.get("/healthz").status, 200)
            answers = []
            pid = process_id(backends.redis_port)
            os.kill(pid, signal.SIGSTOP)
            try:
                burst = [threading.Thread(target=lambda k=k: answers.append(clients[k].post(
                    f"/v1/locks/{names[k]}/acquire", {"wait_ms": 0, "ttl_ms": 60000}))) for k in range(UNANSWERED)]
                for t in burst:
                    t.start()
                for t in burst:
                    t.join(60)
                waiting.join(60)
            finally:
                os.kill(pid, signal.SIGCONT)
            self.assertEqual(sorted(r.status for r in answers), [503] * UNANSWERED, answers)
            self.assertEqual(len(waited), 1, "the waiter was never answered")
            r, seconds = waited[0]
            self.assertEqual(r.status, 503, gw.why(r))
            self.assertLess(seconds, WAIT_MS / 1000 + LATE_S,
                            "the waiter was answered late: the janitor was busy with give-backs Redis did not answer")
            status = gw.client(timeout=60)
            still_held = lambda: [n for n in names if status.get(f"/v1/locks/{n}").body["held"]]  # noqa: E731
            wait_for(lambda: still_held() == [], timeout=10,
                     what="the locks Redis granted late given back once it runs again")
            for client in clients + [waiter]:
                client.close()

    def test_a_kept_place_whose_time_ran_out_in_an_outage_leaves_once_redis_answers(self):
        """A lock held; an acquire with a request_id queues and its client hangs up while Redis is stopped, so
        the janitor's take-back of its kept place, KEPT_MS later, meets the outage. Within seconds of Redis
        running again the queue is empty."""
        backends = private_backends(self, "janitor")
        with Gateway(env_overrides=backends.env, config=CONFIG) as gw:
            c = gw.client(timeout=60)
            name = unique_name("outage-kept")
            self.assertEqual(c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}).status, 200)
            gone = raw_acquire(gw.port, name, {"request_id": unique_name("rid"), "wait_ms": 60000, "ttl_ms": 60000})
            wait_for(lambda: c.get(f"/v1/locks/{name}").body["waiting"] == 1, what="the place queued")
            pid = process_id(backends.redis_port)
            os.kill(pid, signal.SIGSTOP)
            try:
                gone.close()  # the place is kept for KEPT_MS, then the janitor's give-back meets the outage
                time.sleep(KEPT_MS / 1000 + 2 * TIMEOUT_MS / 1000)
            finally:
                os.kill(pid, signal.SIGCONT)
            wait_for(lambda: c.get(f"/v1/locks/{name}").body["waiting"] == 0, timeout=5,
                     what="the kept place out of its queue once Redis answers")

    def test_a_give_back_that_got_no_reply_is_left_to_the_janitor(self):
        """An acquire (wait_ms 0) through a proxy to Redis that holds it back while its client resets; let go,
        it is granted, and the gateway gives the grant back as its answer cannot be sent. The proxy holds
        that give-back past request_timeout_ms, then its connection is cut, the give-back never run. Within
        seconds the lock is free: the janitor gave it back on a new connection."""
        name = unique_name("outage-gone")
        proxy, gateway = gateway_behind_proxy(self, name, timeout_ms=TIMEOUT_MS)
        with gateway as gw:
            c = gw.client(timeout=30)
            self.assertEqual(c.post(f"/v1/locks/{unique_name('outage-warm')}/acquire", {"ttl_ms": 1000}).status,
                             200)  # Redis knows the scripts before any is held back
            gone = raw_post(gw.port, f"/v1/locks/{name}/acquire", {"wait_ms": 0, "ttl_ms": 60000})
            self.assertTrue(proxy.held.wait(10), "the acquire was never held back")
            reset(gone)
            time.sleep(0.2)  # the reset reaches the gateway's socket before the grant's answer
            acquire_go = proxy.go
            proxy.arm()  # the give-back
            acquire_go.set()
            self.assertTrue(proxy.held.wait(10), "the give-back was never held back")
            time.sleep(TIMEOUT_MS / 1000 + 0.5)  # its call gave up
            proxy.cut()  # what it held back never reaches Redis
            proxy.let_go()
            wait_for(lambda: not c.get(f"/v1/locks/{name}").body["held"], timeout=5,
                     what="the grant given back by the janitor")


if __name__ == "__main__":
    unittest.main()
