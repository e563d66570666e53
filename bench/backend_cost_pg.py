#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/backend_cost_pg.py - what a fenced write costs Postgres, next to the hand-written guarded UPDATE.

    python3 bench/backend_cost_pg.py                       # build, own Redis/Postgres/gateway, 15 rounds
    python3 bench/backend_cost_pg.py --writes 500 --rounds 20 --clients 4 --explain
    python3 bench/backend_cost_pg.py --rounds 1 --callgrind                    # instructions per statement
    BUILD=/path/to/a/release/build python3 bench/backend_cost_pg.py   # measure another build
    BEFORE=/path/to/an/older/build python3 bench/backend_cost_pg.py   # its gateway too, on the next port

Postgres execution time per write, from pg_stat_statements (loaded by this script's own Postgres through
shared_preload_libraries): the sum of total_exec_time of every statement run while the writes were made,
divided by the writes. Sides, alternated in each round, each on 1,000 rows of its own table (integer key, a
text column) that every side wrote once before measuring, on random rows:
  - gateway PATCH {"set": {"note": ...}}, default mode (fences in fencegate.resource_fences);
  - the same with Prefer: return=minimal;
  - gateway PATCH on a table with "fence_column": "lock_fence";
  - the same with Prefer: return=minimal;
  - psycopg2 (autocommit): UPDATE t SET note=$1, lock_fence=$2 WHERE id=$3 AND lock_fence <= $2;
  - the same UPDATE with RETURNING * (the row back to the client, as the gateway answers it without
    Prefer: return=minimal), on a table of its own;
  - a takeover: a new lease (a higher fence) for each round, whose writes each meet a row of a table of its
    own for the first time at that fence, in the default mode (the fence row is raised) and with a
    fence_column; its figure is the price of a holder's first write of a row, where the steady sides are
    a holder's later writes;
  - refused writes: a token older than the rows' fences, through the gateway in either mode (409, audited).
A build given in BEFORE runs a second gateway beside the first (same servers, next HTTP port) whose sides
join the rounds, so that a before/after comparison shares the machine's moment. The sides run in one order in
even rounds and in the reverse order in odd ones. Each figure is the median of
the rounds (many short rounds: a loaded machine slows every side alike), and beside it the best round, the
least disturbed; the statements of the last round are listed with their calls and
mean time per call. The gateway's background work (janitor) runs meanwhile and is counted: it shows in the
list as statements with few calls. --explain then prints EXPLAIN (ANALYZE, BUFFERS) of the gateway's write
statements (their text as pg_stat_statements keeps it; with BEFORE, an older build's answered writes too, those
that return row_to_json) and of the hand-written UPDATE, each run a few times in a transaction that is rolled
back, the last run shown: where the time of a write goes.

--callgrind then counts the instructions Postgres executes per write statement, which no load on the
machine moves: Postgres is stopped, and each statement (the gateway's, as its connection shows it, and the
hand-written UPDATE, alone and with RETURNING *) is prepared and executed on random rows in a single-user
Postgres on the same data directory under valgrind's callgrind, counting inside ExecuteQuery (the prepared
statement's plan from the cache and its executor run: what pg_stat_statements times, with the plan lookup);
100 and 600 executions, their difference over 500.

Owns: this measure. Must not: change the servers' configuration between sides. Its services: .data/bench-pgcost,
ports 17393 (Redis), 17443 (Postgres), 18493 (HTTP); PGCOST_PORTS="redis pg http" overrides them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

from lean_http import LeanConnection

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEBIAN_PYTHON = "/usr/bin/python3"  # the interpreter of python3-psycopg2
PGBIN = "/usr/lib/postgresql/15/bin"
ROWS = 1000

