# SPDX-License-Identifier: Apache-2.0
"""A gateway on a redis-sentinel:// URL (docs/operations.md, Failover): its sentinel watcher, the thread that
follows +switch-master, against a sentinel of the test's own that monitors the one test Redis, reached through
a proxy that can make it answer slowly.

Owns: the sentinel watcher at exit. Must not: test failover itself (tests/ha/ does) or the connection set-up
of redis:// URLs (test_redis_roles.py).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (Gateway, Redis, RedisError, TcpProxy, env, free_port, skip_in_cluster, test_data_dir,  # noqa: E402
                     wait_for)
from lock_helpers import unique_name  # noqa: E402


def sentinel(test: unittest.TestCase, master: str) -> int:
    """Starts a sentinel (gone when test ends) monitoring the test Redis as master; returns its port."""
    port = free_port()
    d = tempfile.mkdtemp(dir=test_data_dir())
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor {master} 127.0.0.1 {env('FG_TEST_REDIS_PORT')} 1\n")
    proc = subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    test.addCleanup(proc.wait, 10)
    test.addCleanup(proc.kill)

    def names_the_master() -> bool:
        try:
            with Redis(port=port, timeout=2) as r:
                return r.cmd("SENTINEL", "get-master-addr-by-name", master) is not None
        except (RedisError, OSError):
            return False

    wait_for(names_the_master, what="the sentinel")
    return port


@skip_in_cluster("its sentinel monitors the one test Redis")
class RedisSentinelTest(unittest.TestCase):
    def test_a_watcher_stuck_on_a_slow_sentinel_holds_the_exit_a_second_at_most(self):
        """The gateway serves through its sentinel; then the proxy passes the sentinel's answers one byte every
        150 ms and cuts the watcher's subscription: the watcher subscribes again and reads the SUBSCRIBE
        reply (44 bytes, 6.6 s), each byte well within its per-read timeout. SIGTERM meanwhile, no request in
        flight: the watcher is left behind after a second (exit_without_waiting names it) and the gateway
        exits 0 within that second and a margin. Failed before the fix: the watcher was joined without a
        deadline after the other threads ended, and the gateway exited as the reply was complete (about 6 s
        after SIGTERM)."""
        master = unique_name("sentinel").replace(":", "-")
        # armed below: the watcher's SUBSCRIBE, held back until it is seen, says the watcher subscribes again
        proxy = TcpProxy(sentinel(self, master), hold=b"+switch-master", armed=False)
        self.addCleanup(proxy.close)
        url = f"redis-sentinel://127.0.0.1:{proxy.port}/{master}/0"
        gw = Gateway(env_overrides={"FENCEGATE_REDIS_URL": url})
        self.addCleanup(gw.stop, check=False)
        r = gw.client().post(f"/v1/locks/{master}/acquire", {"ttl_ms": 1000})
        self.assertEqual(r.status, 200, r)
        proxy.trickle(0.15)
        proxy.arm()
        proxy.cut()
        self.assertTrue(proxy.held.wait(10), "the watcher did not subscribe again")
        proxy.let_go()
        time.sleep(0.5)  # the watcher reads the trickled reply
        took = gw.seconds_to_exit()
        self.assertEqual(gw.stop(), 0)
        self.assertLess(took, 2.5, f"the gateway exited {took:.1f} s after SIGTERM; log {gw.log_path}")
        left = [json.loads(line) for line in gw.log_text().splitlines() if '"exit_without_waiting"' in line]
        self.assertEqual([e.get("sentinel_watcher") for e in left], [True], left)


if __name__ == "__main__":
    unittest.main()
