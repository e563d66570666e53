# SPDX-License-Identifier: Apache-2.0
"""The cluster scenario: FG_SCENARIO_CLIENTS clients (20) doing acquire -> fenced write -> release through a real
gateway on the cluster lab's three primaries and three replicas (redis-cluster:// URL), each turn writing the
lock's Postgres row (a table with a fence_column, bound to the lock) and the lock's Redis key (a fenced Redis
write), half of them acquiring with a request_id as the client libraries do, under three faults in turn:

a. kill -9 of a primary: service back within cluster-node-timeout + 2 s of the kill (or 1 s after Redis itself
   promoted the replica, when a loaded machine delays that); 503s the only error meanwhile, and afterwards the
   lease_lost answers of holders whose grants the dead primary had not replicated and the stale_fence
   refusals of Redis writes by holders from before (the write floor of the failed-over slots rises above
   every fence issued before: the new primary cannot tell what was lost);
b. a live reshard of FG_SCENARIO_RESHARD_SLOTS slots (1000 in CI; the long run moves a third, 5461) under load,
   half the locks in slots that move: no error the client sees but 503s, which it retries;
c. a primary stopped and restarted from an older snapshot (its nodes.conf as it stopped): the node rejoins as a
   replica; the stop is a failover, so the errors allowed are those of a kill (a) again;
d. holders that outlive their leases (6 s of work under leases of 5 s) on one primary's locks, through a lossy
   failover (its replica cut off and frozen for 2.5 s, then the primary killed): stale holders, and holders of
   grants the promoted replica never saw, go on writing while others hold the same locks; their writes
   must be refused.

Every answer is recorded and judged by scenario_check.py, which never asks the gateway: no fence granted twice
across the whole run, a lock's fences only grow, every stored fence only grows (the row's versions in commit
order, from a trigger's log; the Redis values a watcher read from the nodes), every stale write refused, the
highest accepted fence stored in the end, and the critical sections the clients were inside counted. In the
kill phases the watcher does not judge Redis values: a primary killed with a write it acknowledged but had not
replicated loses it (asynchronous replication, docs/operations.md "What a failover loses"); the write floor
then refuses every fence issued before, which the stale-write rule checks.

test_0_checker_catches_broken_traces runs the checker on traces a broken gateway would leave (a fence granted
twice, a lock's fence going back, a stored fence going back, a stale write accepted, an accepted write never
committed, a refused write stored): each is caught, so a green run means the rules held.

The long run (a third of the slots, a longer load):
    FG_SCENARIO_SECONDS=20 FG_SCENARIO_RESHARD_SLOTS=5461 scripts/test -R cluster.scenario
Environment: FG_BIN, FG_TEST_PG_DSN, FG_TEST_DATA (scripts/test); FG_CLUSTER_KEEP=1 keeps the lab's directory.
"""

from __future__ import annotations

import collections
import os
import random
import sys
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from cluster_lab import NODE_TIMEOUT_MS, SLOTS, ClusterLab, crc16, resp, wait  # noqa: E402
from harness import Client, Gateway, Redis, psql  # noqa: E402
from pg_helpers import commit_log_sql  # noqa: E402
from scenario_check import Grant, Trace, Write, overlaps, problems  # noqa: E402

CLIENTS = int(os.environ.get("FG_SCENARIO_CLIENTS", "20"))
SECONDS = float(os.environ.get("FG_SCENARIO_SECONDS", "3"))   # load before and after each fault
RESHARD_SLOTS = int(os.environ.get("FG_SCENARIO_RESHARD_SLOTS", "1000"))
LOCKS = 12
TTL_MS = 5000

SETUP_SQL = """
DROP TABLE IF EXISTS public.scn_rows CASCADE;
DROP TABLE IF EXISTS public.scn_log CASCADE;
CREATE TABLE public.scn_rows (id text PRIMARY KEY, note text, lock_fence bigint);
""" + commit_log_sql("scn_rows", "scn_log", "lock_fence")
CONFIG = {"tables": {"scn_rows": {"key": "id", "columns": ["note"], "fence_column": "lock_fence",
                                  "lock": "scn:{key}"}},
          "redis_prefixes": ["scnr:"]}


