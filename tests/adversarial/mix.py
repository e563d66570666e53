# SPDX-License-Identifier: Apache-2.0
"""The mixed adversarial run: client threads drive locks, semaphores and lock sets (overlapping names, asked in
random order) through several gateways on one Redis (or a Redis Cluster lab), with waits and deadlines, resets
while waiting followed by a retry with the same request_id through the same or another gateway, renewals,
double releases, operator revokes, fenced Postgres and Redis writes under each lease and stale writes after
it; optionally a gateway is killed with SIGKILL mid-run and replaced. Each client records what it sent and
what it was answered (mix_check.py judges the records, with the commit history a trigger keeps in Postgres,
the audit table and the state left at the end).

    mix.py [--seconds 30] [--clients 12] [--gateways 3] [--kill] [--cluster] [--seed N] [--keep FILE]
    mix.py --judge FILE            judge the records kept by --keep again
Needs the environment of scripts/test (FG_BIN, FG_TEST_REDIS_URL, FG_TEST_PG_DSN, FG_TEST_DATA); --cluster
starts its own cluster lab (tests/cluster/cluster_lab.py). Exits 1 on any violation or when a check had
nothing to look at.

Owns: the clients' behaviour and the run's set-up. Must not: judge (mix_check.py does).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))

import mix_check  # noqa: E402
from adv_common import GATEWAY_CONFIG, TABLE, Gateway, install_history, psql, uninstall_history  # noqa: E402

TTLS = [600, 1200, 2500]
WAITS = [0, 300, 1500, 4000]
NLOCKS = 6
SEMS = {"S0": 2, "S1": 3}


def now_ms() -> float:
    return time.time() * 1000.0


def code_of(body) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("type"), str):
        return body["type"].rsplit("/", 1)[-1]
    return None


class Pool:
    """The gateways of the run; one may be killed (SIGKILL) and replaced by a fresh one on another port."""

    def __init__(self, n: int):
        self.gws = [Gateway(config=GATEWAY_CONFIG) for _ in range(n)]
        self.lock = threading.Lock()

    def ports(self) -> list[int]:
        with self.lock:
            return [g.port for g in self.gws if g.running]

    def kill_and_replace(self, rng: random.Random, down_s: float) -> None:
        with self.lock:
            victim = rng.randrange(len(self.gws))
            self.gws[victim].kill()
        time.sleep(down_s)
        fresh = Gateway(config=GATEWAY_CONFIG)
        with self.lock:
            self.gws[victim] = fresh

    def stop(self) -> None:
        for g in self.gws:
            g.stop(check=False)


class Conn:
    """One keep-alive connection per gateway port, without any resend: a request that got no answer returns
    status None (a write may or may not have been applied; an acquire is retried by its request_id)."""

    def __init__(self):
        self.conns: dict[int, http.client.HTTPConnection] = {}

    def call(self, port: int, method: str, path: str, body=None, headers=None, timeout: float = 20.0):
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        data = None if body is None else json.dumps(body).encode()
        c = self.conns.get(port)
        if c is None:
            c = self.conns[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            if c.sock is None:
                c.connect()
            c.sock.settimeout(timeout)
            c.request(method, path, body=data, headers=hdrs)
            resp = c.getresponse()
            raw = resp.read()
            if resp.will_close:
                c.close()
            try:
                return resp.status, json.loads(raw) if raw else None
            except ValueError:
                return resp.status, raw.decode("utf-8", "replace")
        except Exception as e:  # timeout, refused, reset, a gateway killed mid-answer
            c.close()
            self.conns.pop(port, None)
            return None, type(e).__name__


def raw_attempt(port: int, path: str, body: dict, after_s: float):
    """Sends a request on its own socket and waits after_s for the answer; without a complete answer by then
    the socket is reset (SO_LINGER 0). Returns (status, body) or None when it reset."""
    data = json.dumps(body).encode()
    req = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(data)}\r\n\r\n").encode() + data
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError:
        return None
    got = b""
    deadline = time.monotonic() + after_s
    try:
        s.sendall(req)
        while True:
            head, sep, rest = got.partition(b"\r\n\r\n")
            if sep:
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                if len(rest) >= length:
                    s.close()
                    raw = rest[:length]
                    return int(head.split(b" ")[1]), json.loads(raw) if raw else None
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except (OSError, ValueError):
        pass
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    return None


class Run:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed or random.SystemRandom().randrange(1, 2**31)
        self.tag = f"mx{self.seed % 100000}x{int(time.time() * 1000) % 10**7}"
        self.locks = [f"{self.tag}:L{i}" for i in range(NLOCKS)]
        self.fifo_lock = f"{self.tag}:F"
        self.sems = {f"{self.tag}:{k}": v for k, v in SEMS.items()}
        self.records: list[dict] = []
        self.rlock = threading.Lock()
        self.old: list[tuple[str, str, int]] = []  # (lock, token, fence) of leases that ended
        self.end_at = 0.0
        self.pool: Pool | None = None

    # -- records and resources --

    def rec(self, ev: str, **f) -> dict:
        f["ev"] = ev
        with self.rlock:
            self.records.append(f)
        return f

    def row(self, lock: str) -> str:
        return lock.replace(":", "-")

    def rkey(self, lock: str) -> str:
        return f"app:{lock}"

    def resources(self) -> list[tuple[str, str, str]]:
        out = []
        for lock in self.locks + [self.fifo_lock]:
            out.append((f"pg:{TABLE}/{self.row(lock)}", "pg", self.row(lock)))
            out.append((f"redis:{self.rkey(lock)}", "redis", self.rkey(lock)))
        return out

    def port(self, rng: random.Random) -> int:
        ports = self.pool.ports()
        return rng.choice(ports) if ports else 1


class Client:
    def __init__(self, run: Run, cid: int):
        self.run = run
        self.id = f"c{cid}"
        self.rng = random.Random(run.seed * 1000 + cid)
        self.conn = Conn()
        self.serial = 0

    def next_id(self, what: str) -> str:
        self.serial += 1
        return f"{self.run.tag}-{self.id}-{what}{self.serial}"

    # -- acquiring, with resets and retries --

    def ask(self, path: str, body: dict, wait_ms: int):
        port = self.run.port(self.rng)
        t0 = now_ms()
        status, rb = self.conn.call(port, "POST", path, body, timeout=wait_ms / 1000.0 + 15.0)
        return port, t0, now_ms(), status, rb

    def acquire(self, kind: str, name: str, wait_ms: int, ttl_ms: int, may_reset: bool = True):
        """An acquire (kind lock or sem) or a lock set (kind set, name a list); sometimes first sent on a socket
        that resets while it waits, then retried at once with the same request_id through the same or another
        gateway; a request that got no answer is retried the same way. Returns the 200 body or None."""
        rid = self.next_id("r")
        body = {"ttl_ms": ttl_ms, "wait_ms": wait_ms, "owner": self.id, "request_id": rid}
        if kind == "set":
            body["names"] = name
            path = "/v1/locksets/acquire"
        elif kind == "lock":
            path = f"/v1/locks/{name}/acquire"
        else:
            body["limit"] = self.run.sems[name]
            path = f"/v1/semaphores/{name}/acquire"
        ev = "set" if kind == "set" else "acq"
        base = {"names": name} if kind == "set" else {"kind": kind, "name": name}
        self.last = (path, body, ev, base)
        retry = False
        if may_reset and wait_ms > 0 and self.rng.random() < 0.3:
            port = self.run.port(self.rng)
            after = self.rng.uniform(0.01, min(wait_ms / 1000.0, 1.0))
            t0 = now_ms()
            got = raw_attempt(port, path, body, after)
            if got is None:
                self.run.rec("reset", rid=rid, after_ms=int(after * 1000), t0=t0, **base)
                if self.rng.random() < 0.5:
                    time.sleep(self.rng.uniform(0, 0.05))
                retry = True
            else:
                status, rb = got
                self.run.rec(ev, rid=rid, status=status, code=code_of(rb), body=rb, t0=t0, t1=now_ms(),
                             **base)
                return rb if status == 200 else None
        twin = None
        if may_reset and not retry and wait_ms > 0 and self.rng.random() < self.run.args.twins:
            twin = threading.Thread(target=self.first_of_twins, args=(path, body, ev, base))
            twin.start()
            time.sleep(self.rng.uniform(0, min(wait_ms / 1000.0, 0.5)))
            retry = True
        got = None
        for attempt in range(4):
            port, t0, t1, status, rb = self.ask(path, body, wait_ms)
            self.run.rec(ev, rid=rid, status=status, code=code_of(rb), body=rb, t0=t0, t1=t1, retry=retry,
                         gw=port, **base)
            if status is not None and status < 500:
                got = rb if status == 200 else None
                break
            retry = True
            if time.time() > self.run.end_at + 10:
                break
        if twin is not None:
            twin.join()
            if got is None and self.twin_answer is not None:
                got = self.twin_answer  # the first answered the lease: it is held, so hold and release it
        return got

    def first_of_twins(self, path: str, body: dict, ev: str, base: dict) -> None:
        """The first of two requests with one request_id, left open while the second goes through another
        gateway: one of them is answered the lease (or both the same), the other 409 conflict."""
        self.twin_answer = None
        port = self.run.port(self.rng)
        t0 = now_ms()
        got = raw_attempt(port, path, body, body["wait_ms"] / 1000.0 + 15.0)
        status, rb = got if got is not None else (None, None)
        self.run.rec(ev, rid=body["request_id"], status=status, code=code_of(rb), body=rb, t0=t0, t1=now_ms(),
                     twin=True, gw=port, **base)
        if status == 200:
            self.twin_answer = rb

    def ask_again(self) -> None:
        """The last acquire sent again while its lease holds, as after a lost answer: the same request_id must
        answer the same lease (or 410 once it ended), never another."""
        path, body, ev, base = self.last
        port, t0, t1, status, rb = self.ask(path, body, body["wait_ms"])
        self.run.rec(ev, rid=body["request_id"], status=status, code=code_of(rb), body=rb, t0=t0, t1=t1,
                     retry=True, gw=port, **base)

    # -- holding --

    def leases_of(self, kind: str, name, rb: dict) -> list[dict]:
        if kind == "set":
            return [{"kind": "lock", "name": g["lock"], "fence": g["fence"], "token": g["token"],
                     "exp": g["expires_at_ms"]} for g in rb["locks"]]
        return [{"kind": kind, "name": name, "fence": rb["fence"], "token": rb["token"],
                 "exp": rb["expires_at_ms"]}]

    def renew(self, kind: str, ls: list[dict]) -> bool:
        if kind == "set":
            path, body = "/v1/locksets/renew", {"tokens": [x["token"] for x in ls]}
        else:
            x = ls[0]
            path = f"/v1/{'locks' if kind == 'lock' else 'semaphores'}/{x['name']}/renew"
            body = {"token": x["token"]}
        port = self.run.port(self.rng)
        t0 = now_ms()
        status, rb = self.conn.call(port, "POST", path, body)
        t1 = now_ms()
        ok = True
        for x in ls:
            f = {"kind": x["kind"], "name": x["name"], "fence": x["fence"], "t0": t0, "t1": t1, "status": status,
                 "code": code_of(rb)}
            if status == 200:
                ans = rb if kind != "set" else next(g for g in rb["locks"] if g["lock"] == x["name"])
                f["exp"] = x["exp"] = ans["expires_at_ms"]
            elif status == 410 and kind == "set" and rb.get("lock") != x["name"]:
                f["status"] = None  # renewed or not: this answer names another lock
            elif status is not None:
                ok = False
            self.run.rec("renew", **f)
        return ok and status == 200

    def release(self, kind: str, ls: list[dict]) -> None:
        if kind == "set":
            path, body = "/v1/locksets/release", {"tokens": [x["token"] for x in ls]}
        else:
            path = f"/v1/{'locks' if kind == 'lock' else 'semaphores'}/{ls[0]['name']}/release"
            body = {"token": ls[0]["token"]}
        first = None
        for again in range(2 if self.rng.random() < 0.3 else 1):
            port = self.run.port(self.rng)
            t0 = now_ms()
            status, rb = self.conn.call(port, "POST", path, body)
            t1 = now_ms()
            for x in ls:
                st = status
                if kind == "set" and status == 410 and rb.get("lock") != x["name"]:
                    st = 200  # the others are released all the same
                self.run.rec("rel", kind=x["kind"], name=x["name"], fence=x["fence"], status=st,
                             code=code_of(rb), t0=t0, t1=t1, again=again > 0, first=first)
            if first is None:
                first = status

    def write(self, x: dict, stale: bool = False) -> None:
        lock, token, fence = x["name"], x["token"], x["fence"]
        wid = f"{self.next_id('w')}-f{fence}"
        hdrs = {"Fence-Token": token}
        if self.rng.random() < 0.6:
            res, method = f"pg:{TABLE}/{self.run.row(lock)}", "PATCH"
            path, body = f"/v1/pg/{TABLE}/{self.run.row(lock)}", {"set": {"note": wid}}
        else:
            res, method = f"redis:{self.run.rkey(lock)}", "PUT"
            path, body = f"/v1/redis/{self.run.rkey(lock)}", {"value": wid}
        port = self.run.port(self.rng)
        t0 = now_ms()
        status, rb = self.conn.call(port, method, path, body, hdrs)
        self.run.rec("write", res=res, lock=lock, fence=fence, wid=wid, status=status, code=code_of(rb),
                     reason=rb.get("reason") if isinstance(rb, dict) else None, t0=t0, t1=now_ms(), stale=stale)

    def hold(self, kind: str, ls: list[dict], ttl_ms: int) -> None:
        """Holds for a while: renews every third of the lease (sometimes not, letting it lapse), writes to each
        lock's Postgres row and Redis key under its token, lets one lock of a set go early now and then (by its
        own token, as any lock), then releases (sometimes twice)."""
        hold_ms = self.rng.choice([0, 30, 150, ttl_ms // 2, ttl_ms * 2])
        lapse = self.rng.random() < 0.15
        writes = self.rng.randint(0, 3) if kind != "sem" else 0
        again = self.rng.random() < 0.2
        part = kind == "set" and len(ls) > 1 and self.rng.random() < 0.25
        held = ls
        start = time.monotonic()
        while True:
            if again and self.rng.random() < 0.5:
                self.ask_again()
                again = False
            if part and self.rng.random() < 0.5:
                early = self.rng.choice(ls)
                self.release("lock", [early])
                ls = [x for x in ls if x is not early]
                part = False
            if writes and self.rng.random() < 0.6:
                self.write(self.rng.choice(ls))
                writes -= 1
            left = hold_ms / 1000.0 - (time.monotonic() - start)
            if left <= 0:
                break
            time.sleep(min(ttl_ms / 3000.0, left))
            if not lapse and not self.renew(kind, ls):
                break
        while writes:
            self.write(self.rng.choice(ls))
            writes -= 1
        if kind != "sem":
            with self.run.rlock:
                self.run.old.extend((x["name"], x["token"], x["fence"]) for x in held)
                del self.run.old[:-40]
        self.release(kind, ls)

    # -- actions --

    def do_lock(self) -> None:
        name = self.rng.choice(self.run.locks)
        ttl, wait = self.rng.choice(TTLS), self.rng.choice(WAITS)
        rb = self.acquire("lock", name, wait, ttl)
        if rb:
            self.hold("lock", self.leases_of("lock", name, rb), ttl)

    def do_set(self) -> None:
        names = self.rng.sample(self.run.locks, self.rng.randint(2, 4))  # random order, overlapping sets
        ttl, wait = self.rng.choice(TTLS), self.rng.choice(WAITS)
        rb = self.acquire("set", names, wait, ttl)
        if rb:
            self.hold("set", self.leases_of("set", names, rb), ttl)

    def do_sem(self) -> None:
        name = self.rng.choice(sorted(self.run.sems))
        ttl, wait = self.rng.choice(TTLS), self.rng.choice(WAITS)
        rb = self.acquire("sem", name, wait, ttl)
        if rb:
            self.hold("sem", self.leases_of("sem", name, rb), ttl)

    def do_stale(self) -> None:
        with self.run.rlock:
            old = self.rng.choice(self.run.old) if self.run.old else None
        if old:
            self.write({"name": old[0], "token": old[1], "fence": old[2]}, stale=True)

    def run_loop(self) -> None:
        acts = [(self.do_lock, 35), (self.do_set, 30), (self.do_sem, 20), (self.do_stale, 15)]
        funcs, weights = zip(*acts)
        while time.time() < self.run.end_at:
            self.rng.choices(funcs, weights)[0]()
            if self.rng.random() < 0.3:
                time.sleep(self.rng.uniform(0, 0.1))


def revoker(run: Run, rng: random.Random) -> None:
    """An operator revoking now and then: a lock's holder, or a semaphore holder by a fence it was granted."""
    conn = Conn()
    while time.time() < run.end_at:
        time.sleep(rng.uniform(0.3, 1.0))
        port = run.port(rng)
        if rng.random() < 0.7:
            name, kind, body = rng.choice(run.locks), "lock", {"reason": "mix"}
            path = f"/v1/locks/{name}/revoke"
        else:
            name, kind = rng.choice(sorted(run.sems)), "sem"
            with run.rlock:
                fences = [r["body"]["fence"] for r in run.records[-300:]
                          if r["ev"] == "acq" and r.get("kind") == "sem" and r["name"] == name and r["status"] == 200]
            if not fences:
                continue
            body = {"fence": rng.choice(fences), "reason": "mix"}
            path = f"/v1/semaphores/{name}/revoke"
        t0 = now_ms()
        status, rb = conn.call(port, "POST", path, body)
        run.rec("revoke", kind=kind, name=name, status=status, t0=t0, t1=now_ms(),
                fence=rb.get("revoked_fence") if status == 200 else None)


