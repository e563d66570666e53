# SPDX-License-Identifier: Apache-2.0
"""Fault tests: the gateway SIGKILLed in the middle of fenced batches, Redis flushed and restarted while
locks are held and waiters queued, Postgres restarted during writes. Each checks from outside the gateway
(the commit history a trigger keeps in Postgres, the fences stored there) that no partial batch became
visible, no acknowledged write was lost, fences kept growing, and the gateway came back by itself.

Owns: these fault scenarios (two gateway replicas on one Redis and Postgres take part in the Redis one;
the randomized run in test_adversarial.py covers replicas under load). Must not: leave a backend stopped
(each test restarts what it stopped, also when it fails) or leave the history trigger installed.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import adv_check  # noqa: E402
from adv_common import (GATEWAY_CONFIG, TABLE, Gateway, audit_counts, final_notes, history,  # noqa: E402
                        install_history, max_stored_fence, run_tag, seed_from_env, stored_fences,
                        uninstall_history)
from harness import Client, Redis, services, wait_for  # noqa: E402


def acquire(client: Client, name: str, **fields) -> dict:
    r = client.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000, **fields})
    assert r.status == 200, r
    return r.body


def status_or_none(fn):
    """fn()'s status, or None when no answer came (the gateway was killed, a backend reset it)."""
    try:
        return fn().status
    except Exception:
        return None


