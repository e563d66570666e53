# SPDX-License-Identifier: Apache-2.0
"""A renewal of a lease its holder released (a lock, a semaphore's slot, a lock set) answers 410 lease_lost
saying the lease was released, with member reason "released" (docs/api.md, "Locks"), wherever Redis keeps
that end: in the key that held the lease (a release that left nobody behind), in the key a first try
granting again moves it to, or in the ended set (a release that passed the lease on, or left other holders).
A lease that expired keeps the detail "expired or was taken over", and one revoked says so.

Broken variant this file is meant to catch: the renewal of a released lease answered "expired or was taken
over", which sends an operator looking for a stall or a second holder that never was.

Owns: the 410 detail of a renewal after a release. Must not: count the renewal's own Redis commands
(integration.backend_cost does).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest  # noqa: E402
from lock_helpers import Waiter, unique_name, wait_for_waiting  # noqa: E402

RELEASED = "the lease was released"
UNKNOWN = "the lease expired or was taken over"


class RenewReleasedTest(GatewayTest):
    def ok(self, path: str, body: dict) -> dict:
        r = self.c.post(path, body)
        self.assertEqual(r.status, 200, r)
        return r.body

    def assert_released(self, path: str, token: str, what: str) -> None:
        r = self.c.post(path, {"token": token})
        self.assertEqual((r.status, r.body.get("type")), (410, "/problems/lease_lost"), (what, r))
        self.assertEqual((r.body.get("detail"), r.body.get("reason")), (RELEASED, "released"), (what, r))

    def test_a_released_lock(self):
        name = unique_name("rel")
        renew = f"/v1/locks/{name}/renew"
        first = self.ok(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000})
        self.ok(f"/v1/locks/{name}/release", {"token": first["token"]})
        self.assert_released(renew, first["token"], "its end in the holder key")
        second = self.ok(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000})
        self.assert_released(renew, first["token"], "its end moved by the first try that granted again")
        # A release that passes the lock to a waiter keeps its end in the ended set.
        waiter = Waiter(self.gw, f"/v1/locks/{name}/acquire", {"ttl_ms": 30000, "wait_ms": 30000})
        waiter.start()
        wait_for_waiting(self.c, name, 1)
        self.ok(f"/v1/locks/{name}/release", {"token": second["token"]})
        waiter.join(30)
        self.assertEqual(waiter.response.status, 200, waiter.response)
        self.assert_released(renew, second["token"], "its end in the ended set")
        self.assert_released(renew, first["token"], "an older end")
        # The waiter's lease holds; one that runs out is not told released.
        short = waiter.response.body
        self.ok(f"/v1/locks/{name}/release", {"token": short["token"]})
        lapsed = self.ok(f"/v1/locks/{name}/acquire", {"ttl_ms": 100})
        time.sleep(0.3)
        r = self.c.post(renew, {"token": lapsed["token"]})
        self.assertEqual((r.status, r.body.get("detail"), r.body.get("reason")), (410, UNKNOWN, None), r)
        # A revoked lease says so, not released.
        held = self.ok(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000})
        self.ok(f"/v1/locks/{name}/revoke", {})
        r = self.c.post(renew, {"token": held["token"]})
        self.assertEqual((r.status, r.body.get("reason")), (410, "revoked"), r)

    def test_a_released_semaphore_slot(self):
        name = unique_name("rel")
        renew = f"/v1/semaphores/{name}/renew"
        a, b = (self.ok(f"/v1/semaphores/{name}/acquire", {"limit": 2, "ttl_ms": 30000}) for _ in range(2))
        self.ok(f"/v1/semaphores/{name}/release", {"token": a["token"]})
        self.assert_released(renew, a["token"], "a slot released beside another holder")
        self.assertEqual(self.c.post(renew, {"token": b["token"]}).status, 200)
        self.ok(f"/v1/semaphores/{name}/release", {"token": b["token"]})
        self.assert_released(renew, b["token"], "the last slot: its end in the limit key")
        self.ok(f"/v1/semaphores/{name}/acquire", {"limit": 2, "ttl_ms": 30000})
        self.assert_released(renew, b["token"], "its end moved by the first try that granted again")
        self.assert_released(renew, a["token"], "an older end")

    def test_a_released_lock_set(self):
        names = [unique_name("rel-set") for _ in range(2)]
        locks = self.ok("/v1/locksets/acquire", {"names": names, "ttl_ms": 30000})["locks"]
        tokens = [x["token"] for x in locks]
        self.ok("/v1/locksets/release", {"tokens": tokens})
        r = self.c.post("/v1/locksets/renew", {"tokens": tokens})
        self.assertEqual((r.status, r.body.get("type")), (410, "/problems/lease_lost"), r)
        self.assertEqual((r.body.get("reason"), r.body.get("lock")), ("released", names[0]), r)
        self.assertTrue(r.body["detail"].endswith(f"the lease of lock '{names[0]}' of the set was released"), r)


if __name__ == "__main__":
    unittest.main()
