# SPDX-License-Identifier: Apache-2.0
"""Gateway liveness per slot (docs/cluster.md, "gateway liveness"), through real gateways on a redis-cluster:// URL
against the cluster lab (three primaries, three replicas: cluster_lab.py). A grant in a slot looks for the waiter's
gateway in that slot's fg:gateways:{T(s)}; each test names the mutation of the gateway it was seen to catch.

1. waiters queued a moment ago are granted in slots on every primary, locks and semaphores: the queued path of
   lock_acquire.lua / sem_acquire.lua marks the waiter's gateway in the slot's key, before any beat;
1c. the same when a gateway's waiter queues through lua/lock_acquire_queue.lua or lua/sem_acquire_queue.lua (the
   gateway found the name busy a moment before): the lean queue join marks the waiter's gateway as the full
   script does;
1d. the same when the releasing gateway hands the slots over through lua/sem_release_handover.lua (it found the
   name busy a moment before): the lean hand-over looks for the waiter's gateway in the slot's key and rings its
   doorbell on the slot's shard channel;
2. waiters parked three waiter leases long (no re-check between: poll_ms past the test) are still granted: the
   beat renews the mark in every slot where the gateway has waiters;
3. waiters of a gateway killed with kill -9 are skipped once its mark ran out (waiter_lease_ms), and the next
   waiter, of a live gateway, gets the lock; 3b. the same through the lean hand-over, which leaves a dead
   gateway's waiter to the full script.

Environment: FG_BIN, FG_TEST_PG_DSN (scripts/test).
"""

from __future__ import annotations

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from cluster_lab import SLOTS, LabTestCase, crc16, lab_gateway, wait  # noqa: E402
from harness import Gateway  # noqa: E402
from lock_helpers import Waiter  # noqa: E402

PER_PRIMARY = 2  # names of distinct slots on each primary
LEASE_MS = 1500  # waiter_lease_ms of the gateways of tests 2 and 3: a beat every 500 ms
KINDS = (("locks", {}), ("semaphores", {"limit": 1}))


