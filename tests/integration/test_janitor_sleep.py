# SPDX-License-Identifier: Apache-2.0
"""An idle gateway sleeps: its janitors until something falls due, its subscribers until a message comes.

The lease janitor wakes waiters whose deadline or re-check time came, gives back orphaned grants, closes
connections whose headers are late and renews the gateway's liveness mark. It used to do that on a tick
of 5 ms whether anything was due or not: an idle gateway woke 200 times a second. Now it sleeps until the
earliest due time (one second at most), and whoever sets an earlier one (a waiter parking, an orphaned
grant, a connection starting to wait for its headers) wakes it through its alarm (src/util/alarm.c).
The backend janitor sleeps until the audit stream's next drain, pruning pass or retention pass, or a
stale write's poke; the threads that follow the doorbell and ended-lease channels sleep on their socket
and are woken to stop or to follow a failover (src/util/wake.c), where they used to look every 200 ms.

Measured from outside: the voluntary context switches of every thread of the gateway process, from
/proc, over three idle seconds; how long acquires with a short wait_ms take to give up while the
janitor sleeps; how long an idle gateway takes to exit on SIGTERM.

Broken variants caught: the 5 ms tick (217 sleeps a second); the backend janitor's 100 ms tick and the
subscribers' 200 ms looks (23 a second, against 6 now); a waiter parking without setting the alarm (the
janitor slept past the deadline: 0.68 to 0.70 s answers for a wait_ms of 150); a stop that does not wake
the subscribers (the gateway never exits: killed after 10 s).

Owns: the idle threads' sleep. Must not: test the waits themselves (test_lock_api.py, test_sem_leases.py).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest  # noqa: E402
from lock_helpers import unique_name  # noqa: E402


def sleeps(pid: int) -> int:
    """Voluntary context switches of all threads of process pid so far."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total


class JanitorSleepTest(GatewayTest):

    def test_an_idle_gateway_sleeps(self):
        self.assertEqual(self.c.get("/healthz").status, 200)
        time.sleep(1.0)  # start-up work done
        pid = self.gw.proc.pid
        before, started = sleeps(pid), time.monotonic()
        time.sleep(3.0)
        rate = (sleeps(pid) - before) / (time.monotonic() - started)
        self.assertLess(rate, 12, f"an idle gateway woke {rate:.0f} times a second")

    def test_a_short_wait_ends_on_time_while_the_janitor_sleeps(self):
        name = unique_name("alarm")
        held = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000})
        self.assertEqual(held.status, 200, held)
        took = []
        for _ in range(5):
            time.sleep(0.3)  # the janitor back asleep
            started = time.monotonic()
            r = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 5000, "wait_ms": 150})
            took.append(time.monotonic() - started)
            self.assertEqual(r.status, 409, r)
        self.assertGreaterEqual(min(took), 0.14, took)
        # The median, not the slowest: one try slowed by a loaded machine is no failure, while a wait
        # left to the janitor's own wake-up takes 0.7 s every time (alarm_set a no-op).
        self.assertLess(sorted(took)[len(took) // 2], 0.5, took)
        self.c.post(f"/v1/locks/{name}/release", {"token": held.body["token"]})

    def test_an_idle_gateway_stops_at_once(self):
        gw = Gateway(config=self.gateway_config, env_overrides=self.gateway_env)
        try:
            self.assertEqual(gw.client().get("/healthz").status, 200)
            time.sleep(1.0)  # its subscribers asleep on their sockets
            started = time.monotonic()
            gw.stop()
            # 5 s: room for AddressSanitizer's leak check at exit on a loaded machine; a gateway that does
            # not wake its subscribers never exits (killed after 10 s)
            self.assertLess(time.monotonic() - started, 5.0)
        finally:
            gw.kill()


if __name__ == "__main__":
    unittest.main()