def fifo_prober(run: Run, rng: random.Random) -> None:
    """Rounds of: hold the FIFO lock, queue three waiters one at a time (each sent once the status shows the one
    before it queued) through random gateways, release, and record the order of their fences."""
    me = Client(run, 900)
    waiters = [Client(run, 901 + i) for i in range(3)]
    conn = Conn()
    while time.time() < run.end_at - 2:
        rb = me.acquire("lock", run.fifo_lock, 3000, 2500, may_reset=False)
        if not rb:
            continue
        holder = me.leases_of("lock", run.fifo_lock, rb)
        grants: list = [None] * 3
        threads = []
        ok = True
        for i in range(3):
            w = waiters[i]

            def wait_turn(i=i, w=w):
                got = w.acquire("lock", run.fifo_lock, 8000, 1000, may_reset=False)
                if got:
                    grants[i] = (i, got["fence"])
                    w.release("lock", w.leases_of("lock", run.fifo_lock, got))
            t = threading.Thread(target=wait_turn)
            t.start()
            threads.append(t)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                st, sb = conn.call(run.port(rng), "GET", f"/v1/locks/{run.fifo_lock}")
                if st == 200 and sb.get("waiting", 0) >= i + 1:
                    break
                time.sleep(0.01)
            else:
                ok = False
                break
        me.release("lock", holder)
        for t in threads:
            t.join()
        if ok:
            run.rec("fifo", name=run.fifo_lock, grants=grants)
        time.sleep(rng.uniform(0.2, 0.5))