class Load:
    """CLIENTS threads, each in a loop: acquire a random lock of names (waiting up to 2 s; every other client with
    a fresh request_id, as the client libraries send), PUT its Postgres row
    and its Redis key with the token, release; with hold, work hold seconds between the two writes and PUT
    the row again after them (a holder that goes on working after its grant was lost). 503s are retried; every other answer but a success is counted
    in errors by step and problem type. Grants and writes go into trace; times of 503s into unavailable."""

    def __init__(self, gw: Gateway, names: list[str], trace: Trace, hold: float = 0.0):
        self.gw, self.names, self.trace, self.hold = gw, names, trace, hold
        self.stop_flag = threading.Event()
        self.errors: collections.Counter = collections.Counter()
        self.unavailable: list[float] = []   # wall-clock seconds of each 503
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.client, args=(k,)) for k in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def note(self, step: str, r) -> None:
        with self.lock:
            if r is not None and r.status == 503:
                self.unavailable.append(time.time())
            else:
                kind = "no answer" if r is None else (r.body.get("type", "").rsplit("/", 1)[-1]
                                                     if isinstance(r.body, dict) else r.status)
                self.errors[(step, kind)] += 1

    def call(self, c: Client, step: str, method: str, path: str, body, token: str | None = None):
        """One request, 503s retried (after Retry-After, at most 0.2 s) until an answer or stop + 5 s."""
        deadline = None
        while True:
            try:
                r = c.request(method, path, body, headers={"Fence-Token": token} if token else None)
            except OSError:
                r = None
            if r is not None and r.status != 503:
                return r
            self.note(step, r)
            if r is None:
                return None
            if self.stop_flag.is_set():
                deadline = deadline or time.monotonic() + 5
                if time.monotonic() > deadline:
                    return r
            time.sleep(min(0.2, float(r.headers.get("retry-after", "0.1"))))

    def client(self, k: int) -> None:
        rng, c = random.Random(k), Client(self.gw.base, timeout=15)
        try:
            while not self.stop_flag.is_set():
                self.turn(k, rng.choice(self.names), c, rng)
        finally:
            c.close()

    def write(self, c: Client, k: int, resource: str, path: str, body, fence: int, token: str) -> bool:
        t0 = time.monotonic()
        step = f"write {resource.split(':', 1)[0]}"   # "write pg", "write redis"
        r = self.call(c, step, "PUT", path, body, token)
        status = 0 if r is None else r.status
        with self.lock:
            self.trace.writes.append(Write(k, resource, fence, status, t0, time.monotonic()))
        if status != 200:
            self.note(step, r)   # a 409 stale_fence too: judged by the phase
        return status == 200

    def turn(self, k: int, name: str, c: Client, rng: random.Random) -> None:
        t0 = time.monotonic()
        # Half the clients send a request_id each turn, as the client libraries do, kept through the retries
        # of a 503 (a grant whose answer was lost is answered again, never granted twice); half send none.
        body = {"ttl_ms": TTL_MS, "wait_ms": 2000, **({"request_id": uuid.uuid4().hex} if k % 2 == 0 else {})}
        r = self.call(c, "acquire", "POST", f"/v1/locks/{name}/acquire", body)
        if r is None or r.status != 200:
            if r is not None and not (r.status == 409 and r.body.get("type", "").endswith("/lock_busy")):
                self.note("acquire", r)
            return
        fence, token, key = r.body["fence"], r.body["token"], name.split(":", 1)[1]
        grant = Grant(k, name, fence, t0, time.monotonic())
        with self.lock:
            self.trace.grants.append(grant)
        row = (f"pg:scn_rows/{key}", f"/v1/pg/scn_rows/{key}", {"row": {"id": key, "note": f"c{k} f{fence}"}})
        ok = self.write(c, k, *row, fence, token)
        if ok and self.hold:
            time.sleep(self.hold)   # work inside the critical section
        if ok:
            ok = self.write(c, k, f"redis:scnr:{key}", f"/v1/redis/scnr:{key}", {"value": str(fence)}, fence, token)
        if ok and self.hold:
            self.write(c, k, *row, fence, token)
        grant.left = time.monotonic()
        r = self.call(c, "release", "POST", f"/v1/locks/{name}/release", {"token": token})
        if r is None or r.status != 200:
            self.note("release", r)

    def stop(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=60)


