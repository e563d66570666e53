# SPDX-License-Identifier: Apache-2.0
"""One client process of the fault lab: acquire -> two fenced writes -> release, in a loop, through the load
balancer, retrying with the same request_id (acquire), the same row (write) and the same token (release) after
a 503, a refused or broken connection, or a timeout. Every HTTP request it makes is one JSON line of its record
file, so the checks of test_ha.py judge the run from what clients saw, not from what the gateway says.

Owns: the client side of the lab. Must not: read Redis or Postgres, or retry a write that was refused as stale.

usage: ha_client.py <base url> <client id> <record file> <seconds> <resources>
"""

import http.client
import json
import random
import sys
import time

TTL_MS = 2000          # short leases: an outage longer than this hands locks on, and old tokens go stale
WAIT_MS = 1500         # how long an acquire queues
HTTP_TIMEOUT_S = 3.0   # a paused gateway is given up on after this long
OP_DEADLINE_S = 20.0   # one logical operation (with its retries) gives up after this long


class Recorder:
    """The record file: one JSON object per HTTP request."""

    def __init__(self, path):
        self.f = open(path, "w", encoding="utf-8")

    def add(self, **fields):
        self.f.write(json.dumps(fields) + "\n")

    def close(self):
        self.f.close()


class Http:
    """A keep-alive connection to the balancer, reopened after any failure."""

    def __init__(self, host, port):
        self.host, self.port, self.conn = host, port, None

    def call(self, method, path, body, headers=None):
        """(status, problem type or None, body) or (error name, None, None) on a transport failure."""
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=HTTP_TIMEOUT_S)
            self.conn.request(method, path, json.dumps(body), hdrs)
            resp = self.conn.getresponse()
            raw = resp.read()
            if resp.getheader("Connection", "").lower() == "close":
                self.reset()
            try:
                data = json.loads(raw) if raw else None
            except ValueError:
                data = None
            kind = data.get("type") if isinstance(data, dict) and resp.status >= 400 else None
            return resp.status, kind, data
        except TimeoutError:
            self.reset()
            return "timeout", None, None
        except (OSError, http.client.HTTPException) as e:
            self.reset()
            return type(e).__name__, None, None

    def reset(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None


def retryable(status):
    return not isinstance(status, int) or status in (502, 503, 504)


def main():
    base, cid, path, seconds, nres = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
    host, port = base.replace("http://", "").split(":")
    http_ = Http(host, int(port))
    rec = Recorder(path)
    rng = random.Random(cid)
    until = time.time() + seconds
    n = 0

    def call(op, opid, res, method, url, body, headers=None, **extra):
        t0 = time.time()
        status, kind, data = http_.call(method, url, body, headers)
        rec.add(op=op, opid=opid, res=res, t0=t0, t1=time.time(), status=status, type=kind, **extra)
        return status, kind, data

    while time.time() < until:
        n += 1
        res = f"r{rng.randrange(nres)}"
        lock = f"/v1/locks/ha:{res}"
        lease, attempt = None, 0
        started = time.time()
        rid = f"{cid}-{n}-{attempt}"
        while lease is None and time.time() - started < OP_DEADLINE_S and time.time() < until:
            t_try = time.time()
            status, kind, data = call("acquire", f"{cid}-{n}-a", res, "POST", f"{lock}/acquire",
                                      {"ttl_ms": TTL_MS, "wait_ms": WAIT_MS, "owner": cid, "request_id": rid},
                                      rid=rid)
            if status == 200:
                lease = (data["token"], data["fence"])
                rec.add(op="granted", opid=f"{cid}-{n}-a", res=res, rid=rid, fence=data["fence"], t0=t_try,
                        t1=time.time())
            elif retryable(status):
                time.sleep(0.05)
            else:
                attempt += 1
                rid = f"{cid}-{n}-{attempt}"
        if lease is None:
            continue
        token, fence = lease
        lost = False
        for seq in (1, 2):
            t_op = time.time()
            while not lost and time.time() - t_op < OP_DEADLINE_S:
                status, kind, _ = call("write", f"{cid}-{n}-w{seq}", res, "PUT", f"/v1/pg/ha_rows/{res}",
                                       {"row": {"holder": cid, "fence": fence, "seq": n * 10 + seq}},
                                       {"Fence-Token": token, "Fence-Owner": cid}, fence=fence, seq=n * 10 + seq)
                if status == 200:
                    break
                if not retryable(status):
                    lost = True
                time.sleep(0.05)
        t_op = time.time()
        while time.time() - t_op < OP_DEADLINE_S:
            status, _, _ = call("release", f"{cid}-{n}-r", res, "POST", f"{lock}/release", {"token": token},
                                fence=fence)
            if not retryable(status):
                break
            time.sleep(0.05)
    rec.close()


if __name__ == "__main__":
    main()
