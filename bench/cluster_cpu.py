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

Through gateways (--gateway): the same two sides, each served by a gateway of its own (the binary given, a
Release build that serves redis-cluster:// URLs) on a Postgres this script starts (scripts/services.sh, the
port of --ports), driven over HTTP by bench/http_pairs in its "random" mode (a new random lock name each pair,
--rate pairs a second per connection: --threads connections on the cluster's gateway, --single-threads on the
single Redis's). The gateway's janitor calls scripts too (on a cluster the listing prune, 1,024 slots a pass
every 5 s, so one primary at a time), so the pairs a primary served are its INCRs (one a grant: the fence),
and each side's idle rates (the gateway running, no client, --idle-seconds: 80 s is a whole round of the
prune) are measured once first: the report gives the Redis CPU per pair gross and net of the idle rate, and
the gateway's CPU per pair. Every slot's fence sequence is raised first (a pair on a lock of each slot's tag),
so the windows measure warm slots.

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build
    bash -c 'build=build; source bench/common.sh; bench_c_program http_pairs'
    python3 bench/cluster_cpu.py --gateway build/fencegate --http-pairs build/http_pairs \
        --threads 6 --single-threads 2 --rate 250 --seconds 10 --rounds 3

Owns: this comparison. Must not: change a Redis's configuration between sides.
"""

from __future__ import annotations

import argparse
import concurrent.futures
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

from cluster_lab import ClusterLab, as_kv, free_port, redis_answers, resp, slot_tag, wait  # noqa: E402
from lean_http import LeanConnection  # noqa: E402

SERVICES = os.path.join(HERE, "..", "scripts", "services.sh")
TICK_US = 1_000_000 / os.sysconf("SC_CLK_TCK")


def cpu_us(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_US


def fcalls(port: int) -> tuple[int, int, int]:
    """FCALL calls and their execution time (µs) so far on the node, and INCR calls (those of the lease
    scripts: one a grant, the fence; no janitor call runs one)."""
    got = {"fcall": (0, 0), "incr": (0, 0)}
    for line in resp(port, "INFO", "commandstats").splitlines():
        name, _, fields = line.partition(":")
        if name.removeprefix("cmdstat_") in got:
            kv = as_kv(fields)
            got[name.removeprefix("cmdstat_")] = (int(kv["calls"]), int(kv["usec"]))
    return got["fcall"][0], got["fcall"][1], got["incr"][0]


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


class Gateway:
    """A gateway (--gateway BINARY) serving one side's Redis URL on a port of its own."""

    def __init__(self, binary: str, redis_url: str, dsn: str, root: str, name: str):
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("FENCEGATE_")}
        env.update(FENCEGATE_LISTEN=f"127.0.0.1:{self.port}", FENCEGATE_REDIS_URL=redis_url,
                   FENCEGATE_PG_DSN=dsn, FENCEGATE_LOG_LEVEL="warn")
        self.log = open(os.path.join(root, f"gateway-{name}.log"), "w")
        self.proc = subprocess.Popen([binary], env=env, stdout=self.log, stderr=self.log)
        wait(self.ready, 60, f"the gateway on {redis_url}")

    def ready(self) -> bool:
        try:
            return LeanConnection("127.0.0.1", self.port, timeout=2).call("GET", "/readyz", {})[0] == 200
        except OSError:
            return False

    def warm(self, names: list[str], connections: int = 8):
        """Takes and releases a lock of each name (on a cluster one a slot: every slot's fence sequence
        raised before any window)."""
        def run(part):
            c = LeanConnection("127.0.0.1", self.port)
            for name in part:
                status, body = c.call("POST", f"/v1/locks/{name}/acquire", {"ttl_ms": 10000})
                if status != 200:
                    raise RuntimeError(f"warm-up acquire of {name}: {status} {body}")
                c.call("POST", f"/v1/locks/{name}/release", {"token": body["token"]})
        with concurrent.futures.ThreadPoolExecutor(connections) as pool:
            list(pool.map(run, [names[i::connections] for i in range(connections)]))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def snapshot(side, primaries: list[int]) -> dict:
    """Per primary: (CPU µs, FCALLs, FCALL µs, INCRs) so far."""
    return {p: (cpu_us(side.procs[p].pid), *fcalls(p)) for p in primaries}


def idle_rates(side, gateway: Gateway, seconds: float) -> dict:
    """Each primary's CPU (µs/s) and FCALLs (/s) with the gateway running and no client, and the gateway's
    CPU (µs/s), over seconds (on a cluster a whole round of the janitor's listing prune, which visits 1,024
    slots a pass, so one primary at a time)."""
    primaries = side.primaries()
    first, gw_first = snapshot(side, primaries), cpu_us(gateway.proc.pid)
    time.sleep(seconds)
    last, gw_last = snapshot(side, primaries), cpu_us(gateway.proc.pid)
    return {"cpu": {p: (last[p][0] - first[p][0]) / seconds for p in primaries},
            "calls": {p: (last[p][1] - first[p][1]) / seconds for p in primaries},
            "gateway": (gw_last - gw_first) / seconds}


