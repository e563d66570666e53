# SPDX-License-Identifier: Apache-2.0
"""A gateway on a redis-sentinel:// URL (docs/operations.md, Failover): its sentinel watcher, the thread that
follows +switch-master, and the sentinel lookup of a new connection, against a sentinel of the test's own that
monitors the one test Redis (or one of the test's own), reached through a proxy that can make it answer slowly.

Owns: the sentinel watcher at exit, the deadline of a sentinel's answer. Must not: test failover itself
(tests/ha/ does) or the connection set-up of redis:// URLs (test_redis_roles.py).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (Gateway, Redis, RedisError, TcpProxy, env, free_port, private_backends,  # noqa: E402
                     skip_in_cluster, test_data_dir, wait_for)
from lock_helpers import unique_name  # noqa: E402

TIMEOUT_MS = 1500
# What a request may take beyond its deadline: reading it, answering it, a loaded machine's scheduling
MARGIN_S = 1.0
SHORT_GRACE_MS = 300  # request_timeout_ms, and so the threads' stop grace: below the watcher's 500 ms
THREADS = ("readiness", "janitor", "doorbell", "sentinel_watcher")  # exit_without_waiting's fields


def sentinel(test: unittest.TestCase, master: str, redis_port: int | None = None) -> int:
    """Starts a sentinel (gone when test ends) monitoring the Redis on redis_port (the test Redis when None) as
    master; returns its port."""
    port = free_port()
    d = tempfile.mkdtemp(dir=test_data_dir())
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor {master} 127.0.0.1 {redis_port or env('FG_TEST_REDIS_PORT')} 1\n")
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
    def test_a_watcher_on_a_slow_sentinel_holds_the_exit_a_second_at_most(self):
        """The gateway serves through its sentinel; then the proxy passes the sentinel's answers one byte every
        150 ms and cuts the watcher's subscription: the watcher subscribes again, and the SUBSCRIBE reply (44
        bytes) would take 6.6 s, each byte well within a per-read timeout. SIGTERM meanwhile, no request in
        flight: the watcher, which gives a sentinel 500 ms to connect and answer in all, has given up and is
        joined with the other threads (no exit_without_waiting), and the gateway exits 0 within a second and a
        margin. Failed before the watcher was joined by a deadline: it was joined after the other threads
        ended, and the gateway exited as the reply was complete (about 6 s after SIGTERM); before a sentinel's
        answer had a deadline in all, the watcher was left behind (exit_without_waiting named it)."""
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
        self.assertEqual(left, [], "a thread was left behind")

    def test_a_watcher_held_in_its_subscribe_is_joined_within_the_grace(self):
        """The proxy holds every SUBSCRIBE +switch-master unanswered: the watcher gives each sentinel 500 ms
        (SENTINEL_TIMEOUT_MS) to connect and answer in all, then 200 ms later subscribes again. SIGTERM as a
        SUBSCRIBE is held, no request in flight: the watcher gives it up and ends 700 ms later at most, within the
        threads' stop grace (a second), so it is joined (no exit_without_waiting) and the gateway exits 0 within a
        second and a margin. Caught with the watcher's budget made request_timeout_ms (5 s): it was left behind."""
        gw = self.gateway_held_in_subscribe()
        took = gw.seconds_to_exit()
        self.assertEqual(gw.stop(), 0)
        self.assertEqual(self.left_behind(gw), [], "a thread was left behind")
        self.assertLess(took, 2.5, f"the gateway exited {took:.1f} s after SIGTERM; log {gw.log_path}")

    def test_a_watcher_held_past_a_short_grace_is_left_behind(self):
        """As above with request_timeout_ms 300, which is then the threads' stop grace, shorter than the watcher's
        500 ms: SIGTERM as a SUBSCRIBE is held leaves the watcher in that call when the grace ends. The process
        does not wait for it: it logs exit_without_waiting naming sentinel_watcher (and no other thread) and exits
        0 within the grace and a margin. Failed before the fix: the threads were asked to end one after another,
        each once the one before was joined, so the watcher's join spent the grace and the readiness and janitor
        threads, idle but asked only then, were named left behind too. Caught too with the watcher joined past
        the grace (redis_watch_stop waiting for it without a deadline): no exit_without_waiting named it."""
        gw = self.gateway_held_in_subscribe(request_timeout_ms=SHORT_GRACE_MS)
        took = gw.seconds_to_exit()
        self.assertEqual(gw.stop(), 0)
        left = self.left_behind(gw)
        self.assertEqual([{k: e.get(k) for k in THREADS} for e in left],
                         [dict.fromkeys(THREADS, False) | {"sentinel_watcher": True}],
                         f"the watcher, still in its SUBSCRIBE, was not the one left behind; log {gw.log_path}")
        self.assertLess(took, 2.5, f"the gateway exited {took:.1f} s after SIGTERM; log {gw.log_path}")

    def gateway_held_in_subscribe(self, **config) -> Gateway:
        """A gateway serving through a sentinel behind a proxy that holds every SUBSCRIBE +switch-master
        unanswered (each connection's until the test ends), returned as the watcher sends one anew."""
        master = unique_name("sentinel").replace(":", "-")
        proxy = TcpProxy(sentinel(self, master), hold=b"+switch-master", hold_every=True)
        self.addCleanup(proxy.close)
        url = f"redis-sentinel://127.0.0.1:{proxy.port}/{master}/0"
        gw = Gateway(env_overrides={"FENCEGATE_REDIS_URL": url}, config=config or None)
        self.addCleanup(gw.stop, check=False)
        r = gw.client().post(f"/v1/locks/{master}/acquire", {"ttl_ms": 1000})
        self.assertEqual(r.status, 200, r)
        self.assertTrue(proxy.held.wait(10), "the watcher did not subscribe")
        proxy.held.clear()
        self.assertTrue(proxy.held.wait(10), "the watcher did not subscribe again")
        return gw

    @staticmethod
    def left_behind(gw: Gateway) -> list[dict]:
        return [json.loads(line) for line in gw.log_text().splitlines() if '"exit_without_waiting"' in line]

    def test_a_sentinel_answering_a_byte_at_a_time_costs_a_request_one_deadline(self):
        """A Redis of the test's own, its sentinel behind the proxy, request_timeout_ms 1500. The gateway
        serves; then the proxy passes the sentinel's answers one byte every 150 ms and Redis closes the
        gateway's connections: the next acquire makes a new one (its thread's own: redis_pipeline_from 4) and
        asks the sentinel where the primary is, whose answer (about 30 bytes) would take 4.5 s. It answers 503
        within request_timeout_ms and a margin. Failed before the fix: the sentinel's answer was waited for a
        read at a time, each byte in time, and the acquire answered 503 after 4.4 s."""
        master = unique_name("sentinel").replace(":", "-")
        backends = private_backends(self, "sentinel")
        proxy = TcpProxy(sentinel(self, master, backends.redis_port))
        self.addCleanup(proxy.close)
        url = f"redis-sentinel://127.0.0.1:{proxy.port}/{master}/0"
        gw = Gateway(env_overrides=dict(backends.env, FENCEGATE_REDIS_URL=url),
                     config={"request_timeout_ms": TIMEOUT_MS, "redis_pipeline_from": 4})
        self.addCleanup(gw.stop, check=False)
        c = gw.client()
        self.assertEqual(c.post(f"/v1/locks/{master}/acquire", {"ttl_ms": 1000}).status, 200)
        proxy.trickle(0.15)
        with Redis(port=backends.redis_port) as r:
            r.cmd("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        time.sleep(0.1)  # the connections rest: each is looked at before use, found closed and made anew
        started = time.monotonic()
        r = c.post(f"/v1/locks/{master}-2/acquire", {"ttl_ms": 1000})
        took = time.monotonic() - started
        self.assertEqual(r.status, 503, r)
        self.assertLess(took, TIMEOUT_MS / 1000 + MARGIN_S, f"answered after {took:.2f} s; log {gw.log_path}")


if __name__ == "__main__":
    unittest.main()
