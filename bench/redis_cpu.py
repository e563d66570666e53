#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/redis_cpu.py - Redis's CPU per lock pair: the gateway next to redis-py's Lock, at 4 and 64 connections.

    python3 bench/redis_cpu.py                                  # this checkout, 3 rounds x 5 s
    python3 bench/redis_cpu.py --gateway before=/tmp/main/fencegate --gateway after=build-bench-rcpu/fencegate
    python3 bench/redis_cpu.py --rounds 5 --duration 4 --out bench/results/redis_cpu-2026-12-01.txt

What a lock acquire + release costs the Redis server, the whole process (utime + stime from /proc, so the
system calls of its reads and writes count with the scripts), divided by the pairs done in the window:
  - 4 connections: 4 Python processes, one keep-alive connection each (bench/side_by_side.py's clients):
    through the gateway (bench/lean_http.py) and redis-py's Redis.lock(name, timeout=10) straight to Redis;
  - 64 connections: C clients, one connection per thread: bench/http_pairs.c through the gateway and
    bench/raw_pairs.c in its redis-py mode, which sends exactly redis-py's Lock commands (SET NX PX, EVALSHA
    of its release script), straight to Redis.
Each lock name is used by one connection only (no waiting). Each gateway given is started afresh for each of
its windows; the sides alternate within a round and the order turns round by round. Also printed: Redis's
reads of client input per pair (INFO stats total_reads_processed: fewer than the commands means pipelined
commands were read together), Redis's time executing the commands each path sends (INFO commandstats usec: wall
time, so a loaded machine inflates it), the bytes Redis appends to its AOF per pair (the bench's Redis runs with
appendonly yes, as scripts/services.sh starts it) and the gateway's own CPU per pair. Medians of the rounds, and the
median of each round's ratio to redis-py's figure of the same round ("paired").

Owns: this comparison. Must not: change Redis's configuration between sides.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import side_by_side as sbs  # noqa: E402

ROOT = sbs.ROOT
PY_SIDES = {"gateway": "gateway lock acquire+release", "redis-py": "redis-py Redis.lock() acquire+release"}


def redis_info(port: int, field: str, section: str = "stats") -> int:
    out = sbs.sh("redis-cli", "-p", str(port), "INFO", section)
    return int(out.split(f"{field}:")[1].split()[0]) if f"{field}:" in out else 0


def aof_bytes(port: int) -> int:
    """Bytes Redis has appended to its AOF (what every write a script makes costs it besides running)."""
    return redis_info(port, "aof_current_size", "persistence")


def per_pair_aof(before: int, after: int, pairs: float) -> float | None:
    """AOF bytes per pair between two readings; None when a rewrite of the AOF shrank it in between."""
    return (after - before) / pairs if after >= before else None


# The commands a path sends itself (a script's own commands are counted apart by Redis, and are inside its time).
TOP_COMMANDS = {"gateway": ("fcall", "evalsha"), "redis-py": ("set", "evalsha")}


