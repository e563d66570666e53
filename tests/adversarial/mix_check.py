# SPDX-License-Identifier: Apache-2.0
"""The judge of the mixed adversarial run (mix.py): pure functions from the clients' own records, and from what
Postgres and the gateway hold at the end, to a list of violations.

Every lease is placed in time by its own Redis times, as the gateway answered them: it starts at
expires_at_ms - ttl_ms of its acquire (the latest such reading, since a retry or a lock set's own renewals can
only move it later) and is live until the latest expires_at_ms any acquire or renew answered, or until its
holder ended it by the product's own rules: the first release sent (the holder stops using the lease before
sending it) or a revoke answered with its fence. Client times are the same machine clock as Redis's TIME (one
host), floored to whole milliseconds as Redis reports them.

Owns: what each guarantee means as seen from outside. Must not: talk to the gateway, Redis or Postgres, or
allow any tolerance beyond the clock's millisecond: a check that saw nothing says so in the coverage.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict

REFUSED = {(409, "stale_fence"), (410, "lease_lost")}


def leases(records: list[dict]) -> dict[tuple, dict]:
    """(kind, name, fence) -> {start, exp, end, token, rids, revoked_at, ...} for every lease answered 200."""
    out: dict[tuple, dict] = {}

    def grant(kind, name, g, rec):
        key = (kind, name, g["fence"])
        start = g["expires_at_ms"] - g["ttl_ms"]
        lease = out.setdefault(key, {"kind": kind, "name": name, "fence": g["fence"], "start": start,
                                     "exp": g["expires_at_ms"], "tokens": set(), "rids": set(),
                                     "early": math.inf, "why": "", "revoked_at": None, "seen": 0})
        lease["start"] = max(lease["start"], start) if lease["seen"] else start
        lease["exp"] = max(lease["exp"], g["expires_at_ms"])
        lease["tokens"].add(g["token"])
        lease["rids"].add(rec.get("rid"))
        lease["t1"] = min(lease.get("t1", math.inf), rec["t1"])
        lease["seen"] += 1

    for r in records:
        if r["ev"] == "acq" and r["status"] == 200:
            grant(r["kind"], r["name"], r["body"], r)
        elif r["ev"] == "set" and r["status"] == 200:
            for g in r["body"]["locks"]:
                grant("lock", g["lock"], g, r)
    first_sent: dict[str, float] = {}
    for r in records:
        if r["ev"] in ("acq", "set", "reset"):
            first_sent[r["rid"]] = min(first_sent.get(r["rid"], math.inf), r.get("t0", math.inf))
    for lease in out.values():
        lease["sent"] = min(first_sent[rid] for rid in lease["rids"])
    for r in records:
        lease = out.get((r.get("kind"), r.get("name"), r.get("fence")))
        if lease is None:
            continue
        if r["ev"] == "renew" and r["status"] == 200 and "exp" in r:
            lease["exp"] = max(lease["exp"], r["exp"])
        elif r["ev"] == "rel" and r["t0"] < lease["early"]:
            lease["early"], lease["why"] = r["t0"], "release"
        elif r["ev"] == "revoke" and r["status"] == 200:
            if r["t0"] < lease["early"]:
                lease["early"], lease["why"] = r["t0"], "revoke"
            lease["revoked_at"] = r["t1"] if lease["revoked_at"] is None else min(lease["revoked_at"], r["t1"])
    for lease in out.values():
        lease["end"] = min(lease["exp"], math.floor(lease["early"]) if lease["early"] < math.inf else math.inf)
        if lease["end"] == lease["exp"]:
            lease["why"] = "expiry"
        # A revoke names no lease unless it sends a fence: one sent before this lease's grant may end it,
        # which then ended after it began, not at the revoke's sending.
        lease["end"] = max(lease["end"], lease["start"])
    return out


def check_holders(all_leases: dict, limits: dict[str, int]) -> tuple[list[str], dict]:
    """At most one live holder per lock, at most limit per semaphore, at every moment; fences grow in grant
    order per lock and per semaphore. Returns (violations, coverage)."""
    bad: list[str] = []
    by_name: dict[tuple, list] = defaultdict(list)
    for lease in all_leases.values():
        by_name[(lease["kind"], lease["name"])].append(lease)
    windows = handovers = 0
    for (kind, name), items in sorted(by_name.items()):
        live = sorted((x for x in items if x["end"] > x["start"]), key=lambda x: (x["start"], x["fence"]))
        windows += len(live)
        cap = 1 if kind == "lock" else limits[name]
        for x in live:
            overlap = [o for o in live if o is not x and o["start"] <= x["start"] < o["end"]]
            if len(overlap) + 1 > cap:
                o = ", ".join(f"fence {o['fence']} [{o['start']}, {o['end']}) ended by {o['why']}"
                              for o in overlap)
                bad.append(f"{kind} {name}: fence {x['fence']} granted at {x['start']} while {len(overlap)} other "
                           f"holder(s) live (cap {cap}): {o}")
        # A lease that ended before another began (a lock's holder; a semaphore's before the other's first
        # request was sent, since a semaphore's leases overlap and a grant's claim may come late) has the
        # lower fence.
        ended = sorted(items, key=lambda x: x["end"])
        ends = [x["end"] for x in ended]
        top: list[dict] = []  # top[i]: the lease of highest fence among ended[:i + 1]
        for x in ended:
            top.append(x if not top or x["fence"] > top[-1]["fence"] else top[-1])
        for b in items:
            # strictly before: a hand-over within one millisecond has no order on this clock
            n = bisect.bisect_left(ends, b["start"] if kind == "lock" else math.floor(b["sent"]))
            if not n:
                continue
            handovers += 1
            a = top[n - 1]
            if a is b:
                a = max((x for x in ended[:n] if x is not b), key=lambda x: x["fence"], default=None)
            if a is not None and a["fence"] >= b["fence"]:
                bad.append(f"{kind} {name}: fence {b['fence']} granted at {b['start']} after fence {a['fence']} "
                           f"ended at {a['end']}: fences do not grow in grant order")
    return bad, {"lease windows": windows, "fence pairs": handovers}


def check_lease_calls(records: list[dict], all_leases: dict) -> tuple[list[str], dict]:
    """Renewals never outlive a revoke or lose a lease early; a retried acquire answers the same lease; a
    second release answers 200; a lock set's answer names its locks."""
    bad: list[str] = []
    cov = defaultdict(int)
    by_rid: dict[tuple, set] = defaultdict(set)
    for r in records:
        if r["ev"] == "acq" and r["status"] == 200:
            by_rid[(r["kind"], r["name"], r["rid"])].add((r["body"]["fence"], r["body"]["token"]))
        elif r["ev"] == "set" and r["status"] == 200:
            got = sorted(g["lock"] for g in r["body"]["locks"])
            if got != sorted(r["names"]):
                bad.append(f"lock set {r['rid']}: asked {sorted(r['names'])}, answered {got}")
            for g in r["body"]["locks"]:
                by_rid[("set", g["lock"], r["rid"])].add((g["fence"], g["token"]))
    for key, answers in by_rid.items():
        if len(answers) > 1:
            bad.append(f"request_id {key}: answered {len(answers)} different leases "
                       f"(fences {sorted(f for f, _ in answers)})")
        cov["request ids answered"] += 1
    for r in records:
        if r["ev"] == "acq" and r.get("retry") and r["status"] == 200:
            cov["retries answered 200"] += 1
        lease = all_leases.get((r.get("kind"), r.get("name"), r.get("fence")))
        if lease is None:
            continue
        if r["ev"] == "renew":
            if r["status"] == 200 and lease["revoked_at"] is not None and r["t0"] > lease["revoked_at"]:
                bad.append(f"{r['kind']} {r['name']} fence {r['fence']}: renewed after its revoke was answered")
            if r["status"] == 410 and r["t1"] < lease["exp"] and lease["revoked_at"] is None:
                bad.append(f"{r['kind']} {r['name']} fence {r['fence']}: renew answered 410 at {r['t1']:.0f}, "
                           f"before the lease's own expiry {lease['exp']} and without a revoke")
            cov[f"renew {r['status']}"] += 1
        elif r["ev"] == "rel" and r.get("again"):
            cov["second releases"] += 1
            if r["first"] == 200 and r["status"] not in (200, None):
                bad.append(f"{r['kind']} {r['name']} fence {r['fence']}: a second release answered {r['status']} "
                           f"after the first answered 200")
    return bad, dict(cov)


