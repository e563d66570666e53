"""A frozen Postgres (every server process SIGSTOPped: connections stay open, nothing answers) stalls audit
rows, never leases (issue 16, item 4):

- a stale Redis write is answered 409 at once; its audit record follows from the stream once Postgres
  thaws;
- the gateway's liveness mark stays fresh, so its parked waiter W is granted on release in FIFO order
  (not skipped as if its gateway were dead, letting a later arrival in first);
- a waiter's deadline does not slip.

Broken variants caught (each tried, then reverted): the audit drain called from the lease janitor's loop
again (the liveness mark ran out during the freeze, W and the later arrival were dropped, and the deadline
answer came seconds late); the stale-write handler copying its audit record to Postgres before answering
(no answer until the Postgres deadline).

Owns: these properties. Must not: leave Postgres stopped (SIGCONT in a cleanup, also on failure).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Client, Gateway, Redis, psql, same_slot, slot_key, wait_for  # noqa: E402
from pg_helpers import unique  # noqa: E402

WAITER_LEASE_MS = 1500
FREEZE_S = 3.5  # over twice the waiter lease


def postgres_pids() -> list[int]:
    """The postmaster of the test cluster and all its children."""
    with open(os.path.join(os.environ["FG_TEST_SVC_DIR"], "pg", "data", "postmaster.pid")) as f:
        master = int(f.readline())
    children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
    return [master, *map(int, children)]


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Timed(threading.Thread):
    """A POST in the background; keeps the answer and when it came."""

    def __init__(self, port: int, path: str, body: dict, headers: dict | None = None, method: str = "POST"):
        super().__init__(daemon=True)
        self.port, self.path, self.body, self.headers, self.method = port, path, body, headers, method
        self.response = None
        self.started = self.done = 0.0

    def run(self) -> None:
        self.started = time.monotonic()
        with Client(self.port, timeout=60) as c:
            self.response = c.request(self.method, self.path, self.body, self.headers)
        self.done = time.monotonic()


class PostgresStall(unittest.TestCase):
    def test_frozen_postgres_stalls_no_lease(self):
        gw = Gateway(config={"redis_prefixes": ["app:"], "waiter_lease_ms": WAITER_LEASE_MS, "poll_ms": 500})
        self.addCleanup(gw.stop)
        c = gw.client(timeout=30)
        self.addCleanup(c.close)
        lock = unique("stall")
        old_lock, new_lock, key = same_slot("old", "new", "app:stall")  # old's fence below new's, on a cluster too
        holder = c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 60000}).body
        old = c.post(f"/v1/locks/{old_lock}/acquire", {"ttl_ms": 60000}).body
        new = c.post(f"/v1/locks/{new_lock}/acquire", {"ttl_ms": 60000}).body
        self.assertEqual(c.request("PUT", f"/v1/redis/{key}", {"value": "new"},
                                   {"Fence-Token": new["token"]}).status, 200)
        w = Timed(gw.port, f"/v1/locks/{lock}/acquire", {"ttl_ms": 60000, "wait_ms": 60000})
        w.start()
        wait_for(lambda: c.get(f"/v1/locks/{lock}").body["waiting"] == 1, what="W parked")
        later = Timed(gw.port, f"/v1/locks/{lock}/acquire", {"ttl_ms": 60000, "wait_ms": 60000})
        later.start()
        wait_for(lambda: c.get(f"/v1/locks/{lock}").body["waiting"] == 2, what="a later arrival parked")

        pids = postgres_pids()
        self.addCleanup(signal_all, pids, signal.SIGCONT)
        signal_all(pids, signal.SIGSTOP)
        frozen_at = time.monotonic()
        stale = Timed(gw.port, f"/v1/redis/{key}", {"value": "old"}, {"Fence-Token": old["token"]}, "PUT")
        stale.start()
        short = Timed(gw.port, f"/v1/locks/{lock}/acquire", {"ttl_ms": 60000, "wait_ms": 1000})
        short.start()
        stale.join(10)
        self.assertIsNotNone(stale.response, "a stale Redis write waited for the frozen Postgres")
        self.assertEqual(stale.response.status, 409, stale.response)
        self.assertLess(stale.done - stale.started, 2.0, "a stale Redis write waited for Postgres")
        short.join(10)
        self.assertIsNotNone(short.response, "a waiter's deadline slipped while Postgres was frozen")
        self.assertEqual(short.response.status, 409, short.response)
        self.assertLess(short.done - short.started, 2.0, "a waiter's deadline slipped while Postgres was frozen")
        time.sleep(max(0.0, FREEZE_S - (time.monotonic() - frozen_at)))
        with Redis() as r:
            alive = r.cmd("ZSCORE", slot_key("fg:gateways", lock), gw_instance(gw))  # the mark W's grant reads
            now_ms = int(r.cmd("TIME")[0]) * 1000
        self.assertIsNotNone(alive, "the gateway's liveness mark ran out while Postgres was frozen")
        self.assertGreater(int(alive), now_ms)
        self.assertEqual(c.post(f"/v1/locks/{lock}/release", {"token": holder["token"]}).status, 200)
        w.join(10)
        self.assertIsNotNone(w.response, "W was not granted on release while Postgres was frozen")
        self.assertEqual(w.response.status, 200, w.response)
        self.assertIsNone(later.response, "the later arrival was answered before W's lease ended")
        self.assertEqual(c.get(f"/v1/locks/{lock}").body["waiting"], 1)
        signal_all(pids, signal.SIGCONT)
        rows = wait_for(lambda: psql("SELECT presented_fence FROM fencegate.rejections WHERE resource = :'r'",
                                     {"r": "redis:" + key}), timeout=30, interval=0.2,
                        what="the audit record, copied after the thaw")
        self.assertEqual(rows, [str(old["fence"])])
        self.assertEqual(c.post(f"/v1/locks/{lock}/release", {"token": w.response.body["token"]}).status, 200)
        later.join(10)
        self.assertEqual(later.response.status, 200, later.response)
        c.post(f"/v1/locks/{lock}/release", {"token": later.response.body["token"]})


def gw_instance(gw: Gateway) -> str:
    """The instance id a gateway logged when it started serving."""
    for line in gw.log_text().splitlines():
        if '"serving"' in line and '"instance"' in line:
            return line.split('"instance":"', 1)[1].split('"', 1)[0]
    raise AssertionError("the gateway did not log its instance id")


if __name__ == "__main__":
    unittest.main()