def killer(run: Run, rng: random.Random) -> None:
    time.sleep(rng.uniform(0.3, 0.6) * run.args.seconds)
    run.rec("kill", t0=now_ms())
    run.pool.kill_and_replace(rng, rng.uniform(0.5, 2.0))


def gather(run: Run) -> dict:
    """What Postgres and the gateway hold at the end, for the judge."""
    pattern = "%" + run.tag + "%"
    hist_rows = psql("SELECT id, coalesce(note, '') FROM public.adv_history WHERE id LIKE :'p' ORDER BY seq",
                     {"p": pattern})
    history: dict[str, list[int]] = {}
    history_wids: dict[str, list[str]] = {}
    for line in hist_rows:
        key, note = line.split("|", 1)
        if "-f" not in note:
            continue
        res = f"pg:{TABLE}/{key}"
        history.setdefault(res, []).append(int(note.rsplit("-f", 1)[1]))
        history_wids.setdefault(res, []).append(note)
    rows = psql("SELECT resource, presented_fence, count(*) FROM fencegate.rejections WHERE resource LIKE :'p' "
                "GROUP BY 1, 2", {"p": pattern})
    audits = {(r, int(f)): int(n) for r, f, n in (line.split("|") for line in rows)}
    conn = Conn()
    port = run.pool.ports()[0]
    finals = {}
    for res, kind, key in run.resources():
        if kind == "pg":
            st, b = conn.call(port, "GET", f"/v1/pg/{TABLE}/{key}")
            finals[res] = (b["row"].get("note"), b.get("fence")) if st == 200 else (None, None)
        else:
            st, b = conn.call(port, "GET", f"/v1/redis/{key}")
            finals[res] = (b.get("value"), b.get("fence")) if st == 200 else (None, None)
    return {"history": history, "history_wids": history_wids, "audits": [[k[0], k[1], n] for k, n in audits.items()],
            "finals": finals}


