#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/side_by_side.py - the gateway next to the direct path, in one run, with the server CPU per operation.

    python3 bench/side_by_side.py                      # build, own Redis/Postgres/gateway, 2 rounds x 5 s
    python3 bench/side_by_side.py --duration 10 --rounds 3 --clients 4
    python3 bench/side_by_side.py --c-connections 16,64   # also C clients at 16 and 64 connections
    python3 bench/side_by_side.py --gateway before=/tmp/main/fencegate --gateway after=build-bench-sbs/fencegate

Paths, each driven by the same CLIENTS Python processes (one keep-alive connection each):
  - lock acquire+release through the gateway (POST /v1/locks/{name}/acquire, then .../release; one name
    per process), against redis-py's Redis.lock() acquire+release straight to Redis; beside them the same
    requests to bench/floor.c in the gateway's place (same port, THREADS threads), the least HTTP server of
    the gateway's shape: with no backend, with one Redis PING per request, and with one FCALL per request
    of bench/lua_floor.lua's rung 3 pair (a fenced lock, the grant's Redis time, the end's record: the
    contract's promises) and rung 5 pair (+ the end's Redis time and the listing index); with the C clients
    (below) also those two with the calls pipelined (bench/floor.c's fcall-batch);
  - a fenced PATCH of one row per process through the gateway, on a table in the default mode (fences in
    fencegate.resource_fences) and on a table with a fence_column, against psycopg2 running
    UPDATE ... SET note=%s, lock_fence=%s WHERE id=%s AND lock_fence <= %s (autocommit).
Each comparison alternates its sides, the order turning round by round; each figure is the median of its
rounds, and "× direct" is the server CPU per operation over the direct path's (the last side of each
comparison) in the same run; "Redis × direct" the same for Redis's CPU alone, where the direct path's is
mostly Redis's (the lock pairs); "paired" is the median of each round's own ratio. With --gateway (given more
than once), each gateway path is run with each binary named, as its own side of the same comparison (the
gateway is restarted when the binary changes), so a change is measured before and after in one run. Server CPU is read from /proc (utime+stime of the gateway, of
redis-server and of every Postgres process) around each timed window and divided by the operations done in it
("pair" for locks, "write" for writes).