class Faults(unittest.TestCase):
    def setUp(self):
        self.seed = seed_from_env()
        self.rng = random.Random(self.seed)
        self.tag = run_tag(self.seed)
        self.gw = Gateway(config=GATEWAY_CONFIG)
        self.addCleanup(self.gw.kill)
        install_history()
        self.addCleanup(uninstall_history)

    def put_rows(self, client: Client, token: str, keys: list[str]) -> None:
        for k in keys:
            r = client.request("PUT", f"/v1/pg/{TABLE}/{k}", {"row": {"customer": "c", "amount_cents": 1,
                                                                      "status": "open", "note": "init"}},
                               {"Fence-Token": token})
            self.assertEqual(r.status, 200, r)

    # -- the gateway dies mid-batch ----------------------------------------------------------------------

    def test_kill_gateway_mid_batch_never_shows_a_partial_batch(self):
        keys = [f"{self.tag}-b{i}" for i in range(6)]
        lock = f"{self.tag}:batch"
        c = self.gw.client()
        old = acquire(c, lock)
        self.put_rows(c, old["token"], keys)
        sent: list[tuple[str, int | None, int]] = []  # (marker, status, fence)
        tokens = [old]
        for rnd in range(4):
            if rnd == 2:  # a new lease: batches with the old token must now be refused, all or nothing
                tokens.append(acquire(c, lock + "2"))
            stop = threading.Event()

            def writer(n: int, port: int) -> None:
                rng = random.Random(self.seed * 100 + rnd * 10 + n)
                with Client(port, timeout=20) as wc:
                    i = 0
                    while not stop.is_set():
                        i += 1
                        lease = rng.choice(tokens)
                        marker = f"{self.tag}-r{rnd}t{n}n{i}-f{lease['fence']}"
                        order = keys[:]
                        rng.shuffle(order)  # opposite lock orders: Postgres may break a deadlock
                        ops = [{"op": "patch", "table": TABLE, "key": k, "set": {"note": marker}} for k in order]
                        st = status_or_none(lambda: wc.post("/v1/pg/batch", {"ops": ops},
                                                            headers={"Fence-Token": lease["token"]}))
                        sent.append((marker, st, lease["fence"]))
                        if st is None:
                            return
            threads = [threading.Thread(target=writer, args=(n, self.gw.port)) for n in range(4)]
            for t in threads:
                t.start()
            time.sleep(self.rng.uniform(0.4, 1.5))
            self.gw.kill()  # SIGKILL with batches in flight
            stop.set()
            for t in threads:
                t.join(30)
            self.gw.start()
            c.close()
            c = self.gw.client()
        c.close()

        hist = history(f"{self.tag}-b")
        per_marker: dict[str, set[str]] = {}
        for _, key, note in hist:
            per_marker.setdefault(note, set()).add(key)
        partial = {m: sorted(ks) for m, ks in per_marker.items() if m != "init" and len(ks) != len(keys)}
        self.assertEqual(partial, {}, "batches only partly committed")
        acked = [m for m, st, _ in sent if st is not None and 200 <= st < 300]
        lost = [m for m in acked if m not in per_marker]
        self.assertEqual(lost, [], "acknowledged batches missing from the commit history")
        refused = [(m, st) for m, st, _ in sent if st is not None and not 200 <= st < 300 and m in per_marker]
        self.assertEqual(refused, [], "batches answered with an error but committed")
        odd = sorted({st for _, st, _ in sent if st is not None and st not in (200, 409, 503)})
        self.assertEqual(odd, [], "batch answers other than 200, 409 stale_fence, 503")
        final = final_notes(f"{self.tag}-b")
        self.assertEqual(len(set(final.values())), 1, f"rows disagree on the last batch: {final}")
        order_bad = []
        for key in keys:
            fences = [adv_check.wid_fence(n) for _, k, n in hist if k == key and n != "init"]
            if any(b < a for a, b in zip(fences, fences[1:])):
                order_bad.append(f"{key}: fences in commit order {fences}")
        self.assertEqual(order_bad, [], "a lower fence committed after a higher one")
        stored = stored_fences(f"pg:{TABLE}/{self.tag}-b%")
        self.assertEqual(set(stored.values()), {max(f for *_, f in sent)}, stored)
        self.assertGreater(len(acked), 10, "too few batches committed to show anything")
        self.assertTrue(any(st == 409 for _, st, _ in sent), "no stale batch was tried")
        print(f"batches: {len(sent)} sent, {len(acked)} acknowledged, {len(per_marker) - 1} committed", flush=True)

    # -- Redis loses its data, or goes away for a while ---------------------------------------------------

    def test_redis_flushall_with_holder_and_waiters(self):
        gw2 = Gateway(config=GATEWAY_CONFIG)
        self.addCleanup(gw2.kill)
        lock, row = f"{self.tag}:flush", f"{self.tag}-f0"
        c = self.gw.client()
        holder = acquire(c, lock, ttl_ms=30000)
        self.put_rows(c, holder["token"], [row])
        results: list = []

        def waiter(port: int) -> None:
            with Client(port, timeout=60) as wc:
                r = wc.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 5000, "wait_ms": 30000})
                results.append(r)
                if r.status == 200:
                    results.append(wc.request("PATCH", f"/v1/pg/{TABLE}/{row}",
                                              {"set": {"note": f"w-f{r.body['fence']}"}},
                                              {"Fence-Token": r.body["token"]}))
                    time.sleep(0.3)
                    wc.post(f"/v1/locks/{lock}/release", {"token": r.body["token"]})
        threads = [threading.Thread(target=waiter, args=(p,)) for p in (self.gw.port, gw2.port)]
        for t in threads:
            t.start()
        wait_for(lambda: c.get(f"/v1/locks/{lock}").body.get("waiting") == 2, timeout=20, what="two waiters")
        stored_before = max_stored_fence()
        with Redis() as r:
            r.cmd("FLUSHALL")
        # The holder's lease is gone with the data: renewal says so rather than pretending.
        self.assertIn(c.post(f"/v1/locks/{lock}/renew", {"token": holder["token"]}).status, (410, 503))
        for t in threads:
            t.join(60)
        grants = [r for r in results if r.status == 200 and "token" in r.body]
        self.assertTrue(all(r.status in (200, 409, 503) for r in results), results)
        fresh = acquire(c, f"{self.tag}:flush-other", ttl_ms=1000)
        fences = [g.body["fence"] for g in grants] + [fresh["fence"]]
        self.assertTrue(all(f > stored_before for f in fences),
                        f"fences after FLUSHALL {fences} not above the stored {stored_before}")
        self.assertGreater(fresh["fence"], holder["fence"])
        # The old holder's write now loses to what the new holders wrote, and is audited.
        if grants:
            r = c.request("PATCH", f"/v1/pg/{TABLE}/{row}", {"set": {"note": "stale"}},
                          {"Fence-Token": holder["token"]})
            self.assertEqual((r.status, r.body.get("type")), (409, "/problems/stale_fence"), r)
            self.assertEqual(audit_counts(f"pg:{TABLE}/{row}").get((f"pg:{TABLE}/{row}", holder["fence"])), 1)
        self.assertGreaterEqual(len(grants), 1, f"no waiter was served after the flush: {results}")
        c.close()
        gw2.stop()

    # A fence issued before the flush but never used for a write must not be issued again: fences are
    # reserved in Postgres before Redis issues them (sql/002_fence_reservation.sql, lua/lib_lease.lua).
    def test_redis_flushall_never_issues_a_fence_twice(self):
        c = self.gw.client()
        row, lock = f"{self.tag}-g0", f"{self.tag}:again"
        writer = acquire(c, f"{self.tag}:first")
        self.put_rows(c, writer["token"], [row])  # the highest stored fence is now writer's
        before = acquire(c, lock)  # issued, not yet used for a write
        with Redis() as r:
            r.cmd("FLUSHALL")
        after = wait_for(lambda: c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 60000}), timeout=20,
                         what="an acquire after the flush").body
        c.request("PATCH", f"/v1/pg/{TABLE}/{row}", {"set": {"note": "new holder"}}, {"Fence-Token": after["token"]})
        late = c.request("PATCH", f"/v1/pg/{TABLE}/{row}", {"set": {"note": "lease lost in the flush"}},
                         {"Fence-Token": before["token"]})
        c.close()
        self.assertGreater(after["fence"], before["fence"], "a fence issued before the flush was issued again")
        self.assertEqual(late.status, 409, late)

    def test_redis_restart_while_postgres_is_down_issues_no_fence_until_it_is_back(self):
        # A Redis restarted from its file may lag the fences it issued; until Postgres confirms a new
        # reserved block, the gateway must issue none (503), and afterwards only fences above the old ones.
        c = self.gw.client()
        before = acquire(c, f"{self.tag}:pre")
        self.addCleanup(services, "start-pg")
        self.addCleanup(services, "start-redis")
        services("stop-pg")
        services("stop-redis")
        services("start-redis")
        answers = []
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:  # every attempt, on fresh and reused connections, is refused
            status = status_or_none(lambda: c.post(f"/v1/locks/{self.tag}:during/acquire", {"ttl_ms": 1000}))
            if status is not None:
                answers.append(status)
            time.sleep(0.1)
        self.assertTrue(answers, "the gateway never answered while Postgres was down")
        self.assertEqual(set(answers), {503}, answers)
        services("start-pg")
        after = wait_for(lambda: status_or_none(lambda: c.get("/readyz")) == 200 and
                         c.post(f"/v1/locks/{self.tag}:post/acquire", {"ttl_ms": 1000}),
                         timeout=30, interval=0.2, what="an acquire once Postgres is back")
        self.assertEqual(after.status, 200, after)
        self.assertGreater(after.body["fence"], before["fence"])
        c.close()

    def test_redis_restart_with_holder_and_waiter(self):
        lock = f"{self.tag}:restart"
        c = self.gw.client()
        holder = acquire(c, lock, ttl_ms=60000)
        results: list = []

        def waiter() -> None:
            with Client(self.gw.port, timeout=90) as wc:
                results.append(wc.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 5000, "wait_ms": 60000}))
        t = threading.Thread(target=waiter)
        t.start()
        wait_for(lambda: c.get(f"/v1/locks/{lock}").body.get("waiting") == 1, timeout=20, what="a waiter")
        self.addCleanup(services, "start-redis")
        services("stop-redis")
        try:
            wait_for(lambda: status_or_none(lambda: c.get("/readyz")) == 503, timeout=20, what="readyz 503")
            r = c.post(f"/v1/locks/{self.tag}:during/acquire", {"ttl_ms": 1000})
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.body.get("type"), "/problems/backend_unavailable", r)
            self.assertIn("retry-after", r.headers)
            time.sleep(1.0)
        finally:
            services("start-redis")
        wait_for(lambda: status_or_none(lambda: c.get("/readyz")) == 200, timeout=30, interval=0.2,
                 what="readyz 200 after Redis came back (no gateway restart)")
        # The AOF kept the lease: the holder renews and releases, the lock moves on.
        r = c.post(f"/v1/locks/{lock}/renew", {"token": holder["token"]})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(c.post(f"/v1/locks/{lock}/release", {"token": holder["token"]}).status, 200)
        t.join(90)
        self.assertEqual(len(results), 1)
        self.assertIn(results[0].status, (200, 503), results[0])
        after = acquire(c, f"{self.tag}:after", ttl_ms=1000)
        self.assertGreater(after["fence"], holder["fence"])
        c.close()

    # -- Postgres goes away during writes -----------------------------------------------------------------

    def test_postgres_restart_during_writes(self):
        c = self.gw.client()
        lease = acquire(c, f"{self.tag}:pgw")
        keys = [f"{self.tag}-p{i}" for i in range(3)]
        self.put_rows(c, lease["token"], keys)
        sent: list[tuple[str, str, int | None, float]] = []
        stop = threading.Event()

        def writer(key: str) -> None:
            with Client(self.gw.port, timeout=30) as wc:
                i = 0
                while not stop.is_set():
                    i += 1
                    note = f"{key}-n{i}-f{lease['fence']}"
                    st = status_or_none(lambda: wc.request("PATCH", f"/v1/pg/{TABLE}/{key}", {"set": {"note": note}},
                                                           {"Fence-Token": lease["token"]}))
                    sent.append((note, key, st, time.monotonic()))
                    if st != 200:
                        time.sleep(0.05)
        threads = [threading.Thread(target=writer, args=(k,)) for k in keys]
        for t in threads:
            t.start()
        time.sleep(1.0)
        self.addCleanup(services, "start-pg")
        services("stop-pg")
        try:
            wait_for(lambda: status_or_none(lambda: c.get("/readyz")) == 503, timeout=20, what="readyz 503")
            time.sleep(1.5)
        finally:
            services("start-pg")
        back = time.monotonic()
        wait_for(lambda: any(st == 200 and at > back for _, _, st, at in sent), timeout=40, interval=0.2,
                 what="a write accepted after Postgres came back (no gateway restart)")
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(60)
        statuses = sorted({st for _, _, st, _ in sent})
        self.assertTrue(set(statuses) <= {200, 503, None}, f"answers during the outage: {statuses}")
        self.assertIn(503, statuses, "the outage was never reported as 503")
        committed = {n for _, _, n in history(f"{self.tag}-p")}
        lost = [n for n, _, st, _ in sent if st == 200 and n not in committed]
        self.assertEqual(lost, [], "acknowledged writes lost across the Postgres restart")
        unknown = committed - {n for n, _, _, _ in sent} - {"init"}
        self.assertEqual(unknown, set(), "committed notes nobody sent")
        self.assertEqual(c.get("/readyz").status, 200)
        c.close()


if __name__ == "__main__":
    unittest.main()