def check_writes(records: list[dict], all_leases: dict, history: dict[str, list[int]],
                 audits: dict[tuple[str, int], int], finals: dict[str, tuple[str | None, int | None]]
                 ) -> tuple[list[str], dict, set[str]]:
    """No accepted write older than one accepted before it; a refused write changes nothing and leaves exactly
    one audit record; no write of a revoked token after the revoke's 200.

    history: resource -> fences of its Postgres commits in commit order (a trigger's log).
    audits: (resource, presented fence) -> number of audit records.
    finals: resource -> (value, fence) stored at the end."""
    bad: list[str] = []
    cov = defaultdict(int)
    by_res: dict[str, list] = defaultdict(list)
    for r in records:
        if r["ev"] == "write":
            by_res[r["res"]].append(r)
    refused_wids = set()
    for res, ws in sorted(by_res.items()):
        accepted = [w for w in ws if w["status"] in (200, 201, 204)]
        cov["accepted writes"] += len(accepted)
        by_answer = sorted(accepted, key=lambda a: a["t1"])
        i, top_done, top_wid = 0, 0, None
        for w in sorted(accepted, key=lambda w: w["t0"]):
            while i < len(by_answer) and by_answer[i]["t1"] < w["t0"]:  # answered before w was sent
                if by_answer[i]["fence"] > top_done:
                    top_done, top_wid = by_answer[i]["fence"], by_answer[i]["wid"]
                i += 1
            if w["fence"] < top_done:
                bad.append(f"{res}: write {w['wid']} with fence {w['fence']} accepted after {top_wid} with fence "
                           f"{top_done} was answered")
        refused: dict[int, int] = defaultdict(int)
        unknown: dict[int, int] = defaultdict(int)
        for w in ws:
            lease = all_leases.get(("lock", w["lock"], w["fence"]))
            if (lease is not None and lease["revoked_at"] is not None and w["t0"] > lease["revoked_at"]
                    and w["status"] in (200, 201, 204)):
                bad.append(f"{res}: write {w['wid']} of revoked fence {w['fence']} accepted after the revoke's 200")
            if (w["status"], w["code"]) in REFUSED:
                refused[w["fence"]] += 1
                refused_wids.add(w["wid"])
                cov[f"refused {w['code']}"] += 1
            elif w["status"] is None or w["status"] >= 500:
                unknown[w["fence"]] += 1
        for fence in set(refused) | set(unknown) | {f for r2, f in audits if r2 == res}:
            n = audits.get((res, fence), 0)
            if not refused[fence] <= n <= refused[fence] + unknown[fence]:
                bad.append(f"{res}: fence {fence} refused {refused[fence]} time(s) ({unknown[fence]} unanswered) "
                           f"but audited {n} time(s)")
        if res in finals and accepted:
            value, fence = finals[res]
            maybe = accepted + [w for w in ws if w["status"] is None or w["status"] >= 500]
            top = max(a["fence"] for a in accepted)
            if fence is None or not top <= fence <= max(a["fence"] for a in maybe):
                bad.append(f"{res}: stored fence {fence}, highest accepted {top}")
            elif value not in {a["wid"] for a in maybe if a["fence"] == fence}:
                bad.append(f"{res}: holds {value!r}, not a write accepted with its fence {fence}")
            cov["resources checked at the end"] += 1
    for res, fences in history.items():
        cov["commits in the history"] += len(fences)
        for i in range(1, len(fences)):
            if fences[i] < fences[i - 1]:
                bad.append(f"{res}: commit {i} has fence {fences[i]} after a commit with fence {fences[i - 1]}")
                break
    return bad, dict(cov), refused_wids


