# SPDX-License-Identifier: Apache-2.0
"""The fault lab: a real replicated topology on loopback (lab.py) under client processes (ha_client.py) doing
acquire -> fenced write -> release with request_id retries through HAProxy, while one fault after another hits
it: kill -9 of the Redis primary (sentinels promote the replica), a SIGSTOP pause of the Redis primary long
enough for a failover, a pause of the Postgres primary, kill -9 of the Postgres primary and promotion of its
synchronous standby, kill -9 of one gateway, a pause of one gateway.

Judged from the clients' own records and the Postgres commit history (a trigger logs every committed write of
ha_rows into ha_history, in commit order per row):
  - no fence is ever granted to two leases;
  - per resource, committed writes never go down in fence, so no two holders' writes interleave out of order;
  - every write a client saw acknowledged is in the history (synchronous standby: no loss on promotion);
  - every stale refusal a client saw has its audit row;
  - after a Redis failover every new grant is above every fence granted before it (fences never go back,
    whatever the dead primary had not replicated).
Per scenario it measures the unavailability (first failed request to the first later request that succeeded,
over the requests that need the faulted component) and checks the targets: a Redis failover within sentinel
down-after-milliseconds + 2 s (or 2 s after the sentinels' switch, when they alone took longer), a Postgres
failover within promotion + 3 s, a gateway crash or pause invisible to the clients that retry (no operation
given up).

Broken variant caught: with the fence check on a new Redis connection disabled (fence_check_on_connect
returning 0 without checking), the Redis kill run (the replica held still for the primary's last half second)
granted fences twice and its fences went back after the failover.

CI runs one pass (FG_HA_ROUNDS=1, 12 clients); the long run is
    FG_HA_ROUNDS=5 FG_HA_CLIENTS=19 scripts/test -R ha.lab
FG_HA_REPORT names a file for the measured figures (JSON); FG_HA_KEEP=1 keeps the lab's directory.

Owns: the scenarios and the judgement. Must not: share servers with the rest of the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unittest
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab import DOWN_AFTER_MS, Lab, resp, wait  # noqa: E402

ROUNDS = int(os.environ.get("FG_HA_ROUNDS", "1"))
CLIENTS = min(19, int(os.environ.get("FG_HA_CLIENTS", "12")))
RESOURCES = 3
SETTLE_S = 4.0           # normal running between two faults
PAUSE_S = 3.0            # length of a SIGSTOP pause (Postgres, gateway)
DETECT_S = 1.0           # how long the lab waits before promoting (stands for a failover manager's check)


def failed(rec) -> bool:
    s = rec["status"]
    return not isinstance(s, int) or s >= 500


# --- scenarios: each injects a fault, heals it, and returns what it measured -------------------------------

def switched(lab: Lab, old: int) -> bool:
    try:
        return lab.redis_primary_port() != old
    except RuntimeError:
        return False


def redis_kill(lab: Lab) -> dict:
    """kill -9 of the primary with writes it had not replicated: the replica is held still (SIGSTOP) and its
    replication link cut for the last half second, so the grants of that half second exist only on the
    primary that dies."""
    old = lab.redis_primary_port()
    i = lab.redis_index(old)
    replica = lab.procs[f"redis{1 - i}"].pid
    lab.pause(replica)
    resp(old, "CLIENT", "KILL", "TYPE", "replica")
    time.sleep(0.5)
    t = time.time()
    lab.kill(f"redis{i}")
    lab.resume(replica)
    wait(lambda: switched(lab, old), 30, "the sentinels to promote the replica")
    t_switch = time.time()
    time.sleep(1.0)
    lab.start_redis(i, lab.redis_primary_port())
    return {"t_fault": t, "switch_s": t_switch - t, "target_s": DOWN_AFTER_MS / 1000 + 2}


def redis_pause(lab: Lab) -> dict:
    old = lab.redis_primary_port()
    pid = lab.procs[f"redis{lab.redis_index(old)}"].pid
    t = time.time()
    lab.pause(pid)
    wait(lambda: switched(lab, old), 30, "the sentinels to promote the replica")
    t_switch = time.time()
    time.sleep(0.5)
    lab.resume(pid)
    return {"t_fault": t, "switch_s": t_switch - t, "target_s": DOWN_AFTER_MS / 1000 + 2}


def pg_pause(lab: Lab) -> dict:
    pids = lab.pg_processes(lab.pg_primary)
    t = time.time()
    for pid in pids:
        lab.pause(pid)
    time.sleep(PAUSE_S)
    for pid in pids:
        lab.resume(pid)
    return {"t_fault": t, "pause_s": PAUSE_S}


def pg_kill(lab: Lab) -> dict:
    old = lab.pg_primary
    t = time.time()
    lab.kill_pg(old)
    time.sleep(DETECT_S)
    lab.promote(1 - old)
    promoted = time.time() - t
    return {"t_fault": t, "promoted_s": promoted, "target_s": promoted + 3,
            "heal": lambda: lab.start_pg_standby(old, 1 - old)}


def gw_kill(lab: Lab) -> dict:
    t = time.time()
    lab.kill("gw1")
    time.sleep(PAUSE_S)
    lab.start_gateway(1)
    return {"t_fault": t, "invisible": True}


def gw_pause(lab: Lab) -> dict:
    pid = lab.procs["gw1"].pid
    t = time.time()
    lab.pause(pid)
    time.sleep(PAUSE_S)
    lab.resume(pid)
    return {"t_fault": t, "pause_s": PAUSE_S, "invisible": True}


# (name, fault, component whose requests count for unavailability)
# Two Redis failovers are kept apart: a sentinel does not fail the same master over again within twice its
# failover-timeout.
SCENARIOS = [
    ("redis_kill", redis_kill, "redis"),
    ("gateway_kill", gw_kill, "gateway"),
    ("postgres_pause", pg_pause, "postgres"),
    ("redis_pause", redis_pause, "redis"),
    ("gateway_pause", gw_pause, "gateway"),
    ("postgres_kill_promote", pg_kill, "postgres"),
]
RELEVANT = {"redis": {"acquire", "release"}, "postgres": {"write"}, "gateway": {"acquire", "release", "write"}}


def measure(records: list[dict], start: float, end: float, component: str) -> dict:
    """Unavailability of a fault at start: from the first failed request (5xx or no answer) sent in
    [start, end) to the first request sent after that failure that was answered (a 409 lock_busy is an
    answer: after a Redis failover that lost releases, locks stay held by leases nobody holds until their
    TTL, which is lease loss, not unavailability); also the longest logical operation (retries included)
    that began in the window."""
    ops = RELEVANT[component]
    relevant = [r for r in records if r.get("op") in ops]
    mine = [r for r in relevant if start <= r["t0"] < end]
    fails = [r for r in mine if failed(r) and r["t1"] < end]
    out = {"requests": len(mine), "failed_requests": len(fails), "unavailable_s": 0.0}
    if fails:
        first = min(r["t1"] for r in fails)
        ok = [r["t1"] for r in relevant if not failed(r) and r["t0"] >= first]
        out["unavailable_s"] = round(min(ok) - first, 2) if ok else None
        out["recovered_after_fault_s"] = round(min(ok) - start, 2) if ok else None
    spans = defaultdict(lambda: [float("inf"), 0.0])
    for r in records:
        if r.get("op") in ops and start <= r["t0"] < end:
            s = spans[r["opid"]]
            s[0], s[1] = min(s[0], r["t0"]), max(s[1], r["t1"])
    out["longest_op_s"] = round(max((b - a for a, b in spans.values()), default=0.0), 2)
    return out


def bound(info: dict) -> float:
    """The unavailability allowed: the target, or for Redis 2 s after the sentinels' switch when they alone
    took longer than down-after-milliseconds to decide (their pace on a loaded machine, not the gateway's)."""
    return max(info["target_s"], info.get("switch_s", 0.0) + 2.0)


class FaultLab(unittest.TestCase):
    def test_faults(self):
        lab = Lab()
        self.addCleanup(lambda: lab.stop(keep=os.environ.get("FG_HA_KEEP") == "1"))
        lab.start()
        records_dir = os.path.join(lab.root, "records")
        os.makedirs(records_dir)
        total = 4 + ROUNDS * len(SCENARIOS) * 14 + 60
        here = os.path.dirname(os.path.abspath(__file__))
        clients = [subprocess.Popen([sys.executable, os.path.join(here, "ha_client.py"),
                                     f"http://127.0.0.1:{lab.lb_port}", f"c{k}",
                                     os.path.join(records_dir, f"c{k}.jsonl"), str(total), str(RESOURCES)])
                   for k in range(CLIENTS)]
        self.addCleanup(lambda: [c.kill() for c in clients if c.poll() is None])
        t_run = time.time()
        time.sleep(SETTLE_S)
        runs = []
        for rnd in range(ROUNDS):
            for name, fault, component in SCENARIOS:
                info = fault(lab)
                time.sleep(SETTLE_S)
                heal = info.pop("heal", None)
                if heal:
                    heal()
                info["t_end"] = time.time()
                runs.append((name, component, info))
        t_stop = time.time()
        for c in clients:
            c.kill()
            c.wait()
        records = []
        for k in range(CLIENTS):
            with open(os.path.join(records_dir, f"c{k}.jsonl")) as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue  # the last line of a killed client
                    rec["client"] = f"c{k}"
                    records.append(rec)
        history = [line.split("|") for line in
                   lab.psql("SELECT id, holder, fence, seq FROM ha_history ORDER BY n").splitlines()]
        audits = Counter(tuple(line.split("|")) for line in lab.psql(
            "SELECT resource, presented_fence FROM fencegate.rejections WHERE resource LIKE 'pg:ha_rows/%'"
        ).splitlines())

        report = {"clients": CLIENTS, "rounds": ROUNDS, "seconds": round(t_stop - t_run, 1),
                  "requests": len(records), "scenarios": []}
        problems = []
        for name, component, info in runs:
            m = measure(records, info["t_fault"], info["t_end"], component)
            m.update({k: round(v, 2) for k, v in info.items() if isinstance(v, float) and k != "t_fault"
                      and k != "t_end"})
            m["scenario"] = name
            m["at_s"] = round(info["t_fault"] - t_run, 2)
            report["scenarios"].append(m)
            if m["failed_requests"] and m["unavailable_s"] is None:
                problems.append(f"{name}: never recovered")
            elif "target_s" in info and m["unavailable_s"] > bound(info):
                problems.append(f"{name}: unavailable {m['unavailable_s']} s > {bound(info):.2f} s")
        self.check_fences(records, runs, problems)
        self.check_history(records, history, audits, problems)
        self.check_gateway_faults(records, runs, problems)
        report["grants"] = sum(1 for r in records if r.get("op") == "granted")
        report["acknowledged_writes"] = sum(1 for r in records if r.get("op") == "write" and r["status"] == 200)
        report["stale_refusals"] = sum(1 for r in records if r.get("op") == "write" and r["status"] == 409)
        report["committed_writes"] = len(history)
        text = json.dumps(report, indent=1)
        print(text)
        if os.environ.get("FG_HA_REPORT"):
            with open(os.environ["FG_HA_REPORT"], "w") as f:
                f.write(text + "\n")
        self.assertGreater(len(history), 50, "the clients barely wrote anything")
        self.assertEqual(problems, [], f"lab directory {lab.root}")

    def check_fences(self, records, runs, problems):
        """No fence granted to two leases; after each Redis failover, new grants above all earlier ones."""
        grants = [r for r in records if r.get("op") == "granted"]
        owners = defaultdict(set)
        for g in grants:
            owners[g["fence"]].add((g["client"], g["rid"]))
        twice = {f: o for f, o in owners.items() if len(o) > 1}
        if twice:
            problems.append(f"fences granted to two leases: {dict(list(twice.items())[:5])}")
        for name, component, info in runs:
            if component != "redis":
                continue
            before = [g["fence"] for g in grants if g["t1"] < info["t_fault"]]
            after = [g for g in grants if g["t0"] > info["t_fault"] + info["switch_s"] + 1]
            low = [g["fence"] for g in after if before and g["fence"] <= max(before)]
            if low:
                problems.append(f"{name}: fences went back after the failover: {low[:5]} <= {max(before)}")

    def check_history(self, records, history, audits, problems):
        """Writes in fence order per resource; acknowledged writes kept; refusals audited."""
        last = {}
        for row_id, holder, fence, seq in history:
            if int(fence) < last.get(row_id, (0,))[0]:
                problems.append(f"{row_id}: fence {fence} by {holder} committed after fence {last[row_id][0]}")
            last[row_id] = (max(int(fence), last.get(row_id, (0,))[0]),)
        committed = {(h, int(f), int(s)) for _, h, f, s in history}
        acked = [r for r in records if r.get("op") == "write" and r["status"] == 200]
        lost = [r for r in acked if (r["client"], r["fence"], r["seq"]) not in committed]
        if lost:
            problems.append(f"{len(lost)} acknowledged writes missing from the history, e.g. {lost[:3]}")
        refused = Counter((f"pg:ha_rows/{r['res']}", str(r["fence"])) for r in records
                          if r.get("op") == "write" and r["status"] == 409 and "stale_fence" in (r["type"] or ""))
        unaudited = {k: n for k, n in refused.items() if audits.get(k, 0) < n}
        if unaudited:
            problems.append(f"stale refusals without an audit row: {dict(list(unaudited.items())[:5])}")
        if not refused:
            print("note: no stale write was refused in this run")

    def check_gateway_faults(self, records, runs, problems):
        """A gateway crash or pause: every logical operation that began then still completed."""
        for name, component, info in runs:
            if not info.get("invisible"):
                continue
            spans = defaultdict(list)
            for r in records:
                if info["t_fault"] <= r["t0"] < info["t_end"] and r.get("op") in ("acquire", "write", "release"):
                    spans[r["opid"]].append(r)
            given_up = [k for k, rs in spans.items() if all(failed(r) for r in rs) and
                        max(r["t1"] for r in rs) < info["t_end"] - 1]
            if given_up:
                problems.append(f"{name}: operations that never succeeded: {given_up[:5]}")


if __name__ == "__main__":
    unittest.main()
