#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/cluster_cpu.py - Redis's CPU per uncontended lock pair on each primary of a Redis Cluster, against a
single Redis, with the same client in the same run.

    cmake --build build-test --target cluster_client
    python3 bench/cluster_cpu.py --client build-test/tests/cluster_client
    python3 bench/cluster_cpu.py --client ... --threads 8 --seconds 5 --rounds 3 --out bench/results/FILE

The client is tests/cluster/cluster_client --pairs: threads of the gateway's own Redis client
(src/store/backend/redis.c: one pipelined connection per primary, each script sent to its slot's primary) that
acquire and release locks of random names with lua/lock_acquire.lua and lua/lock_release.lua, the KEYS made by
src/lease/lease_keys.c; on the cluster the deployment-wide keys the scripts take (fence sequence and limit,
gateways, listing index, revoked set) are those of the lock's slot, "<key>:{T(s)}", as docs/cluster.md lays them
out. Both sides are the cluster lab's topology (tests/cluster/cluster_lab.py: three primaries with a replica
each) and a single primary with one replica, started with the same settings; so both pay for replication.

Measured in a window that opens after the client's start-up (the cluster side raises 16384 fence sequences
first): each primary's CPU (utime + stime from /proc), its FCALLs (INFO commandstats; two a pair) and their
execution time, per pair on that primary; each primary's share of the FCALLs. The sides alternate, the order
turning round by round; medians of the rounds, and each primary's ratio to the single Redis of the same round.

Owns: this comparison. Must not: change a Redis's configuration between sides.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))

from cluster_lab import ClusterLab, as_kv, free_port, redis_answers, resp, wait  # noqa: E402

TICK_US = 1_000_000 / os.sysconf("SC_CLK_TCK")


def cpu_us(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_US


def fcalls(port: int) -> tuple[int, int]:
    """FCALL calls and their execution time (µs) so far on the node."""
    for line in resp(port, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_fcall:"):
            kv = as_kv(line.split(":", 1)[1])
            return int(kv["calls"]), int(kv["usec"])
    return 0, 0


class Single:
    """One Redis primary with one replica, the lab's settings without cluster mode."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="fencegate-single-", dir=os.environ.get("FG_TEST_DATA") or "/var/tmp")
        self.ports = [free_port(), free_port()]
        self.procs = {}
        for i, port in enumerate(self.ports):
            d = os.path.join(self.root, str(port))
            os.makedirs(d)
            argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
                    "--appendonly", "no", "--maxmemory-policy", "noeviction", "--logfile", "redis.log",
                    "--repl-diskless-sync-delay", "0"]
            if i:
                argv += ["--replicaof", "127.0.0.1", str(self.ports[0])]
            self.procs[port] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)
            wait(lambda: redis_answers(port), 15, f"redis {port}")
        wait(lambda: "master_link_status:up" in resp(self.ports[1], "INFO", "replication"), 30, "the replica")

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def primaries(self) -> list[int]:
        return [self.ports[0]]

    def stop(self):
        for p in self.procs.values():
            p.kill()
            p.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def window(client: str, side, threads: int, seconds: float, rate: int) -> dict:
    """Runs the client on side and measures each primary over seconds once it is under way."""
    primaries = side.primaries()
    proc = subprocess.Popen([client, "--pairs", side.url(), str(threads), str(seconds + 60), str(rate)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Under way: past the fence raises (one per slot on the cluster, one on the single Redis), pairs run.
        raises = 16384 if isinstance(side, ClusterLab) else 1
        base = sum(fcalls(p)[0] for p in primaries)
        wait(lambda: sum(fcalls(p)[0] for p in primaries) > base + raises + 600, 120, "pairs under way")
        before = {p: (cpu_us(side.procs[p].pid), *fcalls(p)) for p in primaries}
        time.sleep(seconds)
        after = {p: (cpu_us(side.procs[p].pid), *fcalls(p)) for p in primaries}
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    summary = out.strip().splitlines()[-1] if out.strip() else err[-500:]
    per = {}
    total = sum(after[p][1] - before[p][1] for p in primaries)
    for p in primaries:
        calls = after[p][1] - before[p][1]
        pairs = calls / 2
        per[p] = {"pairs_s": pairs / seconds, "cpu_us": (after[p][0] - before[p][0]) / pairs,
                  "exec_us": (after[p][2] - before[p][2]) / pairs, "share": calls / total}
    return {"per": per, "client": summary}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client", required=True, help="tests/cluster/cluster_client binary")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--single-threads", type=int,
                    help="client threads on the single Redis (default --threads); fewer bring its pairs per second "
                         "down to what each primary serves, where CPU per pair is compared at equal load")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rate", type=int, default=0,
                    help="pairs a second each client thread keeps to (0: as fast as it can); with --single-threads a "
                         "third of --threads, each primary and the single Redis serve the same pairs per second")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="also write the report here")
    args = ap.parse_args()
    lab, single = ClusterLab(), None
    lines = [f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
             f"{args.threads} client threads ({args.single_threads or args.threads} on the single Redis), "
             f"{args.seconds:g} s windows, {args.rounds} rounds",
             f"# command: python3 bench/cluster_cpu.py --client {args.client} --threads {args.threads} "
             f"--single-threads {args.single_threads or args.threads} --rate {args.rate} --seconds {args.seconds:g} "
             f"--rounds {args.rounds}"]
    try:
        lab.start()
        single = Single()
        rows = []
        for r in range(args.rounds):
            sides = [("single", single), ("cluster", lab)]
            got = {}
            for name, side in (sides if r % 2 == 0 else sides[::-1]):
                threads = args.single_threads or args.threads if name == "single" else args.threads
                got[name] = window(args.client, side, threads, args.seconds, args.rate)
                lines.append(f"round {r + 1} {name}: client {got[name]['client']}")
            one = next(iter(got["single"]["per"].values()))
            lines.append(f"round {r + 1} single: {one['pairs_s']:.0f} pairs/s, {one['cpu_us']:.1f} µs CPU and "
                         f"{one['exec_us']:.1f} µs FCALL execution per pair")
            for i, (port, m) in enumerate(sorted(got["cluster"]["per"].items())):
                lines.append(f"round {r + 1} primary {i + 1}: {m['share'] * 100:.1f} % of FCALLs, {m['pairs_s']:.0f} "
                             f"pairs/s, {m['cpu_us']:.1f} µs CPU ({m['cpu_us'] / one['cpu_us']:.2f}x single) and "
                             f"{m['exec_us']:.1f} µs FCALL execution per pair")
                rows.append((i, m["share"], m["cpu_us"], m["cpu_us"] / one["cpu_us"], one["cpu_us"], m["pairs_s"]))
            lines.append(f"round {r + 1} cluster: {sum(m['pairs_s'] for m in got['cluster']['per'].values()):.0f} "
                         "pairs/s in all")
        lines.append("# medians over the rounds")
        singles = [row[4] for row in rows if row[0] == 0]
        lines.append(f"single Redis: {statistics.median(singles):.1f} µs CPU per pair")
        for i in sorted({row[0] for row in rows}):
            mine = [row for row in rows if row[0] == i]
            lines.append(f"primary {i + 1}: {statistics.median(r[1] for r in mine) * 100:.1f} % of FCALLs, "
                         f"{statistics.median(r[2] for r in mine):.1f} µs CPU per pair, "
                         f"{statistics.median(r[3] for r in mine):.2f}x single (paired)")
    finally:
        lab.stop()
        if single:
            single.stop()
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
