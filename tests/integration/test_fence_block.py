# SPDX-License-Identifier: Apache-2.0
"""One reserved block of fences per gateway process until it is used up, not one per new Redis connection.

The reservation is read from Postgres (fencegate.fence_reservation), outside the gateway:
  - many threads opening their first Redis connection, and every connection killed by Redis (CLIENT KILL)
    then reopened, reserve nothing new: fences go on one by one;
  - a restarted Redis (a new server run, whose file may lag the fences it issued) is still recovered: a new
    block is reserved and the fences continue above every fence issued before.

A new connection only runs lua/fence_check.lua: the block is kept while fg:fence_origin names the Redis
run_id that answers, and the reserved limit is deleted (so the next acquire recovers) when it does not.
Broken variants caught while writing this against the earlier design (each tried, then reverted): a recovery
on every new connection (the reservation grew by a block per reconnect and fences jumped by 10,000); the
dataset check always "same" (after the Redis restart nothing was reserved).

Owns: the fence block's lifetime. Must not: test fence recovery after data loss in depth (adversarial/).
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, Redis, psql, services, skip_in_cluster, wait_for  # noqa: E402
from pg_helpers import unique  # noqa: E402

BLOCK = 10000
THREADS = 6


def reserved() -> int:
    return int(psql("SELECT reserved FROM fencegate.fence_reservation")[0])


class FenceBlockTest(GatewayTest):
    gateway_env = {"FENCEGATE_HTTP_THREADS": THREADS}

    def fences(self, n_clients: int, per_client: int) -> list[int]:
        """Acquires and releases per_client locks from n_clients connections at once; returns the fences."""
        out, errors = [], []
        lock = threading.Lock()

        def worker():
            try:
                with self.gw.client() as c:
                    for _ in range(per_client):
                        name = unique("blk")
                        for _attempt in range(2 * THREADS + 2):  # a killed connection answers 503 once
                            r = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 10000})
                            if r.status != 503:
                                break
                        assert r.status == 200, r
                        c.post(f"/v1/locks/{name}/release", {"token": r.body["token"]})
                        with lock:
                            out.append(r.body["fence"])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker) for _ in range(n_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        return sorted(out)

    @skip_in_cluster("it checks the one block of the one Redis: on a cluster each slot reserves blocks of its "
                     "own (docs/cluster.md)")
    def test_reconnects_keep_the_block(self):
        first = self.fences(THREADS * 2, 5)  # every worker thread opens its Redis connection
        before = reserved()
        fences = list(first)
        for _ in range(3):
            Redis().cmd("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            fences += self.fences(THREADS * 2, 3)
        self.assertEqual(reserved(), before, "a reconnect reserved a new block")
        self.assertEqual(len(set(fences)), len(fences))
        self.assertLess(fences[-1] - first[0], len(fences) + 50, f"fences jumped: {fences}")

    @skip_in_cluster("it restarts the one test Redis, which the gateways on a cluster do not use (it passed "
                     "without testing anything); the cluster lab restarts primaries itself (cluster.lab)")
    def test_restarted_redis_is_recovered(self):
        last = self.fences(2, 2)[-1]
        before = reserved()
        self.addCleanup(services, "start-redis")
        services("stop-redis")
        services("start-redis")
        time.sleep(0.2)
        after = wait_for(lambda: self.fences(1, 1), timeout=30, what="an acquire after the restart")
        self.assertGreaterEqual(reserved(), before + BLOCK, "a restarted Redis was not recovered")
        self.assertGreater(after[0], last)


if __name__ == "__main__":
    unittest.main()