TABLES_SQL = f"""
CREATE TABLE public.pgc_default (id integer PRIMARY KEY, note text);
CREATE TABLE public.pgc_column (id integer PRIMARY KEY, note text, lock_fence bigint NOT NULL DEFAULT 0);
CREATE TABLE public.pgc_direct (id integer PRIMARY KEY, note text, lock_fence bigint NOT NULL DEFAULT 0);
CREATE TABLE public.pgc_direct_returning (LIKE public.pgc_direct INCLUDING ALL);
CREATE TABLE public.pgc_takeover (id integer PRIMARY KEY, note text);
CREATE TABLE public.pgc_takeover_column (id integer PRIMARY KEY, note text, lock_fence bigint);
INSERT INTO public.pgc_takeover SELECT g, '' FROM generate_series(0, {ROWS - 1}) g;
INSERT INTO public.pgc_takeover_column SELECT g, '' FROM generate_series(0, {ROWS - 1}) g;
INSERT INTO public.pgc_default SELECT g, '' FROM generate_series(0, {ROWS - 1}) g;
INSERT INTO public.pgc_column SELECT g, '' FROM generate_series(0, {ROWS - 1}) g;
INSERT INTO public.pgc_direct SELECT g, '' FROM generate_series(0, {ROWS - 1}) g;
INSERT INTO public.pgc_direct_returning SELECT g, '' FROM generate_series(0, {ROWS - 1}) g;
"""
GATEWAY_CONFIG = {"tables": {"pgc_default": {"key": "id", "columns": ["note"]},
                             "pgc_column": {"key": "id", "columns": ["note"], "fence_column": "lock_fence"},
                             "pgc_takeover": {"key": "id", "columns": ["note"]},
                             "pgc_takeover_column": {"key": "id", "columns": ["note"], "fence_column": "lock_fence"}}}
DIRECT_SQL = "UPDATE public.pgc_direct SET note = %s, lock_fence = %s WHERE id = %s AND lock_fence <= %s"
DIRECT_RETURNING_SQL = ("UPDATE public.pgc_direct_returning SET note = %s, lock_fence = %s WHERE id = %s "
                        "AND lock_fence <= %s RETURNING *")
DIRECT = "hand-written guarded UPDATE (psycopg2)"
DIRECT_RETURNING = "hand-written guarded UPDATE RETURNING * (psycopg2)"
STATS_SQL = """SELECT query, calls, total_exec_time FROM pg_stat_statements
               WHERE query NOT LIKE '%%pg_stat_statements%%' ORDER BY total_exec_time DESC"""
MINIMAL = b"Prefer: return=minimal\r\n"


def sh(*cmd: str, **kw) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, **kw).stdout


def gateway_writer(http_port: int, table: str, token: str, expect: tuple, extra: bytes = b"", rows=None):
    """A function that PATCHes row `key` of table through its own keep-alive connection, expecting one of
    the statuses in expect; with rows (an iterator), the next of them instead of key."""
    conn = LeanConnection("127.0.0.1", http_port)
    hdr = b"Fence-Token: %s\r\n%s" % (token.encode(), extra)
    seq = [0]

    def write(key: int) -> None:
        seq[0] += 1
        key = next(rows) if rows is not None else key
        status, body = conn.call("PATCH", f"/v1/pg/{table}/{key}", {"set": {"note": f"n{seq[0]}"}}, hdr)
        assert status in expect, (status, body)
    return write


def direct_writer(dsn: str, fence: int, sql: str = DIRECT_SQL):
    import psycopg2  # python3-psycopg2
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    seq = [0]

    def write(key: int) -> None:
        seq[0] += 1
        cur.execute(sql, (f"n{seq[0]}", fence, key, fence))
        assert cur.rowcount == 1
        if cur.description:
            assert cur.fetchone()[0] == key
    return write