def check_history_refused(history_wids: dict[str, list[str]], refused_wids: set[str]) -> list[str]:
    return [f"{res}: refused write {w} was committed" for res, ws in history_wids.items() for w in ws
            if w in refused_wids]


def check_fifo(records: list[dict]) -> tuple[list[str], int]:
    """Waiters queued one after another (each sent only once the previous one was seen queued) are granted in
    that order."""
    bad, rounds = [], 0
    for r in records:
        if r["ev"] != "fifo":
            continue
        rounds += 1
        got = [w for w in r["grants"] if w is not None]
        if got != sorted(got, key=lambda w: w[1]) or [w[0] for w in got] != sorted(w[0] for w in got):
            bad.append(f"lock {r['name']}: queued in order {[w[0] for w in r['grants'] if w]}, granted fences "
                       f"{[w[1] for w in r['grants'] if w]}")
    return bad, rounds


def odd_answers(records: list[dict]) -> list[str]:
    """Answers that break no guarantee but deserve a look: a lock set answered 410 for a lock lost while it
    waited with no revoke of that lock meanwhile (its renewals came too late, or a race), and a retried
    request_id answered 410 for a lease its client was never answered."""
    out = []
    revokes = [r for r in records if r["ev"] == "revoke" and r.get("fence")]
    for r in records:
        if r["ev"] != "set" or r["status"] != 410:
            continue
        detail = r["body"].get("detail", "") if isinstance(r["body"], dict) else ""
        lock = r["body"].get("lock") or next((n for n in r["names"] if f"'{n}'" in detail), None)
        if any(v["name"] == lock and r["t0"] <= v["t0"] and v["t1"] <= r["t1"] for v in revokes):
            continue
        out.append(f"lock set {r['rid']} (retry {r.get('retry')}): 410 {detail!r} after {r['t1'] - r['t0']:.0f} ms")
    answers: dict[str, list] = defaultdict(list)
    for r in records:
        if r["ev"] in ("acq", "set"):
            answers[r["rid"]].append(r)
    for rid, rs in answers.items():
        twins = [r for r in rs if r.get("twin")]
        if twins and twins[0]["status"] == 200 and all(r["status"] != 200 for r in rs if not r.get("twin")):
            out.append(f"request_id {rid}: its first request was answered the lease, the second "
                       f"{[(r['status'], r['code']) for r in rs if not r.get('twin')]}")
    return out


def check_end(held: dict[str, str]) -> list[str]:
    return [f"{name}: still {what} at the end" for name, what in sorted(held.items())]


def judge(records, limits, history, history_wids, audits, finals, held) -> tuple[list[str], dict]:
    all_leases = leases(records)
    bad, cov = check_holders(all_leases, limits)
    b2, c2 = check_lease_calls(records, all_leases)
    b3, c3, refused_wids = check_writes(records, all_leases, history, audits, finals)
    b4 = check_history_refused(history_wids, refused_wids)
    b5, fifo_rounds = check_fifo(records)
    b6 = check_end(held)
    cov.update(c2)
    cov.update(c3)
    cov["fifo rounds"] = fifo_rounds
    cov["lock sets answered 200"] = sum(1 for r in records if r["ev"] == "set" and r["status"] == 200)
    cov["resets while waiting"] = sum(1 for r in records if r["ev"] == "reset")
    cov["revokes that ended a lease"] = sum(1 for r in records if r["ev"] == "revoke" and r.get("fence"))
    return bad + b2 + b3 + b4 + b5 + b6, cov
