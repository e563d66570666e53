# SPDX-License-Identifier: Apache-2.0
"""GET /v1/gateways: the gateway processes whose liveness mark in Redis lasts, the answering one marked
`self`; a process that stops drops out once its mark lapses (waiter_lease_ms), and the scope is `metrics`.

Owns: /v1/gateways. Must not: test what the marks do for waiters (the lease tests do).
"""

import hashlib
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, wait_for  # noqa: E402

# Marks that outlast a stalled beat on a loaded machine (a third of the lease apart), and lapse well within the
# wait for a stopped gateway to drop out.
CONFIG = {"waiter_lease_ms": 3000}


class GatewaysTest(GatewayTest):
    gateway_config = CONFIG

    def listed(self, gw: Gateway) -> list[dict]:
        r = gw.http("GET", "/v1/gateways")
        self.assertEqual(r.status, 200, r)
        self.assertIsInstance(r.body["now_ms"], int)
        for g in r.body["gateways"]:
            self.assertGreater(g["alive_until_ms"], r.body["now_ms"])
        return r.body["gateways"]

    def test_every_live_process_once_and_itself_marked(self):
        with Gateway(config=CONFIG) as other:
            # Other tests' gateways on the same Redis start and stop between two listings: the two must agree
            # on one pair read close together.
            def agreeing() -> tuple[list[dict], list[dict]] | None:
                mine, theirs = self.listed(self.gw), self.listed(other)
                same = sorted(g["id"] for g in mine) == sorted(g["id"] for g in theirs)
                return (mine, theirs) if same else None
            mine, theirs = wait_for(agreeing, what="both gateways to list the same processes")
            self.assertEqual([g["self"] for g in mine].count(True), 1)
            self.assertEqual([g["self"] for g in theirs].count(True), 1)
            other_id = next(g["id"] for g in theirs if g["self"])
            self.assertIn(other_id, [g["id"] for g in mine if not g["self"]])
        wait_for(lambda: other_id not in [g["id"] for g in self.listed(self.gw)], timeout=10,
                 what="the stopped gateway's mark to lapse")


class GatewaysScopeTest(unittest.TestCase):
    def test_needs_the_metrics_scope(self):
        keys = [{"id": k, "sha256": hashlib.sha256(k.encode()).hexdigest(), "scopes": [s]}
                for k, s in (("key-m", "metrics"), ("key-l", "lock:*"))]
        with Gateway(config={"auth": {"mode": "required", "keys": keys}}) as gw:
            for key, status in (("key-m", 200), ("key-l", 403), ("nope", 401)):
                r = gw.http("GET", "/v1/gateways", headers={"Authorization": f"Bearer {key}"})
                self.assertEqual(r.status, status, (key, r))


if __name__ == "__main__":
    unittest.main()
