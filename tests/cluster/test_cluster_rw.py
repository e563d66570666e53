# SPDX-License-Identifier: Apache-2.0
"""Fenced Redis writes, revocations and the audit stream of docs/cluster.md, through the real gateway on a
redis-cluster:// URL against the cluster lab (three primaries, three replicas: cluster_lab.py), with the test's
Postgres. Each test names in its docstring a mutation of the gateway it was seen to catch.

1. a stale write is refused, and an up-to-date one applied, for keys in many slots on every primary; the highest
   fence of key K lives in fg:rf:{T(slot K)}:K on K's node, and nothing under a deployment-wide name;
2. a revoke is final on every shard: from its 200 on, the revoked token's writes are refused on every primary,
   also for a set rebuilt from Postgres (deleted, or left by another process: a failover), and after slots move
   (a revoked set carried away by a reshard and brought back must not miss a revocation made meanwhile);
3. refusals from many slots reach fencegate.rejections exactly once each, and their streams empty;
4. entries a gateway left in the streams of several slots when it was killed are found by the sweep of a gateway
   that starts, and entries left behind a running gateway's back by its sweep within the minute (the long run,
   FG_CLUSTER_LONG=1); each stored exactly once;
5. a slot moved by a live reshard under a holder is adopted by its new owner without a loss (its writes go on);
   a slot's first use raises no write floor; a lock whose fences are below another slot's floor (raised by a
   loss) is lifted above it by its first refused write there;
6. dead letters are kept per slot and listed from every slot by `fencegate audit-dead-letters`;
7. a replica promoted from a slot's old owner, which lives on, still counts a loss;
8. so does a new owner restarted from data older than its adoption of a moved slot (docs/cluster.md, "A moved
   slot");
9. a write under require_live_lease whose script cannot read the lease where the gateway's map put it (the lock's
   slot moved away behind the map) asks about the lease outside it: applied while the lease holds, refused 410
   lease_expired once it ended (docs/design.md, "Writes under a live lease").

Environment: FG_BIN, FG_TEST_PG_DSN (scripts/test); FG_CLUSTER_LONG=1 adds the minute-long wait of test_4b:
    FG_CLUSTER_LONG=1 scripts/test -R cluster.rw
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from cluster_lab import SLOTS, LabTestCase, as_kv, crc16, lab_gateway, resp, slot_tag, wait  # noqa: E402
from harness import Gateway, psql, run_fencegate  # noqa: E402
from lab import encode, read_reply  # noqa: E402  (tests/ha, on the path cluster_lab set)

PREFIX = "app:"
LIVE = "live:"  # a prefix with require_live_lease (docs/api.md)


def slot_of(key: str) -> int:
    s = key.find("{")
    if s >= 0:
        e = key.find("}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key.encode()) % SLOTS


def rejections(resource: str) -> list[tuple[str, str, int]]:
    """(reason, source_id, presented fence) of every audit row of resource, oldest first."""
    rows = psql("SELECT reason, coalesce(source_id, ''), presented_fence FROM fencegate.rejections"
                " WHERE resource = :'r' ORDER BY id", {"r": resource})
    return [(r.split("|")[0], r.split("|")[1], int(r.split("|")[2])) for r in rows]


class Monitor:
    """The commands a node runs from now on (MONITOR, on a connection of its own); commands() reads them up to
    a marker sent after, so it holds exactly what the node ran before it was called. Commands a node refuses
    (MOVED, ASK, a script's read of a key of a slot it does not serve) are not in it."""

    def __init__(self, port: int):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.file = self.sock.makefile("rb")
        self.sock.sendall(encode("MONITOR"))
        if read_reply(self.file) != "OK":
            raise RuntimeError(f"MONITOR refused on {port}")

    def commands(self, *args: str) -> list[str]:
        """The commands run (MONITOR's lines) that have each of args as an argument; closes the monitor."""
        marker = f"monitor-end-{time.monotonic_ns()}"
        resp(self.port, "ECHO", marker)
        lines = []
        while marker not in (line := read_reply(self.file)):
            lines.append(line)
        self.close()
        return [ln for ln in lines if all(f'"{a}"' in ln for a in args)]

    def close(self):
        self.file.close()
        self.sock.close()


class ClusterWriteTest(LabTestCase):
    gw: Gateway | None = None

    @classmethod
    def start_more(cls):
        cls.gw = cls.gateway()
        cls.run_tag = f"{os.getpid()}-{time.monotonic_ns()}"

    @classmethod
    def stop_more(cls):
        if cls.gw is not None:
            cls.gw.stop(check=False)

    @classmethod
    def gateway(cls) -> Gateway:
        return lab_gateway(cls.lab, {"redis_prefixes": [PREFIX, {"prefix": LIVE, "require_live_lease": True}]})

    # --- helpers ---------------------------------------------------------------------------------------
    def keys_on_every_primary(self, per_primary: int, what: str) -> dict[int, list[str]]:
        """Application keys of distinct slots, per_primary of them on each primary (port -> keys), each
        "app:{<tag>}/..." so that the lock called <tag> (bound_lock) lives in the key's slot."""
        out: dict[int, list[str]] = {p: [] for p in self.lab.primaries()}
        slots = set()
        i = 0
        while any(len(v) < per_primary for v in out.values()):
            key = f"{PREFIX}{{{what}-{self.run_tag}-{i}}}/k"
            i += 1
            owner = self.lab.owner(slot_of(key))
            if slot_of(key) not in slots and len(out[owner]) < per_primary:
                slots.add(slot_of(key))
                out[owner].append(key)
        return out

    @staticmethod
    def bound_lock(key: str) -> str:
        """The lock whose keys share key's slot: its hash tag (docs/cluster.md: bind a key to a lock of its
        slot; a token of a lock whose slot's sequence started before the key's slot was first used is below
        that slot's write floor)."""
        return key[key.index("{") + 1:key.index("}")]

    def warm(self, keys: list[str]) -> None:
        """Starts the fence sequence (and so the write floor) of each key's slot, through a lease of its lock."""
        for key in keys:
            lease = self.acquire(self.bound_lock(key))
            self.assertEqual(self.gw.http("POST", f"/v1/locks/{self.bound_lock(key)}/release",
                                          {"token": lease["token"]}).status, 200)

    def stale_pairs(self, keys: list[str]) -> dict[str, tuple[dict, dict]]:
        """For each key two leases of its bound lock, the first expired: key -> (old, new)."""
        olds = {key: self.acquire(self.bound_lock(key), ttl_ms=200) for key in keys}
        time.sleep(0.3)
        out = {}
        for key in keys:
            new = self.acquire(self.bound_lock(key))
            self.assertGreater(new["fence"], olds[key]["fence"])
            out[key] = (olds[key], new)
        return out

    def acquire(self, name: str, ttl_ms: int = 30000) -> dict:
        r = self.gw.http("POST", f"/v1/locks/{name}/acquire", {"ttl_ms": ttl_ms})
        self.assertEqual(r.status, 200, r)
        return r.body

    def put(self, key: str, token: str, value: str):
        return self.gw.http("PUT", f"/v1/redis/{key}", {"value": value}, {"Fence-Token": token})

    def assert_refused(self, key: str, token: str, reason: str):
        r = self.put(key, token, "late")
        want = (409, "/problems/stale_fence") if reason == "stale_fence" else (410, "/problems/lease_lost")
        self.assertEqual((r.status, r.body.get("type")), want, (key, r))
        if reason == "revoked":
            self.assertEqual(r.body["reason"], "revoked", r)

    def wait_rows(self, resources: list[str], count: int = 1) -> None:
        wait(lambda: all(len(rejections(res)) >= count for res in resources), 30, "the audit rows")
        time.sleep(0.5)  # a row stored twice would show by now

    # --- tests -----------------------------------------------------------------------------------------
    def test_1_stale_write_refused_in_every_slot(self):
        """Keys in 12 slots, four on each primary: the holder's write applied (also a value of 8 KB, whose command
        is formatted apart), the expired holder's refused (409), audited once, with the fence kept in K's slot.
        Caught: the audit rows' source id without the slot's stream (fg:audit/<id>); a command over 4 KB written
        without the run_id in the fence limit's name (its write answered 503: the slot's limit never found)."""
        keys = self.keys_on_every_primary(4, "stale")
        pairs = self.stale_pairs([k for ks in keys.values() for k in ks])
        for port, ks in keys.items():
            for key in ks:
                old, new = pairs[key]
                r = self.put(key, new["token"], "now")
                self.assertEqual((r.status, r.body.get("fence")), (200, new["fence"]), (key, r))
                self.assert_refused(key, old["token"], "stale_fence")
                tag = slot_tag(slot_of(key))
                self.assertEqual(resp(port, "GET", f"fg:rf:{{{tag}}}:{key}"), str(new["fence"]))
                self.assertEqual(resp(port, "GET", key), "now")
                big = self.put(key, new["token"], "x" * 8192)
                self.assertEqual((big.status, len(resp(port, "GET", key))), (200, 8192), (key, big.status))
        self.wait_rows(["redis:" + k for ks in keys.values() for k in ks])
        for ks in keys.values():
            for key in ks:
                [(reason, source, presented)] = rejections("redis:" + key)
                self.assertEqual((reason, presented), ("stale_fence", pairs[key][0]["fence"]))
                self.assertTrue(source.startswith(f"fg:audit:{{{slot_tag(slot_of(key))}}}/"), source)
        for p in self.lab.primaries():
            for name in ("fg:fence_floor", "fg:fence_limit", "fg:audit", "fg:revoked"):
                self.assertNotEqual(resp(p, "EXISTS", name), 1, name)

    def test_2_revoke_final_on_every_shard(self):
        """A revoked token is refused on every primary from the revoke's 200 on: for sets that existed, for a set
        deleted (rebuilt from Postgres), on a node whose set came from another process (a failover), and after the
        home slot of a primary (whose set the writes read) is moved away, a second lock revoked meanwhile, and the
        slot moved back. Caught: the revoke adding the fence only to the set of each primary's home slot of the
        gateway's map (the set brought back by the second move missed the second revocation: 200, not 410)."""
        keys = self.keys_on_every_primary(3, "revoke")
        self.warm([k for ks in keys.values() for k in ks])  # the locks below start their sequences after
        lock_a, lock_b = f"rv-a-{self.run_tag}", f"rv-b-{self.run_tag}"
        a, b = self.acquire(lock_a), self.acquire(lock_b)
        for ks in keys.values():  # every node's set built and read before the revoke
            for key in ks:
                self.assertEqual(self.put(key, a["token"], "a").status, 200)
        r = self.revoke(lock_a)
        self.assertEqual((r.status, r.body), (200, {"revoked_fence": a["fence"]}))
        for ks in keys.values():
            for key in ks:
                self.assert_refused(key, a["token"], "revoked")
        # A set missing is rebuilt from Postgres, which holds the revocation.
        shards = self.lab.shards()
        home = {s["primary"]: max(s["ranges"][i + 1] for i in range(0, len(s["ranges"]), 2)) for s in shards}
        for port, slot in home.items():
            self.assertEqual(resp(port, "SISMEMBER", f"fg:revoked:{{{slot_tag(slot)}}}", str(a["fence"])), 1)
        first = shards[0]["primary"]
        self.assertEqual(resp(first, "DEL", f"fg:revoked:{{{slot_tag(home[first])}}}"), 1)
        for key in keys[first]:
            self.assert_refused(key, a["token"], "revoked")
        # The home slot of the first primary moves to the second, lock b is revoked while it is away, it comes
        # back: the set it carries must hold b's fence.
        src, dst = shards[0], shards[1]
        self.lab.move_slot(home[first], src, dst)
        self.lab.wait_converged()
        for key in keys[first]:  # the first primary's writes now read another slot's set
            self.assert_refused(key, a["token"], "revoked")
        self.assertEqual(self.revoke(lock_b).status, 200)
        self.lab.move_slot(home[first], self.lab.shards()[1], self.lab.shards()[0])
        self.lab.wait_converged()
        time.sleep(0.3)
        for ks in keys.values():
            for key in ks:
                self.assert_refused(key, b["token"], "revoked")
                self.assert_refused(key, a["token"], "revoked")
        # A failover: the promoted replica holds sets stamped with its old primary's run_id: rebuilt.
        victim = self.lab.shards()[2]
        self.lab.kill9(victim["primary"])
        wait(lambda: self.lab.failed_over(victim["ranges"][0], victim["primary"]), 30, "the failover")
        self.lab.wait_converged()
        deadline = time.monotonic() + 20
        for key in keys[victim["primary"]]:
            while (r := self.put(key, b["token"], "late")).status == 503 and time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertEqual((r.status, r.body.get("reason")), (410, "revoked"), (key, r))
        self.lab.start_node(victim["primary"])  # back as a replica, for the tests after
        self.lab.wait_converged()

    def test_3_audit_exactly_once_from_many_slots(self):
        """Stale writes to keys of 30 slots, three each, from eight threads: every refusal is one row in Postgres
        (its source id names its slot's stream) and every stream is empty after. Caught: the source id kept as
        fg:audit/<entry id> (entries of two slots with the same id stored as one row: fewer rows than refusals)."""
        import threading
        keys = [k for ks in self.keys_on_every_primary(10, "audit").values() for k in ks]
        pairs = self.stale_pairs(keys)
        for key in keys:
            self.assertEqual(self.put(key, pairs[key][1]["token"], "v").status, 200)
        errors: list = []

        def stale(part: list[str]):
            try:
                with self.gw.client() as c:  # one connection per thread
                    for _ in range(3):
                        for key in part:
                            r = c.request("PUT", f"/v1/redis/{key}", {"value": "late"},
                                          {"Fence-Token": pairs[key][0]["token"]})
                            if r.status != 409:
                                errors.append((key, r))
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=stale, args=(keys[i::8],)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.wait_rows(["redis:" + k for k in keys], 3)
        for key in keys:
            rows = rejections("redis:" + key)
            self.assertEqual(len(rows), 3, (key, rows))
            self.assertEqual(len({source for _, source, _ in rows}), 3, rows)
        for key in keys:
            stream = f"fg:audit:{{{slot_tag(slot_of(key))}}}"
            self.assertEqual(resp(self.lab.owner(slot_of(key)), "XLEN", stream), 0, stream)

    def test_4_sweep_after_a_gateway_died(self):
        """Refusals a gateway left in the streams of nine slots when it was killed (kill -9; the entries written by
        the write script itself, as a gateway that died before its drain ran leaves them) are stored exactly once
        by the gateway that starts after, from its first sweep (test_4b: the sweep within the minute). Caught: the
        sweep left out (the rows never come)."""
        keys = [k for ks in self.keys_on_every_primary(3, "sweep").values() for k in ks]
        pairs = self.stale_pairs(keys)
        for key in keys:
            self.assertEqual(self.put(key, pairs[key][1]["token"], "v").status, 200)
        self.gw.kill()
        try:
            for key in keys:
                self.leave_refusal(key, pairs[key][0])
            time.sleep(0.5)
            self.assertEqual([rejections("redis:" + k) for k in keys], [[] for _ in keys])
            before = self.command_usec("exists"), self.cpu_s()
        finally:
            type(self).gw = self.gateway()
        self.wait_rows(["redis:" + k for k in keys])
        after = self.command_usec("exists"), self.cpu_s()
        print(f"sweep at start: {after[0][0] - before[0][0]} EXISTS, {(after[0][1] - before[0][1]) / 1000:.1f} ms in "
              f"EXISTS, {(after[1] - before[1]) * 1000:.1f} ms of Redis CPU in all (the gateway's start included), "
              "over the primaries", file=sys.stderr)
        for key in keys:
            self.assertEqual(len(rejections("redis:" + key)), 1, key)
            self.assertEqual(resp(self.lab.owner(slot_of(key)), "XLEN", f"fg:audit:{{{slot_tag(slot_of(key))}}}"), 0)

    @unittest.skipUnless(os.environ.get("FG_CLUSTER_LONG") == "1",
                         "the long run (FG_CLUSTER_LONG=1): waits up to a minute for the gateway's sweep")
    def test_4b_sweep_within_the_minute(self):
        """Refusals left in the streams of three slots behind a running gateway's back (no poke: the write script
        run directly) are stored by its sweep within the minute. Caught: the sweep run at start only (the rows
        never come)."""
        keys = [k for ks in self.keys_on_every_primary(1, "minute").values() for k in ks]
        pairs = self.stale_pairs(keys)
        for key in keys:
            self.assertEqual(self.put(key, pairs[key][1]["token"], "v").status, 200)
            self.leave_refusal(key, pairs[key][0])
        wait(lambda: all(len(rejections("redis:" + k)) == 1 for k in keys), 75, "the minute's sweep")

    def leave_refusal(self, key: str, old: dict) -> None:
        """Runs the write script on key's node with the expired lease old, as a gateway would: a stale refusal
        left in the stream of key's slot."""
        slot = slot_of(key)
        tag, port = slot_tag(slot), self.lab.owner(slot)
        audit = "".join(f"{len(f.encode())}:{f}"  # lua/lib_rw.lua ARGV audit
                        for f in ("redis:" + key, self.bound_lock(key), "lock", "", "127.0.0.1", "PUT", "", ""))
        out = resp(port, "FCALL", self.function(port, "rw_put"), "5", key, f"fg:rf:{{{tag}}}:{key}",
                   f"fg:audit:{{{tag}}}", f"fg:fence_floor:{{{tag}}}", f"fg:fence_limit:{{{tag}}}:" + self.run_id(port),
                   str(old["fence"]), self.revoked_set(port), audit, "", "late")  # no lease to look at
        self.assertIn('"r":"stale"', str(out), (key, out))

    def holder_of_a_key_elsewhere(self, what: str) -> tuple[str, dict, str]:
        """A lease of a new lock and a key of a slot used for the first time, on another primary than the lock's,
        which the holder has written (a first use raises no floor): (lock, lease, key)."""
        lock = f"{what}-{self.run_tag}"
        lease = self.acquire(lock)
        key = next(k for i in range(1000) if slot_of(k := f"{PREFIX}{what}/{self.run_tag}/{i}") != slot_of(lock)
                   and self.lab.owner(slot_of(k)) != self.lab.owner(slot_of(lock)))
        r = self.put(key, lease["token"], "first")
        self.assertEqual((r.status, r.body.get("fence")), (200, lease["fence"]), r)
        return lock, lease, key

    def test_5_a_slot_moved_mid_hold_is_adopted(self):
        """A holder's lock and a key it writes each sit in a slot that a live reshard moves to another primary
        while it holds the lock (the key in a slot of its own, written by the lock of another slot): its next
        writes are applied (no 409), its release works, and the new owner took each slot over without a loss:
        Postgres names the new owner's process, the slot's origin record too, the old owner's limit is gone, and
        the write floor did not move. Caught: the old owner's view left out of the judgement (condition 3 read
        as "the old owner still serves the slot": 409); the adoption disabled (409)."""
        lock, lease, key = self.holder_of_a_key_elsewhere("adopt")
        moved = {}
        for slot in (slot_of(key), slot_of(lock)):
            shards = self.lab.shards()
            src = next(sh for sh in shards if sh["primary"] == self.lab.owner(slot))
            dst = next(sh for sh in shards if sh is not src)
            tag = slot_tag(slot)
            old_run, floor = self.run_id(src["primary"]), resp(src["primary"], "GET", f"fg:fence_floor:{{{tag}}}")
            self.assertEqual(resp(src["primary"], "GET", f"fg:fence_origin:{{{tag}}}"), old_run)
            self.lab.move_slot(slot, src, dst)
            moved[slot] = (src["primary"], dst["primary"], old_run, floor)
        self.lab.wait_converged()
        r = self.put(key, lease["token"], "after the move")
        self.assertEqual((r.status, r.body.get("fence")), (200, lease["fence"]), r)
        self.assertEqual(resp(self.lab.owner(slot_of(key)), "GET", key), "after the move")
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{lock}/renew", {"token": lease["token"], "ttl_ms": 30000})
                         .status, 200)
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{lock}/release", {"token": lease["token"]}).status, 200)
        nxt = self.acquire(lock)
        self.assertGreater(nxt["fence"], lease["fence"])
        self.assertEqual(self.put(key, nxt["token"], "next").status, 200)
        self.assert_refused(key, lease["token"], "stale_fence")
        for slot, (src, dst, old_run, floor) in moved.items():
            tag, new_run = slot_tag(slot), self.run_id(dst)
            self.assertEqual(psql("SELECT owner FROM fencegate.fence_slots WHERE slot = :'s'", {"s": str(slot)}),
                             [new_run], slot)
            self.assertEqual(resp(dst, "GET", f"fg:fence_origin:{{{tag}}}"), new_run)
            self.assertEqual(resp(dst, "EXISTS", f"fg:fence_limit:{{{tag}}}:{old_run}"), 0)
            self.assertEqual(resp(dst, "EXISTS", f"fg:fence_limit:{{{tag}}}:{new_run}"), 1)
            self.assertEqual(resp(dst, "GET", f"fg:fence_floor:{{{tag}}}"), floor, slot)

    def test_5b_a_lock_lifted_above_another_slots_floor(self):
        """A key in a slot used for the first time is written by a lock of another slot whose sequence started
        earlier (a first use raises no floor: nothing there was ever written). Its slot then moves to another
        primary without its origin record (deleted first: keys the new owner cannot trace), whose recovery of
        the slot is a loss and raises the floor above that lock's fences: the next write is refused (409, the
        floor as current_fence), and the refusal makes the lock issue above the floor, so a lease taken after
        writes. Caught: a slot's first use taken as a loss (the first write refused); the lift left out (every
        later lease of the lock refused too, until its slot's block of 10,000 fences ran out)."""
        lock, lease, key = self.holder_of_a_key_elsewhere("lift")
        shards = self.lab.shards()
        src = next(sh for sh in shards if sh["primary"] == self.lab.owner(slot_of(key)))
        dst = next(sh for sh in shards if sh is not src)
        self.assertEqual(resp(src["primary"], "DEL", f"fg:fence_origin:{{{slot_tag(slot_of(key))}}}"), 1)
        self.lab.move_slot(slot_of(key), src, dst)
        self.lab.wait_converged()
        r = self.put(key, lease["token"], "after the move")
        self.assertEqual((r.status, r.body.get("type")), (409, "/problems/stale_fence"), r)
        floor = r.body["current_fence"]
        self.assertGreater(floor, lease["fence"])
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{lock}/release", {"token": lease["token"]}).status, 200)
        lease = self.acquire(lock)
        self.assertGreater(lease["fence"], floor)
        r = self.put(key, lease["token"], "now")
        self.assertEqual((r.status, r.body.get("fence")), (200, lease["fence"]), r)

    def test_6_dead_letters_of_every_slot(self):
        """An entry Postgres cannot store (a NUL in a field) ahead of a refusal in the streams of three slots, one
        on each primary: the drain the refusal pokes moves it to that slot's dead letters and stores the refusal
        behind it, and `fencegate audit-dead-letters` on the cluster URL lists the three. Caught: the listing
        reading one slot's dead letters only (two of the three missing)."""
        keys = [ks[0] for ks in self.keys_on_every_primary(1, "dead").values()]
        pairs = self.stale_pairs(keys)
        bad = {}
        for key in keys:
            self.assertEqual(self.put(key, pairs[key][1]["token"], "v").status, 200)
            slot = slot_of(key)
            bad[key] = resp(self.lab.owner(slot), "XADD", f"fg:audit:{{{slot_tag(slot)}}}", "*", "resource",
                            "redis:" + key, "lock", "l", "presented", "1", "current", "2", "owner", "bad\x00owner",
                            "client_addr", "127.0.0.1", "method", "PUT", "reason", "stale_fence", "at_ms", "0")
            self.assert_refused(key, pairs[key][0]["token"], "stale_fence")
        self.wait_rows(["redis:" + k for k in keys])
        for key in keys:
            self.assertEqual(len(rejections("redis:" + key)), 1, key)
            slot = slot_of(key)
            dead = resp(self.lab.owner(slot), "XRANGE", f"fg:audit:dead:{{{slot_tag(slot)}}}", "-", "+")
            self.assertIn(bad[key], [dict(zip(e[1][::2], e[1][1::2]))["source_id"] for e in dead])
        listed = run_fencegate(["audit-dead-letters"], env_overrides={"FENCEGATE_REDIS_URL": self.lab.url()})
        self.assertEqual(listed.returncode, 0, listed.stderr)
        ids = [json.loads(line)["fields"]["source_id"] for line in listed.stdout.splitlines()]
        self.assertEqual(sorted(i for i in ids if i in bad.values()), sorted(bad.values()))

    def test_7_a_replica_promoted_from_the_old_owner_is_a_loss(self):
        """A primary's replica takes its slots over (CLUSTER FAILOVER TAKEOVER) while the primary is frozen
        (SIGSTOP), so the primary's last writes may be missing there; the primary is thawed and lives on (as a
        replica of the promoted one). Its slots' origin records name the old primary, a live process: the new
        owner must still count a loss, so a holder from before is refused (the write floor rose above its
        fence), and the next lease writes. Caught: conditions 3 (the old owner still a primary) and 4 (no
        replication history in common) both left out (the holder's write applied: 200)."""
        shard = self.lab.shards()[0]
        primary, replica = shard["primary"], shard["replicas"][0]
        lock_key = next(k for i in range(2000)
                        if self.lab.owner(slot_of(k := f"{PREFIX}{{promoted-{self.run_tag}-{i}}}/k")) == primary)
        lease = self.acquire(self.bound_lock(lock_key))
        self.assertEqual(self.put(lock_key, lease["token"], "before").status, 200)
        resp(primary, "WAIT", "1", "2000")
        self.lab.procs[primary].send_signal(signal.SIGSTOP)
        try:
            self.assertEqual(resp(replica, "CLUSTER", "FAILOVER", "TAKEOVER"), "OK")
            wait(lambda: resp(replica, "ROLE")[0] == "master", 30, "the takeover")
        finally:
            self.lab.procs[primary].send_signal(signal.SIGCONT)
        wait(lambda: resp(primary, "ROLE")[0] == "slave", 30, "the old primary to follow the promoted one")
        self.lab.wait_converged()
        deadline = time.monotonic() + 20
        while (r := self.put(lock_key, lease["token"], "after")).status == 503 and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual((r.status, r.body.get("type")), (409, "/problems/stale_fence"), r)
        self.assertGreater(r.body["current_fence"], lease["fence"])
        self.gw.http("POST", f"/v1/locks/{self.bound_lock(lock_key)}/release", {"token": lease["token"]})
        nxt = self.acquire(self.bound_lock(lock_key))
        self.assertEqual(self.put(lock_key, nxt["token"], "next").status, 200)

    def test_8_new_owner_restarted_from_data_older_than_its_adoption(self):
        """A slot moves live to another primary and that primary saves a snapshot; the newer holder then writes
        there (the slot adopted without a loss); the primary is stopped (its replica down, so nothing fails
        over) and started from that snapshot: the slot's keys there name the old owner again, which is alive
        and hands the slot over in its own view, but the newer holder's write is gone. Postgres names the
        adopter, not the old owner: a loss, so the older holder, whose fence the lost write had put behind, is
        refused. Caught: condition 2 left out (the adoption made whatever Postgres says: the older holder's
        write applied, 200)."""
        shards = self.lab.shards()
        src, dst = shards[0], shards[1]
        key = next(k for i in range(2000)
                   if self.lab.owner(slot_of(k := f"{PREFIX}{{restart-{self.run_tag}-{i}}}/k")) == src["primary"])
        slot = slot_of(key)
        old = self.acquire(self.bound_lock(key), ttl_ms=200)
        self.assertEqual(self.put(key, old["token"], "old").status, 200)
        time.sleep(0.3)
        new = self.acquire(self.bound_lock(key))
        self.lab.move_slot(slot, src, dst)
        self.lab.wait_converged()
        port = dst["primary"]
        self.lab.snapshot(port, "moved")
        r = self.put(key, new["token"], "adopted")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(psql("SELECT owner FROM fencegate.fence_slots WHERE slot = :'s'", {"s": str(slot)}),
                         [self.run_id(port)])
        for replica in dst["replicas"]:
            self.lab.kill9(replica)
        self.lab.stop_node(port)
        self.lab.restart_from(port, "moved")
        self.lab.wait_converged(timeout=60)
        self.assertEqual(self.lab.owner(slot), port)
        deadline = time.monotonic() + 20
        while (r := self.put(key, old["token"], "late")).status == 503 and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual((r.status, r.body.get("type")), (409, "/problems/stale_fence"), r)
        for replica in dst["replicas"]:
            self.lab.start_node(replica)
        self.lab.wait_converged(timeout=60)

    def test_9_a_lease_the_write_script_cannot_read_is_asked(self):
        """A lock and a key of a require_live_lease prefix in two slots of one primary, so the write script reads
        the lease itself (fenced_redis.c look_before). The lock's slot then moves to another primary while the
        gateway's map still puts it on the key's (the nodes refuse CLUSTER SHARDS meanwhile: a gateway fetches
        its map again when the slot leaves the node, Redis ending its shard subscription there): the script's
        read fails and answers nolook, the gateway asks about the lease (MOVED to its node) and runs the write
        again without the look: applied, the write script run twice. Released, and the map stale again, the
        lock's late write is refused: 410 lease_expired, nothing written, one audit row, the script run once.
        Caught: nolook read as the script's last answer (503 where 200 was due); nolook taken as a lease that
        holds, the write run again unasked (the released lock's write applied: 200 where 410 was due)."""
        shards = self.lab.shards()
        src, dst = shards[0], shards[1]
        home, there, primaries = src["primary"], dst["primary"], [s["primary"] for s in shards]
        owners, used = self.lab.slot_owners(home), {int(s) for s in psql("SELECT slot FROM fencegate.fence_slots")}
        lock = next(n for i in range(5000) if owners[slot_of(n := f"nolook-{self.run_tag}-{i}")] == home)
        slot = slot_of(lock)
        # the key's slot never used: its first use raises no write floor above the lock's fences
        key = next(k for i in range(5000) if owners[slot_of(k := f"{LIVE}nolook/{self.run_tag}/{i}")] == home
                   and slot_of(k) not in used | {slot})
        lease = self.acquire(lock)
        # The slot's first write finds no write floor and no revoked set there yet, and runs again after each.
        self.assertEqual(self.put(key, lease["token"], "first").status, 200)
        r, seen = self.put_seen(key, lease["token"], "before", lock, home, there)
        self.assertEqual((r.status, seen), (200, (1, 0, False)), r)  # the lease read inside the write script
        fence_key = f"fg:rf:{{{slot_tag(slot_of(key))}}}:{key}"
        self.map_fetches(False)
        try:
            self.lab.move_slot(slot, src, dst, primaries)
            r, seen = self.put_seen(key, lease["token"], "moved", lock, home, there)
            self.assertEqual((r.status, r.body.get("fence"), seen), (200, lease["fence"], (2, 1, True)), r)
            self.assertEqual(resp(home, "GET", key), "moved")
            self.assertEqual(self.gw.http("POST", f"/v1/locks/{lock}/release", {"token": lease["token"]}).status, 200)
            # The ask's MOVED told the gateway where the lock's slot is: it comes back, a read of the lock tells
            # the gateway so (MOVED), and it moves away again behind the gateway's back.
            self.lab.move_slot(slot, dst, src, primaries)
            self.assertEqual(self.gw.http("GET", f"/v1/locks/{lock}").body.get("held"), False)
            self.lab.move_slot(slot, src, dst, primaries)
            r, seen = self.put_seen(key, lease["token"], "late", lock, home, there)
            self.assertEqual((r.status, r.body.get("type"), r.body.get("reason"), r.body.get("resource"), seen),
                             (410, "/problems/lease_lost", "lease_expired", "redis:" + key, (1, 1, True)), r)
        finally:
            self.map_fetches(True)
            self.lab.wait_converged()
        self.assertEqual((resp(home, "GET", key), resp(home, "GET", fence_key)), ("moved", str(lease["fence"])))
        self.assertEqual([(reason, fence) for reason, _, fence in rejections("redis:" + key)],
                         [("lease_expired", lease["fence"])])

    def put_seen(self, key: str, token: str, value: str, lock: str, home: int, there: int):
        """PUTs value at key with token; returns the answer and what the nodes saw: (runs of the write script on
        home, key's node; reads home refused, a script's read of a key of a slot it does not serve among them;
        whether lock's lease was looked at on there, once or more: a slot's first use on its new owner, its
        adoption, may run the look again)."""
        refused = self.refused_gets(home)
        writes, looks = Monitor(home), Monitor(there)
        try:
            r = self.put(key, token, value)
            return r, (len(writes.commands("FCALL", self.function(home, "rw_put"), key)),
                       self.refused_gets(home) - refused, bool(looks.commands("FCALL", f"fg:lk:{{{lock}}}:h")))
        finally:
            writes.close()
            looks.close()

    def refused_gets(self, port: int) -> int:
        """GETs the node refused (INFO commandstats rejected_calls)."""
        v = self.lab.info(port, "commandstats").get("cmdstat_get")
        return int(as_kv(v).get("rejected_calls", "0")) if v else 0

    def map_fetches(self, allowed: bool) -> None:
        """Lets every node answer CLUSTER SHARDS, the slot map's fetch, or refuses it (ACL of the default user):
        a gateway then keeps the map it has, but for the slots a MOVED corrects."""
        for p in self.lab.procs:
            self.assertEqual(resp(p, "ACL", "SETUSER", "default", ("+" if allowed else "-") + "cluster|shards"), "OK")

    def function(self, port: int, stem: str) -> str:
        """The name of the gateway's function stem as loaded on the node (fg_<stem>_<digest>)."""
        [lib] = resp(port, "FUNCTION", "LIST", "LIBRARYNAME", f"fg_{stem}_*")
        return lib[1]

    def revoke(self, lock: str):
        """Revokes lock's holder, printing what it cost: time, script calls and Redis CPU over the primaries."""
        before, cpu, started = self.command_usec("fcall"), self.cpu_s(), time.monotonic()
        r = self.gw.http("POST", f"/v1/locks/{lock}/revoke", {"reason": "test"})
        took, after = time.monotonic() - started, self.command_usec("fcall")
        print(f"revoke: {took * 1000:.0f} ms, {after[0] - before[0]} FCALLs, {(self.cpu_s() - cpu) * 1000:.1f} ms of "
              "Redis CPU over the primaries", file=sys.stderr)
        return r

    def cpu_s(self) -> float:
        """Seconds of CPU the primaries used so far (INFO cpu, user and system)."""
        return sum(float(self.lab.info(p, "cpu")[k]) for p in self.lab.primaries()
                   for k in ("used_cpu_user", "used_cpu_sys"))

    def command_usec(self, command: str) -> tuple[int, int]:
        """Calls of command and the microseconds Redis spent in them, summed over the primaries."""
        calls = usec = 0
        for p in self.lab.primaries():
            v = self.lab.info(p, "commandstats").get(f"cmdstat_{command}")
            if v:
                kv = dict(part.split("=", 1) for part in v.split(","))
                calls, usec = calls + int(kv["calls"]), usec + int(float(kv["usec"]))
        return calls, usec

    def run_id(self, port: int) -> str:
        return next(line.split(":", 1)[1].strip() for line in resp(port, "INFO", "server").splitlines()
                    if line.startswith("run_id:"))

    def revoked_set(self, port: int) -> str:
        shard = next(s for s in self.lab.shards() if s["primary"] == port)
        home = max(shard["ranges"][i + 1] for i in range(0, len(shard["ranges"]), 2))
        return f"fg:revoked:{{{slot_tag(home)}}}"


if __name__ == "__main__":
    unittest.main()