class Watcher:
    """Reads every lock's Redis value (the fence its writer put there) from the cluster's nodes every 50 ms into
    trace.watched[resource + label], when it changed."""

    def __init__(self, keys: list[str], trace: Trace, label: str):
        self.keys, self.trace, self.label = keys, trace, label
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self) -> None:
        r = Redis(timeout=2)
        last: dict[str, int] = {}
        while not self.stop_flag.wait(0.05):
            for key in self.keys:
                try:
                    value = r.cmd("GET", key)
                except Exception:  # noqa: BLE001 (a node down: the next round reads again)
                    continue
                if value is not None and int(value) != last.get(key):
                    last[key] = int(value)
                    self.trace.watched.setdefault(f"redis:{key}{self.label}", []).append(int(value))
        r.close()

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(timeout=30)


def slot_of(name: str) -> int:
    return crc16(name.encode()) % SLOTS


class CheckerTest(unittest.TestCase):
    def test_0_checker_catches_broken_traces(self):
        """The checker on a clean trace finds nothing, and on each trace a broken gateway or store would leave
        finds the break."""
        def clean() -> Trace:
            t = Trace()
            t.grants = [Grant(1, "scn:a", 10, 0.0, 0.1, 0.65), Grant(2, "scn:a", 20, 0.2, 0.4, 0.6),
                        Grant(3, "scn:b", 11, 0.0, 0.1, 0.2)]
            t.writes = [Write(1, "pg:scn_rows/a", 10, 200, 0.15, 0.2), Write(2, "pg:scn_rows/a", 20, 200, 0.45, 0.5),
                        Write(1, "pg:scn_rows/a", 10, 409, 0.55, 0.6)]
            t.committed, t.final, t.watched = {"pg:scn_rows/a": [10, 20]}, {"pg:scn_rows/a": 20}, {"redis:k": [10, 20]}
            return t

        self.assertEqual(problems(clean()), [])
        self.assertEqual(overlaps(clean()), 1)   # client 1 still inside when client 2 was granted
        broken = {
            "granted twice": lambda t: t.grants.append(Grant(4, "scn:c", 11, 0.5, 0.6)),
            "granted after": lambda t: t.grants.append(Grant(4, "scn:a", 15, 0.7, 0.8)),
            "went from 20 back": lambda t: t.committed["pg:scn_rows/a"].append(15),
            "watched": lambda t: t.watched["redis:k"].append(12),
            "stale write": lambda t: t.writes.__setitem__(2, Write(1, "pg:scn_rows/a", 10, 200, 0.55, 0.6)),
            "not committed": lambda t: t.committed.__setitem__("pg:scn_rows/a", [20]),
            "no client wrote": lambda t: t.committed["pg:scn_rows/a"].append(30),
            "stores fence 10": lambda t: t.final.__setitem__("pg:scn_rows/a", 10),
        }
        for what, breaks in broken.items():
            t = clean()
            breaks(t)
            found = problems(t)
            self.assertTrue(any(what in p for p in found), f"{what}: the checker found {found}")


