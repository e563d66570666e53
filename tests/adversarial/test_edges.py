"""Randomized edge scenarios (issue 16), each bounded to a few seconds of load:

1. Redis restarts from an older snapshot while Postgres is down, under random lock and semaphore traffic
   (holders, waiters parked on both gateways, releases, fresh acquires) through two gateways. Checked:
   no fence is ever granted twice (every 200 answer's fence is unique across the run), and no grant made
   after the rollback carries a fence at or below one granted before it.
2. Postgres frozen (SIGSTOP) while random waiters are parked on one lock through two gateways, and the
   holders hand it on: every waiter is granted, in the order it queued (FIFO), none dropped.
3. Random fenced writes to a table keyed by `numeric`, each spelling a key at random (`7`, `7.0`, `7.000`,
   `0.7e1`), with fresh and stale tokens: every spelling is one resource, exactly one fence row per value,
   and a write answered 200 never carries a lower fence than one answered 200 for the same value before
   it was sent.

FG_ADV_SEED replays a run. Broken variants caught: scenario 1 with fence_check.lua trusting any existing
sequence (a fence granted twice); scenario 2 with the audit drain back on the lease janitor and a stale
write per second (waiters dropped, FIFO broken); scenario 3 with the numeric identity off (two fence rows
for one value, a lower fence accepted after a higher one).
Must not: leave Postgres stopped or frozen, or its test table behind.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

from adv_common import run_tag, seed_from_env  # noqa: E402
from harness import Client, Gateway, psql, services, wait_for  # noqa: E402
from test_fence_rollback import PrivateRedis  # noqa: E402
from test_pg_stall import postgres_pids, signal_all  # noqa: E402


def post(port: int, path: str, body: dict, timeout: float = 60):
    try:
        with Client(port, timeout=timeout) as c:
            return c.post(path, body)
    except Exception:  # noqa: BLE001 - a backend restart may cut a connection
        return None


class Edges(unittest.TestCase):
    def setUp(self):
        self.seed = seed_from_env()
        self.rng = random.Random(self.seed)
        self.tag = run_tag(self.seed)

    # -- 1 -------------------------------------------------------------------------------------------------

    def test_redis_rollback_with_postgres_down_under_load(self):
        redis = PrivateRedis("adv-rollback")
        redis.start()
        self.addCleanup(redis.stop)
        gws = [Gateway(env_overrides={"FENCEGATE_REDIS_URL": redis.url}, config={"poll_ms": 300})
               for _ in range(2)]
        for gw in gws:
            self.addCleanup(gw.kill)
        grants: list[tuple[float, int]] = []  # (time answered, fence)
        lock = threading.Lock()
        stop = threading.Event()

        def record(r) -> None:
            if r is not None and r.status == 200 and "fence" in r.body:
                with lock:
                    grants.append((time.monotonic(), r.body["fence"]))

        def worker(n: int) -> None:
            rng = random.Random(self.seed * 31 + n)
            while not stop.is_set():
                gw = rng.choice(gws)
                kind = rng.choice(["locks", "semaphores"])
                name = f"{self.tag}:{kind[0]}{rng.randrange(3)}"
                body = {"ttl_ms": rng.choice([300, 800]), "wait_ms": rng.choice([0, 2000])}
                if kind == "semaphores":
                    body["limit"] = 2
                r = post(gw.port, f"/v1/{kind}/{name}/acquire", body, timeout=30)
                record(r)
                if r is not None and r.status == 200 and rng.random() < 0.7:
                    time.sleep(rng.uniform(0, 0.2))
                    post(gw.port, f"/v1/{kind}/{name}/release", {"token": r.body["token"]})
                time.sleep(rng.uniform(0, 0.05))

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(6)]
        for t in threads:
            t.start()
        time.sleep(self.rng.uniform(1.0, 2.0))
        redis.snapshot("old.rdb")
        time.sleep(self.rng.uniform(1.0, 2.0))
        self.addCleanup(services, "start-pg")
        services("stop-pg")
        rollback_at = time.monotonic()
        redis.restart_from("old.rdb")
        time.sleep(self.rng.uniform(1.5, 3.0))
        services("start-pg")
        time.sleep(self.rng.uniform(1.5, 3.0))
        stop.set()
        for t in threads:
            t.join(60)
        fences = [f for _, f in grants]
        self.assertGreater(len(fences), 20, "the run granted almost nothing")
        dup = sorted({f for f in fences if fences.count(f) > 1})
        self.assertEqual(dup, [], f"fences granted twice (seed {self.seed})")
        before = [f for t, f in grants if t < rollback_at]
        after = [f for t, f in grants if t > rollback_at + 0.5]
        self.assertTrue(after, "nothing was granted after the rollback")
        self.assertGreater(min(after), max(before), f"a fence at or below an earlier one (seed {self.seed})")

    # -- 2 -------------------------------------------------------------------------------------------------

    def test_postgres_stall_with_waiters_parked(self):
        gws = [Gateway(config={"redis_prefixes": ["app:"], "waiter_lease_ms": 1500, "poll_ms": 500})
               for _ in range(2)]
        for gw in gws:
            self.addCleanup(gw.stop)
        c = gws[0].client(timeout=30)
        self.addCleanup(c.close)
        name, key = f"{self.tag}:stall", f"app:{self.tag}:stall"
        old = c.post(f"/v1/locks/{self.tag}:old/acquire", {"ttl_ms": 60000}).body
        new = c.post(f"/v1/locks/{self.tag}:new/acquire", {"ttl_ms": 60000}).body
        self.assertEqual(c.request("PUT", f"/v1/redis/{key}", {"value": "v"}, {"Fence-Token": new["token"]}).status,
                         200)
        holder = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}).body
        n = self.rng.randrange(4, 8)
        answers: dict[int, object] = {}

        def wait(i: int, gw: Gateway) -> None:
            answers[i] = post(gw.port, f"/v1/locks/{name}/acquire", {"ttl_ms": 60000, "wait_ms": 60000, "owner": f"w{i}"})

        order = []
        for i in range(n):
            gw = self.rng.choice(gws)
            threading.Thread(target=wait, args=(i, gw), daemon=True).start()
            wait_for(lambda: c.get(f"/v1/locks/{name}").body["waiting"] == i + 1, what="a waiter queued")
            order.append(i)
        pids = postgres_pids()
        self.addCleanup(signal_all, pids, signal.SIGCONT)
        signal_all(pids, signal.SIGSTOP)
        stale_stop = threading.Event()

        def stale_writer() -> None:  # audit records for the drain to copy while Postgres is frozen
            with Client(gws[0].port, timeout=10) as sc:
                while not stale_stop.is_set():
                    sc.request("PUT", f"/v1/redis/{key}", {"value": "old"}, {"Fence-Token": old["token"]})
                    time.sleep(0.3)
        threading.Thread(target=stale_writer, daemon=True).start()
        time.sleep(self.rng.uniform(2.5, 3.5))  # past the waiter lease
        granted_order = []
        token = holder["token"]
        for _ in range(n):
            self.assertEqual(c.post(f"/v1/locks/{name}/release", {"token": token}).status, 200)
            got = wait_for(lambda: [i for i, r in answers.items() if i not in granted_order and r is not None],
                           timeout=10, what="the next waiter granted")
            self.assertEqual(len(got), 1, f"more than one waiter answered at once: {got}")
            r = answers[got[0]]
            self.assertEqual(r.status, 200, f"waiter {got[0]} was answered {r} (seed {self.seed})")
            granted_order.append(got[0])
            token = r.body["token"]
            time.sleep(self.rng.uniform(0, 0.3))
        stale_stop.set()
        signal_all(pids, signal.SIGCONT)
        self.assertEqual(granted_order, order, f"FIFO broken while Postgres was frozen (seed {self.seed})")
        c.post(f"/v1/locks/{name}/release", {"token": token})

    # -- 3 -------------------------------------------------------------------------------------------------

    def test_numeric_keys_in_random_writes(self):
        table = f"adv_num_{self.seed % 100000}"
        psql(f"CREATE TABLE IF NOT EXISTS public.{table} (id numeric PRIMARY KEY, note text)")
        self.addCleanup(psql, f"DROP TABLE IF EXISTS public.{table}")
        gw = Gateway(config={"tables": {table: {"key": "id", "columns": ["note"]}}})
        self.addCleanup(gw.stop)
        values = [7, 12.5, 1000]
        spellings = {7: ["7", "7.0", "7.000", "0.7e1", "07"], 12.5: ["12.5", "12.50", "1.25e1"],
                     1000: ["1000", "1e3", "1000.00"]}
        results = []
        lock = threading.Lock()

        def worker(n: int) -> None:
            rng = random.Random(self.seed * 17 + n)
            tokens = []
            with Client(gw.port, timeout=30) as c:
                for _ in range(25):
                    if not tokens or rng.random() < 0.3:
                        r = c.post(f"/v1/locks/{self.tag}:n{n}:{len(tokens)}/acquire", {"ttl_ms": 60000})
                        tokens.append((r.body["token"], r.body["fence"]))
                    token, fence = rng.choice(tokens)
                    value = rng.choice(values)
                    spelled = rng.choice(spellings[value])
                    sent = time.monotonic()
                    r = c.request("PUT", f"/v1/pg/{table}/{spelled}", {"row": {"note": str(fence)}},
                                  {"Fence-Token": token})
                    with lock:
                        results.append((sent, time.monotonic(), value, fence, r))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertTrue(all(x[4].status in (200, 409) for x in results), [x[4] for x in results])
        for value in values:
            ok = [x for x in results if x[2] == value and x[4].status == 200]
            names = {x[4].body["resource"] for x in results if x[2] == value}
            self.assertEqual(len(names), 1, f"one value, several resources: {names}")
            for a in ok:
                for b in ok:
                    if a[1] < b[0]:
                        self.assertLessEqual(a[3], b[3], f"a lower fence accepted after a higher one (seed {self.seed})")
        rows = psql(f"SELECT count(*) FROM fencegate.resource_fences WHERE resource LIKE 'pg:{table}/%'")
        self.assertEqual(rows, [str(len(values))])


if __name__ == "__main__":
    unittest.main()
