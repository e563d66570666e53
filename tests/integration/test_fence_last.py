# SPDX-License-Identifier: Apache-2.0
"""The last fence: every fence the gateway issues stays below 10^14, where Redis's scripts still count it
exactly and print it as digits (their JSON encoder writes numbers with 14 significant digits), and past the
last one it issues none: an acquire answers 503 backend_unavailable, never a fence a status call or a
refusal would print rounded.

The test runs a gateway on a Redis and a Postgres database of its own (the fence sequence only grows, so the
shared ones would carry its fences into every later test): it moves the Postgres reservation near the end,
flushes Redis so the sequence is recovered from it, and acquires until the gateway refuses. Broken variant
caught: no last fence (the gateway issued fences on past the last limit, toward 10^14, where a status call
answers a fence rounded: 1.0000000000001e+14); a sequence at its end reserving a block in Postgres on every
acquire that found no fence.

Owns: the upper end of the fence sequence. Must not: test fence recovery itself (test_fence_block.py).
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, private_backends, psql, skip_in_cluster  # noqa: E402

LAST = 10**14 - 1


def overshoot() -> int:
    """SEMAPHORE_MAX_LIMIT of src/fglimits.h: how far one script may pass the fence limit."""
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "fglimits.h")
    with open(header, encoding="utf-8") as f:
        return int(re.search(r"#define SEMAPHORE_MAX_LIMIT\s+(\d+)", f.read()).group(1))


@skip_in_cluster("it runs its own one Redis")
class FenceLastTest(unittest.TestCase):
    def setUp(self) -> None:
        own = private_backends(self, "last")
        self.dsn, self.redis_port, self.env = own.dsn, own.redis_port, own.env

    def test_no_fence_is_issued_past_the_last(self):
        limit = LAST - overshoot()  # the highest limit a recovery sets: a script's overshoot stays below 10^14
        with Gateway(env_overrides=self.env) as gw, gw.client() as c:
            self.assertEqual(c.post("/v1/locks/last-0/acquire", {"ttl_ms": 30000}).status, 200)
            # A recovery after a loss reserves from reserved + overshoot on: its floor is then limit - 3.
            psql(f"UPDATE fencegate.fence_reservation SET reserved = {limit - 3 - overshoot()}", dsn=self.dsn)
            with Redis(port=self.redis_port) as r:
                r.cmd("FLUSHALL")
            fences = []
            for i in range(1, 6):
                got = c.post(f"/v1/locks/last-{i}/acquire", {"ttl_ms": 30000})
                if got.status != 200:
                    break
                fences.append(got.body["fence"])
                self.assertEqual(c.get(f"/v1/locks/last-{i}").body["fence"], got.body["fence"], "status rounded")
            self.assertEqual(fences, [limit - 2, limit - 1, limit], got)
            self.assertEqual((got.status, got.body.get("type")), (503, "/problems/backend_unavailable"), got)
            reserved = psql("SELECT reserved FROM fencegate.fence_reservation", dsn=self.dsn)
            again = c.post("/v1/locks/last-9/acquire", {"ttl_ms": 30000})
            self.assertEqual(again.status, 503, again)
            self.assertIn("fences exhausted", gw.log_text())
            self.assertEqual(psql("SELECT reserved FROM fencegate.fence_reservation", dsn=self.dsn), reserved,
                             "an acquire at the end reserved another block")


if __name__ == "__main__":
    unittest.main(verbosity=2)
