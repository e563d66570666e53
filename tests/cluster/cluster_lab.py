# SPDX-License-Identifier: Apache-2.0
"""The cluster lab's topology, on loopback and without Docker: a Redis Cluster of three primaries and three
replicas (`redis-server --cluster-enabled yes`, joined by `redis-cli --cluster create --cluster-replicas 1`).
Every port (client and cluster bus) is picked free by the kernel; all state lives in one directory under the
test's scratch directory (FG_TEST_DATA) or /var/tmp, removed by stop().

Owns: starting, faulting (kill -9, restart, restart from an older snapshot), resharding and stopping those
processes, and reading their state (slot map, command counts). Must not: judge a run (test_cluster.py does),
or touch any process it did not start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ha"))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lab import encode, free_port, free_ports, read_reply, redis_answers, resp, wait  # noqa: E402  (the fault lab's helpers: ports, RESP, polling)

NODE_TIMEOUT_MS = 1000   # cluster-node-timeout: a primary unreachable this long is failed over
# cluster-replica-validity-factor is 0: a replica however far behind takes over (availability first, and the
# worst case for fences: grants its primary acknowledged are lost).
SLOTS = 16384


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
        table.append(crc)
    return table


CRC16_TABLE = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC16 as Redis Cluster computes slots (XMODEM)."""
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ CRC16_TABLE[(crc >> 8) ^ b]
    return crc


_slot_tags: list[str | None] = []


def slot_tag(slot: int) -> str:
    """The slot tag of docs/cluster.md: the first of "0", "1", "2", ... whose CRC16 falls in slot (the whole
    table is made on first use, as the gateway makes it at start-up)."""
    if not _slot_tags:
        _slot_tags.extend([None] * SLOTS)
        left, i = SLOTS, 0
        while left:
            s = crc16(str(i).encode()) % SLOTS
            if _slot_tags[s] is None:
                _slot_tags[s] = str(i)
                left -= 1
            i += 1
    return _slot_tags[slot]


def as_map(flat: list) -> dict:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


# Seconds of disagreement on the slot map before wait_converged mends orphaned slots.
MEND_AFTER = 10


def ranges_of(slots: list[int]) -> list[tuple[int, int]]:
    """The runs of consecutive numbers in sorted slots, as (first, last)."""
    runs: list[tuple[int, int]] = []
    for s in slots:
        if runs and runs[-1][1] == s - 1:
            runs[-1] = (runs[-1][0], s)
        else:
            runs.append((s, s))
    return runs