def window(load: list[str], load_env: dict | None, side, seconds: float, raises: int,
           gateway: Gateway | None = None, idle: dict | None = None) -> dict:
    """Runs the load command on side and measures each primary over seconds once it is under way. Pairs on a
    primary: its FCALLs / 2 (the client's two scripts), or through a gateway, whose janitor calls scripts too,
    its INCRs (one a grant); then net of the side's idle rates as well."""
    primaries = side.primaries()
    proc = subprocess.Popen(load, env=load_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Under way: past the fence raises (one per slot on the cluster, one on the single Redis), pairs run.
        base = sum(fcalls(p)[0] for p in primaries)
        wait(lambda: sum(fcalls(p)[0] for p in primaries) > base + raises + 600, 120, "pairs under way")
        before, gw_before = snapshot(side, primaries), cpu_us(gateway.proc.pid) if gateway else 0
        time.sleep(seconds)
        after, gw_after = snapshot(side, primaries), cpu_us(gateway.proc.pid) if gateway else 0
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    summary = out.strip().splitlines()[-1] if out.strip() else err[-500:]
    counted = {p: (after[p][3] - before[p][3]) if gateway else (after[p][1] - before[p][1]) / 2 for p in primaries}
    total = sum(counted.values())
    per = {}
    for p in primaries:
        pairs, cpu = counted[p], after[p][0] - before[p][0]
        per[p] = {"pairs_s": pairs / seconds, "cpu_us": cpu / pairs, "exec_us": (after[p][2] - before[p][2]) / pairs,
                  "share": pairs / total, "fcalls_pair": (after[p][1] - before[p][1]) / pairs}
        if idle:
            per[p]["net_cpu_us"] = (cpu - idle["cpu"][p] * seconds) / pairs
    result = {"per": per, "client": summary}
    if gateway is not None:
        result["gateway_cpu_us"] = (gw_after - gw_before) / total
        result["gateway_net_cpu_us"] = (gw_after - gw_before - idle["gateway"] * seconds) / total
    return result


def median(xs) -> float:
    return statistics.median(list(xs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client", help="tests/cluster/cluster_client binary (the scripts through the gateway's client)")
    ap.add_argument("--gateway", help="a fencegate binary: measure through gateways instead (needs --http-pairs)")
    ap.add_argument("--http-pairs", help="bench/http_pairs binary, the HTTP client of --gateway")
    ap.add_argument("--ports", default="17591", help="with --gateway: the port of the Postgres this script starts")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--single-threads", type=int,
                    help="client threads on the single Redis (default --threads); fewer bring its pairs per second "
                         "down to what each primary serves, where CPU per pair is compared at equal load")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rate", type=int, default=0,
                    help="pairs a second each client thread keeps to (0: as fast as it can); with --single-threads a "
                         "third of --threads, each primary and the single Redis serve the same pairs per second")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=80,
                    help="with --gateway: the idle measurement of each side (80 s: a whole round of the janitor's "
                         "listing prune on a cluster)")
    ap.add_argument("--out", help="also write the report here")
    args = ap.parse_args()
    if bool(args.client) == bool(args.gateway) or (args.gateway and not args.http_pairs):
        ap.error("give --client, or --gateway with --http-pairs")
    single_threads = args.single_threads or args.threads
    lab, single, gateways, pg, idle = ClusterLab(), None, {}, None, {}
    driver = (f"--gateway {args.gateway} --http-pairs {args.http_pairs} --ports {args.ports}" if args.gateway
              else f"--client {args.client}")
    lines = [f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
             f"{args.threads} client threads ({single_threads} on the single Redis), "
             f"{args.seconds:g} s windows, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}"
             + (", through gateways" if args.gateway else ""),
             f"# command: python3 bench/cluster_cpu.py {driver} --threads {args.threads} "
             f"--single-threads {single_threads} --rate {args.rate} --seconds {args.seconds:g} "
             f"--rounds {args.rounds}"]
    try:
        lab.start()
        single = Single()
        if args.gateway:
            pg = [os.path.join(lab.root, "pg"), str(free_port()), args.ports]  # services.sh's datadir and ports
            subprocess.run(["bash", SERVICES, "start-pg", *pg], check=True, stdout=subprocess.DEVNULL)
            dsn = f"postgresql://fencegate@127.0.0.1:{args.ports}/fencegate"
            for name, side in (("single", single), ("cluster", lab)):
                gateways[name] = Gateway(args.gateway, side.url(), dsn, lab.root, name)
            gateways["cluster"].warm([slot_tag(s) for s in range(16384)])  # a lock in each slot
            gateways["single"].warm(["warm"])
            for name, side in (("single", single), ("cluster", lab)):
                idle[name] = idle_rates(side, gateways[name], args.idle_seconds)
                lines.append(f"idle {name} ({args.idle_seconds:g} s, the gateway running, no client): "
                             + ", ".join(f"{idle[name]['calls'][p]:.0f} FCALLs/s and {idle[name]['cpu'][p] / 1000:.1f}"
                                         f" ms CPU/s on {'primary ' + str(i + 1) if name == 'cluster' else 'Redis'}"
                                         for i, p in enumerate(sorted(side.primaries())))
                             + f"; gateway {idle[name]['gateway'] / 1000:.1f} ms CPU/s")
        rows, gw_rows = [], []
        for r in range(args.rounds):
            sides = [("single", single), ("cluster", lab)]
            got = {}
            for name, side in (sides if r % 2 == 0 else sides[::-1]):
                threads = single_threads if name == "single" else args.threads
                if args.gateway:
                    load = [args.http_pairs, str(gateways[name].port), str(threads), str(int(args.seconds) + 60),
                            "random", f"bench-{name}-{r}"]
                    got[name] = window(load, dict(os.environ, BENCH_RATE=str(args.rate)), side, args.seconds, 0,
                                       gateways[name], idle[name])
                else:
                    load = [args.client, "--pairs", side.url(), str(threads), str(args.seconds + 60), str(args.rate)]
                    got[name] = window(load, None, side, args.seconds, 16384 if name == "cluster" else 1)
                if got[name]["client"]:
                    lines.append(f"round {r + 1} {name}: client {got[name]['client']}")
            one = next(iter(got["single"]["per"].values()))
            line = (f"round {r + 1} single: {one['pairs_s']:.0f} pairs/s, {one['cpu_us']:.1f} µs CPU and "
                    f"{one['exec_us']:.1f} µs FCALL execution per pair")
            if args.gateway:
                line += (f", {one['fcalls_pair']:.2f} FCALLs; net of idle {one['net_cpu_us']:.1f} µs; gateway "
                         f"{got['single']['gateway_cpu_us']:.0f} µs CPU per pair "
                         f"({got['single']['gateway_net_cpu_us']:.0f} net)")
            lines.append(line)
            for i, (port, m) in enumerate(sorted(got["cluster"]["per"].items())):
                line = (f"round {r + 1} primary {i + 1}: {m['share'] * 100:.1f} % of the pairs, {m['pairs_s']:.0f} "
                        f"pairs/s, {m['cpu_us']:.1f} µs CPU ({m['cpu_us'] / one['cpu_us']:.2f}x single) and "
                        f"{m['exec_us']:.1f} µs FCALL execution per pair")
                row = {"i": i, "share": m["share"], "cpu": m["cpu_us"], "ratio": m["cpu_us"] / one["cpu_us"],
                       "single": one["cpu_us"]}
                if args.gateway:
                    line += (f", {m['fcalls_pair']:.2f} FCALLs; net of idle {m['net_cpu_us']:.1f} µs "
                             f"({m['net_cpu_us'] / one['net_cpu_us']:.2f}x single net)")
                    row.update(net=m["net_cpu_us"], net_ratio=m["net_cpu_us"] / one["net_cpu_us"],
                               single_net=one["net_cpu_us"])
                lines.append(line)
                rows.append(row)
            line = f"round {r + 1} cluster: {sum(m['pairs_s'] for m in got['cluster']['per'].values()):.0f} pairs/s in all"
            if args.gateway:
                line += (f"; gateway {got['cluster']['gateway_cpu_us']:.0f} µs CPU per pair "
                         f"({got['cluster']['gateway_net_cpu_us']:.0f} net)")
                gw_rows.append((got["single"]["gateway_cpu_us"], got["cluster"]["gateway_cpu_us"]))
            lines.append(line)
        lines.append("# medians over the rounds")
        firsts = [row for row in rows if row["i"] == 0]
        line = f"single Redis: {median(r['single'] for r in firsts):.1f} µs CPU per pair"
        if args.gateway:
            line += f", {median(r['single_net'] for r in firsts):.1f} net of idle"
        lines.append(line)
        for i in sorted({row["i"] for row in rows}):
            mine = [row for row in rows if row["i"] == i]
            line = (f"primary {i + 1}: {median(r['share'] for r in mine) * 100:.1f} % of the pairs, "
                    f"{median(r['cpu'] for r in mine):.1f} µs "
                    f"CPU per pair, {median(r['ratio'] for r in mine):.2f}x single (paired)")
            if args.gateway:
                line += (f"; net of idle {median(r['net'] for r in mine):.1f} µs, "
                         f"{median(r['net_ratio'] for r in mine):.2f}x single net (paired)")
            lines.append(line)
        if gw_rows:
            lines.append(f"gateway CPU per pair: {median(g[0] for g in gw_rows):.0f} µs on the single Redis, "
                         f"{median(g[1] for g in gw_rows):.0f} µs on the cluster")
    finally:
        for gw in gateways.values():
            gw.stop()
        if pg:
            subprocess.run(["bash", SERVICES, "wipe", *pg], stdout=subprocess.DEVNULL)
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