def run_writes(writers: list, writes: int) -> None:
    """Makes `writes` writes on random rows, spread over the writers, each on a thread of its own."""
    per = writes // len(writers)

    def loop(write) -> None:
        rnd = random.Random()
        for _ in range(per):
            write(rnd.randrange(ROWS))
    threads = [threading.Thread(target=loop, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class Stats:
    """pg_stat_statements of the bench Postgres, read and reset as its superuser."""

    def __init__(self, pg_port: int):
        import psycopg2
        self.conn = psycopg2.connect(f"postgresql://postgres@127.0.0.1:{pg_port}/fencegate")
        self.conn.autocommit = True
        self.cur = self.conn.cursor()
        self.cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    def reset(self) -> None:
        self.cur.execute("SELECT pg_stat_statements_reset()")

    def read(self) -> list:
        self.cur.execute(STATS_SQL)
        return self.cur.fetchall()


def measure(stats: Stats, writers: list, writes: int) -> tuple[dict, list]:
    stats.reset()
    run_writes(writers, writes)
    done = (writes // len(writers)) * len(writers)
    rows = stats.read()
    total_ms = sum(r[2] for r in rows)
    calls = sum(r[1] for r in rows)
    return {"us": 1000.0 * total_ms / done, "stmts": calls / done}, [(r[0], r[1] / done, 1000.0 * r[2] / max(r[1], 1))
                                                                    for r in rows]


# The statements to explain: the side that runs it, the start of its text, its parameters ($1 fence, $2 key,
# $3 resource prefix, $4 the note, as the gateway sends them), and which of the texts the gateways' connections
# show is that side's: an answered write returns the note as c1 (and the resource and the key where the
# gateway does not know them), an older build's returns row_to_json instead; a write with return=minimal
# returns neither.
ANSWERED = lambda q: " AS c1" in q  # noqa: E731
OLDER = lambda q: "row_to_json" in q  # noqa: E731
MINIMAL_TEXT = lambda q: " AS c1" not in q and "row_to_json" not in q  # noqa: E731
EXPLAINED = [
    ("gateway PATCH, fence_column", 'UPDATE %"pgc_column"', "({f}, '7', 'x')", ANSWERED),  # no prefix
    ("before: gateway PATCH, fence_column", 'UPDATE %"pgc_column"', "({f}, '7', 'pg:pgc_column/', 'x')", OLDER),
    ("gateway PATCH, fence_column, return=minimal", 'UPDATE %"pgc_column"', "({f}, '7', 'x')",  # no prefix
     MINIMAL_TEXT),
    ("gateway PATCH, default mode", "WITH c AS", "({f}, '7', 'pg:pgc_default/', 'x')", ANSWERED),
    ("before: gateway PATCH, default mode", "WITH c AS", "({f}, '7', 'pg:pgc_default/', 'x')", OLDER),
    ("gateway PATCH, default mode, return=minimal", "WITH c AS", "({f}, '7', 'pg:pgc_default/', 'x')",
     MINIMAL_TEXT),
]
DIRECT_PREPARED = ("PREPARE s (text, bigint, integer, bigint) AS UPDATE public.pgc_direct SET note = $1, "
                   "lock_fence = $2 WHERE id = $3 AND lock_fence <= $4")


def statement_text(stats: Stats, sides: dict, side: str, start: str, form) -> str | None:
    """The text of side's write statement as prepared (constants and all): the one its gateway connection shows
    in pg_stat_activity right after the side wrote once more."""
    sides[side]()[0](7)
    stats.cur.execute("SELECT query FROM pg_stat_activity WHERE application_name = 'fencegate' AND query LIKE %s",
                      (start.replace("%", "%%") + "%",))
    texts = [q for q, in stats.cur.fetchall() if form(q)]
    return texts[0] if texts else None


def explain(stats: Stats, sides: dict, fence: int) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of the hand-written UPDATE and of each statement of EXPLAINED on row 7, the
    last of five runs, in a transaction rolled back."""
    cur = stats.cur
    plans = [(DIRECT, DIRECT_PREPARED, f"('x', {fence}, 7, {fence})")]
    for side, start, args, form in EXPLAINED:
        if side not in sides:  # a side of an older build, run without BEFORE
            continue
        text = statement_text(stats, sides, side, start, form)
        if text:
            plans.append((side, f"PREPARE s AS {text}", args.format(f=fence)))
    for side, prepare, args in plans:
        cur.execute("BEGIN")
        cur.execute(prepare)
        for _ in range(5):
            cur.execute(f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE s {args}")
            plan = [r[0] for r in cur.fetchall()]
        cur.execute("ROLLBACK")
        cur.execute("DEALLOCATE s")
        print(f"\n{side}:\n  " + " ".join(prepare.split(" AS ", 1)[1].split()) + "\n"
              + "\n".join("    " + line for line in plan))


# Each side's EXECUTE arguments: the gateway's statements take ($1 fence, $2 key, [$3 resource prefix,] note),
# the hand-written ones (note, fence, key, fence).
CALLGRIND_ARGS = {3: "({f}, {k}, 'x')", 4: "({f}, {k}, 'pg:pgc_default/', 'x')"}
DIRECT_RETURNING_PREPARED = DIRECT_PREPARED.replace("pgc_direct", "pgc_direct_returning") + " RETURNING *"


# Compacted before counting, so that no table carries more dead rows than another from the rounds.
COMPACTED = ["public.pgc_direct", "public.pgc_direct_returning", "public.pgc_column", "public.pgc_default",
             "fencegate.resource_fences", "fencegate.revocations"]


def single_user(pgdata: str, text: str, under: list) -> None:
    """Runs the statements of text (one a line) in a single-user Postgres on pgdata, as its OS user, without
    preloaded libraries (pg_stat_statements' hooks would count on every side), under the command under."""
    run_as = [] if os.geteuid() else ["runuser", "-u", os.environ.get("FG_PG_OS_USER", "fencegate-pg"), "--"]
    subprocess.run(run_as + under + [os.path.join(PGBIN, "postgres"), "--single", "-D", pgdata, "-c", "fsync=off",
                                     "-c", "shared_preload_libraries=", "fencegate"],
                   input=text.encode(), check=True, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def single_user_instructions(pgdata: str, prepare: str, execute: str, times: int) -> int:
    """Instructions inside ExecuteQuery of a single-user Postgres on pgdata that prepares and then runs
    execute (a format of {k}, a random row) times."""
    rnd = random.Random(7)
    text = prepare + "\n" + "\n".join(execute.format(k=rnd.randrange(ROWS)) for _ in range(times)) + "\n"
    out = os.path.join(os.path.dirname(pgdata), "callgrind.out")
    if os.path.exists(out):
        os.unlink(out)
    single_user(pgdata, text, ["valgrind", "--tool=callgrind", "--toggle-collect=ExecuteQuery",
                               f"--callgrind-out-file={out}"])
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return 0


def callgrind(stats: Stats, sides: dict, fence: int, datadir: str, redis_port: int, pg_port: int) -> None:
    """Instructions per execution of each write statement (the gateway's and the hand-written ones) in a
    single-user Postgres under callgrind, once the servers' Postgres is stopped."""
    statements = [(DIRECT, DIRECT_PREPARED, f"EXECUTE s('x', {fence}, {{k}}, {fence})"),
                  (DIRECT_RETURNING, DIRECT_RETURNING_PREPARED, f"EXECUTE s('x', {fence}, {{k}}, {fence})")]
    for side, start, _, form in EXPLAINED:
        if side in sides and not side.startswith("before: "):
            text = statement_text(stats, sides, side, start, form)
            if text:
                params = max(int(n) for n in re.findall(r"\$(\d+)", text))
                statements.append((side, f"PREPARE s AS {' '.join(text.split())}",
                                   "EXECUTE s" + CALLGRIND_ARGS[params].format(f=fence, k="{k}")))
    stats.conn.close()
    sh("bash", "scripts/services.sh", "stop-pg", datadir, str(redis_port), str(pg_port))
    pgdata = os.path.join(os.path.realpath(os.path.join(datadir, "pg")), "data")
    single_user(pgdata, "".join(f"VACUUM FULL ANALYZE {t}\n" for t in COMPACTED), [])
    counts = {side: (single_user_instructions(pgdata, prepare, execute, 600)
                     - single_user_instructions(pgdata, prepare, execute, 100)) / 500
              for side, prepare, execute in statements}
    base, returning = counts[DIRECT], counts[DIRECT_RETURNING]
    print("\nInstructions per execution inside ExecuteQuery (single-user Postgres under callgrind, random rows, "
          "600 executions less 100, over 500):\n")
    print("| statement | instructions | × hand-written UPDATE | × the UPDATE RETURNING * |")
    print("|---|---|---|---|")
    for side, _, _ in statements:
        print(f"| {side.replace(' (psycopg2)', '')} | {counts[side]:,.0f} | {counts[side] / base:.2f} "
              f"| {counts[side] / returning:.2f} |")


def enable_stat_statements(datadir: str, redis_port: int, pg_port: int) -> None:
    su = f"postgresql://postgres@127.0.0.1:{pg_port}/postgres"
    sh("psql", "-X", su, "-qc", "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    sh("bash", "scripts/services.sh", "stop-pg", datadir, str(redis_port), str(pg_port))
    sh("bash", "scripts/services.sh", "start-pg", datadir, str(redis_port), str(pg_port))


def start_gateway(build: str, port: int, datadir: str, cfg: str, redis_port: int, dsn: str, log_name: str):
    """A gateway of build on port, against the bench's servers; returns its process once it is ready."""
    env = dict(os.environ, FENCEGATE_LISTEN=f"127.0.0.1:{port}", FENCEGATE_CONFIG=cfg,
               FENCEGATE_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", FENCEGATE_PG_DSN=dsn,
               FENCEGATE_LOG_LEVEL="warn")
    log = open(os.path.join(datadir, log_name), "w")
    gw = subprocess.Popen([os.path.join(build, "fencegate")], env=env, stdout=log, stderr=log)
    for _ in range(100):
        try:
            LeanConnection("127.0.0.1", port).call("GET", "/readyz", {})
            return gw
        except OSError:
            time.sleep(0.1)
    return gw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writes", type=int, default=200, help="writes per side and round (default 200)")
    ap.add_argument("--rounds", type=int, default=15, help="rounds, sides alternated in each (default 15)")
    ap.add_argument("--clients", type=int, default=1,
                    help="writers at once, one connection each (default 1: no write groups)")
    ap.add_argument("--explain", action="store_true", help="then EXPLAIN ANALYZE the write statements")
    ap.add_argument("--callgrind", action="store_true",
                    help="last, count the write statements' instructions in a single-user Postgres")
    args = ap.parse_args()
    if args.writes > ROWS:
        ap.error(f"--writes: at most {ROWS} (a takeover writes each row once)")
    sh("bash", "scripts/deps.sh", "bench")
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        if sys.executable != DEBIAN_PYTHON and os.path.exists(DEBIAN_PYTHON):
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
        sys.exit("backend_cost_pg: python3-psycopg2 is not importable")
    build = os.environ.get("BUILD") or os.path.join(ROOT, "build-bench-pgcost")
    if not os.environ.get("BUILD"):
        sh("cmake", "-S", ".", "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DFG_TESTS=OFF")
        sh("cmake", "--build", build, "-j", str(os.cpu_count() or 2))
    builds = [("", build)] + ([("before: ", os.environ["BEFORE"])] if os.environ.get("BEFORE") else [])
    datadir = os.path.join(ROOT, ".data/bench-pgcost")
    redis_port, pg_port, http_port = (int(p) for p in os.environ.get("PGCOST_PORTS", "17393 17443 18493").split())
    svc = ["bash", "scripts/services.sh"]
    sh(*svc, "wipe", datadir, str(redis_port), str(pg_port))
    sh(*svc, "start", datadir, str(redis_port), str(pg_port))
    gateways = []
    try:
        enable_stat_statements(datadir, redis_port, pg_port)
        dsn = f"postgresql://fencegate@127.0.0.1:{pg_port}/fencegate"
        sh("psql", "-X", dsn, "-qc", TABLES_SQL)
        cfg = os.path.join(datadir, "pgcost.json")
        with open(cfg, "w") as f:
            json.dump(GATEWAY_CONFIG, f)
        for i, (_, b) in reversed(list(enumerate(builds))):  # the older first: it refuses a newer schema
            gateways.append(start_gateway(b, http_port + i, datadir, cfg, redis_port, dsn, f"gateway{i}.log"))
        lc = LeanConnection("127.0.0.1", http_port)
        tokens = {}
        for name in ("pgcost-old", "pgcost"):  # the older one's fence is lower: its writes are refused
            status, body = lc.call("POST", f"/v1/locks/{name}/acquire", {"ttl_ms": 3600000})
            assert status == 200, (status, body)
            tokens[name] = body
        token, fence, old = tokens["pgcost"]["token"], tokens["pgcost"]["fence"], tokens["pgcost-old"]["token"]
        n = args.clients

        def via(port: int, table: str, tok: str, expect: tuple, extra: bytes = b""):
            return lambda: [gateway_writer(port, table, tok, expect, extra) for _ in range(n)]

        def takeover(port: int, table: str):
            """Writers under a new lease, each write on a row it has not written yet (at most ROWS)."""
            def make():
                status, body = LeanConnection("127.0.0.1", port).call(  # lc may have idled out
                    "POST", f"/v1/locks/pgcost-takeover-{time.monotonic_ns()}/acquire", {"ttl_ms": 3600000})
                assert status == 200, (status, body)
                rows = iter(random.sample(range(ROWS), ROWS))
                return [gateway_writer(port, table, body["token"], (200,), rows=rows) for _ in range(n)]
            return make
        applied, minimal = (200,), (204,)
        order = []
        for i, (label, _) in enumerate(builds):
            port = http_port + i
            order += [(f"{label}gateway PATCH, default mode", via(port, "pgc_default", token, applied)),
                      (f"{label}gateway PATCH, fence_column", via(port, "pgc_column", token, applied))]
            if not label:  # a build from before return=minimal answers 200: not measured
                order += [("gateway PATCH, default mode, return=minimal",
                           via(port, "pgc_default", token, minimal, MINIMAL)),
                          ("gateway PATCH, fence_column, return=minimal",
                           via(port, "pgc_column", token, minimal, MINIMAL))]
        order.append((DIRECT, lambda: [direct_writer(dsn, fence) for _ in range(n)]))
        order.append((DIRECT_RETURNING,
                      lambda: [direct_writer(dsn, fence, DIRECT_RETURNING_SQL) for _ in range(n)]))
        warm = list(order)  # every row written once by every side: steady state, fence rows exist
        for i, (label, _) in enumerate(builds):
            order += [(f"{label}takeover PATCH, default mode", takeover(http_port + i, "pgc_takeover")),
                      (f"{label}takeover PATCH, fence_column", takeover(http_port + i, "pgc_takeover_column"))]
        for i, (label, _) in enumerate(builds):
            order += [(f"{label}refused (stale) PATCH, default mode", via(http_port + i, "pgc_default", old, (409,))),
                      (f"{label}refused (stale) PATCH, fence_column", via(http_port + i, "pgc_column", old, (409,)))]
        for _, make in warm:
            write = make()[0]
            for key in range(ROWS):
                write(key)
        stats = Stats(pg_port)
        results = {name: [] for name, _ in order}
        detail = {}
        for r in range(args.rounds):
            for name, make in order if r % 2 == 0 else order[::-1]:  # ABBA: a drift of the load evens out
                figures, detail[name] = measure(stats, make(), args.writes)
                results[name].append(figures)
        direct_runs = [r["us"] for r in results[DIRECT]]
        direct, direct_best = statistics.median(direct_runs), min(direct_runs)
        returning = statistics.median(r["us"] for r in results[DIRECT_RETURNING])
        print(f"Postgres execution time per write (pg_stat_statements, every statement), {args.clients} "
              f"writer(s), {args.writes} writes on random rows of {ROWS} per side and round, {args.rounds} rounds "
              f"alternated, medians of the rounds; build {build}"
              + (f", before: {builds[1][1]}" if len(builds) > 1 else "") + ".\n")
        print("| path | statements per write | µs per write | × hand-written UPDATE | best round µs | × "
              "| × the UPDATE RETURNING * |")
        print("|---|---|---|---|---|---|---|")
        for name, _ in order:
            us = statistics.median(r["us"] for r in results[name])
            best = min(r["us"] for r in results[name])
            stmts = statistics.median(r["stmts"] for r in results[name])
            print(f"| {name} | {stmts:.2f} | {us:.1f} | {us / direct:.2f} | {best:.1f} | {best / direct_best:.2f} "
                  f"| {us / returning:.2f} |")
        print("\nStatements of the last round (calls per write, mean µs per call):")
        for name, _ in order:
            print(f"\n{name}:")
            for query, per_write, mean in detail[name][:6]:
                text = " ".join(query.split())
                print(f"  {per_write:6.3f} x {mean:8.1f} µs  {text[:160]}")
        if args.explain:
            print("\nEXPLAIN (ANALYZE, BUFFERS) of row 7's write, the last of five runs, rolled back:")
            explain(stats, dict(order), fence)
        if args.callgrind:
            callgrind(stats, dict(order), fence, datadir, redis_port, pg_port)
    finally:
        for gw in gateways:
            gw.terminate()
            gw.wait(30)
        sh(*svc, "stop", datadir, str(redis_port), str(pg_port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