def exec_usec(port: int, path: str) -> float:
    """Redis's execution time (INFO commandstats usec) so far of the commands path sends itself."""
    total = 0.0
    for line in sbs.sh("redis-cli", "-p", str(port), "INFO", "commandstats").splitlines():
        name, _, fields = line.strip().partition(":")
        if name.removeprefix("cmdstat_") in TOP_COMMANDS[path]:
            total += float(fields.split("usec=")[1].split(",")[0])
    return total


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.join(ROOT, "build-bench-rcpu")
        self.datadir = os.path.join(ROOT, ".data/bench-rcpu")
        self.redis_port = int(os.environ.get("BENCH_REDIS_PORT", 17394))
        self.pg_port = int(os.environ.get("BENCH_PG_PORT", 17444))
        self.http_port = int(os.environ.get("BENCH_HTTP_PORT", 18494))
        self.dsn = f"postgresql://fencegate@127.0.0.1:{self.pg_port}/fencegate"
        self.gw = None
        self.lines: list[str] = []

    def say(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)

    def say_round(self, r: int, conns: int, name: str, res: dict) -> None:
        aof = "rewritten" if res["aof"] is None else f"{res['aof']:.0f}"
        self.say(f"round {r + 1} {conns} {name} pairs/s {res['ops']:.0f} redis_us {res['redis']:.1f} "
                 f"exec_us {res['exec']:.1f} aof_bytes {aof} reads {res['reads']:.2f} "
                 f"gateway_us {res.get('gateway', 0.0):.1f}")

    def listens(self, pid: int) -> bool:
        """Whether process pid is the one listening on the HTTP port (not another bench's gateway on it)."""
        inodes = set()
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == self.http_port:
                    inodes.add(fields[9])
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            return False
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return True
        return False

    def start_gateway(self, binary: str) -> int:
        env = dict(os.environ, FENCEGATE_LISTEN=f"127.0.0.1:{self.http_port}",
                   FENCEGATE_REDIS_URL=f"redis://127.0.0.1:{self.redis_port}/0", FENCEGATE_PG_DSN=self.dsn,
                   FENCEGATE_LOG_LEVEL="warn")
        if self.args.threads is not None:
            env["FENCEGATE_HTTP_THREADS"] = str(self.args.threads)
        log = open(os.path.join(self.datadir, "gateway.log"), "a")
        self.gw = subprocess.Popen([binary], env=env, stdout=log, stderr=log)
        for _ in range(100):
            try:
                sbs.lean(self.http_port).call("GET", "/readyz", {})
                if self.listens(self.gw.pid):
                    return self.gw.pid
            except OSError:
                pass
            if self.gw.poll() is not None:
                break
            time.sleep(0.1)
        sys.exit(f"redis_cpu: the gateway did not become ready on port {self.http_port} (another one there?); "
                 f"log: {self.datadir}/gateway.log")

    def stop_gateway(self) -> None:
        if self.gw is not None:
            self.gw.terminate()
            self.gw.wait(30)
            self.gw = None

    def servers(self, gateway_pid: int) -> dict:
        return {"gateway": gateway_pid, "redis": self.redis_pid, "postmaster": self.postmaster}

    def python_side(self, side: str, binary: str | None) -> dict:
        """4 Python client processes; side is "gateway" (binary) or "redis-py"."""
        gw_pid = self.start_gateway(binary) if binary else os.getpid()
        reads = redis_info(self.redis_port, "total_reads_processed")
        usec = exec_usec(self.redis_port, side)
        aof = aof_bytes(self.redis_port)
        env = {"http_port": self.http_port, "redis_port": self.redis_port, "pg_dsn": self.dsn}
        res = sbs.run_side(PY_SIDES[side], env, 4, self.args.duration, self.servers(gw_pid))
        pairs = max(res["ops"] * self.args.duration, 1)
        res["reads"] = (redis_info(self.redis_port, "total_reads_processed") - reads) / pairs
        res["exec"] = (exec_usec(self.redis_port, side) - usec) / pairs
        res["aof"] = per_pair_aof(aof, aof_bytes(self.redis_port), pairs)
        if not binary:
            res["gateway"] = 0.0
        self.stop_gateway()
        return res

    def c_side(self, binary: str | None, round_no: int) -> dict:
        """64 C client threads: http_pairs through the gateway (binary), or raw_pairs as redis-py to Redis."""
        gw_pid = self.start_gateway(binary) if binary else None
        prefix = f"rcpu-{round_no}-{time.monotonic_ns()}"
        if binary:
            cmd = [os.path.join(self.build, "http_pairs"), str(self.http_port), "64", str(self.args.duration),
                   "distinct", prefix]
        else:
            cmd = [os.path.join(self.build, "raw_pairs"), str(self.redis_port), "64",
                   str(self.args.duration), "distinct", "redis-py"]
        pids = {"redis": [self.redis_pid], "gateway": [gw_pid] if gw_pid else []}
        path = "gateway" if binary else "redis-py"
        reads = redis_info(self.redis_port, "total_reads_processed")
        usec = exec_usec(self.redis_port, path)
        aof = aof_bytes(self.redis_port)
        before = {k: sbs.cpu_ticks(v) for k, v in pids.items()}
        out = sbs.sh(*cmd)
        after = {k: sbs.cpu_ticks(v) for k, v in pids.items()}
        rate = float(out.split()[0])
        pairs = max(rate * self.args.duration, 1)
        res = {"ops": rate, "reads": (redis_info(self.redis_port, "total_reads_processed") - reads) / pairs,
               "exec": (exec_usec(self.redis_port, path) - usec) / pairs,
               "aof": per_pair_aof(aof, aof_bytes(self.redis_port), pairs)}
        for k in pids:
            res[k] = (after[k] - before[k]) / sbs.TICK / pairs * 1e6
        self.stop_gateway()
        return res

    def run(self) -> None:
        a = self.args
        gateways = dict(g.split("=", 1) for g in a.gateway) if a.gateway else {
            "gateway": os.path.join(self.build, "fencegate")}
        sides = [(name, path) for name, path in gateways.items()] + [("redis-py", None)]
        runs = {(conns, name): [] for conns in (4, 64) for name, _ in sides}
        for r in range(a.rounds):
            order = sides if r % 2 == 0 else list(reversed(sides))
            for name, path in order:
                res = self.python_side("gateway" if path else "redis-py", path)
                runs[(4, name)].append(res)
                self.say_round(r, 4, name, res)
            for name, path in order:
                res = self.c_side(path, r)
                runs[(64, name)].append(res)
                self.say_round(r, 64, name, res)
        self.say("")
        self.say("| connections | path | pairs/s | Redis CPU µs/pair | of it executing commands | AOF bytes/pair | "
                 "Redis reads/pair | gateway CPU µs/pair | Redis CPU vs redis-py | paired |")
        self.say("|---|---|---|---|---|---|---|---|---|---|")
        for conns in (4, 64):
            base = statistics.median(x["redis"] for x in runs[(conns, "redis-py")])
            for name, _ in sides:
                xs = runs[(conns, name)]
                m = {k: statistics.median(x.get(k, 0.0) for x in xs)
                     for k in ("ops", "redis", "exec", "reads", "gateway")}
                aofs = [x["aof"] for x in xs if x["aof"] is not None]
                m["aof"] = statistics.median(aofs) if aofs else float("nan")
                # Each round's figure over redis-py's in the same round: the machine's drift moves both alike.
                paired = statistics.median(x["redis"] / y["redis"] for x, y in zip(xs, runs[(conns, "redis-py")]))
                self.say(f"| {conns} | {name} | {m['ops']:,.0f} | {m['redis']:.1f} | {m['exec']:.1f} | "
                         f"{m['aof']:.0f} | {m['reads']:.2f} | {m['gateway']:.1f} | {m['redis'] / base:.2f} | "
                         f"{paired:.2f} |")

    def main(self) -> int:
        a = self.args
        # This checkout's build also gives raw_pairs the generated script table it is compiled against.
        sbs.sh("bash", "-c", f'build="{self.build}"; source bench/common.sh; bench_build; bench_pair_clients')
        svc = ["bash", "scripts/services.sh"]
        sbs.sh(*svc, "wipe", self.datadir, str(self.redis_port), str(self.pg_port))
        sbs.sh(*svc, "start", self.datadir, str(self.redis_port), str(self.pg_port))
        try:
            self.redis_pid = int(sbs.sh("redis-cli", "-p", str(self.redis_port), "INFO", "server")
                                 .split("process_id:")[1].split()[0])
            checkpointer = int(sbs.sh("psql", self.dsn, "-Atc", "SELECT pid FROM pg_stat_activity WHERE "
                                      "backend_type = 'checkpointer'").strip())
            self.postmaster = int(open(f"/proc/{checkpointer}/stat").read().rsplit(")", 1)[1].split()[1])
            self.say(f"# bench/redis_cpu.py, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
                     f"{a.rounds} rounds of {a.duration} s per side, {a.threads or 'the default'} HTTP threads, "
                     f"load before: {os.getloadavg()[0]:.2f}")
            self.run()
            self.say(f"# load after: {os.getloadavg()[0]:.2f}")
        finally:
            self.stop_gateway()
            sbs.sh(*svc, "stop", self.datadir, str(self.redis_port), str(self.pg_port))
        if a.out:
            with open(a.out, "w") as f:
                f.write("\n".join(self.lines) + "\n")
        return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gateway", action="append", metavar="NAME=BINARY",
                    help="a gateway binary to measure (repeatable); default: build this checkout")
    ap.add_argument("--duration", type=int, default=5, help="seconds per window (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--threads", type=int,
                    help="the gateway's FENCEGATE_HTTP_THREADS (default: the gateway's own, 32)")
    ap.add_argument("--out", help="also write the runs and the table to this file")
    args = ap.parse_args()
    if not sbs.direct_clients_importable():
        if sys.executable != sbs.DEBIAN_PYTHON and os.path.exists(sbs.DEBIAN_PYTHON):
            os.execv(sbs.DEBIAN_PYTHON, [sbs.DEBIAN_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
        sys.exit("redis_cpu: python3-redis and python3-psycopg2 are not importable")
    return Bench(args).main()


if __name__ == "__main__":
    sys.exit(main())
