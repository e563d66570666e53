# SPDX-License-Identifier: Apache-2.0
"""A lock's and a semaphore's keys split between the two nodes of a migrating slot, through a gateway on the
cluster lab (three primaries, three replicas: cluster_lab.py). The name's slot is set IMPORTING on another primary
and MIGRATING on its owner, and one key is MIGRATEd while the rest stay, as a reshard leaves them in its middle.

The ends a first try writes over move to keys the script makes, `<key>:<fence>` (lib_lease.lua end_move), and the
watches and releases that read them name them in KEYS. What Redis Cluster does with a call whose keys a migration
split (some here, some there: TRYAGAIN) is what keeps those reads right, so each test builds that split:

1. a watch and a retried release of a lease whose end moved away, with that key on the importing node and every
   other key the watch names on the owner: 503 with Retry-After once the gateway has waited out the owner's
   TRYAGAIN (126 ms), never a wrong answer (caught: a watch that makes the moved end's key inside the script runs
   on the owner, finds no end there and fails);
2. a first try on a name used again (lua/lock_acquire_fast.lua, lua/sem_acquire_fast.lua), with and without a
   request_id, whose end record is on either node: 503 with Retry-After, and neither node's keys change;
3. a first try that meets the split while the migration moves the rest of the slot's keys and gives the slot
   away: granted, since the gateway waits out TRYAGAIN and follows the slot (caught: answering TRYAGAIN with
   503 at once);
4. once the slot has moved, every answer is right: the watches "released" and "revoked", the retried release 200,
   the watcher parked through the move told its lease's end, and the next grant's fence above every fence before.

Environment: FG_BIN, FG_TEST_PG_DSN (scripts/test).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from cluster_lab import SLOTS, LabTestCase, crc16, encode, lab_gateway, read_reply, resp, slot_tag, wait  # noqa: E402
from lock_helpers import Waiter  # noqa: E402

# kind: (key prefix, the key an end is kept in, the acquire's fields, the other keys its watch names)
KINDS = {"locks": ("lk", "h", {}, ("h", "n", "v")),
         "semaphores": ("sm", "l", {"limit": 2}, ("h", "d", "l", "n", "v"))}


class ClusterSplitTest(LabTestCase):
    @classmethod
    def start_more(cls):
        # No timed re-check of a parked watch while the test runs, so that the TRYAGAIN errors counted are
        # the test's own calls': the watcher is told of its lease's end by the slot's shard channel. A look
        # it takes anyway (the gateway's subscriptions made anew, after the move of the slot before) meets the
        # split and keeps it parked (integration.lock_ops shows that of a Redis outage).
        cls.gw = lab_gateway(cls.lab, {"poll_ms": 120000})
        cls.run_tag = f"{os.getpid()}-{time.monotonic_ns()}"

    @classmethod
    def stop_more(cls):
        if getattr(cls, "gw", None):
            cls.gw.stop(check=False)

    # -- the gateway's calls -------------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: dict | None = None):
        return self.gw.http(method, path, body)

    def acquire(self, kind: str, name: str) -> dict:
        r = self.call("POST", f"/v1/{kind}/{name}/acquire", {"ttl_ms": 60000, **KINDS[kind][2]})
        self.assertEqual(r.status, 200, self.gw.why(r))
        return r.body

    def release(self, kind: str, name: str, lease: dict):
        return self.call("POST", f"/v1/{kind}/{name}/release", {"token": lease["token"]})

    def watch(self, kind: str, name: str, fence: int, wait_ms: int = 0):
        return self.call("GET", f"/v1/{kind}/{name}?watch=true&fence={fence}&wait_ms={wait_ms}")

    def watch_apart(self, kind: str, name: str, fence: int, told: list) -> threading.Thread:
        """A watch of the lease with fence parked for up to a minute on a connection of its own, its answer put
        into told."""
        def run():
            with self.gw.client(timeout=90) as c:
                told.append(c.get(f"/v1/{kind}/{name}?watch=true&fence={fence}&wait_ms=60000"))
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def revoke(self, kind: str, name: str, lease: dict) -> None:
        body = {"fence": lease["fence"]} if kind == "semaphores" else {}
        r = self.call("POST", f"/v1/{kind}/{name}/revoke", {**body, "reason": "split test"})
        self.assertEqual((r.status, r.body.get("revoked_fence")), (200, lease["fence"]), self.gw.why(r))

    def hand_over(self, kind: str, name: str, lease: dict) -> dict:
        """Queues a waiter behind lease, releases lease (its end filed among the ended leases, since the lock passes
        on) and returns the waiter's grant."""
        waiter = Waiter(self.gw, f"/v1/{kind}/{name}/acquire", {"ttl_ms": 60000, "wait_ms": 30000})
        waiter.start()
        wait(lambda: self.call("GET", f"/v1/{kind}/{name}").body.get("waiting") == 1, 30, f"a waiter on {name}")
        self.assertEqual(self.release(kind, name, lease).status, 200)
        waiter.join(30)
        self.assertEqual(getattr(waiter.response, "status", waiter.response), 200, waiter.response)
        return waiter.response.body

    def assert_refused(self, port: int, call, what: str) -> None:
        """call() answers 503 with Retry-After because the node at port refused it (TRYAGAIN: its keys split)."""
        before = self.lab.errors(port, "TRYAGAIN")
        r = call()
        self.assertEqual((r.status, r.body.get("type") if isinstance(r.body, dict) else r.body),
                         (503, "/problems/backend_unavailable"), f"{what}: {self.gw.why(r)}")
        self.assertIn("retry-after", r.headers, what)
        self.assertGreater(self.lab.errors(port, "TRYAGAIN"), before, f"{what}: 503 for another reason than TRYAGAIN")

    def assert_ended(self, r, reason: str, what: str) -> None:
        self.assertEqual((r.status, r.body.get("held"), r.body.get("reason")), (200, False, reason),
                         f"{what}: {self.gw.why(r)}")

    # -- the slot -----------------------------------------------------------------------------------------------

    def names_in_one_slot(self, kind: str, count: int) -> list[str]:
        """count names whose keys share one slot (the hash tag is the name)."""
        first = f"split-{kind}-{self.run_tag}"
        slot, out, i = crc16(first.encode()) % SLOTS, [first], 0
        while len(out) < count:
            name = f"{first}-{i}"
            i += 1
            if crc16(name.encode()) % SLOTS == slot:
                out.append(name)
        return out

    def shards_of(self, slot: int) -> tuple[dict, dict]:
        """The shard that owns slot and another one."""
        shards = self.lab.shards()
        src = next(s for s in shards if s["primary"] == self.lab.owner(slot))
        return src, next(s for s in shards if s is not src)

    def keys(self, port: int, slot: int) -> dict[str, str]:
        """Every key of slot on the node at port, with what it holds (strings: their value; others: their type),
        read after ASKING, which an importing node needs."""
        def asking(*args: str):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s, s.makefile("rb") as f:
                s.sendall(encode("ASKING") + encode(*args))
                self.assertEqual(read_reply(f), "OK")
                return read_reply(f)

        out = {}
        for key in resp(port, "CLUSTER", "GETKEYSINSLOT", str(slot), "1000"):
            kind = asking("TYPE", key)
            out[key] = asking("GET", key) if kind == "string" else kind
        return out

    def split(self, slot: int, src: dict, dst: dict, moved: list[str]) -> None:
        """Opens the slot's migration from src to dst, as redis-cli does, and migrates the keys named only."""
        self.assertEqual(resp(dst["primary"], "CLUSTER", "SETSLOT", str(slot), "IMPORTING", src["primary_id"]), "OK")
        self.assertEqual(resp(src["primary"], "CLUSTER", "SETSLOT", str(slot), "MIGRATING", dst["primary_id"]), "OK")
        self.assertEqual(resp(src["primary"], "MIGRATE", "127.0.0.1", str(dst["primary"]), "", "0", "5000",
                              "KEYS", *moved, timeout=10), "OK")

    def move(self, slot: int, src: dict, dst: dict) -> None:
        """Migrates the slot's keys left on src and gives the slot to dst on every primary, dst first."""
        while keys := resp(src["primary"], "CLUSTER", "GETKEYSINSLOT", str(slot), "100"):
            self.assertEqual(resp(src["primary"], "MIGRATE", "127.0.0.1", str(dst["primary"]), "", "0", "5000",
                                  "KEYS", *keys, timeout=10), "OK")
        for p in sorted(self.lab.primaries(), key=lambda p: p != dst["primary"]):
            self.assertEqual(resp(p, "CLUSTER", "SETSLOT", str(slot), "NODE", dst["primary_id"]), "OK")

    def finish(self, slot: int, src: dict, dst: dict) -> None:
        """Moves the slot (move), then waits until every node agrees and the gateway follows it."""
        self.move(slot, src, dst)
        self.lab.wait_converged()
        channel = f"fg:ended:{{{slot_tag(slot)}}}"
        wait(lambda: resp(dst["primary"], "PUBSUB", "SHARDNUMSUB", channel)[1] == 1, 30,
             "the gateway following the slot's ended leases on its new owner")

    # -- the test -----------------------------------------------------------------------------------------------

    def run_split(self, kind: str) -> None:
        prefix, end_key, fields, watch_keys = KINDS[kind]
        watched, reused, warm = self.names_in_one_slot(kind, 3)
        key = f"fg:{prefix}:{{{watched}}}:{end_key}"
        reused_key = f"fg:{prefix}:{{{reused}}}:{end_key}"
        slot = crc16(watched.encode()) % SLOTS
        src, dst = self.shards_of(slot)

        # watched: a released lease (a), whose end the next first try moved to <key>:<fence a>; a revoked lease
        # (b), whose end a first try moved too; ended leases filed in the ended set (the watch's key `n`: a lock's
        # lease c released to a waiter, or a semaphore's revoked b); live holders (a lock's waiter granted, a
        # semaphore's c and x beside it, whose holders' keys then exist) with a watcher parked on the first (the
        # watched mark `v`). reused: a lease released, its end in place. warm: the slot's first grant, which
        # sets up its fences through the full script, leaving the lean paths to the others.
        w = self.acquire(kind, warm)
        self.assertEqual(self.release(kind, warm, w).status, 200)
        a = self.acquire(kind, watched)
        self.assertEqual(self.release(kind, watched, a).status, 200)
        b = self.acquire(kind, watched)
        self.revoke(kind, watched, b)
        c = self.acquire(kind, watched)
        ended = {a["fence"]: "released", b["fence"]: "revoked"}
        if kind == "locks":
            held = [self.hand_over(kind, watched, c)]
            ended[c["fence"]] = "released"
        else:
            held = [c, self.acquire(kind, watched)]
        d = self.acquire(kind, reused)
        self.assertEqual(self.release(kind, reused, d).status, 200)
        # The watcher's first look must be over before the split, or it meets the split and is answered 503, as
        # any new watch is; once it has seen its lease, looks that meet the split keep it parked. Its look marks
        # the name watched (`v`), which tells it is over; but a semaphore's revoke looks at the fence it names
        # the same way and left that mark already. It is deleted first, so the mark waited for is the watcher's
        # (no lease ends in between whose end it would have published).
        mark = f"fg:{prefix}:{{{watched}}}:v"
        self.assertIn(resp(src["primary"], "DEL", mark), (0, 1))
        told = []
        watcher = self.watch_apart(kind, watched, held[0]["fence"], told)
        wait(lambda: resp(src["primary"], "EXISTS", mark) == 1, 30, "the watcher's mark")
        before = self.keys(src["primary"], slot)
        for k in [f"{key}:{a['fence']}", reused_key, *(f"fg:{prefix}:{{{watched}}}:{s}" for s in watch_keys)]:
            self.assertIn(k, before, f"the set-up did not make {k}")

        # 1. The moved end of a on the importing node, every other key the watch names on the owner: only
        # the moved end's key, named, makes the owner refuse the watch. (A retried release names keys that do
        # not exist here, the queue's, and is refused for them too.)
        self.split(slot, src, dst, [f"{key}:{a['fence']}"])
        # A test that fails while split still moves the slot on, so the next test finds every slot served.
        self.addCleanup(lambda: self.lab.owner(slot) == src["primary"] and self.finish(slot, src, dst))
        self.assert_refused(src["primary"], lambda: self.watch(kind, watched, a["fence"]),
                            "a watch of the lease whose end moved away")
        self.assert_refused(src["primary"], lambda: self.release(kind, watched, a), "a retried release of that lease")

        # 2. A first try on the name used again, its end record on the owner, then on the importing node;
        # without a request_id and with one (its own keys named besides).
        first_try = {"ttl_ms": 60000, "wait_ms": 0, **fields}
        on_owner = {k: v for k, v in before.items() if k != f"{key}:{a['fence']}"}
        self.assert_refused(src["primary"], lambda: self.call("POST", f"/v1/{kind}/{reused}/acquire", first_try),
                            "a first try with the end record on the owner")
        self.assert_refused(src["primary"], lambda: self.call("POST", f"/v1/{kind}/{reused}/acquire",
                                                              {**first_try, "request_id": f"split-{kind}-1"}),
                            "a first try with a request_id, the end record on the owner")
        self.assertEqual(self.keys(src["primary"], slot), on_owner,
                         "a call refused during the split wrote on the owner")
        self.assertEqual(resp(src["primary"], "MIGRATE", "127.0.0.1", str(dst["primary"]), "", "0", "5000",
                              "KEYS", reused_key, timeout=10), "OK")
        del on_owner[reused_key]
        on_importing = self.keys(dst["primary"], slot)
        for body in (first_try, {**first_try, "request_id": f"split-{kind}-2"}):
            self.assert_refused(src["primary"], lambda: self.call("POST", f"/v1/{kind}/{reused}/acquire", body),
                                f"a first try {body}, the end record on the importing node")
        self.assertEqual(self.keys(dst["primary"], slot), on_importing,
                         "a first try refused during the split wrote on the importing node")
        self.assertEqual(self.keys(src["primary"], slot), on_owner,
                         "a first try refused during the split wrote on the owner")
        self.assertEqual(told, [], "the watcher was answered while its lease held")

        # 3. A first try that meets the split, then the slot moves within the gateway's waits: granted.
        tries, answer = self.lab.errors(src["primary"], "TRYAGAIN"), []
        caller = threading.Thread(target=lambda: answer.append(
            self.call("POST", f"/v1/{kind}/{reused}/acquire", first_try)), daemon=True)
        caller.start()
        deadline = time.monotonic() + 10
        while self.lab.errors(src["primary"], "TRYAGAIN") == tries and time.monotonic() < deadline:
            pass
        # The gateway, stopped while the slot moves, resumes mid-wait: its next look finds the slot moved, however
        # long the move took on a loaded machine.
        self.gw.signal(signal.SIGSTOP)
        try:
            self.assertGreater(self.lab.errors(src["primary"], "TRYAGAIN"), tries, "the first try never met the split")
            self.move(slot, src, dst)
        finally:
            self.gw.signal(signal.SIGCONT)
        caller.join(30)
        self.assertEqual(answer[0].status, 200, f"a first try as the slot moved: {self.gw.why(answer[0])}")
        self.assertGreater(answer[0].body["fence"], max(x["fence"] for x in (a, b, c, d, *held)),
                           "a fence issued as the slot moved")
        self.assertEqual(self.release(kind, reused, answer[0].body).status, 200)

        # 4. The slot moved: every answer right.
        self.finish(slot, src, dst)
        for fence, reason in ended.items():
            self.assert_ended(self.watch(kind, watched, fence), reason, f"the lease with fence {fence} after the move")
        r = self.release(kind, watched, a)
        self.assertEqual(r.status, 200, f"a retried release after the move: {self.gw.why(r)}")
        for lease in held:
            self.assertEqual(self.release(kind, watched, lease).status, 200)
        watcher.join(30)
        self.assertEqual(len(told), 1, "the watcher parked through the move was never answered")
        self.assert_ended(told[0], "released", "the watcher parked through the move")
        e = self.acquire(kind, reused)
        self.assertGreater(e["fence"], max(x["fence"] for x in (a, b, c, d, answer[0].body, *held)),
                           "a fence issued after the move")
        # The slot's first grant on its new owner (step 3's) set its fences up there (docs/cluster.md), through the
        # full script, which files the end before among the ended leases; either way it is still told.
        self.assert_ended(self.watch(kind, reused, d["fence"]), "released", "the end before the grant after the move")
        self.assertEqual(self.release(kind, reused, d).status, 200, "a retried release of the end before")

    def test_1_lock(self):
        self.run_split("locks")

    def test_2_semaphore(self):
        self.run_split("semaphores")


if __name__ == "__main__":
    unittest.main()
