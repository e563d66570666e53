# SPDX-License-Identifier: Apache-2.0
"""The eviction-policy check of a cluster node the gateway connects to after start-up (docs/cluster.md, "The
gateway's client"): `CONFIG GET maxmemory-policy` on every new connection to a primary, a warning when the node
may evict. Its cluster is one primary serving every slot, with `maxmemory-policy allkeys-lru` (no `maxmemory`:
nothing is ever evicted) and announcing a proxy's port (harness.TcpProxy) as its address, so every connection the
gateway makes to it goes through the proxy, which cuts them all (a network failure) to make the gateway connect
anew, and holds back what a connection sends from the check's `CONFIG GET` on.

1. A check that gets no answer (the node stalls while the connection is made) makes no connection: the call it
   was made for fails by its deadline, and the next request connects anew (checked and warned about) and is
   answered at once. Caught before the fix: the connection was kept with its check unanswered and the next
   calls' scripts went out on it, held behind the check: the next request answered 503 after a whole deadline
   (request_timeout_ms 2000: 2.0 s), or, when a call of the gateway's own had made the connection, waited until
   that connection's first batch was a deadline late (1.9 s). A node that answers again late would have run
   those scripts and the requests still answered 503: hiredis reads nothing more on a connection that timed
   out.
2. A check that Redis refuses (the gateway's user may not run `CONFIG`) is no failure: the connection is used,
   the request answered at once, and nothing is warned about.
3. A node that answers a byte at a time (the proxy passes one every 150 ms, each in time for a per-read
   timeout) while a connection is made for a request: the set-up's replies (`SELECT`, `ROLE`, `INFO`, the check)
   are read against the request's deadline, and it answers 503 within request_timeout_ms and a margin. Caught
   before the fix: they were read a read at a time, and the request answered 503 after about 5 s.
4. A node that answers the doorbell's shard subscriptions a byte at a time (its 16384 `SSUBSCRIBE`s written
   again after a cut, their confirmations trickled): the follower gives the node SUBSCRIBER_SETUP_MS (1 s) in
   all to confirm them and drops the connection, so at SIGTERM the doorbell ends with the other threads (no
   `exit_without_waiting` names it) and the gateway exits within a second and a margin. Caught before the fix:
   the confirmations were read a read at a time, each byte in time for a per-read timeout, and the follower was
   left behind (`exit_without_waiting` named `doorbell`).

Environment: FG_BIN, FG_TEST_PG_DSN (scripts/test).
"""

from __future__ import annotations

import json
import os
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from cluster_lab import resp, wait  # noqa: E402
from harness import Gateway  # noqa: E402
from one_node import OneNodeCluster  # noqa: E402

TIMEOUT_MS = 2000  # request_timeout_ms: how long a request may wait for the check
MARGIN_S = 1.0  # what a request may take beyond its deadline on a loaded machine
# What a request may take that waits for no stalled connection: half a deadline (a new connection and a script
# take 10-150 ms on a loaded machine; a request that meets the stalled one waits for most of a deadline).
AT_ONCE_S = TIMEOUT_MS / 2000
USER, PASSWORD = "fg-no-config", "fg-no-config-password"


class ClusterPolicyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = OneNodeCluster("policy", hold=b"maxmemory-policy",
                                     redis_args=("--maxmemory-policy", "allkeys-lru"))
        cls.proxy = cls.cluster.proxy
        resp(cls.cluster.port, "ACL", "SETUSER", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all", "-config")

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def gateway(self, credentials: str = "") -> Gateway:
        gw = Gateway(env_overrides=self.cluster.gateway_env(credentials),
                     config={"request_timeout_ms": TIMEOUT_MS})
        self.addCleanup(gw.stop)
        return gw

    def acquire(self, gw: Gateway, name: str):
        """The answer to an acquire of lock name, and how long it took."""
        t0 = time.monotonic()
        r = gw.http("POST", f"/v1/locks/{name}/acquire", {"ttl_ms": 60000})
        return r, time.monotonic() - t0

    def reconnect(self):
        """Cuts the gateway's connections to the node; the next call finds its connection closed (it rested
        since its last reply, util/sock.h) and makes a new one."""
        self.proxy.cut()
        time.sleep(0.1)

    def warnings(self, gw: Gateway) -> list[dict]:
        return [json.loads(line) for line in gw.log_text().splitlines() if '"eviction_policy_unsafe"' in line]

    def test_1_a_check_unanswered_makes_no_connection(self):
        gw = self.gateway()
        r, _ = self.acquire(gw, f"policy-before-{uuid.uuid4().hex[:8]}")
        self.assertEqual(r.status, 200, gw.why(r))
        self.assertEqual(len(self.warnings(gw)), 1, "start-up warns about the node's policy")
        self.proxy.arm()
        self.addCleanup(self.proxy.let_go)
        self.reconnect()
        # The connection is made for this request, or for a call of the gateway's own (the audit stream's
        # drain, the liveness mark) that came first and this request waited behind: its check is held back, and
        # this request answers 503 at its deadline, or 200 on a connection made anew after the other's deadline.
        r, took = self.acquire(gw, f"policy-stalled-{uuid.uuid4().hex[:8]}")
        self.assertTrue(self.proxy.held.is_set(), "the check of the new connection was never held back")
        self.assertIn(r.status, (200, 503), gw.why(r))
        self.assertLess(took, TIMEOUT_MS / 1000 + MARGIN_S, "answered after more than one deadline")
        name = f"policy-after-{uuid.uuid4().hex[:8]}"
        r, took = self.acquire(gw, name)
        self.assertEqual(r.status, 200, f"the request after a check without answer ({took:.2f} s): {gw.why(r)}")
        self.assertLess(took, AT_ONCE_S, "the request after a check without answer waited for it")
        held = gw.http("GET", f"/v1/locks/{name}").body
        self.assertEqual((held["held"], held.get("fence")), (True, r.body["fence"]), held)
        warned = self.warnings(gw)
        self.assertEqual([(w["policy"], w["host"], w["port"]) for w in warned[1:]],
                         [("allkeys-lru", "127.0.0.1", self.proxy.port)],
                         "the new connection's check answered and warned once")

    def test_2_a_check_refused_keeps_the_connection(self):
        gw = self.gateway(f"{USER}:{PASSWORD}@")
        self.assertIn('"eviction_policy_unknown"', gw.log_text(), "start-up says it could not read the policy")
        self.reconnect()
        for i in range(3):
            r, took = self.acquire(gw, f"policy-refused-{i}-{uuid.uuid4().hex[:8]}")
            self.assertEqual(r.status, 200, gw.why(r))
            self.assertLess(took, AT_ONCE_S, "a refused check cost the request its deadline")
        self.assertEqual(self.warnings(gw), [], "a node that refuses CONFIG is warned about")

    def test_3_a_node_answering_a_byte_at_a_time_costs_a_request_one_deadline(self):
        gw = self.gateway()
        r, _ = self.acquire(gw, f"policy-before-{uuid.uuid4().hex[:8]}")
        self.assertEqual(r.status, 200, gw.why(r))
        self.proxy.trickle(0.15)
        self.addCleanup(self.proxy.trickle, 0)  # off before the gateway stops (cleanups run last first)
        self.reconnect()
        r, took = self.acquire(gw, f"policy-trickled-{uuid.uuid4().hex[:8]}")
        self.assertEqual(r.status, 503, gw.why(r))
        self.assertLess(took, TIMEOUT_MS / 1000 + MARGIN_S, f"answered after {took:.2f} s: {gw.log_path}")

    def test_4_a_node_trickling_the_shard_subscriptions_holds_no_exit(self):
        gw = self.gateway()
        r, _ = self.acquire(gw, f"policy-before-{uuid.uuid4().hex[:8]}")
        self.assertEqual(r.status, 200, gw.why(r))
        self.proxy.hold = b"SSUBSCRIBE"  # the follower's subscriptions, written again after the cut
        self.addCleanup(setattr, self.proxy, "hold", b"maxmemory-policy")
        self.proxy.arm()
        self.addCleanup(self.proxy.let_go)
        self.reconnect()
        self.assertTrue(self.proxy.held.wait(10), "the doorbell's follower did not subscribe again")
        self.proxy.trickle(0.15)
        self.addCleanup(self.proxy.trickle, 0)  # off before the gateway stops (cleanups run last first)
        self.proxy.let_go()
        time.sleep(0.3)  # the follower reads the trickled confirmations
        took = gw.seconds_to_exit()
        gw.stop(check=False)
        left = [json.loads(line) for line in gw.log_text().splitlines() if '"exit_without_waiting"' in line]
        self.assertEqual([entry for entry in left if entry.get("doorbell")], [],
                         f"the doorbell was left behind: {gw.log_path}")
        self.assertLess(took, 2.5, f"the gateway exited {took:.1f} s after SIGTERM; log {gw.log_path}")


if __name__ == "__main__":
    unittest.main()