class ClusterBeatTest(LabTestCase):
    gateways: list[Gateway] = []

    @classmethod
    def start_more(cls):
        cls.gateways = []
        cls.gw = cls.gateway(LEASE_MS)
        cls.run_tag = f"{os.getpid()}-{time.monotonic_ns()}"

    @classmethod
    def stop_more(cls):
        for gw in cls.gateways:
            gw.stop(check=False)

    @classmethod
    def gateway(cls, lease_ms: int) -> Gateway:
        """A gateway on the lab whose waiters re-check only past the test (poll_ms), so only the marks of the
        queued path and of the beat keep them."""
        gw = lab_gateway(cls.lab, {"waiter_lease_ms": lease_ms, "poll_ms": 120000})
        cls.gateways.append(gw)
        return gw

    def names(self, what: str) -> list[str]:
        """PER_PRIMARY names of distinct slots on every primary (a lock's or semaphore's slot is its name's)."""
        per = {p: 0 for p in self.lab.primaries()}
        out, slots, i = [], set(), 0
        while any(n < PER_PRIMARY for n in per.values()):
            name = f"{what}-{self.run_tag}-{i}"
            i += 1
            slot = crc16(name.encode()) % SLOTS
            owner = self.lab.owner(slot)
            if slot not in slots and per[owner] < PER_PRIMARY:
                slots.add(slot)
                per[owner] += 1
                out.append(name)
        return out

    def waiting(self, kind: str, name: str) -> int:
        r = self.gw.http("GET", f"/v1/{kind}/{name}")
        self.assertEqual(r.status, 200, self.gw.why(r))
        return r.body["waiting"]

    def hold(self, kind: str, name: str, extra: dict) -> str:
        r = self.gw.http("POST", f"/v1/{kind}/{name}/acquire", {"ttl_ms": 60000, **extra})
        self.assertEqual(r.status, 200, self.gw.why(r))
        return r.body["token"]

    def queue(self, gw: Gateway, kind: str, name: str, extra: dict, behind: int = 0) -> Waiter:
        w = Waiter(gw, f"/v1/{kind}/{name}/acquire", {"ttl_ms": 60000, "wait_ms": 60000, **extra})
        w.start()
        wait(lambda: w.response is not None or self.waiting(kind, name) == behind + 1, 30, f"a waiter on {name}")
        self.assertIsNone(w.response, f"the waiter on {name} was answered: {w.response}")
        return w

    def release(self, kind: str, name: str, token: str) -> None:
        r = self.gw.http("POST", f"/v1/{kind}/{name}/release", {"token": token})
        self.assertEqual(r.status, 200, self.gw.why(r))

    def assert_granted(self, waiters: dict[tuple[str, str], Waiter]) -> None:
        for (kind, name), w in waiters.items():
            w.join(30)
            self.assertFalse(w.is_alive(), f"the waiter on {kind}/{name} was never granted (dropped as a dead"
                                           " gateway's waiter)")
            self.assertEqual(getattr(w.response, "status", w.response), 200, (kind, name, w.gw.why(w.response)))

    def busy(self, gw: Gateway, kind: str, name: str, extra: dict) -> None:
        """An acquire of gw that does not wait, answered busy: gw then knows the name has a queue or a holder, and
        its next acquire there that waits runs the lean queue join (semaphores, src/lease/contention.h)."""
        r = gw.http("POST", f"/v1/{kind}/{name}/acquire", {"ttl_ms": 60000, "wait_ms": 0, **extra})
        self.assertEqual(r.status, 409, gw.why(r))

    def release_all(self, held: dict[tuple[str, str], str], lean: bool) -> None:
        """Releases every name held through self.gw; lean: each right after a busy answer there, so that a
        semaphore's release runs the lean hand-over (src/lease/contention.h)."""
        extras = dict(KINDS)
        for (kind, name), token in held.items():
            if lean:
                self.busy(self.gw, kind, name, extras[kind])
            self.release(kind, name, token)

    def run_pairs(self, gw: Gateway, what: str, pause: float, lean: bool = False, lean_release: bool = False) -> None:
        """Holds every name of both kinds, queues a waiter of gw on each (lean: after a busy answer, see busy),
        waits pause seconds, releases them all (lean_release: see release_all); every waiter must be granted."""
        held, waiters = {}, {}
        for kind, extra in KINDS:
            for name in self.names(f"{what}-{kind}"):
                held[(kind, name)] = self.hold(kind, name, extra)
                if lean:
                    self.busy(gw, kind, name, extra)
                waiters[(kind, name)] = self.queue(gw, kind, name, extra)
        time.sleep(pause)
        self.release_all(held, lean_release)
        self.assert_granted(waiters)

    def test_1_fresh_waiters_granted_on_every_primary(self):
        """Caught: the queued path without its mark (a gateway whose one beat so far came before its waiters:
        every waiter dropped at the grant)."""
        fresh = self.gateway(60000)  # its next beat 20 s after its start, past this test's grants
        self.run_pairs(fresh, "fresh", 0)

    def test_1c_lean_waiters_granted_on_every_primary(self):
        """Caught: a lean queue join without its mark, of locks or semaphores (every such waiter dropped at the
        grant)."""
        fresh = self.gateway(60000)
        self.run_pairs(fresh, "lean", 0, lean=True)

    def test_1d_lean_hand_overs_reach_waiters_on_every_primary(self):
        """Caught: a lean hand-over that published to the plain channel (no gateway of a cluster follows it: every
        such waiter left waiting)."""
        fresh = self.gateway(60000)
        self.run_pairs(fresh, "handover", 0, lean_release=True)

    def test_2_parked_waiters_outlive_three_waiter_leases(self):
        """Caught: the beat writing fg:gateways alone (the marks of the queued path ran out; every waiter
        dropped at the grant)."""
        self.run_pairs(self.gw, "parked", 3 * LEASE_MS / 1000)

    def dead_gateways_waiters_skipped(self, what: str, lean_release: bool) -> None:
        doomed = self.gateway(LEASE_MS)
        held, behind = {}, {}
        for kind, extra in KINDS:
            for name in self.names(f"{what}-{kind}"):
                held[(kind, name)] = self.hold(kind, name, extra)
                self.queue(doomed, kind, name, extra)
                behind[(kind, name)] = self.queue(self.gw, kind, name, extra, behind=1)
        doomed.kill()
        time.sleep(LEASE_MS / 1000 + 0.5)
        self.release_all(held, lean_release)
        self.assert_granted(behind)
        for kind, name in behind:
            self.assertEqual(self.waiting(kind, name), 0, (kind, name))

    def test_3_dead_gateways_waiters_skipped(self):
        """Caught: the beat writing fg:gateways alone (the live waiter behind is dropped as well)."""
        self.dead_gateways_waiters_skipped("dead", lean_release=False)

    def test_3b_dead_gateways_waiters_skipped_by_a_lean_hand_over(self):
        """Caught: a lean hand-over that took a dead gateway's waiter for a live one (granted to nobody, the live
        waiter behind left waiting)."""
        self.dead_gateways_waiters_skipped("dead-lean", lean_release=True)


if __name__ == "__main__":
    unittest.main()
