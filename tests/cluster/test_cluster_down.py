# SPDX-License-Identifier: Apache-2.0
"""A Redis Cluster that answers without running a call (docs/cluster.md, "The gateway's client"). Its cluster is
one primary serving every slot and announcing a proxy's port (harness.TcpProxy) as its address, so every connection
the gateway makes to it goes through the proxy, which cuts them all (a network failure) and holds back what a
connection sends from a given command on.

1. An acquire that the cluster refuses before running it (CLUSTERDOWN: a slot left unserved puts the cluster in
   state fail) answers 503 and leaves nothing behind: it made no lease, so the janitor has none to drop, and logs
   no `orphan_grant` while the cluster is down. An acquire that got no reply still leaves its lease to the janitor
   (tests/integration/test_janitor_outage.py). Caught before the fix: the refused acquire's lease was handed to the
   janitor to drop like an unanswered one's, and every round (GIVE_BACK_RETRY_MS) its drop met CLUSTERDOWN again
   and logged `orphan_grant ... (tried again later)` until the cluster came back, to drop nothing.
2. The doorbell's follower, whose connection was cut, fetches the slot map again in its next round; a node that
   holds that fetch (`CLUSTER SHARDS`) unanswered costs the round SUBSCRIBER_SETUP_MS (1 s), not request_timeout_ms
   (5 s here): at SIGTERM the doorbell ends with the other threads (no `exit_without_waiting` names it) and the
   gateway exits within a second and a margin. Caught before the fix: the fetch waited request_timeout_ms, and the
   follower was left behind (`exit_without_waiting` named `doorbell`).
3. The lease janitor's liveness beat (every waiter_lease_ms / 3: 500 ms here) fetches the slot map again too while
   it is stale (after a follower's fetch failed); a node that holds that fetch unanswered costs the beat no more than the time to its
   next beat, not request_timeout_ms: at SIGTERM the lease janitor ends with the other threads (no
   `exit_without_waiting` names `janitor`) and the gateway exits within a second and a margin. Caught before the
   fix: the beat's fetch waited request_timeout_ms, and the janitor was left behind.

4. The lease janitor's give-back of an orphaned grant (a doorbell message for a lease this gateway does not wait
   for) routes its cancel by the slot map, which it fetches again first when stale; a node that holds that fetch
   unanswered costs the give-back ROUTE_REFETCH_MS (1 s) at most, and the map in force routes the cancel: a
   waiter parked meanwhile, whose deadline the same janitor answers, is answered within a second of it. Caught
   before the fix: the fetch waited request_timeout_ms (5 s) for each node asked, and so did the waiter's answer.
5. The backend janitor's audit sweep (one EXISTS per slot, pipelined, at start-up, every minute and after a back-off
   while it fails) waits for Redis a second in all (request_timeout_ms if less); a node that holds it unanswered
   at SIGTERM holds the janitor no longer than the threads' stop grace: no `exit_without_waiting` names `janitor`
   and the gateway exits within a second and a margin. Caught before the fix: the sweep waited request_timeout_ms
   (5 s here) in all, and the janitor was left behind.

6. The backend janitor's pruning of the listing indexes (a bounded batch of slots a pass, every 5 s) waits for
   Redis a second in all (request_timeout_ms if less), as the sweep does: a node that holds a pass unanswered at
   SIGTERM holds no exit. Caught before the fix: each pass's calls waited request_timeout_ms, and the janitor
   was left behind.

Environment: FG_BIN, FG_TEST_PG_DSN (scripts/test).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from cluster_lab import resp, wait  # noqa: E402
from harness import Gateway  # noqa: E402
from one_node import OneNodeCluster  # noqa: E402

TIMEOUT_MS = 5000  # request_timeout_ms: well above SUBSCRIBER_SETUP_MS (1 s)
GIVE_BACK_RETRY_MS = 1000  # src/fglimits.h: a janitor's give-back that met an outage is tried again
UNSERVED_SLOT = 0  # the slot left without an owner: the cluster is down
BEAT_LEASE_MS = 1500  # waiter_lease_ms: a liveness beat every 500 ms, well below request_timeout_ms
WAIT_MS = 500  # the parked waiter's wait_ms in test 4
LATE_S = 1.5  # what its answer may take beyond WAIT_MS: ROUTE_REFETCH_MS and a margin on a loaded machine
SWEEP_KEY = b"fg:audit:{"  # what the audit sweep's EXISTS name: a slot's audit stream (KEY_AUDIT ":{T(s)}")
PRUNE_CALL = b"fg_lease_list_"  # the listing script's function, which the index pruning calls (nobody lists here)
PRUNE_EVERY_S = 5  # src/janitor.c INDEX_PRUNE_MS


class ClusterDownTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = OneNodeCluster("down", hold=b"SHARDS")
        cls.port, cls.proxy = cls.cluster.port, cls.cluster.proxy

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def gateway(self, **config) -> Gateway:
        gw = Gateway(env_overrides=self.cluster.gateway_env(),
                     config={"request_timeout_ms": TIMEOUT_MS, **config})
        self.addCleanup(gw.stop)
        return gw

    def cluster_down(self):
        """Leaves UNSERVED_SLOT without an owner (until cluster_up): every command is answered CLUSTERDOWN."""
        resp(self.port, "CLUSTER", "DELSLOTS", str(UNSERVED_SLOT))
        self.addCleanup(self.cluster_up)
        wait(lambda: "cluster_state:fail" in resp(self.port, "CLUSTER", "INFO"), 15, "the cluster down")

    def cluster_up(self):
        resp(self.port, "CLUSTER", "ADDSLOTS", str(UNSERVED_SLOT))  # an error once it is served again
        wait(lambda: "cluster_state:ok" in resp(self.port, "CLUSTER", "INFO"), 15, "the cluster up again")

    @staticmethod
    def logged(gw: Gateway, event: str) -> list[dict]:
        return [json.loads(line) for line in gw.log_text().splitlines() if f'"{event}"' in line]

    def test_1_an_acquire_refused_by_a_cluster_down_leaves_no_lease_to_drop(self):
        gw = self.gateway()
        r = gw.http("POST", f"/v1/locks/down-before-{uuid.uuid4().hex[:8]}/acquire", {"ttl_ms": 60000})
        self.assertEqual(r.status, 200, gw.why(r))
        self.cluster_down()
        names = [f"down-{i}-{uuid.uuid4().hex[:8]}" for i in range(3)]
        for name in names:
            r = gw.http("POST", f"/v1/locks/{name}/acquire", {"wait_ms": 0, "ttl_ms": 60000})
            self.assertEqual(r.status, 503, gw.why(r))
            self.assertIn("CLUSTERDOWN", gw.why(r), "the cause of the 503 is logged")
        # The janitor gives an unanswered acquire's lease back ORPHAN_GRACE_MS (200 ms) after its answer, and
        # again every GIVE_BACK_RETRY_MS while Redis refuses the drop.
        time.sleep(3 * GIVE_BACK_RETRY_MS / 1000)
        self.assertEqual([e.get("detail") for e in self.logged(gw, "orphan_grant")], [],
                         f"the janitor dropped the leases of acquires the cluster never ran: {gw.log_path}")
        self.cluster_up()
        for name in names:
            r = gw.http("GET", f"/v1/locks/{name}")
            self.assertEqual((r.status, r.body.get("held")), (200, False), gw.why(r))

    def test_2_a_map_fetch_held_unanswered_holds_no_exit(self):
        # The liveness beat (every waiter_lease_ms / 3) and the audit stream's sweep (at start-up, then every
        # minute) look up every slot's owner too: neither during the test, so that the followers' rounds are the
        # ones that fetch the map.
        gw = self.gateway(waiter_lease_ms=60000)
        self.cut_and_hold_the_map_fetch(gw)
        self.assert_exits_in_time(gw, "doorbell")

    def test_3_a_map_fetch_held_unanswered_holds_no_beat_past_its_round(self):
        gw = self.gateway(waiter_lease_ms=BEAT_LEASE_MS)
        self.cut_and_hold_the_map_fetch(gw)
        # That follower gives its fetch up within a second and subscribes by the map it has, as the other follower
        # does meanwhile: the next fetch of the map, still stale, is a beat's, and is held back too
        self.proxy.arm()
        self.assertTrue(self.proxy.held.wait(10), "no beat fetched the slot map again")
        self.assert_exits_in_time(gw, "janitor")

    def test_4_a_map_fetch_held_unanswered_holds_no_give_back_past_a_second(self):
        gw = self.gateway(waiter_lease_ms=60000)
        held = f"down-held-{uuid.uuid4().hex[:8]}"
        r = gw.http("POST", f"/v1/locks/{held}/acquire", {"ttl_ms": 60000})
        self.assertEqual(r.status, 200, gw.why(r))
        self.cut_and_hold_the_map_fetch(gw)
        time.sleep(1.5)  # the followers gave their fetch up and subscribed again by the map they have
        channels = resp(self.port, "PUBSUB", "SHARDCHANNELS", "*bell:*")
        self.assertTrue(channels, "the gateway follows no doorbell channel")
        channel = channels[0] if isinstance(channels[0], str) else channels[0].decode()
        self.proxy.arm()
        resp(self.port, "SPUBLISH", channel, f"l|{uuid.uuid4().hex}|down-orphan-{uuid.uuid4().hex[:8]}")
        self.assertTrue(self.proxy.held.wait(10), "no give-back fetched the slot map again")
        t0 = time.monotonic()
        r = gw.http("POST", f"/v1/locks/{held}/acquire", {"ttl_ms": 60000, "wait_ms": WAIT_MS})
        took = time.monotonic() - t0
        self.assertEqual(r.status, 409, gw.why(r))
        self.assertLess(took, WAIT_MS / 1000 + LATE_S,
                        f"the waiter was answered {took:.1f} s after it asked; log {gw.log_path}")

    def test_5_a_sweep_held_unanswered_holds_no_exit(self):
        # The sweep runs at start-up, then every minute, and again after a back-off (500 ms) while it fails. The
        # backend janitor's other calls (its index pruning, every 5 s) are not due then.
        gw = self.gateway_held_on_a_retry(SWEEP_KEY, "the sweep", 10)
        self.assert_exits_in_time(gw, "janitor")

    def test_6_a_prune_held_unanswered_holds_no_exit(self):
        # The pruning runs at start-up, then every PRUNE_EVERY_S, failed or not.
        gw = self.gateway_held_on_a_retry(PRUNE_CALL, "the indexes' pruning", PRUNE_EVERY_S + 10)
        self.assert_exits_in_time(gw, "janitor")

    def gateway_held_on_a_retry(self, call: bytes, what: str, again_within: float) -> Gateway:
        """A gateway whose start-up call naming `call` is held and its connection cut at once, which fails it,
        returned once its next such call, on a new connection, is held unanswered."""
        self.addCleanup(setattr, self.proxy, "hold", self.proxy.hold)
        self.proxy.hold = call
        self.proxy.arm()
        self.addCleanup(self.proxy.let_go)
        first, armed_again = self.proxy.held, threading.Event()

        def fail_the_first():
            if first.wait(30):
                self.proxy.arm()
                self.proxy.cut()
                armed_again.set()

        threading.Thread(target=fail_the_first, daemon=True).start()
        gw = self.gateway(waiter_lease_ms=60000)  # no liveness beat during the test (see test 2)
        self.assertTrue(armed_again.wait(30), f"the start-up's call of {what} was not held")
        self.assertTrue(self.proxy.held.wait(again_within), f"{what} was not tried again")
        return gw

    def cut_and_hold_the_map_fetch(self, gw: Gateway):
        """Once gw answers and its start-up's sweep is done, cuts its connections: the followers' subscriptions
        end, their next round marks the map stale and fetches it, and the proxy holds that fetch unanswered."""
        r = gw.http("POST", f"/v1/locks/down-before-{uuid.uuid4().hex[:8]}/acquire", {"ttl_ms": 60000})
        self.assertEqual(r.status, 200, gw.why(r))
        time.sleep(2)  # the start-up's sweep is done
        self.proxy.arm()
        self.addCleanup(self.proxy.let_go)
        self.proxy.cut()
        self.assertTrue(self.proxy.held.wait(10), "nobody fetched the slot map again")

    def assert_exits_in_time(self, gw: Gateway, thread: str):
        """SIGTERM: gw exits within a second and a margin, and no exit_without_waiting names thread."""
        # SIGTERM half a second into the held fetch: the fetch's own budget (1 s at most) then ends half a second
        # before the threads' stop grace (STOP_GRACE_MS, 1 s from the drain's end) does, a margin a loaded machine
        # keeps; a fetch that waits request_timeout_ms (5 s) still outlasts that grace.
        time.sleep(0.5)
        took = gw.seconds_to_exit()
        gw.stop(check=False)
        left = [entry for entry in self.logged(gw, "exit_without_waiting") if entry.get(thread)]
        self.assertEqual(left, [], f"{thread} was left behind: {gw.log_path}")
        self.assertLess(took, 2.5, f"the gateway exited {took:.1f} s after SIGTERM; log {gw.log_path}")

if __name__ == "__main__":
    unittest.main()
