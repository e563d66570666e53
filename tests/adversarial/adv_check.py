# SPDX-License-Identifier: Apache-2.0
"""The judges of the adversarial suite: pure functions from the clients' own records (JSON lines written by
adv_worker.py) and from what Postgres holds (commit history, audit rows) to a list of violations.

Owns: the definitions of each guarantee as checked from outside the gateway. Must not: talk to the gateway,
Redis or Postgres (the tests fetch and pass in what is needed), or relax a safety check for a flaky
environment: every tolerance here is zero, and a check that finds nothing to look at says so (coverage).
"""

from __future__ import annotations

import bisect
import glob
import json
import os
import re
from collections import defaultdict

FENCE_IN_WID = re.compile(r"-f(\d+)$")


def load_records(directory: str) -> list[dict]:
    """Every record of every worker file (*.jsonl) in directory; a torn last line (SIGKILL) is skipped."""
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def wid_fence(wid: str | None) -> int | None:
    m = FENCE_IN_WID.search(wid or "")
    return int(m.group(1)) if m else None


class Leases:
    """The leases the clients saw, keyed by (kind, name, fence): when each was first received, its last
    known expiry, when its holder stopped using it, and the request_ids and tokens behind it."""

    def __init__(self, records: list[dict], kills: dict[str, float]):
        self.by_key: dict[tuple, dict] = {}
        for r in records:
            ev = r["ev"]
            if ev == "grant":
                key = (r["kind"], r["name"], r["fence"])
                lease = self.by_key.setdefault(key, {"kind": r["kind"], "name": r["name"], "fence": r["fence"],
                                                     "start": r["t"], "t_first": r["t_first"], "exp": r["exp"],
                                                     "exit": None, "tokens": set(), "rids": set(),
                                                     "workers": set()})
                lease["start"] = min(lease["start"], r["t"])
                lease["t_first"] = min(lease["t_first"], r["t_first"])
                lease["exp"] = max(lease["exp"], r["exp"])
                lease["tokens"].add(r["token"])
                lease["rids"].add(r["rid"])
                lease["workers"].add(r["w"])
        for r in records:
            key = (r.get("kind"), r.get("name"), r.get("fence"))
            lease = self.by_key.get(key)
            if lease is None:
                continue
            if r["ev"] == "renew":
                lease["exp"] = max(lease["exp"], r["exp"])
            elif r["ev"] == "exit":
                lease["exit"] = r["t"] if lease["exit"] is None else min(lease["exit"], r["t"])
        for lease in self.by_key.values():
            end = lease["exp"]
            if lease["exit"] is not None:
                end = min(end, lease["exit"])
            for w in lease["workers"]:
                if w in kills:
                    end = min(end, max(kills[w], lease["start"]))
            lease["end"] = end  # the live window is [start, end); empty when end <= start

    def of(self, kind: str) -> list[dict]:
        return [lease for lease in self.by_key.values() if lease["kind"] == kind]


def check_exclusion(leases: Leases) -> tuple[list[str], int]:
    """No two holders of one lock inside at once while both leases are live. Returns (violations,
    number of non-empty windows checked)."""
    bad, checked = [], 0
    by_name = defaultdict(list)
    for lease in leases.of("lock"):
        if lease["end"] > lease["start"]:
            by_name[lease["name"]].append(lease)
    for name, items in by_name.items():
        items.sort(key=lambda x: x["start"])
        checked += len(items)
        prev = None
        for lease in items:
            if prev is not None and lease["start"] < prev["end"]:
                bad.append(f"lock {name}: fence {lease['fence']} entered at {lease['start']:.1f} while fence "
                           f"{prev['fence']} was live until {prev['end']:.1f} "
                           f"({prev['end'] - lease['start']:.1f} ms overlap)")
            if prev is None or lease["end"] > prev["end"]:
                prev = lease
    return bad, checked


def check_semaphore(leases: Leases, limit: int) -> tuple[list[str], int]:
    """Never more than limit live holders of a semaphore. Returns (violations, highest count seen)."""
    bad, highest = [], 0
    by_name = defaultdict(list)
    for lease in leases.of("sem"):
        if lease["end"] > lease["start"]:
            by_name[lease["name"]].append(lease)
    for name, items in by_name.items():
        for lease in items:
            live = [o for o in items if o["start"] <= lease["start"] < o["end"]]
            highest = max(highest, len(live))
            if len(live) > limit:
                bad.append(f"semaphore {name}: {len(live)} live holders (limit {limit}) at {lease['start']:.1f}: "
                           f"fences {sorted(o['fence'] for o in live)}")
    return bad, highest


def check_fences(leases: Leases, records: list[dict]) -> list[str]:
    """Fences unique per lease, one lease per request_id, and increasing in grant order: a lease received
    before another's first request was sent has the smaller fence."""
    bad = []
    by_fence = defaultdict(set)
    for lease in leases.by_key.values():
        by_fence[lease["fence"]].add((lease["kind"], lease["name"]))
        if len(lease["tokens"]) > 1:
            bad.append(f"fence {lease['fence']} came with {len(lease['tokens'])} different tokens")
    for fence, owners in by_fence.items():
        if len(owners) > 1:
            bad.append(f"fence {fence} issued to several leases: {sorted(owners)}")
    by_rid = defaultdict(set)
    for r in records:
        if r["ev"] == "grant":
            by_rid[(r["kind"], r["name"], r["rid"])].add(r["fence"])
    for rid, fences in by_rid.items():
        if len(fences) > 1:
            bad.append(f"request_id {rid} got a second lease: fences {sorted(fences)}")
    items = sorted(leases.by_key.values(), key=lambda x: x["start"])
    starts = [x["start"] for x in items]
    prefix_max, top, top_lease = [], 0, None
    for x in items:
        if x["fence"] > top:
            top, top_lease = x["fence"], x
        prefix_max.append((top, top_lease))
    for b in items:
        i = bisect.bisect_left(starts, b["t_first"]) - 1
        if i >= 0 and prefix_max[i][0] >= b["fence"]:
            a = prefix_max[i][1]
            bad.append(f"fence {b['fence']} ({b['kind']} {b['name']}, first asked at {b['t_first']:.1f}) is not "
                       f"above fence {a['fence']} ({a['kind']} {a['name']}) received earlier at {a['start']:.1f}")
    return bad