class ScenarioTest(unittest.TestCase):
    lab: ClusterLab
    gw: Gateway

    @classmethod
    def setUpClass(cls):
        cls.lab = ClusterLab()
        try:
            cls.lab.start()
            os.environ["FG_TEST_REDIS_URL"] = cls.lab.url()
            psql(SETUP_SQL)
            cls.gw = Gateway(config=CONFIG, env_overrides={"FENCEGATE_HTTP_THREADS": 8})
        except Exception:
            cls.lab.stop(keep=True)
            raise
        cls.trace = Trace()

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop(check=False)
        cls.lab.stop(keep=os.environ.get("FG_CLUSTER_KEEP") == "1")

    def names_on(self, shards: list[dict], low: int = 0) -> list[str]:
        """LOCKS lock names "scn:<n>", an even share in each shard's slots; with low, that many of each shard's
        share in the shard's lowest slots (the first a reshard moves)."""
        per, out = LOCKS // len(shards), []
        for shard in shards:
            r = shard["ranges"]
            inside = lambda s: any(r[i] <= s <= r[i + 1] for i in range(0, len(r), 2))
            pool = (f"scn:{shard['primary']}-{i}" for i in range(100000))
            mine = [n for n in pool if inside(slot_of(n))][:2000]
            out += sorted(mine, key=slot_of)[:low] + mine[-(per - low):]
        return out

    def judge(self, load: Load, watcher: Watcher | None, phase: str, allowed: set) -> None:
        """Stops the load and the watcher, reads the stores, runs the checker over the whole run so far, and
        fails on any error of the phase outside allowed ((step, problem type) pairs)."""
        load.stop()
        if watcher:
            watcher.stop()
        rows = psql("SELECT id, lock_fence FROM public.scn_rows")
        self.trace.final.update({f"pg:scn_rows/{i}": int(f) for i, f in (x.split("|") for x in rows)})
        log = psql("SELECT id, fence FROM public.scn_log ORDER BY seq")
        self.trace.committed = {}
        for line in log:
            key, fence = line.split("|")
            self.trace.committed.setdefault(f"pg:scn_rows/{key}", []).append(int(fence))
        grants = len(self.trace.grants)
        print(f"{phase}: {grants} grants, {len(self.trace.writes)} writes so far, "
              f"{sum(1 for w in self.trace.writes if w.status == 409)} refused as stale; this phase: "
              f"{len(load.unavailable)} 503s retried, errors {dict(load.errors)}; "
              f"{overlaps(self.trace)} critical sections shared so far", file=sys.stderr)
        self.assertEqual(problems(self.trace), [], phase)
        self.assertEqual({k: n for k, n in load.errors.items() if k not in allowed}, {}, f"{phase}: errors")
        self.assertGreater(grants, 50, f"{phase}: too few grants")

    def test_a_kill_primary(self):
        victim = self.lab.shards()[2]
        names = self.names_on(self.lab.shards())
        load = Load(self.gw, names, self.trace)
        self.addCleanup(load.stop)   # also when the phase fails
        time.sleep(SECONDS)
        killed = time.time()
        self.lab.kill9(victim["primary"])
        wait(lambda: self.lab.failed_over(victim["ranges"][0], victim["primary"]), 30, "the failover")
        promoted = time.time()
        self.lab.wait_converged(timeout=30)
        time.sleep(SECONDS)
        self.judge(load, None, "kill -9", {("release", "lease_lost"), ("write pg", "stale_fence"),
                                           ("write redis", "stale_fence")})
        self.assertTrue(load.unavailable, "the kill went unnoticed")
        outage = max(load.unavailable) - killed
        print(f"kill -9: last 503 {outage:.2f} s after the kill, promotion seen after {promoted - killed:.2f} s",
              file=sys.stderr)
        self.assertLessEqual(outage, max(NODE_TIMEOUT_MS / 1000 + 2, promoted - killed + 1))
        self.lab.start_node(victim["primary"])   # back empty, as a replica of the promoted one
        self.lab.wait_converged(timeout=30)

    def test_b_reshard(self):
        shards = self.lab.shards()
        src, other, dst = shards[0], shards[2], shards[1]
        names = self.names_on(shards, low=2)
        load = Load(self.gw, names, self.trace)
        self.addCleanup(load.stop)   # also when the phase fails
        watcher = Watcher([f"scnr:{n.split(':', 1)[1]}" for n in names], self.trace, " (reshard)")
        self.addCleanup(watcher.stop)
        time.sleep(SECONDS)
        t0 = time.monotonic()
        run = self.lab.reshard(f"{src['primary_id']},{other['primary_id']}", dst["primary_id"], RESHARD_SLOTS)
        took = time.monotonic() - t0
        time.sleep(SECONDS)
        self.assertEqual(run.returncode, 0, run.stdout[-2000:] + run.stderr[-2000:])
        moved = [n for n in names if self.lab.owner(slot_of(n)) == dst["primary"]
                 and not any(dst["ranges"][i] <= slot_of(n) <= dst["ranges"][i + 1]
                             for i in range(0, len(dst["ranges"]), 2))]
        print(f"reshard of {RESHARD_SLOTS} slots in {took:.1f} s; locks moved: {moved}", file=sys.stderr)
        self.assertTrue(moved, "no lock of the load was in a slot that moved")
        self.judge(load, watcher, "reshard", set())
        self.lab.wait_converged(timeout=30)

    def test_c_restart_from_older_data(self):
        target = self.lab.shards()[0]
        port = target["primary"]
        names = self.names_on(self.lab.shards())
        load = Load(self.gw, names, self.trace)
        self.addCleanup(load.stop)   # also when the phase fails
        watcher = Watcher([f"scnr:{n.split(':', 1)[1]}" for n in names], self.trace, " (older data)")
        self.addCleanup(watcher.stop)
        time.sleep(1)
        self.lab.snapshot(port, "older")
        time.sleep(SECONDS)   # the locks' state moves on past the snapshot
        self.lab.stop_node(port)
        wait(lambda: self.lab.failed_over(target["ranges"][0], port), 30, "the failover")
        self.lab.wait_converged(timeout=30)
        self.lab.restart_from(port, "older")
        # The node comes back believing it serves the slots its replica took over: the others correct it,
        # which a loaded machine can take longer than a failover.
        self.lab.wait_converged(timeout=60)
        time.sleep(SECONDS)
        # The stop is a failover: the new primary cannot tell it lost nothing, so each slot's write floor rises
        # above every fence issued before, and a holder from before may be refused once, as after a kill.
        self.judge(load, watcher, "older data", {("release", "lease_lost"), ("write redis", "stale_fence")})
        self.assertEqual(resp(port, "ROLE")[0], "slave", "the node restarted from older data serves as a primary")

    def test_d_lossy_failover(self):
        """kill -9 of a primary whose replica was cut off and frozen for 2.5 s first, while the clients held
        locks of that primary only and worked 6 s under leases of 5 s: every holder outlives its lease, so
        the next is granted while it still works and writes, and the replica is promoted without the grants
        of those 2.5 s, whose holders go on writing too. The checker judges every write; critical sections
        shared must have happened, or the phase proved nothing."""
        victim = self.lab.shards()[1]
        print(f"lossy failover of {victim['primary']}, replicas {victim['replicas']}", file=sys.stderr)
        names = self.names_on([victim])
        shared = overlaps(self.trace)
        self.lab.wait_replicated()
        load = Load(self.gw, names, self.trace, hold=6.0)
        self.addCleanup(load.stop)   # also when the phase fails
        time.sleep(SECONDS)
        self.lab.lossy_failover(victim, window=2.5)
        self.lab.wait_converged(timeout=30)
        time.sleep(SECONDS + 2)
        self.judge(load, None, "lossy failover", {("release", "lease_lost"), ("write pg", "stale_fence"),
                                                  ("write redis", "stale_fence")})
        self.assertGreater(overlaps(self.trace), shared, "the failover lost no grant a client went on using")


if __name__ == "__main__":
    unittest.main()
