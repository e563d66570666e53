# SPDX-License-Identifier: Apache-2.0
"""The randomized adversarial run: worker processes (adv_worker.py) hammer locks, a semaphore and fenced
writes through TWO gateway processes on the same Redis and Postgres, while this orchestrator SIGKILLs them
(holding or waiting), freezes them with SIGSTOP past their lease and resumes them, and they themselves hang
up mid-wait, retry with the same request_id and storm one lock. Afterwards the guarantees are checked
from records kept outside the gateway (adv_check.py): the workers' own JSON lines and the commit history
a trigger keeps in Postgres.

Environment: FG_ADV_SECONDS (length of the storm, default 60; e.g. 600 locally), FG_ADV_SEED (replay),
FG_ADV_WORKERS (default 8). Owns: the orchestration and the coverage floor (a run that exercised nothing
fails). Must not: relax a safety check on a slow machine (only liveness waits are generous).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import adv_check  # noqa: E402
from adv_worker import park  # noqa: E402
from adv_common import (GATEWAY_CONFIG, TABLE, Gateway, audit_counts, final_notes, history,  # noqa: E402
                        install_history, run_tag, seed_from_env, stored_fences, uninstall_history)
from harness import test_data_dir, wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TTLS = [800, 1500, 3000]
SEM_LIMIT = 3
NLOCKS = 3


def proc_state(pid: int) -> str:
    """The state letter of /proc/<pid>/stat ('T' stopped, 'Z' zombie), or '' when gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def last_event(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
        for line in reversed(lines):
            try:
                return json.loads(line)["ev"]
            except ValueError:
                continue
    except OSError:
        pass
    return ""


class AdversarialRun(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.seed = seed_from_env()
        self.rng = random.Random(self.seed)
        self.seconds = float(os.environ.get("FG_ADV_SECONDS", "60"))
        self.nworkers = int(os.environ.get("FG_ADV_WORKERS", "8"))
        self.tag = run_tag(self.seed)
        self.dir = tempfile.mkdtemp(prefix=f"{self.tag}-", dir=test_data_dir())
        self.gateways = [Gateway(config=GATEWAY_CONFIG) for _ in range(2)]
        for gw in self.gateways:
            self.addCleanup(gw.kill)
        install_history()  # after start-up: the gateway's migrations create public.invoices
        self.addCleanup(uninstall_history)
        self.procs: dict[str, subprocess.Popen] = {}
        self.addCleanup(self.kill_workers)

    def kill_workers(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def spec(self, wid: str) -> dict:
        locks = [f"{self.tag}:L{i}" for i in range(NLOCKS)]
        storm = f"{self.tag}:storm"
        every = locks + [storm]
        return {"id": wid, "seed": self.rng.randrange(2**31), "out": os.path.join(self.dir, wid + ".jsonl"),
                "ports": [gw.port for gw in self.gateways], "locks": locks, "storm": storm,
                "rows": {lk: f"{self.tag}-{i}" for i, lk in enumerate(every)},
                "rkeys": {lk: f"app:{self.tag}:{i}" for i, lk in enumerate(every)},
                "sem": f"{self.tag}:sem", "sem_limit": SEM_LIMIT, "end_at": self.end_at, "ttls": TTLS,
                "table": TABLE}

    def spawn(self) -> None:
        wid = f"w{len(self.procs)}"
        spec = self.spec(wid)
        self.specs[wid] = spec
        with open(spec["out"] + ".err", "w") as err:
            self.procs[wid] = subprocess.Popen([sys.executable, os.path.join(HERE, "adv_worker.py"),
                                                json.dumps(spec)], stdin=subprocess.DEVNULL, stderr=err)

    def test_guarantees_under_hostile_clients(self):
        self.end_at = time.time() + self.seconds
        self.specs: dict[str, dict] = {}
        kills: dict[str, float] = {}
        stats = {"kill_holding": 0, "kill_waiting": 0, "kill_other": 0, "stop_external": 0, "stop_self": 0}
        stopped: dict[str, float] = {}  # worker -> when to resume it
        for _ in range(self.nworkers):
            self.spawn()
        next_kill = time.time() + self.rng.uniform(2, 5)
        next_stop = time.time() + self.rng.uniform(1, 4)
        while time.time() < self.end_at:
            now = time.time()
            for wid, p in list(self.procs.items()):
                if wid in kills or p.poll() is not None:
                    continue
                if proc_state(p.pid) == "T" and wid not in stopped:
                    stopped[wid] = now + max(TTLS) / 1000 + self.rng.uniform(0.3, 2.0)
                    stats["stop_self"] += 1
                if wid in stopped and now >= stopped[wid]:
                    del stopped[wid]
                    p.send_signal(signal.SIGCONT)
            live = [w for w, p in self.procs.items() if w not in kills and p.poll() is None]
            if now >= next_kill and live:
                wid = self.rng.choice(live)
                ev = last_event(self.specs[wid]["out"])
                kind = ("kill_holding" if ev in ("grant", "renew", "wreq", "wresp", "pause", "resumed")
                        else "kill_waiting" if ev == "acq" else "kill_other")
                stats[kind] += 1
                kills[wid] = time.time() * 1000
                self.procs[wid].kill()
                self.procs[wid].wait()
                stopped.pop(wid, None)
                self.spawn()
                next_kill = now + self.rng.uniform(2, 6)
            if now >= next_stop and live:
                wid = self.rng.choice(live)
                if wid not in stopped and wid not in kills and proc_state(self.procs[wid].pid) != "T":
                    self.procs[wid].send_signal(signal.SIGSTOP)
                    stopped[wid] = now + max(TTLS) / 1000 + self.rng.uniform(0.3, 2.0)
                    stats["stop_external"] += 1
                next_stop = now + self.rng.uniform(2, 5)
            time.sleep(0.05)

        # Let everyone finish its current action (a hold lasts at most 2.5 leases), resuming the frozen.
        deadline = time.time() + 60
        while time.time() < deadline:
            for wid, p in self.procs.items():
                if p.poll() is None and proc_state(p.pid) == "T":
                    p.send_signal(signal.SIGCONT)
            if all(p.poll() is not None for p in self.procs.values()):
                break
            time.sleep(0.1)
        for wid, p in self.procs.items():
            if p.poll() is None:
                kills[wid] = time.time() * 1000
                p.kill()
                p.wait()
        failed = [w for w, p in self.procs.items() if w not in kills and p.returncode != 0]
        errs = {}
        for w in failed:
            with open(self.specs[w]["out"] + ".err", encoding="utf-8", errors="replace") as f:
                errs[w] = f.read()[-2000:]
        self.assertEqual(failed, [], f"workers crashed: {errs}")

        self.check_quiescent()
        self.check_hangups_leave_the_queue()
        self.judge(kills, stats)
        for gw in self.gateways:
            gw.stop()  # SIGTERM must drain and exit 0 (and, under ASan, without a leak)

    def check_quiescent(self):
        """Once every client is gone and every lease has run out, nothing is held and nobody waits: no
        ghost waiter of a hung-up or killed client is left behind."""
        spec = next(iter(self.specs.values()))
        c = self.gateways[0].client()
        names = spec["locks"] + [spec["storm"]]

        def idle():
            st = [c.get(f"/v1/locks/{n}").body for n in names]
            sem = c.get(f"/v1/semaphores/{spec['sem']}").body
            busy = [s for s in st if s["held"] or s["waiting"]]
            if sem.get("holders") or sem.get("waiting"):
                busy.append(sem)
            self.last_busy = busy
            return not busy
        try:
            wait_for(idle, timeout=max(TTLS) / 1000 + 25, interval=0.25, what="every lock and semaphore idle")
        except AssertionError:
            self.fail(f"locks or semaphore still held or waited on long after every client left: {self.last_busy}")
        finally:
            c.close()

    def check_hangups_leave_the_queue(self):
        """On each replica, a waiter whose process is SIGKILLed and one that hangs up leave the queue while
        the lock is still held (not only when their turn comes), and the release then frees the lock."""
        for i, gw in enumerate(self.gateways):
            name = f"{self.tag}:probe{i}"
            with gw.client() as c:
                holder = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}).body

                def waiting() -> int:
                    return c.get(f"/v1/locks/{name}").body["waiting"]
                p = subprocess.Popen([sys.executable, os.path.join(HERE, "adv_worker.py"), "--park",
                                      str(gw.port), name])
                self.procs[f"probe{i}"] = p
                wait_for(lambda: waiting() == 1, timeout=20, what="the probe waiter queued")
                p.kill()
                p.wait()
                try:
                    wait_for(lambda: waiting() == 0, timeout=10, interval=0.1, what="")
                except AssertionError:
                    self.fail(f"gateway {i}: a SIGKILLed waiter stayed in the queue of a held lock")
                s = park(gw.port, name)
                wait_for(lambda: waiting() == 1, timeout=20, what="the probe waiter queued")
                s.close()
                try:
                    wait_for(lambda: waiting() == 0, timeout=10, interval=0.1, what="")
                except AssertionError:
                    self.fail(f"gateway {i}: a waiter that hung up stayed in the queue of a held lock")
                self.assertEqual(c.post(f"/v1/locks/{name}/release", {"token": holder["token"]}).status, 200)
                st = c.get(f"/v1/locks/{name}").body
                self.assertEqual((st["held"], st["waiting"]), (False, 0), st)

    def judge(self, kills: dict[str, float], stats: dict[str, int]):
        records = adv_check.load_records(self.dir)
        leases = adv_check.Leases(records, kills)
        writes = adv_check.Writes(records)
        excl, windows = adv_check.check_exclusion(leases)
        sem_bad, sem_high = adv_check.check_semaphore(leases, SEM_LIMIT)
        fence_bad = adv_check.check_fences(leases, records)

        res_pattern = f"%{self.tag}%"
        # Redis writes' audit rows reach Postgres right away or through the janitor: wait for them.
        expected = len(writes.stale())
        wait_for(lambda: sum(audit_counts(res_pattern).values()) >= expected, timeout=20, interval=0.25,
                 what=f"{expected} audit rows")
        audit_bad = adv_check.check_audit(writes, audit_counts(res_pattern))
        hist_bad = adv_check.check_pg_history(writes, history(self.tag), final_notes(self.tag),
                                              stored_fences(f"pg:{TABLE}/{self.tag}%"), TABLE)
        values = {}
        c = self.gateways[1].client()
        for key in next(iter(self.specs.values()))["rkeys"].values():
            r = c.get(f"/v1/redis/{key}")
            values[f"redis:{key}"] = (r.body.get("value"), r.body.get("fence")) if r.status == 200 else (None, None)
        c.close()
        redis_bad = adv_check.check_redis_values(writes, values)

        answers = [r for r in records if r["ev"] in ("acq_err", "renew_err", "rel", "wresp") and r["status"]]
        server_errors = [r for r in answers if r["status"] >= 500]
        odd = [r for r in records if r["ev"] == "acq_err" and r["status"] is not None
               and (r["status"], r["code"]) not in ((409, "lock_busy"), (409, "conflict"), (410, "lease_lost"))]
        odd += [r for r in records if r["ev"] == "wresp" and r["status"] is not None
                and not (200 <= r["status"] < 300 or (r["status"], r["code"]) in ((409, "stale_fence"),
                                                                                   (404, "not_found")))]
        pg_stale = [w for w in writes.stale() if w["res"].startswith("pg:")]
        cover = {
            "lock_windows": windows, "sem_grants": len(leases.of("sem")), "sem_highest_concurrency": sem_high,
            "pg_accepted": sum(1 for w in writes.accepted() if w["res"].startswith("pg:")),
            "pg_stale": len(pg_stale),
            "redis_accepted": sum(1 for w in writes.accepted() if w["res"].startswith("redis:")),
            "redis_stale": len(writes.stale()) - len(pg_stale), "unresolved_writes": len(writes.unresolved()),
            "disconnects": sum(1 for r in records if r["ev"] == "disc" and r["got"] is None),
            "retried_grants": sum(1 for r in records if r["ev"] == "grant" and r.get("retry")),
            "storm_grants": sum(1 for x in leases.of("lock") if x["name"].endswith(":storm")),
            "pauses_past_lease": sum(1 for r in records if r["ev"] == "resumed"), **stats,
        }
        print("adversarial coverage: " + json.dumps(cover), flush=True)
        problems = {"mutual exclusion": excl, "semaphore limit": sem_bad, "fences": fence_bad,
                    "stale writes audited": audit_bad, "commit history": hist_bad, "redis values": redis_bad,
                    "server errors": [json.dumps(r) for r in server_errors],
                    "unexpected answers": [json.dumps(r) for r in odd]}
        report = {k: v[:10] + ([f"... {len(v) - 10} more"] if len(v) > 10 else []) for k, v in problems.items() if v}
        self.assertEqual(report, {}, f"guarantees broken (seed {self.seed}, records in {self.dir}):\n"
                                     + json.dumps(report, indent=1))
        # A run that exercised nothing proves nothing.
        floor = {"lock_windows": 20, "sem_grants": 5, "pg_accepted": 20, "redis_accepted": 3,
                 "disconnects": 1, "storm_grants": 5}
        if self.seconds >= 45:
            floor.update({"pg_stale": 1, "sem_highest_concurrency": 2, "pauses_past_lease": 1})
        thin = {k: (cover[k], v) for k, v in floor.items() if cover[k] < v}
        self.assertEqual(thin, {}, "the run exercised too little (seen, floor)")
        self.assertGreaterEqual(sum(stats[k] for k in stats if k.startswith("kill")), 1, stats)


if __name__ == "__main__":
    unittest.main()
