#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/expiry_cost.py - what Redis spends deleting a key whose time ran out, outside any command.

    python3 bench/expiry_cost.py                     # 20,000 keys, each pattern once
    python3 bench/expiry_cost.py --keys 50000 --rounds 3

A first try that grants a name used again moves the end of the lease before to a key of its own
(lib_lease.lua end_move), and one with a request_id moves the id before to `i:<id>` (rid_take_first): each
such key lives out its time to live (10 minutes for an end) and Redis's active expiry deletes it. That work
happens in Redis's cycle (activeExpireCycle: sampling the keys that have a time to live, deleting the
expired, propagating each DEL to the AOF), not inside a command, so `bench/backend_cost --callgrind`, which
counts inside call(), does not see it. This measures it per key: a redis-server under callgrind counting
inside activeExpireCycle only, with keys of the moved ends' shape (`fg:lk:{N}:h:<fence>`, the end's text),
written by one client and then left to expire:
  - together: every key due at once, alone in the database (the least a key costs: each sample finds
    expired keys);
  - spread: the keys due one by one over 20 s among as many keys that do not expire during the run (each
    cycle samples live keys too, as on a Redis whose leases come and go).
Instructions counted per key expired (INFO stats expired_keys), median of the rounds. Redis runs with
appendonly yes, as scripts/services.sh starts it, so each deletion is fed to the AOF buffer as in use (the
buffer's write to the file, before Redis sleeps, is not counted, as it is not for commands either). The
spread pattern's figure includes the sampling of live keys over SPREAD_S, shared by --keys; under valgrind
a cycle's time budget runs out sooner than natively, so its own overhead is shared by fewer keys.

Owns: this measure. Must not: count work of the commands that wrote the keys.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SPREAD_S = 20  # the spread pattern's keys fall due over this many seconds


def resp_encode(*args: str) -> bytes:
    return ("*%d\r\n" % len(args) + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)).encode()


class Redis:
    """A minimal RESP client: pipelined commands, replies read and checked for errors."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.f = self.sock.makefile("rb")

    def reply(self):
        line = self.f.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return rest.decode() if kind == b"+" else int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def pipeline(self, commands: list[tuple[str, ...]]) -> list:
        self.sock.sendall(b"".join(resp_encode(*c) for c in commands))
        return [self.reply() for _ in commands]

    def call(self, *args: str):
        return self.pipeline([args])[0]

    def stat(self, field: str) -> int:
        text = self.call("INFO", "stats")
        return int(next(l for l in text.splitlines() if l.startswith(field + ":")).split(":")[1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CallgrindRedis:
    """redis-server under callgrind, counting inside activeExpireCycle only, its state in folder."""

    def __init__(self, folder: str):
        self.folder, self.port, self.dumps = folder, free_port(), 0
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--toggle-collect=activeExpireCycle",
             f"--callgrind-out-file={folder}/out", "redis-server", "--port", str(self.port), "--bind",
             "127.0.0.1", "--save", "", "--appendonly", "yes", "--dir", folder],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.r = Redis(self.port)
                if self.r.call("PING") == "PONG":
                    break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("expiry_cost: Redis under callgrind did not answer")
                time.sleep(0.3)

    def zero(self) -> None:
        subprocess.run(["callgrind_control", "-z", str(self.proc.pid)], check=True, capture_output=True)

    def dump(self) -> int:
        """Instructions counted since the last zero."""
        subprocess.run(["callgrind_control", "-d", str(self.proc.pid)], check=True, capture_output=True)
        self.dumps += 1
        with open(f"{self.folder}/out.{self.dumps}") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("summary:"))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def end_keys(first: int, count: int) -> list[tuple[str, str]]:
    """count keys and values shaped like moved ends: fg:lk:{N}:h:<fence> holding "~<lease> <fence> released"."""
    return [(f"fg:lk:{{bench-{i:08x}}}:h:{100000 + i}", f"~{random.getrandbits(128):032x} {100000 + i} released")
            for i in range(first, first + count)]


def write(r: Redis, keys: list[tuple[str, str]], px_of) -> None:
    for i in range(0, len(keys), 1000):
        r.pipeline([("SET", k, v, "PX", str(px_of(j + i))) for j, (k, v) in enumerate(keys[i:i + 1000])])


def run(cg: CallgrindRedis, pattern: str, count: int) -> float:
    """Writes the keys of one pattern, counts what their expiry costs; instructions per key expired."""
    r = cg.r
    r.call("FLUSHALL")
    if pattern == "together":
        write(r, end_keys(0, count), lambda i: 3000)
    else:
        write(r, end_keys(count, count), lambda i: 3_600_000)  # live throughout
        write(r, end_keys(0, count), lambda i: 3000 + SPREAD_S * 1000 * i // count)
    cg.zero()
    before = r.stat("expired_keys")
    deadline = time.monotonic() + 600
    while r.call("DBSIZE") > (count if pattern == "spread" else 0):
        if time.monotonic() > deadline:
            sys.exit(f"expiry_cost: the keys of pattern {pattern} did not expire in 10 minutes")
        time.sleep(0.5)
    instructions = cg.dump()
    expired = r.stat("expired_keys") - before
    return instructions / max(expired, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=20000, help="keys that expire in each pattern (default 20000)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of both patterns (default 1)")
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_control", "redis-server"):
        if not shutil.which(tool):
            sys.exit(f"expiry_cost: {tool} not found (scripts/deps.sh bench)")
    folder = tempfile.mkdtemp(prefix="fencegate-expiry-")
    cg = CallgrindRedis(folder)
    try:
        version = next(l for l in cg.r.call("INFO", "server").splitlines() if l.startswith("redis_version:"))
        print(f"# bench/expiry_cost.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {version}, "
              f"{args.keys} keys a pattern, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
        figures: dict[str, list[float]] = {"together": [], "spread": []}
        for n in range(args.rounds):
            for pattern in figures:
                per_key = run(cg, pattern, args.keys)
                figures[pattern].append(per_key)
                print(f"round {n + 1} {pattern}: {per_key:,.0f} instructions per key expired", flush=True)
        for pattern, values in figures.items():
            print(f"{pattern}: median {statistics.median(values):,.0f} instructions per key expired")
    finally:
        cg.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