def left_held(run: Run, timeout_s: float) -> dict[str, str]:
    """Locks and semaphores still held (or with waiters) once every client stopped, after up to timeout_s (a
    killed gateway's unanswered grants are given back within waiter_lease_ms, its leases at their TTL)."""
    conn = Conn()
    deadline = time.monotonic() + timeout_s
    while True:
        port = run.pool.ports()[0]
        held = {}
        for kind, names, who in (("locks", run.locks + [run.fifo_lock], "held"), ("semaphores", run.sems, "holders")):
            for name in names:
                st, b = conn.call(port, "GET", f"/v1/{kind}/{name}")
                if st != 200:
                    held[name] = f"status answered {st}"
                elif b[who] or b["waiting"]:
                    held[name] = f"{who}={b[who]} waiting={b['waiting']}"
        if not held or time.monotonic() > deadline:
            return held
        time.sleep(0.2)


def judge_file(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        kept = json.load(f)
    return report(kept)


def report(kept: dict) -> int:
    audits = {(r, f): n for r, f, n in kept["audits"]}
    finals = {k: tuple(v) for k, v in kept["finals"].items()}
    bad, cov = mix_check.judge(kept["records"], kept["limits"], kept["history"], kept["history_wids"], audits,
                               finals, kept["held"])
    print("mix: coverage " + json.dumps(cov, sort_keys=True), flush=True)
    needed = ["lease windows", "lock sets answered 200", "resets while waiting", "accepted writes",
              "refused stale_fence", "revokes that ended a lease", "fifo rounds", "second releases"]
    empty = [k for k in needed if not cov.get(k)]
    for b in bad:
        print("VIOLATION " + b, flush=True)
    for o in mix_check.odd_answers(kept["records"]):
        print("odd: " + o, flush=True)
    if empty:
        print(f"mix: nothing to check for {empty}", flush=True)
    return 1 if bad or empty else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--clients", type=int, default=12)
    p.add_argument("--gateways", type=int, default=3)
    p.add_argument("--kill", action="store_true", help="SIGKILL one gateway mid-run and start another")
    p.add_argument("--cluster", action="store_true", help="run on a cluster lab of its own")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--twins", type=float, default=0.15,
                   help="share of acquires sent twice at once with one request_id, through two gateways")
    p.add_argument("--keep", help="write records and end state to this JSON file")
    p.add_argument("--judge", help="judge a file written by --keep and exit")
    args = p.parse_args(argv)
    if args.judge:
        return judge_file(args.judge)
    lab = None
    if args.cluster:
        from cluster_lab import ClusterLab
        lab = ClusterLab()
        lab.start()
        os.environ["FG_TEST_REDIS_URL"] = lab.url()
    run = Run(args)
    print(f"mix: seed {run.seed} tag {run.tag} clients {args.clients} gateways {args.gateways} "
          f"kill {args.kill} cluster {args.cluster}", flush=True)
    install_history()
    try:
        psql("INSERT INTO public.invoices (id, note) SELECT unnest(string_to_array(:'ids', ',')), '' "
             "ON CONFLICT DO NOTHING", {"ids": ",".join(run.row(n) for n in run.locks + [run.fifo_lock])})
        run.pool = Pool(args.gateways)
        run.end_at = time.time() + args.seconds
        threads = [threading.Thread(target=Client(run, i).run_loop) for i in range(args.clients)]
        threads.append(threading.Thread(target=revoker, args=(run, random.Random(run.seed + 1))))
        threads.append(threading.Thread(target=fifo_prober, args=(run, random.Random(run.seed + 2))))
        if args.kill:
            threads.append(threading.Thread(target=killer, args=(run, random.Random(run.seed + 3))))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        held = left_held(run, max(TTLS) / 1000.0 + 8.0)
        time.sleep(1.0)  # Redis refusals reach the audit table through the janitor
        kept = {"records": run.records, "limits": run.sems, "held": held, **gather(run)}
        for _ in range(20):
            if report_quiet(kept):
                break
            time.sleep(0.5)
            kept.update(gather(run))
        if args.keep:
            with open(args.keep, "w", encoding="utf-8") as f:
                json.dump(kept, f)
        return report(kept)
    finally:
        uninstall_history()
        if run.pool:
            run.pool.stop()
        if lab:
            lab.stop()


def report_quiet(kept: dict) -> bool:
    """True once the audit table agrees with the refusals (the janitor copies Redis refusals late)."""
    audits = {(r, f): n for r, f, n in kept["audits"]}
    finals = {k: tuple(v) for k, v in kept["finals"].items()}
    bad, _ = mix_check.judge(kept["records"], kept["limits"], kept["history"], kept["history_wids"], audits,
                             finals, kept["held"])
    return not any("audited" in b for b in bad)


if __name__ == "__main__":
    sys.exit(main())
