# SPDX-License-Identifier: Apache-2.0
"""One randomized client of the adversarial suite, run as its own OS process (standard library only).

Owns: acting like a hostile but honest user of the gateway (locks, semaphores, fenced writes to the
Postgres row and Redis key each lock guards) and recording, from the client's side, everything it saw:
one JSON object per line in its own file, flushed per line, so a SIGKILL loses at most the line being
written. It must not: judge the results (test_adversarial.py does, from these records and from Postgres),
or coordinate with other workers.

    python3 adv_worker.py SPEC_JSON
    python3 adv_worker.py --park PORT LOCK    (only queues on LOCK and waits to be killed)

SPEC_JSON: {"id", "seed", "out", "ports": [gateway ports], "locks": [names], "rows": {lock: row key},
"rkeys": {lock: redis key}, "storm": lock name, "sem": name, "sem_limit": n, "end_at": epoch s,
"ttls": [ms], "table": "invoices"}

Records ("ev" field), times "t" in epoch ms from time.time() on the shared machine clock:
  acq      kind, name, rid, gw, wait_ms, ttl_ms          before an acquire request is sent
  grant    kind, name, rid, fence, token, exp, t_first   a 200 to an acquire (t_first: first send of rid)
  acq_err  kind, name, rid, status, code                 any other answer, or "timeout"/"conn" for none
  renew    kind, name, fence, exp | renew_err ... status, code
  exit     kind, name, fence                             the holder stops using the lease (before release)
  rel      kind, name, fence, status, code
  wreq     wid, res, fence, op                           before a fenced write is sent
  wresp    wid, res, fence, status, code
  pause    name, fence                                   about to SIGSTOP itself while holding
  disc     name, after_ms, got                           a waiter that hung up mid-wait
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

from harness import Client  # noqa: E402


def now_ms() -> float:
    return time.time() * 1000.0


class Worker:
    def __init__(self, spec: dict):
        self.spec = spec
        self.id = spec["id"]
        self.rng = random.Random(spec["seed"])
        self.out = open(spec["out"], "a", encoding="utf-8")
        self.clients = [Client(p, timeout=30) for p in spec["ports"]]
        self.serial = 0
        self.old_tokens: list[tuple[str, str, int]] = []  # (lock, token, fence) of ended leases

    # -- records --

    def rec(self, ev: str, **fields) -> None:
        fields["ev"] = ev
        fields["w"] = self.id
        fields.setdefault("t", now_ms())
        self.out.write(json.dumps(fields) + "\n")
        self.out.flush()

    def next_id(self, what: str) -> str:
        self.serial += 1
        return f"{self.id}-{what}{self.serial}"

    def client(self) -> tuple[int, Client]:
        i = self.rng.randrange(len(self.clients))
        return i, self.clients[i]

    def call(self, client: Client, method: str, path: str, body=None, headers=None, timeout: float = 30):
        """(status, body) or (None, "timeout"|"conn") when no answer came."""
        try:
            r = client.request(method, path, body, headers, timeout=timeout)
            return r.status, r.body
        except socket.timeout:
            return None, "timeout"
        except (OSError, ConnectionError) as e:  # refused, reset, closed
            return None, f"conn:{type(e).__name__}"
        except Exception as e:  # http.client's own errors (BadStatusLine...)
            return None, f"conn:{type(e).__name__}"

    @staticmethod
    def code(body) -> str:
        if isinstance(body, dict) and isinstance(body.get("type"), str):
            return body["type"].rsplit("/", 1)[-1]
        return str(body)[:80]

    # -- leases --

    def acquire(self, kind: str, name: str, wait_ms: int, ttl_ms: int) -> dict | None:
        """Acquires with a request_id; a client-side timeout (sometimes deliberately short) is retried
        with the same request_id. Returns the grant record or None."""
        rid = self.next_id("r")
        path = f"/v1/{'locks' if kind == 'lock' else 'semaphores'}/{name}/acquire"
        body = {"ttl_ms": ttl_ms, "wait_ms": wait_ms, "owner": self.id, "request_id": rid}
        if kind == "sem":
            body["limit"] = self.spec["sem_limit"]
        t_first = None
        short = self.rng.random() < 0.15
        for attempt in range(4):
            gi, c = self.client()
            timeout = wait_ms / 1000.0 + 20.0
            if short and attempt == 0 and wait_ms > 1000:
                timeout = self.rng.uniform(0.2, wait_ms / 1000.0 * 0.8)
            self.rec("acq", kind=kind, name=name, rid=rid, gw=gi, wait_ms=wait_ms, ttl_ms=ttl_ms,
                     attempt=attempt)
            if t_first is None:
                t_first = now_ms()
            status, rb = self.call(c, "POST", path, body, timeout=timeout)
            if status == 200:
                g = dict(kind=kind, name=name, rid=rid, fence=rb["fence"], token=rb["token"],
                         exp=rb["expires_at_ms"], t_first=t_first)
                self.rec("grant", **g)
                return g
            self.rec("acq_err", kind=kind, name=name, rid=rid, status=status, code=self.code(rb))
            if status is not None:
                return None
            if time.time() > self.spec["end_at"] + 5:
                return None
        return None

    def retry_acquire_after_grant(self, g: dict, ttl_ms: int) -> None:
        """As if the grant's reply had been lost: the same request_id again must give the same lease
        (or 410 once it ended), never a second one."""
        path = f"/v1/{'locks' if g['kind'] == 'lock' else 'semaphores'}/{g['name']}/acquire"
        body = {"ttl_ms": ttl_ms, "wait_ms": 0, "owner": self.id, "request_id": g["rid"]}
        if g["kind"] == "sem":
            body["limit"] = self.spec["sem_limit"]
        _, c = self.client()
        self.rec("acq", kind=g["kind"], name=g["name"], rid=g["rid"], gw=-1, wait_ms=0, ttl_ms=ttl_ms,
                 attempt=99)
        status, rb = self.call(c, "POST", path, body)
        if status == 200:
            self.rec("grant", kind=g["kind"], name=g["name"], rid=g["rid"], fence=rb["fence"],
                     token=rb["token"], exp=rb["expires_at_ms"], t_first=g["t_first"], retry=True)
            g["exp"] = max(g["exp"], rb["expires_at_ms"])
        else:
            self.rec("acq_err", kind=g["kind"], name=g["name"], rid=g["rid"], status=status,
                     code=self.code(rb), retry=True)

    def renew(self, g: dict) -> bool:
        path = f"/v1/{'locks' if g['kind'] == 'lock' else 'semaphores'}/{g['name']}/renew"
        _, c = self.client()
        status, rb = self.call(c, "POST", path, {"token": g["token"]})
        if status == 200:
            g["exp"] = rb["expires_at_ms"]
            self.rec("renew", kind=g["kind"], name=g["name"], fence=g["fence"], exp=rb["expires_at_ms"],
                     fence_back=rb.get("fence"))
            return True
        self.rec("renew_err", kind=g["kind"], name=g["name"], fence=g["fence"], status=status,
                 code=self.code(rb))
        return False

    def release(self, g: dict) -> None:
        self.rec("exit", kind=g["kind"], name=g["name"], fence=g["fence"])
        path = f"/v1/{'locks' if g['kind'] == 'lock' else 'semaphores'}/{g['name']}/release"
        for _ in range(2 if self.rng.random() < 0.25 else 1):
            _, c = self.client()
            status, rb = self.call(c, "POST", path, {"token": g["token"]})
            self.rec("rel", kind=g["kind"], name=g["name"], fence=g["fence"], status=status,
                     code=self.code(rb))

    # -- writes --

    def write(self, lock: str, token: str, fence: int) -> None:
        """One fenced write to the Postgres row or the Redis key that lock guards; the written value
        is a unique write id that also names the fence presented."""
        wid = f"{self.next_id('w')}-f{fence}"
        headers = {"Fence-Token": token}
        _, c = self.client()
        if self.rng.random() < 0.75:
            key = self.spec["rows"][lock]
            res = f"pg:{self.spec['table']}/{key}"
            if self.rng.random() < 0.7:
                op, method, body = "patch", "PATCH", {"set": {"note": wid}}
            else:
                op, method, body = "put", "PUT", {"row": {"customer": self.id, "amount_cents": fence,
                                                          "status": "open", "note": wid}}
            path = f"/v1/pg/{self.spec['table']}/{key}"
        else:
            key = self.spec["rkeys"][lock]
            res = f"redis:{key}"
            op, method, body, path = "rput", "PUT", {"value": wid}, f"/v1/redis/{key}"
        self.rec("wreq", wid=wid, res=res, fence=fence, op=op)
        status, rb = self.call(c, method, path, body, headers)
        if status == 404 and op == "patch":  # the row does not exist yet: create it
            op, method, body = "put", "PUT", {"row": {"customer": self.id, "amount_cents": fence,
                                                      "status": "open", "note": wid}}
            self.rec("wresp", wid=wid, res=res, fence=fence, status=status, code=self.code(rb))
            self.rec("wreq", wid=wid, res=res, fence=fence, op=op)
            status, rb = self.call(c, method, path, body, headers)
        extra = {}
        if status == 409 and isinstance(rb, dict):
            extra = {"presented": rb.get("presented_fence"), "current": rb.get("current_fence")}
        self.rec("wresp", wid=wid, res=res, fence=fence, status=status, code=self.code(rb), **extra)

    # -- behaviours --

    def hold(self, g: dict, lock: str | None, ttl_ms: int) -> None:
        """Holds the lease for a random time, sometimes several leases long while renewing, writing now
        and then; sometimes freezes itself (SIGSTOP) past the lease and writes after waking."""
        hold_ms = self.rng.choice([0, 50, 200, ttl_ms // 2, ttl_ms * 2, int(ttl_ms * 2.5)])
        writes = self.rng.randint(1, 3) if lock else 0
        start = time.monotonic()
        step = ttl_ms / 3000.0
        paused = lock is not None and self.rng.random() < 0.12
        while True:
            if writes and self.rng.random() < 0.6:
                self.write(lock, g["token"], g["fence"])
                writes -= 1
            left = hold_ms / 1000.0 - (time.monotonic() - start)
            if left <= 0:
                break
            time.sleep(min(step, left))
            if (time.monotonic() - start) * 1000 < hold_ms and not self.renew(g):
                break
        if paused:
            self.rec("pause", name=g["name"], fence=g["fence"], exp=g["exp"])
            os.kill(os.getpid(), signal.SIGSTOP)  # the orchestrator resumes it after the lease
            self.rec("resumed", name=g["name"], fence=g["fence"])
            self.write(lock, g["token"], g["fence"])
            if self.rng.random() < 0.5:
                self.renew(g)
        while writes:
            self.write(lock, g["token"], g["fence"])
            writes -= 1
        if lock is not None and self.rng.random() < 0.3:
            self.retry_acquire_after_grant(g, ttl_ms)
        self.release(g)
        if lock is not None:
            self.old_tokens.append((lock, g["token"], g["fence"]))
            del self.old_tokens[:-5]

    def do_lock(self) -> None:
        storm = self.rng.random() < 0.35
        lock = self.spec["storm"] if storm else self.rng.choice(self.spec["locks"])
        ttl = self.rng.choice(self.spec["ttls"])
        wait = self.rng.choice([0, 500, 2000, 6000])
        g = self.acquire("lock", lock, wait, ttl)
        if g is not None:
            self.hold(g, lock, ttl)

    def do_sem(self) -> None:
        ttl = self.rng.choice(self.spec["ttls"])
        g = self.acquire("sem", self.spec["sem"], self.rng.choice([0, 1000, 4000]), ttl)
        if g is not None:
            self.hold(g, None, ttl)

    def do_stale_write(self) -> None:
        """Writes with a token whose lease already ended: refused iff a newer fence was stored."""
        if self.old_tokens:
            lock, token, fence = self.rng.choice(self.old_tokens)
            self.write(lock, token, fence)

    def do_disconnect(self) -> None:
        """Queues on a lock over a raw socket and hangs up after a random moment. A grant that arrived
        before the hang-up is a real lease: it is recorded and released."""
        lock = self.rng.choice(self.spec["locks"] + [self.spec["storm"]])
        port = self.spec["ports"][self.rng.randrange(len(self.spec["ports"]))]
        rid = self.next_id("d")
        body = json.dumps({"ttl_ms": 2000, "wait_ms": 20000, "owner": self.id, "request_id": rid}).encode()
        req = (f"POST /v1/locks/{lock}/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        after = self.rng.uniform(0.05, 1.5)
        self.rec("acq", kind="lock", name=lock, rid=rid, gw=-2, wait_ms=20000, ttl_ms=2000, attempt=0)
        t_first = now_ms()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            return
        got = b""
        try:
            s.sendall(req)
            s.settimeout(after)
            deadline = time.monotonic() + after
            while b"\r\n\r\n" not in got or not self._complete(got):
                s.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except (socket.timeout, OSError):
            pass
        if got and self._complete(got):
            s.close()
            head, _, rb = got.partition(b"\r\n\r\n")
            status = int(head.split(b" ")[1])
            self.rec("disc", name=lock, after_ms=int(after * 1000), got=status)
            if status == 200:
                b = json.loads(rb)
                g = dict(kind="lock", name=lock, rid=rid, fence=b["fence"], token=b["token"],
                         exp=b["expires_at_ms"], t_first=t_first)
                self.rec("grant", **g)
                self.release(g)
            return
        s.close()  # hang up mid-wait (a partial answer counts as no answer)
        self.rec("disc", name=lock, after_ms=int(after * 1000), got=None)

    @staticmethod
    def _complete(raw: bytes) -> bool:
        head, sep, body = raw.partition(b"\r\n\r\n")
        if not sep:
            return False
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                return len(body) >= int(v.strip())
        return True

    def run(self) -> None:
        actions = [(self.do_lock, 50), (self.do_sem, 22), (self.do_stale_write, 10), (self.do_disconnect, 8)]
        funcs, weights = zip(*actions)
        self.rec("start")
        while time.time() < self.spec["end_at"]:
            self.rng.choices(funcs, weights)[0]()
            if self.rng.random() < 0.3:
                time.sleep(self.rng.uniform(0, 0.2))
        self.rec("done")


def park(port: int, lock: str, wait_ms: int = 50000) -> socket.socket:
    """Sends an acquire that waits, over a raw socket, and returns the socket without reading."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = json.dumps({"wait_ms": wait_ms}).encode()
    s.sendall((f"POST /v1/locks/{lock}/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    return s


if __name__ == "__main__":
    if sys.argv[1] == "--park":  # adv_worker.py --park PORT LOCK: a waiter to be killed
        sock = park(int(sys.argv[2]), sys.argv[3])
        time.sleep(120)
    else:
        Worker(json.loads(sys.argv[1])).run()