With --c-connections, the same comparisons follow at each of those connection counts with C clients, one
connection per thread: bench/http_pairs.c through the gateway and the floor's sides against bench/raw_pairs.c
in its redis-py mode (SET NX PX, EVALSHA of redis-py's release script) straight to Redis; bench/pg_load.c's
fenced PATCHes of random rows among ROWS against pgbench running the guarded UPDATE on the same rows.

Owns: this comparison. Must not: change the servers' configuration between sides.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
import uuid

from lean_http import LeanConnection

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")
DEBIAN_PYTHON = "/usr/bin/python3"  # the interpreter of python3-redis and python3-psycopg2

DIRECT_SQL = "UPDATE public.sbs_direct SET note = %s, lock_fence = %s WHERE id = %s AND lock_fence <= %s"
TABLES_SQL = """
CREATE TABLE IF NOT EXISTS public.sbs_default (id text PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.sbs_column (id text PRIMARY KEY, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.sbs_direct (id text PRIMARY KEY, note text, lock_fence bigint);
"""
GATEWAY_CONFIG = {"tables": {"sbs_default": {"key": "id", "columns": ["note"]},
                             "sbs_column": {"key": "id", "columns": ["note"], "fence_column": "lock_fence"}}}


def lean(port: int) -> LeanConnection:
    """A lean keep-alive client of the gateway on port (bench/lean_http.py): the client's cost stays small."""
    return LeanConnection("127.0.0.1", port)


# --- one operation of each path, set up per process --------------------------------------------------------

def setup_gateway_pairs(env: dict, ix: int):
    c, name = lean(env["http_port"]), f"sbs-pair-{ix}-{uuid.uuid4().hex[:8]}"

    def op():
        s, b = c.call("POST", f"/v1/locks/{name}/acquire", {"ttl_ms": 10000})
        assert s == 200, (s, b)
        s, b = c.call("POST", f"/v1/locks/{name}/release", {"token": b["token"]})
        assert s == 200, (s, b)
    return op


def setup_redis_py_pairs(env: dict, ix: int):
    import redis  # python3-redis
    r = redis.Redis(port=env["redis_port"])
    name = f"sbs-rpy-{ix}-{uuid.uuid4().hex[:8]}"

    def op():
        lock = r.lock(name, timeout=10)
        assert lock.acquire(blocking=False)
        lock.release()
    return op


def setup_gateway_writes(table: str):
    def setup(env: dict, ix: int):
        c, key = lean(env["http_port"]), f"row-{ix}-{uuid.uuid4().hex[:8]}"
        s, b = c.call("POST", f"/v1/locks/sbs-w-{key}/acquire", {"ttl_ms": 3600000})
        assert s == 200, (s, b)
        hdr = b"Fence-Token: %s\r\n" % b["token"].encode()
        s, b = c.call("PUT", f"/v1/pg/{table}/{key}", {"row": {"note": "start"}}, hdr)
        assert s == 200, (s, b)
        n = [0]

        def op():
            n[0] += 1
            s, b = c.call("PATCH", f"/v1/pg/{table}/{key}", {"set": {"note": f"n{n[0]}"}}, hdr)
            assert s == 200, (s, b)
        return op
    return setup


def setup_psycopg2_writes(env: dict, ix: int):
    import psycopg2  # python3-psycopg2
    conn = psycopg2.connect(env["pg_dsn"])
    conn.autocommit = True
    cur = conn.cursor()
    key, fence = f"row-{ix}-{uuid.uuid4().hex[:8]}", 1000 + ix
    cur.execute("INSERT INTO public.sbs_direct (id, note, lock_fence) VALUES (%s, 'start', 0)", (key,))
    n = [0]

    def op():
        n[0] += 1
        cur.execute(DIRECT_SQL, (f"n{n[0]}", fence, key, fence))
        assert cur.rowcount == 1
    return op


# The floor's sides: bench/floor.c's backend and its arguments ({redis}: the Redis port, {lib}: the library of
# bench/lua_floor's rungs, whose rung 3 is acquire_2 + release_3 and rung 5 acquire_5 + release_5).
FLOORS = {
    "floor, no backend": ["none"],
    "floor, one Redis PING": ["redis", "{redis}"],
    "floor, Lua rung 3 pair": ["fcall", "{redis}", "{lib}", "acquire_2", "release_3"],
    "floor, Lua rung 5 pair": ["fcall", "{redis}", "{lib}", "acquire_5", "release_5", "floor-index"],
}
# With the C clients also the same calls pipelined: each floor thread sends the calls of all its connections'
# requests at hand in one write (with 4 Python clients on 4 threads there is nothing to pipeline).
PIPELINED_FLOORS = {f"{side}, pipelined": ["fcall-batch", *args[1:]] for side, args in FLOORS.items()
                    if args[0] == "fcall"}
SIDES = {
    "gateway lock acquire+release": setup_gateway_pairs,
    **{floor: setup_gateway_pairs for floor in FLOORS},
    "redis-py Redis.lock() acquire+release": setup_redis_py_pairs,
    "gateway fenced PATCH, default table": setup_gateway_writes("sbs_default"),
    "gateway fenced PATCH, fence_column table": setup_gateway_writes("sbs_column"),
    "psycopg2 guarded UPDATE": setup_psycopg2_writes,
}
COMPARISONS = [
    ["gateway lock acquire+release", *FLOORS, "redis-py Redis.lock() acquire+release"],
    ["gateway fenced PATCH, default table", "gateway fenced PATCH, fence_column table", "psycopg2 guarded UPDATE"],
]


# --- servers and their CPU ------------------------------------------------------------------------------

def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except FileNotFoundError:
            pass
    return total


def pg_cpu_ticks(postmaster: int) -> int:
    """Postgres's CPU: the postmaster and its living children, plus the children that exited (cutime+cstime of
    the postmaster), so that a connection that opens and closes inside a window (pgbench's) counts too."""
    try:
        with open(f"/proc/{postmaster}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        exited = int(fields[13]) + int(fields[14])  # cutime, cstime
    except FileNotFoundError:
        exited = 0
    return exited + cpu_ticks([postmaster, *children(postmaster)])


def server_ticks(servers: dict) -> dict:
    return {"gateway": cpu_ticks([servers["gateway"]]) if servers.get("gateway") else 0,
            "redis": cpu_ticks([servers["redis"]]), "postgres": pg_cpu_ticks(servers["postmaster"])}


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return out


def run_side(side: str, env: dict, clients: int, duration: float, servers: dict) -> dict:
    ready, out = mp.Queue(), mp.Queue()
    shared = mp.Array("d", 2)  # start and end of the timed window, set once every client is warm
    procs = []
    for ix in range(clients):
        p = mp.Process(target=_client_entry, args=(side, env, ix, shared, ready, out))
        p.start()
        procs.append(p)
    for _ in procs:
        ready.get(timeout=60)
    start_at = time.time() + 0.3
    shared[0], shared[1] = start_at, start_at + duration
    while time.time() < start_at:
        time.sleep(0.001)
    before = server_ticks(servers)
    time.sleep(max(0.0, start_at + duration - time.time()))
    after = server_ticks(servers)
    lat = []
    for _ in procs:
        lat += out.get(timeout=60)
    for p in procs:
        p.join(30)
    n = len(lat)
    lat.sort()
    res = {"ops": n / duration, "p50": lat[n // 2] * 1e3, "p99": lat[min(n - 1, int(n * 0.99))] * 1e3}
    for k in before:
        res[k] = (after[k] - before[k]) / TICK / max(n, 1) * 1e6
    return res


def _client_entry(side, env, ix, shared, ready, out):
    op = SIDES[side](env, ix)
    for _ in range(20):
        op()
    ready.put(ix)
    while shared[0] == 0 or time.time() < shared[0]:
        time.sleep(0.0005)
    end_at, lat = shared[1], []
    while True:
        t0 = time.perf_counter()
        if time.time() >= end_at:
            break
        op()
        lat.append(time.perf_counter() - t0)
    out.put(lat)


# --- C clients at more connections -------------------------------------------------------------------------

C_ROWS = 1000  # rows each C write side picks from at random
C_TABLES_SQL = """
CREATE TABLE IF NOT EXISTS public.sbs_rows_default (id text PRIMARY KEY, n bigint, note text);
CREATE TABLE IF NOT EXISTS public.sbs_rows_column (id text PRIMARY KEY, n bigint, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.sbs_rows_direct (id text PRIMARY KEY, n bigint, note text, lock_fence bigint);
""" + "".join(f"INSERT INTO public.{t} SELECT g::text, 0, '', 0 FROM generate_series(0, {C_ROWS - 1}) g;\n"
              for t in ("sbs_rows_column", "sbs_rows_direct")) + \
    f"INSERT INTO public.sbs_rows_default SELECT g::text, 0, '' FROM generate_series(0, {C_ROWS - 1}) g;\n"
C_DIRECT_SQL = ("\\set key random(0, %d)\n\\set n random(0, 1000000)\n"
                "UPDATE public.sbs_rows_direct SET n = :n, note = 'w', lock_fence = :fence "
                "WHERE id = :key AND lock_fence <= :fence;\n" % (C_ROWS - 1))
C_COMPARISONS = [
    ["gateway lock acquire+release (http_pairs)",
     *(f"{floor} (http_pairs)" for floor in [*FLOORS, *PIPELINED_FLOORS]), "redis-py Lock commands (raw_pairs)"],
    ["gateway fenced PATCH, default table (pg_load)", "gateway fenced PATCH, fence_column table (pg_load)",
     "pgbench guarded UPDATE"],
]


def c_command(side: str, conns: int, duration: float, env: dict) -> list[str]:
    b, secs = env["build"], str(int(duration))
    if side.startswith(("gateway lock", "floor")):
        return [os.path.join(b, "http_pairs"), str(env["http_port"]), str(conns), secs, "distinct",
                f"sbs-c-{uuid.uuid4().hex[:8]}"]
    if side.startswith("redis-py"):
        return [os.path.join(b, "raw_pairs"), str(env["redis_port"]), str(conns), secs, "distinct", "redis-py"]
    if side.startswith("gateway fenced"):
        table = "sbs_rows_column" if "fence_column" in side else "sbs_rows_default"
        return [os.path.join(b, "pg_load"), str(env["http_port"]), str(conns), secs, "distinct", str(C_ROWS),
                env["token"], table]
    return [env["pgbench"], "-n", "-M", "prepared", "-c", str(conns), "-j", "2", "-T", secs, "-f",
            env["pgbench_script"], "-D", f"fence={env['fence']}", "-d", env["pg_dsn"]]


def run_c_side(side: str, env: dict, conns: int, duration: float, servers: dict) -> dict:
    cmd = c_command(side, conns, duration, env)
    before = server_ticks(servers)
    out = sh(*cmd)
    time.sleep(0.3)  # the postmaster reaps pgbench's backends: their CPU moves to its cutime
    after = server_ticks(servers)
    if cmd[0] == env["pgbench"]:
        rate = float(next(line.split()[2] for line in out.splitlines() if line.startswith("tps")))
    else:
        rate = float(out.split()[1] if out.startswith("WRITES") else out.split()[0])
    n = max(rate * int(duration), 1)
    return {"ops": rate, **{k: (after[k] - before[k]) / TICK / n * 1e6 for k in before}}


def c_setup(env: dict, dsn: str) -> None:
    """The C clients' tables, rows, lock token and pgbench script (after the gateway is up)."""
    sh("psql", dsn, "-qc", C_TABLES_SQL)
    c = lean(env["http_port"])
    s, b = c.call("POST", "/v1/locks/sbs-c-writes/acquire", {"ttl_ms": 3600000})
    assert s == 200, (s, b)
    env["token"], env["fence"] = b["token"], b["fence"]
    env["pgbench_script"] = os.path.join(env["datadir"], "direct.pgbench")
    with open(env["pgbench_script"], "w") as f:
        f.write(C_DIRECT_SQL)
    pgbin = os.environ.get("FG_PGBIN") or sh("pg_config", "--bindir").strip()
    env["pgbench"] = os.path.join(pgbin, "pgbench")


class Gateways:
    """The gateway binaries of the run (name -> path; one unnamed for this checkout's build) and the server that
    runs now on the HTTP port: run_side's sides name a binary after " @ ", a floor side the floor's backend
    (FLOORS), and use() restarts the server when it changes."""

    def __init__(self, binaries: dict, env: dict, http_port: int, log_path: str, floor: list[str], redis_port: int):
        self.binaries, self.env, self.http_port, self.log_path = binaries, env, http_port, log_path
        self.floor = floor  # bench/floor.c's command up to its backend: binary, port, threads
        self.floor_args = {"redis": str(redis_port), "lib": os.path.join(ROOT, "bench", "lua_floor.lua")}
        self.proc, self.running = None, None

    def sides(self, group: list[str]) -> list[str]:
        """group with each gateway side once per named binary (unchanged with one unnamed binary)."""
        if list(self.binaries) == [""]:
            return group
        return [f"{side} @ {name}" if side.startswith("gateway") else side
                for side in group for name in (self.binaries if side.startswith("gateway") else [""])]

    def use(self, side: str, servers: dict) -> str:
        """Runs the binary or floor side names (or the only binary) and returns the side without its binary's
        name; a direct side leaves the server that runs as it is (idle: its CPU is no part of the direct
        path)."""
        base, _, name = side.partition(" @ ")
        floor = base.removesuffix(" (http_pairs)")
        floors = {**FLOORS, **PIPELINED_FLOORS}
        if floor in floors:
            want, cmd = floor, [*self.floor, *(a.format(**self.floor_args) for a in floors[floor])]
        elif name in self.binaries and base.startswith("gateway"):
            want, cmd = name, [self.binaries[name]]
        else:
            return base
        if self.running != want or self.proc is None:
            self.stop()
            log = open(self.log_path, "a")
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=log)
            for _ in range(100):
                try:
                    lean(self.http_port).call("GET", "/readyz", {})
                    break
                except OSError:
                    time.sleep(0.1)
            self.running = want
            servers["gateway"] = self.proc.pid
        return base

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None


def compare(groups: list[list[str]], rounds: int, run) -> None:
    """Runs each group's sides in alternated rounds (run(side) -> figures) and prints their medians, with the
    server CPU per operation over the group's last side (the direct path)."""
    for group in groups:
        runs = {side: [] for side in group}
        for r in range(rounds):
            for side in (group if r % 2 == 0 else list(reversed(group))):
                runs[side].append(run(side))
        med = {side: {k: statistics.median(x[k] for x in runs[side]) for k in runs[side][0]} for side in group}
        direct = med[group[-1]]
        base = direct["redis"] + direct["postgres"]
        for side in group:
            m = med[side]
            gw = m["gateway"] if side != group[-1] else 0.0  # the idle gateway is no part of the direct path
            total = gw + m["redis"] + m["postgres"]
            p50 = f"{m['p50']:.2f} | {m['p99']:.2f}" if "p50" in m else "– | –"
            redis_x = (f"{m['redis'] / direct['redis']:.2f} | {paired(runs[side], runs[group[-1]], 'redis'):.2f}"
                       if direct["redis"] > base / 2 else "– | –")
            print(f"| {side} | {m['ops']:,.0f} | {p50} | {gw:.0f} | {m['redis']:.0f} | {m['postgres']:.0f} | "
                  f"{total:.0f} | {total / base if base else float('nan'):.2f} | "
                  f"{paired(runs[side], runs[group[-1]], 'server', side != group[-1]):.2f} | {redis_x} |", flush=True)


def paired(side: list[dict], direct: list[dict], what: str, gateway: bool = False) -> float:
    """The median of each round's ratio of side's figure to the direct side's ("server": gateway, if counted, +
    Redis + Postgres; else that key)."""
    def figure(x: dict, with_gateway: bool) -> float:
        return (x["gateway"] if with_gateway else 0.0) + x["redis"] + x["postgres"] if what == "server" else x[what]
    return statistics.median(figure(s, gateway) / max(figure(d, False), 1e-9) for s, d in zip(side, direct))


def direct_clients_importable() -> bool:
    """Whether this interpreter sees Debian's python3-redis and python3-psycopg2 (a python3 of pyenv or a
    venv does not: then the script runs itself again with /usr/bin/python3)."""
    try:
        import psycopg2  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        return False
    return True


def sh(*cmd: str, **kw) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, **kw).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per timed window (default 5)")
    ap.add_argument("--rounds", type=int, default=2, help="A/B rounds per comparison (default 2)")
    ap.add_argument("--clients", type=int, default=4, help="client processes (default 4)")
    ap.add_argument("--log-level", default="info", help="the gateway's FENCEGATE_LOG_LEVEL (default info)")
    ap.add_argument("--threads", type=int, default=4, help="the gateway's FENCEGATE_HTTP_THREADS (default 4)")
    ap.add_argument("--c-connections", default="", help="also C clients at these connection counts (e.g. 16,64)")
    ap.add_argument("--ports", default="17391,17441,18491", help="Redis, Postgres and HTTP ports of the run")
    ap.add_argument("--gateway", action="append", metavar="NAME=BINARY",
                    help="a gateway binary to measure, named (give several for a before/after in one run)")
    args = ap.parse_args()
    sh("bash", "scripts/deps.sh", "bench")
    if not direct_clients_importable():
        if sys.executable != DEBIAN_PYTHON and os.path.exists(DEBIAN_PYTHON):
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
        sys.exit("side_by_side: python3-redis and python3-psycopg2 are not importable")
    build, datadir = os.path.join(ROOT, "build-bench-sbs"), os.path.join(ROOT, ".data/bench-sbs")
    redis_port, pg_port, http_port = (int(p) for p in args.ports.split(","))
    c_conns = [int(n) for n in args.c_connections.split(",") if n]
    # The C clients are built with this checkout's build (raw_pairs needs its generated script table).
    sh("bash", "-c", f'build="{build}"; source bench/common.sh; set -e; bench_build; bench_pair_clients; '
       f'bench_c_program pg_load; bench_c_program floor')
    svc = ["bash", "scripts/services.sh"]
    sh(*svc, "wipe", datadir, str(redis_port), str(pg_port))
    sh(*svc, "start", datadir, str(redis_port), str(pg_port))
    gw = None
    try:
        binaries = dict(g.split("=", 1) for g in args.gateway) if args.gateway else {
            "": os.path.join(build, "fencegate")}
        dsn = f"postgresql://fencegate@127.0.0.1:{pg_port}/fencegate"
        sh("psql", dsn, "-qc", TABLES_SQL)
        os.makedirs(datadir, exist_ok=True)
        cfg = os.path.join(datadir, "sbs.json")
        config = json.loads(json.dumps(GATEWAY_CONFIG))
        config["tables"].update({"sbs_rows_default": {"key": "id", "columns": ["n", "note"]},
                                 "sbs_rows_column": {"key": "id", "columns": ["n", "note"],
                                                     "fence_column": "lock_fence"}})
        if c_conns:
            sh("psql", dsn, "-qc", C_TABLES_SQL.split("INSERT")[0])  # the tables the configuration names
        else:
            config = GATEWAY_CONFIG
        with open(cfg, "w") as f:
            json.dump(config, f)
        env = dict(os.environ, FENCEGATE_LISTEN=f"127.0.0.1:{http_port}", FENCEGATE_CONFIG=cfg,
                   FENCEGATE_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", FENCEGATE_PG_DSN=dsn,
                   FENCEGATE_LOG_LEVEL=args.log_level, FENCEGATE_HTTP_THREADS=str(args.threads))
        gw = Gateways(binaries, env, http_port, os.path.join(datadir, "gateway.log"),
                      [os.path.join(build, "floor"), str(http_port), str(args.threads)], redis_port)
        servers = {}
        gw.use(gw.sides(COMPARISONS[0])[0], servers)
        redis_pid = int(sh("redis-cli", "-p", str(redis_port), "INFO", "server").split("process_id:")[1].split()[0])
        postmaster = int(sh("psql", dsn, "-Atc", "SELECT pid FROM pg_stat_activity WHERE backend_type = "
                            "'checkpointer'").strip())
        postmaster = int(open(f"/proc/{postmaster}/stat").read().rsplit(")", 1)[1].split()[1])
        servers.update({"redis": redis_pid, "postmaster": postmaster})
        cenv = {"http_port": http_port, "redis_port": redis_port, "pg_dsn": dsn, "build": build,
                "datadir": datadir}
        print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average before "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs; gateway log level "
              f"{args.log_level}, {args.threads} HTTP threads; {args.rounds} rounds of {args.duration:g} s per "
              f"side, the order turning each round; medians of the rounds.\n")
        header = ("| path | ops/s | p50 ms | p99 ms | gateway or floor µs/op | Redis µs/op | Postgres µs/op | "
                  "server µs/op | × direct | paired | Redis × direct | paired |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|---|")
        print(f"{args.clients} Python client processes, one keep-alive connection each:\n")
        print(header)
        compare([gw.sides(g) for g in COMPARISONS], args.rounds,
                lambda side: run_side(gw.use(side, servers), cenv, args.clients, args.duration, servers))
        if c_conns:
            gw.use(gw.sides(COMPARISONS[0])[0], servers)  # a gateway to take the C writes' lock from
            c_setup(cenv, dsn)
        for conns in c_conns:
            print(f"\n{conns} connections, C clients (one thread each):\n")
            print(header)
            compare([gw.sides(g) for g in C_COMPARISONS], args.rounds,
                    lambda side: run_c_side(gw.use(side, servers), cenv, conns, args.duration, servers))
        print(f"\nload average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if gw is not None:
            gw.stop()
        sh(*svc, "stop", datadir, str(redis_port), str(pg_port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
