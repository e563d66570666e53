#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/sem_wakeups.py - where each semaphore hand-over's time goes, split at every wake-up.

Reads the records of one bench/sem_bench.py run (--records: per job the release sent, the grant received and
the worker's thread id, all CLOCK_MONOTONIC) and the kernel's scheduler events of the same minutes
(`perf record -k CLOCK_MONOTONIC -e sched:sched_wakeup,sched:sched_switch -a`, then `perf script --ns
-F tid,time,event,trace`), and walks back from each grant received along the wake-ups that led to it:

    client thread woken by gateway thread B (B wrote the grant)
    B woken by gateway thread A (A resumed the waiter's request: the in-process hand-over)
    A woken by Redis (the release script's answer)
    Redis woken by a gateway thread (the script written)
    A woken by a client thread (the release request), whose release was sent just before

Each link gives a wait for a CPU (woken -> on a CPU) and a stretch of work (on a CPU -> the next wake-up).
When the waiter's request is on the releasing thread itself (A is B) there is no wake-up between them: the
thread's work from the answer to the grant written counts as B's. A hand-over whose chain breaks (a thread
that was busy with another request when its news came, so nothing woke it; a wake-up from an interrupt; the
answer read by another thread of the pipelined connection) is counted and left out, so the figures are of
the hand-overs that found their threads asleep.
The gateway is not instrumented: any Release build will do. `bench/sem.sh` runs it with WAKEUPS=1.

Usage: python3 bench/sem_wakeups.py --records R.json --sched S.txt --gateway PID --redis PID
Prints one line per segment: median and mean in microseconds, over the hand-overs whose chain is whole.

Owns: this split. Must not: stand for CPU time (a segment is wall-clock time between two events).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import statistics
import sys

EVENT = re.compile(r"\s*(\d+)\s+(\d+)\.(\d{9}):\s+sched:(sched_wakeup|sched_switch):\s+(.*)")
WAKEE = re.compile(r" pid=(\d+)")
NEXT = re.compile(r"next_pid=(\d+)")

SEGMENTS = [
    ("client: release sent -> gateway thread A woken", "client"),
    ("scheduler: A woken -> on a CPU", "scheduler"),
    ("gateway: A reads the release, writes its script -> Redis woken", "gateway"),
    ("scheduler: Redis woken -> on a CPU", "scheduler"),
    ("Redis: runs what was written (the release script last) -> A woken", "Redis"),
    ("scheduler: A woken -> on a CPU", "scheduler"),
    ("gateway: A reads the answer, hands over, resumes -> waiter's thread B woken", "gateway"),
    ("scheduler: B woken -> on a CPU", "scheduler"),
    ("gateway: B runs the resumed request, writes the grant -> client woken", "gateway"),
    ("scheduler: client woken -> on a CPU", "scheduler"),
    ("client: reads and parses the grant", "client"),
]


class Sched:
    """Wake-ups (time, waker) and switches onto a CPU (time) of each thread, sorted by time."""

    def __init__(self, path: str):
        self.wakeups: dict[int, list[tuple[int, int]]] = {}
        self.oncpu: dict[int, list[int]] = {}
        with open(path) as f:
            for line in f:
                m = EVENT.match(line)
                if not m:
                    continue
                current, t, body = int(m.group(1)), int(m.group(2)) * 1_000_000_000 + int(m.group(3)), m.group(5)
                if m.group(4) == "sched_wakeup":
                    self.wakeups.setdefault(int(WAKEE.search(body).group(1)), []).append((t, current))
                else:
                    self.oncpu.setdefault(int(NEXT.search(body).group(1)), []).append(t)
        for v in self.wakeups.values():
            v.sort()
        for v in self.oncpu.values():
            v.sort()

    def last_wakeup(self, tid: int, before: int) -> tuple[int, int] | None:
        """The last wake-up of tid at or before the time: (time, waker)."""
        w = self.wakeups.get(tid, [])
        i = bisect.bisect_right(w, (before, sys.maxsize)) - 1
        return w[i] if i >= 0 else None

    def first_oncpu(self, tid: int, after: int) -> int | None:
        s = self.oncpu.get(tid, [])
        i = bisect.bisect_left(s, after)
        return s[i] if i < len(s) else None


def chain(rec: dict, sched: Sched, gateway: set[int], redis: set[int], clients: dict[int, list[int]]):
    """The segment times (ns) of the hand-over that ended in grant record rec, or None if the chain breaks."""
    grant = rec["grant"]
    w5 = sched.last_wakeup(rec["tid"], grant)  # the client thread woken by B's write
    if w5 is None or w5[1] not in gateway:
        return None
    c_on = sched.first_oncpu(rec["tid"], w5[0])
    b = w5[1]
    w4 = sched.last_wakeup(b, w5[0])
    if w4 is not None and w4[1] in redis:
        # The waiter's request is on the releasing thread: A is B, woken by the answer, and goes on to
        # the resumed request with no wake-up between (what A does for its own release's reply included).
        a, w3 = b, w4
        a2_on = sched.first_oncpu(a, w3[0])
        w4_at = b_on = a2_on
    elif w4 is not None and w4[1] in gateway and w4[1] != b:
        a, w4_at = w4[1], w4[0]  # B woken by A's resume
        b_on = sched.first_oncpu(b, w4_at)
        w3 = sched.last_wakeup(a, w4_at)  # A woken by Redis's answer
        if w3 is None or w3[1] not in redis:
            return None
        a2_on = sched.first_oncpu(a, w3[0])
    else:
        return None
    w2 = sched.last_wakeup(w3[1], w3[0])  # Redis woken by the script written
    if w2 is None or w2[1] not in gateway:
        return None
    r_on = sched.first_oncpu(w3[1], w2[0])
    w1 = sched.last_wakeup(a, w2[0])  # A woken by the release request, past hand-offs of the shared connection
    while w1 is not None and w1[1] in gateway:
        w1 = sched.last_wakeup(a, w1[0] - 1)
    if w1 is None or w1[1] not in clients:
        return None
    a1_on = sched.first_oncpu(a, w1[0])
    sent = clients[w1[1]]
    i = bisect.bisect_right(sent, w1[0]) - 1
    if i < 0 or None in (c_on, b_on, a2_on, r_on, a1_on):
        return None
    times = [sent[i], w1[0], a1_on, w2[0], r_on, w3[0], a2_on, w4_at, b_on, w5[0], c_on, grant]
    if any(y < x for x, y in zip(times, times[1:])) or grant - sent[i] > 50_000_000:
        return None
    return [y - x for x, y in zip(times, times[1:])]


def threads(pid: int) -> set[int]:
    return {int(t) for t in os.listdir(f"/proc/{pid}/task")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", required=True, help="sem_bench.py --records output")
    ap.add_argument("--sched", required=True, help="perf script --ns -F tid,time,event,trace output")
    ap.add_argument("--gateway", type=int, required=True, help="the gateway's process id (still running)")
    ap.add_argument("--redis", type=int, required=True, help="Redis's process id (still running)")
    args = ap.parse_args()
    with open(args.records) as f:
        records = json.load(f)
    sched = Sched(args.sched)
    gateway, redis = threads(args.gateway), threads(args.redis)
    clients: dict[int, list[int]] = {}
    for r in records:
        clients.setdefault(r["tid"], []).append(r["release"])
    for v in clients.values():
        v.sort()
    splits = [c for r in records if (c := chain(r, sched, gateway, redis, clients)) is not None]
    if not splits:
        print("no hand-over chain found (is perf recording the scheduler events?)", file=sys.stderr)
        return 1
    print(f"hand-overs traced back whole: {len(splits)} of {len(records)} grants")
    print("| segment | median µs | mean µs |")
    print("|---|---|---|")
    by_part: dict[str, list[float]] = {}
    for k, (name, part) in enumerate(SEGMENTS):
        v = [s[k] / 1000 for s in splits]
        print(f"| {name} | {statistics.median(v):.0f} | {statistics.mean(v):.0f} |")
        by_part.setdefault(part, [0.0] * len(splits))
        by_part[part] = [x + s[k] / 1000 for x, s in zip(by_part[part], splits)]
    total = [sum(s) / 1000 for s in splits]
    print(f"| **release sent -> grant received** | {statistics.median(total):.0f} | {statistics.mean(total):.0f} |")
    print("by part, the sum of its segments per hand-over: " + "; ".join(
        f"{part} median {statistics.median(v):.0f} µs, mean {statistics.mean(v):.0f}" for part, v in by_part.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
