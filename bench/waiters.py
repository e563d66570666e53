#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/waiters.py - what parked waiters cost a running gateway: memory per waiter, the busy-acquire latency
with them queued, and how fast they leave when their clients hang up.

    python3 bench/waiters.py --url http://127.0.0.1:8480 --pid <gateway pid> --waiters 10000 [--warm]

One lock is held; WAITERS connections each send an acquire of it with a long wait_ms and stay parked. With
--warm each connection first has one request answered (a GET of the lock): a kept-alive connection, as a
client that queues again after a release has, whose connection buffer the library cleared after that answer.
Printed:
  - the gateway's RSS (VmRSS of /proc/<pid>/status) before and after, and the difference per waiter;
  - p50/p99 of 500 busy acquires (wait_ms 0, answered 409 lock_busy) on the same lock with no waiter and with
    all of them queued;
  - the time from closing every waiter's socket at once to the lock's status showing 0 waiting.
The client needs one file descriptor per waiter (ulimit -n), the gateway too (limits.max_connections).

Owns: this measurement. Must not: be run against a gateway that serves others (it holds a lock for minutes).
"""

from __future__ import annotations

import argparse
import json
import socket
import time
import urllib.parse
import uuid


def request(host: str, port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    with socket.create_connection((host, port), timeout=30) as s:
        data = json.dumps(body).encode() if body is not None else b""
        s.sendall(b"%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n%s" % (method.encode(), path.encode(), host.encode(), port, len(data),
                                                     data))
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(payload) if payload else {}


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def busy_latencies(host: str, port: int, name: str, n: int) -> tuple[float, float]:
    s = socket.create_connection((host, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = json.dumps({"ttl_ms": 1000, "wait_ms": 0}).encode()
    req = (b"POST /v1/locks/%s/acquire HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (name.encode(), host.encode(), port, len(body), body))
    lat, buf = [], b""
    for _ in range(n):
        t0 = time.perf_counter()
        s.sendall(req)
        while True:
            while b"\r\n\r\n" not in buf:
                buf += s.recv(65536)
            head, rest = buf.split(b"\r\n\r\n", 1)
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(rest) < length:
                rest += s.recv(65536)
            buf = rest[length:]
            break
        assert b" 409 " in head.split(b"\r\n")[0], head
        lat.append(time.perf_counter() - t0)
    s.close()
    lat.sort()
    return lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3


def waiting(host: str, port: int, name: str) -> int:
    return request(host, port, "GET", f"/v1/locks/{name}")[1].get("waiting", -1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8480")
    ap.add_argument("--pid", type=int, required=True, help="the gateway's process id (for its RSS)")
    ap.add_argument("--waiters", type=int, default=10000)
    ap.add_argument("--warm", action="store_true", help="one answered request on each connection first")
    args = ap.parse_args()
    u = urllib.parse.urlsplit(args.url)
    host, port = u.hostname, u.port or 80
    name = f"bench-waiters-{uuid.uuid4().hex[:8]}"
    status, held = request(host, port, "POST", f"/v1/locks/{name}/acquire", {"ttl_ms": 600000})
    assert status == 200, (status, held)
    idle = busy_latencies(host, port, name, 500)
    before = rss_kib(args.pid)
    body = json.dumps({"ttl_ms": 10000, "wait_ms": 600000}).encode()
    req = (b"POST /v1/locks/%s/acquire HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (name.encode(), host.encode(), port, len(body), body))
    socks = []
    t0 = time.monotonic()
    warm = b"GET /v1/locks/%s HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (name.encode(), host.encode(), port)
    for _ in range(args.waiters):
        s = socket.create_connection((host, port), timeout=30)
        if args.warm:
            s.sendall(warm)
            answered = b""
            while b"}" not in answered:  # the status body is one JSON object
                answered += s.recv(65536)
        s.sendall(req)
        socks.append(s)
    while waiting(host, port, name) < args.waiters:
        time.sleep(0.2)
        if time.monotonic() - t0 > 300:
            raise SystemExit(f"only {waiting(host, port, name)} of {args.waiters} waiters queued after 300 s")
    time.sleep(1.0)
    after = rss_kib(args.pid)
    loaded = busy_latencies(host, port, name, 500)
    t1 = time.monotonic()
    for s in socks:
        s.close()
    while waiting(host, port, name) > 0:
        time.sleep(0.01)
    gone = time.monotonic() - t1
    request(host, port, "POST", f"/v1/locks/{name}/release", {"token": held["token"]})
    print(f"waiters: {args.waiters}{' on kept-alive connections' if args.warm else ''}; gateway RSS {before} KiB -> {after} KiB: "
          f"{(after - before) / args.waiters:.2f} KiB per waiter")
    print(f"busy acquire p50/p99: {idle[0]:.2f}/{idle[1]:.2f} ms with none waiting, "
          f"{loaded[0]:.2f}/{loaded[1]:.2f} ms with {args.waiters} waiting ({loaded[0] / idle[0]:.2f}x at p50)")
    print(f"all waiters gone {gone * 1e3:.0f} ms after their clients hung up (includes closing the sockets)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
