# SPDX-License-Identifier: Apache-2.0
"""Probes answered at once whatever the backends do: /readyz and /metrics.

/readyz and /metrics ask the backends, and waited for each up to request_timeout_ms on the HTTP thread that
served them: with Redis stopped (SIGSTOP), /readyz answered after 3 s (request_timeout_ms 3000), past an
orchestrator's probe timeout. They now ask through threads of their own (http/readiness.h) and wait at most
probe_timeout_ms: test_readyz_and_metrics_wait_at_most_probe_timeout_ms failed before (3.0 s).

Owns: the deadline of /readyz and /metrics. Must not: test the API's own threads (test_http_threads.py,
test_hostile.py).
"""

import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, http, private_backends, skip_in_cluster, wait_for  # noqa: E402

REQUEST_TIMEOUT_MS = 3000
PROBE_TIMEOUT_MS = 500


def timed_get(port: int, path: str, timeout: float = 15.0, headers: dict | None = None):
    """(seconds, Response) of GET path on a new connection to port."""
    started = time.monotonic()
    r = http("GET", f"http://127.0.0.1:{port}{path}", headers=headers, timeout=timeout)
    return time.monotonic() - started, r


def redis_pid(redis: Redis) -> int:
    return int(redis.cmd("INFO", "server").split("process_id:")[1].split()[0])


def backend_up(metrics_text: str, backend: str) -> int:
    line = next(line for line in metrics_text.splitlines()
                if line.startswith(f'fencegate_backend_up{{backend="{backend}"}} '))
    return int(line.split()[1])


@skip_in_cluster("it stops a Redis of its own")
class StalledRedisTest(unittest.TestCase):
    """Redis stopped (SIGSTOP)."""

    def gateway(self, tag: str):
        own = private_backends(self, tag)
        config = {"request_timeout_ms": REQUEST_TIMEOUT_MS, "probe_timeout_ms": PROBE_TIMEOUT_MS}
        gw = Gateway(config=config, env_overrides=own.env)
        self.addCleanup(gw.stop, check=False)
        redis = Redis(port=own.redis_port)
        self.addCleanup(redis.close)
        self.assertEqual(http("POST", gw.url(f"/v1/locks/{tag}-warm/acquire"), {"ttl_ms": 1000}).status, 200)
        return gw, redis_pid(redis)

    def stopped(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        self.addCleanup(os.kill, pid, signal.SIGCONT)  # also when the test fails midway

    def test_readyz_and_metrics_wait_at_most_probe_timeout_ms(self):
        """On the API's port, its threads free: /readyz answers 503 naming Redis, and /metrics
        fencegate_backend_up 0, within probe_timeout_ms and a margin, not request_timeout_ms; probes that
        come while the ping is still out do too; once Redis answers again, /readyz answers 200."""
        gw, pid = self.gateway("probe-bound")
        margin = PROBE_TIMEOUT_MS / 1000 + 1.0
        self.stopped(pid)
        for _ in range(3):
            took, r = timed_get(gw.port, "/readyz")
            self.assertEqual((r.status, r.body.get("redis"), r.body.get("postgres")), (503, "down", "up"), r)
            self.assertLess(took, margin)
            took, r = timed_get(gw.port, "/metrics")
            self.assertEqual((r.status, backend_up(r.body, "redis"), backend_up(r.body, "postgres")), (200, 0, 1))
            self.assertLess(took, margin)
        os.kill(pid, signal.SIGCONT)
        wait_for(lambda: http("GET", gw.url("/readyz"), timeout=5).status == 200,
                 timeout=3 * REQUEST_TIMEOUT_MS / 1000, what="/readyz 200 once Redis answers")


if __name__ == "__main__":
    unittest.main()
