# SPDX-License-Identifier: Apache-2.0
"""The independent check of the cluster scenario (test_scenario.py): what the clients saw, and what the stores
hold, judged without asking the gateway. Pure: it reads a Trace and returns the problems it finds.

Owns: the rules below. Must not: drive a gateway or a store (test_scenario.py records the trace).

The rules (docs/cluster.md, "Fences in cluster mode"):
- no fence is granted twice, whatever the lock: every granted fence of the run is compared with every other;
- the fences of one lock only grow: a grant asked for after another grant of the same lock was answered has
  a higher fence;
- every stored fence only grows: the fences of a row's committed versions in commit order (a trigger's log,
  observed by Postgres), and the fences a watcher read from the stores over time, never go down;
- every stale write is refused: a write whose fence is below the fence of a write to the same resource that
  was accepted before it was sent is answered 409 stale_fence, never 200; every accepted write is in the
  log, which holds no fence no client wrote, and the store keeps the highest accepted fence in the end (or
  that of a later write whose answer was lost);
- who is inside each critical section, as the clients tracked it: two clients holding one lock at once
  (a grant a failover lost, a lease that ran out) are counted, never an error by themselves: the rules above
  make the older one's writes fail.
"""

from __future__ import annotations

import collections
import dataclasses


@dataclasses.dataclass
class Grant:
    client: int
    lock: str
    fence: int
    sent: float       # monotonic seconds: request sent
    answered: float   # monotonic seconds: answer read
    left: float = 0.0  # when the client left the critical section (release sent); 0: never


@dataclasses.dataclass
class Write:
    client: int
    resource: str     # "pg:<table>/<key>" or "redis:<key>"
    fence: int
    status: int       # 200 accepted, 409 stale_fence refused
    sent: float
    answered: float


@dataclasses.dataclass
class Trace:
    grants: list[Grant] = dataclasses.field(default_factory=list)
    writes: list[Write] = dataclasses.field(default_factory=list)
    committed: dict[str, list[int]] = dataclasses.field(default_factory=dict)   # resource: fences, commit order
    watched: dict[str, list[int]] = dataclasses.field(default_factory=dict)     # resource: fences read over time
    final: dict[str, int] = dataclasses.field(default_factory=dict)             # resource: fence stored at the end


def overlaps(trace: Trace) -> int:
    """Pairs of grants of one lock whose critical sections (answered .. left) overlapped, as the clients saw
    them."""
    by_lock = collections.defaultdict(list)
    for g in trace.grants:
        by_lock[g.lock].append(g)
    count = 0
    for grants in by_lock.values():
        grants.sort(key=lambda g: g.answered)
        for i, a in enumerate(grants):
            end = a.left or float("inf")
            count += sum(1 for b in grants[i + 1:] if b.answered < end)
    return count


def problems(trace: Trace) -> list[str]:
    """Every rule the trace breaks, one line each (empty: the run kept every guarantee)."""
    out = []
    twice = [f for f, n in collections.Counter(g.fence for g in trace.grants).items() if n > 1]
    if twice:
        out.append(f"fences granted twice: {sorted(twice)[:10]}")
    by_lock = collections.defaultdict(list)
    for g in trace.grants:
        by_lock[g.lock].append(g)
    for lock, grants in by_lock.items():
        grants.sort(key=lambda g: g.answered)
        for i, a in enumerate(grants):
            later = [b for b in grants[i + 1:] if b.sent > a.answered and b.fence <= a.fence]
            if later:
                out.append(f"lock {lock}: fence {later[0].fence} granted after {a.fence} was")
                break
    for resource, fences in sorted({**trace.committed, **{f"{k} (watched)": v for k, v in trace.watched.items()}}.items()):
        back = [(x, y) for x, y in zip(fences, fences[1:]) if y < x]
        if back:
            out.append(f"{resource}: stored fence went from {back[0][0]} back to {back[0][1]}")
    by_resource = collections.defaultdict(list)
    for w in trace.writes:
        by_resource[w.resource].append(w)
    for resource, writes in sorted(by_resource.items()):
        accepted = sorted((w for w in writes if w.status == 200), key=lambda w: w.answered)
        for w in writes:
            if w.status != 200:
                continue
            before = [a for a in accepted if a.answered < w.sent and a.fence > w.fence]
            if before:
                out.append(f"{resource}: stale write of fence {w.fence} accepted after fence {before[0].fence} was")
                break
        if resource in trace.committed:
            missing = sorted({w.fence for w in accepted} - set(trace.committed[resource]))
            unasked = sorted(set(trace.committed[resource]) - {w.fence for w in writes})
            if missing:
                out.append(f"{resource}: accepted writes not committed: fences {missing[:10]}")
            if unasked:
                out.append(f"{resource}: committed fences no client wrote: {unasked[:10]}")
        # The end: the highest accepted fence, or a higher one of a write whose answer was lost (a 503 or
        # no answer after it committed), never a refused one nor one no client wrote.
        unanswered = {w.fence for w in writes if w.status not in (200, 409)}
        top = max((w.fence for w in accepted), default=0)
        end = trace.final.get(resource)
        if end is not None and (end < top or (end != top and end not in unanswered)):
            out.append(f"{resource}: stores fence {end}, the highest accepted was {top}")
    return out
