# SPDX-License-Identifier: Apache-2.0
"""What large fenced Redis values do to everybody else's calls: WRITERS threads (one process, a keep-alive
connection each, each holding a lock of its own) PUT (or GET) values of SIZE bytes through gateway A for
SECONDS (at RATE requests a second in all, or as many as they can), while a probe process does lock acquire + release pairs, one after the other, through gateway A and
then through gateway B (the same Redis, a Redis connection of its own). The probe's latency through A next to
through B is what sharing A's Redis connections costs; B's next to an idle run is what the load costs the
machine. Prints one line per probe: pairs, p50, p99, max, the writers' requests per second, and with
--redis-port the Redis CPU and socket reads per writer's request (INFO, over the probe's whole run).

    python3 bench/large_values.py --a URL --b URL [--writers 30] [--size 60000] [--seconds 6] [--get] [--rate R]
                                  [--redis-port PORT]

Run by bench/large_values.sh, which starts the Redis, the Postgres and the gateways.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
from subprocess import run
from urllib.parse import urlparse


def call(conn, method, path, body=None, headers=None):
    h = {"Content-Type": "application/json", **(headers or {})}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=h)
    r = conn.getresponse()
    return r.status, r.read()


def connect(url):
    u = urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def redis_work(port):
    """Redis's CPU seconds and socket reads so far."""
    text = run(["redis-cli", "-p", str(port), "INFO", "all"], capture_output=True, text=True, check=True).stdout
    info = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"]), int(info["total_reads_processed"])


def probe(url, seconds):
    """Lock pairs one after the other for seconds; their latencies in ms, sorted."""
    conn, out, name = connect(url), [], f"large-probe-{time.time_ns()}"
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        t0 = time.monotonic()
        s, body = call(conn, "POST", f"/v1/locks/{name}/acquire", {"ttl_ms": 10000})
        assert s == 200, (s, body)
        s, body = call(conn, "POST", f"/v1/locks/{name}/release", {"token": json.loads(body)["token"]})
        assert s == 200, (s, body)
        out.append((time.monotonic() - t0) * 1000)
    return sorted(out)


def writers(args, seconds):
    """args.writers threads writing (or reading) args.size bytes for seconds; requests per second."""
    done, failures, tag = [0], [], time.time_ns()

    def one(ix):
        conn = connect(args.a)
        s, body = call(conn, "POST", f"/v1/locks/large-{tag}-{ix}/acquire", {"ttl_ms": 600000})
        fence = {"Fence-Token": json.loads(body)["token"]}
        path, value = f"/v1/redis/app:large-{ix}", "x" * args.size
        call(conn, "PUT", path, {"value": value}, fence)
        stop, pace = time.monotonic() + seconds, args.writers / args.rate if args.rate else 0.0
        due = time.monotonic() + pace * ix / max(args.writers, 1)
        while time.monotonic() < stop:
            due += pace
            time.sleep(max(0.0, due - time.monotonic()))
            s, body = call(conn, "GET", path) if args.get else call(conn, "PUT", path, {"value": value}, fence)
            if s != 200:
                failures.append((s, body[:200]))
                return
            done[0] += 1

    threads = [threading.Thread(target=one, args=(i,)) for i in range(args.writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        sys.exit(f"large_values: a writer failed: {failures[0]}")
    return done[0] / seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True)
    p.add_argument("--writers", type=int, default=30)
    p.add_argument("--size", type=int, default=60000)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--get", action="store_true")
    p.add_argument("--rate", type=float, default=0, help="the writers' requests per second in all (0: as many as they can)")
    p.add_argument("--redis-port", type=int, help="the Redis's port: print its work per writer's request")
    p.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.probe:  # the probe's own process, out of the writers' interpreter lock
        lat = probe(args.probe, args.seconds)
        q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]  # noqa: E731
        print(f"{len(lat)} {q(0.5):.2f} {q(0.99):.2f} {lat[-1]:.2f}")
        return
    what = f"{args.writers} x {'GET' if args.get else 'PUT'} {args.size} B" + (f" at {args.rate:.0f}/s" if args.rate else "")
    for side, url in (("A (the writers' gateway)", args.a), ("B (another gateway)", args.b)):
        load = threading.Thread(target=lambda: rates.append(writers(args, args.seconds)))
        rates: list[float] = []
        work = redis_work(args.redis_port) if args.redis_port else None
        load.start()
        time.sleep(0.5)
        out = subprocess.run([sys.executable, __file__, "--a", args.a, "--b", args.b, "--probe", url,
                              "--seconds", str(args.seconds - 1.0)], capture_output=True, text=True, check=True)
        load.join()
        pairs, p50, p99, top = out.stdout.split()
        line = (f"{what}: probe through {side}: {pairs} pairs, p50 {p50} ms, p99 {p99} ms, max {top} ms; "
                f"writers {rates[0]:.0f} requests/s")
        if work and rates[0] > 0:
            cpu, reads = (b - a for a, b in zip(work, redis_work(args.redis_port)))
            line += f"; Redis {1e6 * cpu / (rates[0] * args.seconds):.1f} us, {reads / (rates[0] * args.seconds):.2f} reads a request"
        print(line)


if __name__ == "__main__":
    main()