class Writes:
    """Every fenced write the clients sent: its resource, fence, final answer, or unresolved (no answer:
    killed, timed out, connection lost)."""

    def __init__(self, records: list[dict]):
        self.by_wid: dict[str, dict] = {}
        for r in records:
            if r["ev"] == "wreq":
                w = self.by_wid.setdefault(r["wid"], {"wid": r["wid"], "res": r["res"], "fence": r["fence"],
                                                      "status": None, "code": None, "answered": False})
                w["answered"] = False
            elif r["ev"] == "wresp":
                w = self.by_wid[r["wid"]]
                w["status"], w["code"], w["answered"] = r["status"], r["code"], r["status"] is not None

    def accepted(self) -> list[dict]:
        return [w for w in self.by_wid.values() if w["answered"] and 200 <= w["status"] < 300]

    def stale(self) -> list[dict]:
        return [w for w in self.by_wid.values()
                if w["answered"] and w["status"] == 409 and w["code"] == "stale_fence"]

    def unresolved(self) -> list[dict]:
        return [w for w in self.by_wid.values() if not w["answered"]]


def check_audit(writes: Writes, audit: dict[tuple[str, int], int]) -> list[str]:
    """Every stale write refused and audited: per (resource, presented fence), audit rows equal the 409
    stale_fence answers; writes left without an answer may add at most one row each."""
    bad = []
    stale = defaultdict(int)
    for w in writes.stale():
        stale[(w["res"], w["fence"])] += 1
    unknown = defaultdict(int)
    for w in writes.unresolved():
        unknown[(w["res"], w["fence"])] += 1
    for key in set(stale) | set(audit):
        rows, answers, slack = audit.get(key, 0), stale.get(key, 0), unknown.get(key, 0)
        if not answers <= rows <= answers + slack:
            bad.append(f"{key[0]} fence {key[1]}: {answers} stale_fence answers "
                       f"(+{slack} unanswered writes) but {rows} audit rows")
    return bad


def check_pg_history(writes: Writes, history: list[tuple[int, str, str]], final: dict[str, str | None],
                     stored_fences: dict[str, int], table: str) -> list[str]:
    """Per row, from the commit history kept by a trigger (seq, key, note): accepted fences never decrease,
    the stored value is the last write committed, every acknowledged write is there, no refused write is,
    nothing there was never sent, and the fence stored for the resource is the highest committed."""
    bad = []
    sent = {w["wid"]: w for w in writes.by_wid.values() if w["res"].startswith("pg:")}
    committed = set()
    per_row = defaultdict(list)
    for seq, key, note in sorted(history):
        per_row[key].append(note)
        committed.add(note)
        w = sent.get(note)
        if w is None:
            bad.append(f"row {key}: committed note {note!r} was never sent by a client")
        elif w["answered"] and not 200 <= w["status"] < 300:
            bad.append(f"row {key}: write {note} was answered {w['status']} {w['code']} but committed")
    for key, notes in per_row.items():
        fences = [wid_fence(n) for n in notes]
        for i in range(1, len(fences)):
            if fences[i] is not None and fences[i - 1] is not None and fences[i] < fences[i - 1]:
                bad.append(f"row {key}: fence {fences[i]} ({notes[i]}) committed after fence {fences[i - 1]} "
                           f"({notes[i - 1]})")
        if final.get(key) != notes[-1]:
            bad.append(f"row {key}: stored note {final.get(key)!r} is not the last committed {notes[-1]!r}")
        top = max(f for f in fences if f is not None)
        res = f"pg:{table}/{key}"
        if stored_fences.get(res) != top:
            bad.append(f"{res}: stored fence {stored_fences.get(res)} but highest committed fence {top}")
    for w in writes.accepted():
        if w["res"].startswith("pg:") and w["wid"] not in committed:
            bad.append(f"acknowledged write {w['wid']} to {w['res']} is not in the commit history (lost)")
    return bad


def check_redis_values(writes: Writes, values: dict[str, tuple[str | None, int | None]]) -> list[str]:
    """Per Redis key: the stored value was written by a client with the highest fence accepted for it,
    and the fence the gateway reports is that highest fence."""
    bad = []
    top = defaultdict(int)
    for w in writes.accepted():
        if w["res"].startswith("redis:"):
            top[w["res"]] = max(top[w["res"]], w["fence"])
    sent = {w["wid"]: w for w in writes.by_wid.values()}
    for res, (value, fence) in values.items():
        if value is None:
            if top.get(res):
                bad.append(f"{res}: no value although writes were acknowledged")
            continue
        w = sent.get(value)
        if w is None:
            bad.append(f"{res}: value {value!r} was never sent")
            continue
        if w["fence"] < top.get(res, 0):
            bad.append(f"{res}: value {value} has fence {w['fence']} below the accepted fence {top[res]}")
        if fence is not None and fence < max(top.get(res, 0), w["fence"]):
            bad.append(f"{res}: reported fence {fence} below the highest accepted {top[res]}")
    return bad