class ClusterLab:
    def __init__(self, nodes: int = 6):
        base = os.environ.get("FG_TEST_DATA") or "/var/tmp"
        os.makedirs(base, exist_ok=True)
        self.root = tempfile.mkdtemp(prefix="fencegate-cluster-", dir=base)
        ports = free_ports(2 * nodes)
        self.ports, self.bus_ports = ports[:nodes], ports[nodes:]
        self.procs: dict[int, subprocess.Popen] = {}

    # --- processes ------------------------------------------------------------------------------------
    def node_dir(self, port: int) -> str:
        return os.path.join(self.root, f"n{port}")

    def start_node(self, port: int):
        d = self.node_dir(port)
        os.makedirs(d, exist_ok=True)
        bus = self.bus_ports[self.ports.index(port)]
        argv = ["redis-server", "--port", str(port), "--cluster-port", str(bus), "--bind", "127.0.0.1",
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--cluster-replica-validity-factor", "0", "--dir", d, "--save", "", "--appendonly", "no",
                "--dbfilename", "dump.rdb", "--maxmemory-policy", "noeviction", "--logfile", "redis.log",
                "--repl-diskless-sync-delay", "0"]
        self.procs[port] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            stdin=subprocess.DEVNULL, cwd=d)
        wait(lambda: redis_answers(port), 15, f"redis node {port}")

    def start(self):
        for p in self.ports:
            self.start_node(p)
        r = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
                            "--cluster-replicas", "1", "--cluster-yes"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"cluster lab: create failed: {r.stdout[-2000:]} {r.stderr[-2000:]}")
        self.wait_converged()
        self.forget_fence_slots()
        # A replica may reach the node asked after the slots do: until then its shard lists none.
        wait(lambda: all(s["replicas"] for s in self.shards()), 30, "every primary to have its replica")
        self.wait_replicated()

    def forget_fence_slots(self):
        """A new cluster, no slot of which was ever written: the test Postgres forgets the slots that labs before
        it recovered (fencegate.fence_slots), which would make each slot's first use here count as a loss
        (docs/cluster.md) and raise write floors that the tests' writes with tokens of other slots' locks meet."""
        if os.environ.get("FG_TEST_PG_DSN"):
            from harness import psql  # the integration harness (tests/integration), only where Postgres is
            psql("DO $$ BEGIN IF to_regclass('fencegate.fence_slots') IS NOT NULL THEN"
                 " DELETE FROM fencegate.fence_slots; END IF; END $$;")

    def replicated(self) -> bool:
        """Every replica of the map has its link to its primary up."""
        try:
            return all("master_link_status:up" in resp(r, "INFO", "replication")
                       for s in self.shards() for r in s["replicas"])
        except OSError:
            return False

    def wait_replicated(self, timeout: float = 30):
        wait(self.replicated, timeout, "the replicas to sync")

    def url(self) -> str:
        return "redis-cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def kill9(self, port: int):
        p = self.procs.pop(port)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)

    def lossy_failover(self, shard: dict, window: float = 0.5):
        """Cuts the shard's replicas off their primary and freezes them, lets the primary take writes for
        window seconds, kills the primary and thaws the replicas, one of which is promoted without those
        writes; the old primary comes back empty, as a replica of the promoted one. Returns when a replica
        serves."""
        primary, replicas = shard["primary"], shard["replicas"]
        for r in replicas:
            self.procs[r].send_signal(signal.SIGSTOP)
        resp(primary, "CLIENT", "KILL", "TYPE", "replica")
        time.sleep(window)
        self.kill9(primary)
        for r in replicas:
            self.procs[r].send_signal(signal.SIGCONT)
        wait(lambda: self.owner_or_none(shard["ranges"][0]) in replicas, 30, "the promotion of a replica")
        self.start_node(primary)

    def stop_node(self, port: int):
        """SHUTDOWN NOSAVE-free stop: SIGTERM, so the node writes its nodes.conf."""
        p = self.procs.pop(port)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=20)

    def stop(self, keep: bool = False):
        for port in list(self.procs):
            self.kill9(port)
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)

    # --- state -----------------------------------------------------------------------------------------
    def shards(self, port: int | None = None) -> list[dict]:
        """CLUSTER SHARDS as one node sees it: [{"slots": n, "ranges": [...], "primary": port,
        "primary_id": id, "replicas": [ports]}], shards serving no slot left out."""
        for p in ([port] if port else list(self.procs)):
            try:
                raw = resp(p, "CLUSTER", "SHARDS")
            except OSError:
                continue
            if isinstance(raw, Exception):
                continue
            out = []
            for shard in raw:
                s = as_map(shard)
                ranges = s["slots"]
                n = sum(ranges[i + 1] - ranges[i] + 1 for i in range(0, len(ranges), 2))
                if n == 0:
                    continue
                nodes = [as_map(x) for x in s["nodes"]]
                primary = next(x for x in nodes if x["role"] == "master")
                out.append({"slots": n, "ranges": ranges, "primary": primary["port"], "primary_id": primary["id"],
                            "primary_health": primary["health"],
                            "replicas": [x["port"] for x in nodes if x["role"] != "master"]})
            return sorted(out, key=lambda s: s["ranges"][0])
        raise RuntimeError("cluster lab: no node answers CLUSTER SHARDS")

    def primaries(self) -> list[int]:
        return [s["primary"] for s in self.shards()]

    def owner(self, slot: int) -> int:
        port = self.owner_or_none(slot)
        if port is None:
            raise RuntimeError(f"cluster lab: slot {slot} has no owner")
        return port

    def owner_or_none(self, slot: int) -> int | None:
        """The primary that owns slot, or None: in a failover the node asked may show it owned by nobody for a
        moment (the failed primary's shard without it, the promoted replica's not yet with it)."""
        for s in self.shards():
            r = s["ranges"]
            if any(r[i] <= slot <= r[i + 1] for i in range(0, len(r), 2)):
                return s["primary"]
        return None

    def failed_over(self, slot: int, primary: int) -> bool:
        """True once a primary other than primary owns slot."""
        return self.owner_or_none(slot) not in (None, primary)

    def info(self, port: int, section: str) -> dict:
        text = resp(port, "INFO", section)
        out = {}
        for line in text.splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def calls(self, port: int, command: str) -> int:
        """Calls of command on the node (INFO commandstats)."""
        v = self.info(port, "commandstats").get(f"cmdstat_{command}")
        return int(as_kv(v)["calls"]) if v else 0

    def errors(self, port: int, prefix: str) -> int:
        """Error replies of a kind the node gave (INFO errorstats: MOVED, ASK, TRYAGAIN, CLUSTERDOWN)."""
        v = self.info(port, "errorstats").get(f"errorstat_{prefix}")
        return int(as_kv(v)["count"]) if v else 0

    def converged(self) -> bool:
        """Every running node says cluster_state:ok and names the same primaries for all 16384 slots."""
        views = set()
        for p in self.procs:
            try:
                info = resp(p, "CLUSTER", "INFO", timeout=0.5)
                if "cluster_state:ok" not in info:
                    return False
                view = self.shards(p)
            except (OSError, RuntimeError, StopIteration, KeyError, TypeError):
                return False
            if sum(s["slots"] for s in view) != SLOTS:
                return False
            views.add(tuple((tuple(s["ranges"]), s["primary"]) for s in view))
        return len(views) == 1

    def wait_converged(self, timeout: float = 60, mend_after: float = MEND_AFTER):
        """Waits until the nodes agree on the slot map; after mend_after seconds without, mends orphaned
        slots (mend_orphaned_slots) every mend_after / 2 seconds, as an operator would. (A map that gossip may
        still bring together waits MEND_AFTER; one split for good by the test itself need not.)"""
        started, mended = time.monotonic(), [0.0]

        def agreed() -> bool:
            if self.converged():
                return True
            now = time.monotonic()
            if now - started > mend_after and now - mended[0] > mend_after / 2:
                mended[0] = now
                self.mend_orphaned_slots()
            return False
        try:
            wait(agreed, timeout, "the nodes to agree on the slot map")
        except RuntimeError as e:
            raise RuntimeError(f"{e}\n{self.views()}") from None

    def slot_owners(self, port: int) -> dict[int, int]:
        """The primary's port of each slot, as the node on port sees them."""
        owners = {}
        for s in self.shards(port):
            r = s["ranges"]
            for i in range(0, len(r), 2):
                owners.update(dict.fromkeys(range(r[i], r[i + 1] + 1), s["primary"]))
        return owners

    def mend_orphaned_slots(self):
        """Gives each slot that no running node claims as its own to the primary most nodes name for it. A
        node never takes the others' word about its own slots, so the map stays split until someone assigns
        them, as `redis-cli --cluster fix` does: a replica promoted on a loaded machine can miss a slot its
        old primary took in a reshard just before (every other node names it, it leaves the slot
        unassigned: CLUSTER ADDSLOTSRANGE on it), and a slot given back to a primary while a reshard moved
        it on can end with two primaries each naming the other (CLUSTER SETSLOT ... NODE on the one most
        nodes name)."""
        try:
            views = {p: self.slot_owners(p) for p in self.procs}
        except (OSError, RuntimeError, StopIteration, KeyError, TypeError):
            return
        orphans: dict[int, list[int]] = {}
        for slot in range(SLOTS):
            named = [v[slot] for v in views.values() if slot in v]
            if not named or any(v.get(slot) == p for p, v in views.items()):
                continue
            port = Counter(named).most_common(1)[0][0]
            if port in views:
                orphans.setdefault(port, []).append(slot)
        for port, slots in orphans.items():
            unassigned = [s for s in slots if s not in views[port]]
            for first, last in ranges_of(unassigned):
                print(f"cluster lab: node {port} forgot slots {first}-{last} the others say it serves; "
                      "assigning them to it", file=sys.stderr)
                resp(port, "CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
            named_elsewhere = [s for s in slots if s in views[port]]
            if named_elsewhere:
                print(f"cluster lab: node {port} names another for slots {named_elsewhere} that no node claims "
                      "and most say it serves; assigning them to it", file=sys.stderr)
                node_id = resp(port, "CLUSTER", "MYID")
                for s in named_elsewhere:
                    resp(port, "CLUSTER", "SETSLOT", str(s), "NODE", node_id)

    def views(self) -> str:
        """What each node says of the cluster, and the end of its log: the diagnosis of a wait that failed."""
        out = []
        for p in self.procs:
            try:
                info = resp(p, "CLUSTER", "INFO", timeout=0.5)
                state = next((ln for ln in info.splitlines() if ln.startswith("cluster_state")), "?")
                nodes = resp(p, "CLUSTER", "NODES", timeout=0.5)
            except (OSError, RuntimeError) as e:
                state, nodes = f"unreachable: {e}", ""
            try:
                with open(os.path.join(self.node_dir(p), "redis.log"), errors="replace") as f:
                    log = "".join(f.readlines()[-12:])
            except OSError:
                log = ""
            out.append(f"--- node {p}: {state}\n{nodes}\n{log}")
        return "\n".join(out)

    # --- changes ---------------------------------------------------------------------------------------
    def reshard(self, from_ids: str, to_id: str, slots: int, pipeline: int = 10) -> subprocess.CompletedProcess:
        """Moves slots from primaries (comma-separated ids, an even share from each) to another with redis-cli
        (MIGRATE, keys in flight answered with ASK); returns the finished redis-cli run. Replicas fail no
        primary over meanwhile: a primary busy moving keys on a loaded machine may miss its pings for
        NODE_TIMEOUT_MS, and a failover in the middle fails the move ("SETSLOT only with masters"), which is
        no test's subject (the tests kill primaries between moves)."""
        replicas = [port for shard in self.shards() for port in shard["replicas"]]
        self.replicas_fail_over(replicas, False)
        try:
            any_port = next(iter(self.procs))
            return subprocess.run(["redis-cli", "--cluster", "reshard", f"127.0.0.1:{any_port}",
                                   "--cluster-from", from_ids, "--cluster-to", to_id, "--cluster-slots", str(slots),
                                   "--cluster-yes", "--cluster-pipeline", str(pipeline)],
                                  capture_output=True, text=True, timeout=600)
        finally:
            self.replicas_fail_over(replicas, True)

    @staticmethod
    def replicas_fail_over(replicas: list[int], on: bool):
        """Lets replicas fail their primaries over, or not (cluster-replica-no-failover); one down is passed."""
        for port in replicas:
            try:
                resp(port, "CONFIG", "SET", "cluster-replica-no-failover", "no" if on else "yes", timeout=5)
            except OSError:
                pass

    def move_slot(self, slot: int, src: dict, dst: dict, primaries: list[int] | None = None):
        """Moves one slot by hand, as redis-cli does: IMPORTING on the destination, MIGRATING on the
        source, its keys MIGRATEd, then the new owner told to every primary (those of primaries, where the
        nodes are not to be asked: CLUSTER SHARDS refused). src and dst are shards."""
        ok = [resp(dst["primary"], "CLUSTER", "SETSLOT", str(slot), "IMPORTING", src["primary_id"]),
              resp(src["primary"], "CLUSTER", "SETSLOT", str(slot), "MIGRATING", dst["primary_id"])]
        while (keys := resp(src["primary"], "CLUSTER", "GETKEYSINSLOT", str(slot), "100")) and ok[-1] == "OK":
            ok.append(resp(src["primary"], "MIGRATE", "127.0.0.1", str(dst["primary"]), "", "0", "5000",
                           "KEYS", *keys, timeout=10))
        for p in primaries or self.primaries():
            ok.append(resp(p, "CLUSTER", "SETSLOT", str(slot), "NODE", dst["primary_id"]))
        if any(r != "OK" for r in ok):
            raise RuntimeError(f"cluster lab: moving slot {slot} failed: {ok}")

    def snapshot(self, port: int, name: str):
        """SAVE on the node and keeps a copy of its dump as name."""
        resp(port, "SAVE", timeout=30)
        d = self.node_dir(port)
        shutil.copy(os.path.join(d, "dump.rdb"), os.path.join(d, f"{name}.rdb"))

    def restart_from(self, port: int, name: str):
        """Starts a stopped node from the snapshot name: older data, as a restored backup gives it. Its
        cluster configuration is the one it wrote when it stopped, as an operator's restore leaves it: an
        older nodes.conf may lack a slot moved to the node since, which Redis never gives back to it (a node
        discards the others' word about its own slots), so the cluster would stay split."""
        d = self.node_dir(port)
        shutil.copy(os.path.join(d, f"{name}.rdb"), os.path.join(d, "dump.rdb"))
        self.start_node(port)


class LabTestCase(unittest.TestCase):
    """Tests that share one lab: started before the first, stopped after the last (and kept for a look with
    FG_CLUSTER_KEEP=1 or after a start that failed). A class starts what it adds (its gateways) in
    start_more() and stops it in stop_more(); a unittest.SkipTest from start_more() skips the class."""

    lab: ClusterLab

    @classmethod
    def start_more(cls):
        pass

    @classmethod
    def stop_more(cls):
        pass

    @classmethod
    def setUpClass(cls):
        cls.lab = ClusterLab()
        try:
            cls.lab.start()
            cls.start_more()
        except unittest.SkipTest:
            cls.stop_more()
            cls.lab.stop()
            raise
        except Exception:
            cls.lab.stop(keep=True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.stop_more()
        cls.lab.stop(keep=os.environ.get("FG_CLUSTER_KEEP") == "1")


def lab_gateway(lab: ClusterLab, config: dict):
    """A gateway (tests/integration/harness.py) on the lab's redis-cluster:// URL."""
    from harness import Gateway  # the integration harness, on the path of the tests that use it

    return Gateway(env_overrides={"FENCEGATE_REDIS_URL": lab.url()}, config=config)


def as_kv(text: str) -> dict:
    return dict(part.split("=", 1) for part in text.split(","))
