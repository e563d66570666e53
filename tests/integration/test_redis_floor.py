# SPDX-License-Identifier: Apache-2.0
"""A lease that outlives a Redis restart: Redis kept its records (its AOF), so the lease still holds (it renews,
its lock shows it held, nobody else may take it), but the recovery after the restart raised the write floor of
Redis keys above every fence issued before (docs/api.md, "Fences after Redis loses data"): its Redis writes are
refused, each with one audit record, and its 409 says that the floor refused it, not a fence stored for the key.
Acquired again, the lock's new fence is above the floor and writes.

Broken variant caught: the 409 of a write below the floor read "fence F is older than fence <floor> stored for
redis:K" while the key's stored fence was F itself (the answer named the floor as the key's fence, and the lease
whose write it refused was the live holder of its lock).

Owns: what a lease that survives a Redis restart can and cannot write. Must not: test the fence sequence's
recovery itself (test_fence_block.py) or stale writes without a restart (test_redis_writes.py).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, psql, services, skip_in_cluster, wait_for, write_fence_key  # noqa: E402
from pg_helpers import unique  # noqa: E402


def audit_rows(resource: str) -> list[str]:
    return psql("SELECT presented_fence || '|' || current_fence || '|' || reason || '|' || method"
                " FROM fencegate.rejections WHERE resource = :'r' ORDER BY id", {"r": resource})


@skip_in_cluster("it restarts the one test Redis, which the gateways on a cluster do not use")
class LeaseThroughRedisRestartTest(unittest.TestCase):
    def test_a_lease_kept_through_a_restart_writes_no_redis_key_until_acquired_again(self):
        name, key = unique("floor"), f"floor:{unique('k')}"
        with Gateway(config={"redis_prefixes": ["floor:"]}) as gw:
            c = gw.client()
            self.addCleanup(c.close)
            held = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}).body
            token, fence = held["token"], held["fence"]
            r = c.request("PUT", f"/v1/redis/{key}", {"value": "before"}, {"Fence-Token": token})
            self.assertEqual(r.status, 200, r)

            self.addCleanup(services, "start-redis")
            services("stop-redis")
            services("start-redis")

            r = wait_for(lambda: (lambda a: a if a.status != 503 else None)(
                c.post(f"/v1/locks/{name}/renew", {"token": token, "ttl_ms": 60000})),
                timeout=30, what="a renewal after the restart")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(c.get(f"/v1/locks/{name}").body["fence"], fence)

            r = c.request("PUT", f"/v1/redis/{key}", {"value": "after"}, {"Fence-Token": token})
            with Redis() as redis:
                floor = int(redis.cmd("GET", "fg:fence_floor"))
                self.assertEqual((redis.cmd("GET", key), redis.cmd("GET", write_fence_key(key))),
                                 ("before", str(fence)), "a write below the floor changed the key")
            self.assertGreater(floor, fence)
            self.assertEqual(r.status, 409, r)
            self.assertEqual((r.body["presented_fence"], r.body["current_fence"], r.body["resource"]),
                             (fence, floor, f"redis:{key}"))
            self.assertIn(f"fence {fence} is below the write floor {floor} of Redis keys", r.body["detail"])
            self.assertNotIn("stored for", r.body["detail"])
            wait_for(lambda: audit_rows(f"redis:{key}"), timeout=20, what="the refusal's audit record")
            self.assertEqual(audit_rows(f"redis:{key}"), [f"{fence}|{floor}|stale_fence|PUT"])

            self.assertEqual(c.post(f"/v1/locks/{name}/release", {"token": token}).status, 200)
            again = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}).body
            self.assertGreater(again["fence"], floor)
            r = c.request("PUT", f"/v1/redis/{key}", {"value": "again"}, {"Fence-Token": again["token"]})
            self.assertEqual(r.status, 200, r)


if __name__ == "__main__":
    unittest.main()
