# SPDX-License-Identifier: Apache-2.0
"""An explicit leak and sanitizer check (AddressSanitizer + LeakSanitizer + UBSan, the build scripts/test
makes): one gateway is driven through a scripted sequence that touches every path holding memory across
calls (granted and refused locks, parked waiters that are served, that time out, that hang up, that are
still parked at SIGTERM; semaphores; fenced Postgres writes applied, stale, missing and batched; fenced
Redis writes; the audit; bad input), then gets SIGTERM. It must exit 0 and its stderr must hold no
sanitizer report. Skipped (with a message) when FG_BIN is not instrumented.

Owns: that sequence. Must not: depend on timing beyond generous liveness waits.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adv_common import GATEWAY_CONFIG, TABLE, Gateway, run_tag, seed_from_env  # noqa: E402
from harness import Client, env, wait_for  # noqa: E402

REPORTS = ("LeakSanitizer", "AddressSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


def instrumented(path: str) -> bool:
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


def post_into(out: list, port: int, path: str, body: dict) -> None:
    with Client(port, timeout=30) as c:
        out.append(c.post(path, body))


class SanitizedShutdown(unittest.TestCase):
    def test_scripted_calls_then_sigterm_exit_clean(self):
        if not instrumented(env("FG_BIN")):
            self.skipTest("FG_BIN is not built with FG_SANITIZE=ON; run through scripts/test")
        tag = run_tag(seed_from_env())
        gw = Gateway(config=GATEWAY_CONFIG)
        self.addCleanup(gw.kill)
        c = gw.client()
        lock, row = f"{tag}:lk", f"{tag}-r"

        a = c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 5000, "request_id": "a"}).body
        self.assertEqual(c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 5000, "request_id": "a"}).status, 200)
        self.assertEqual(c.post(f"/v1/locks/{lock}/acquire", {}).status, 409)
        hdr = {"Fence-Token": a["token"]}
        self.assertEqual(c.request("PUT", f"/v1/pg/{TABLE}/{row}", {"row": {"note": "x", "amount_cents": 1}},
                                   hdr).status, 200)
        self.assertEqual(c.request("PATCH", f"/v1/pg/{TABLE}/{row}", {"set": {"note": "y"}}, hdr).status, 200)
        self.assertEqual(c.request("PATCH", f"/v1/pg/{TABLE}/{tag}-none", {"set": {"note": "y"}}, hdr).status, 404)
        self.assertEqual(c.request("PATCH", f"/v1/pg/{TABLE}/{row}", {"set": {"nope": 1}}, hdr).status, 400)
        self.assertEqual(c.post("/v1/pg/batch", {"ops": [{"op": "patch", "table": TABLE, "key": row,
                                                          "set": {"note": "z"}}]}, headers=hdr).status, 200)
        self.assertEqual(c.request("PUT", f"/v1/redis/app:{tag}", {"value": "v"}, hdr).status, 200)
        self.assertEqual(c.get(f"/v1/redis/app:{tag}").status, 200)

        # Waiters: one served by the release, one timing out, one hanging up mid-wait.
        served: list = []
        t = threading.Thread(target=post_into, args=(served, gw.port, f"/v1/locks/{lock}/acquire",
                                                      {"ttl_ms": 5000, "wait_ms": 20000}))
        t.start()
        wait_for(lambda: c.get(f"/v1/locks/{lock}").body["waiting"] == 1, timeout=20, what="a waiter")
        self.assertEqual(c.post(f"/v1/locks/{lock}/acquire", {"wait_ms": 200}).status, 409)
        s = socket.create_connection(("127.0.0.1", gw.port))
        body = b'{"wait_ms": 20000}'
        s.sendall(b"POST /v1/locks/%s/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (lock.encode(), len(body), body))
        wait_for(lambda: c.get(f"/v1/locks/{lock}").body["waiting"] == 2, timeout=20, what="two waiters")
        s.close()
        wait_for(lambda: c.get(f"/v1/locks/{lock}").body["waiting"] == 1, timeout=20, what="hang-up noticed")
        self.assertEqual(c.post(f"/v1/locks/{lock}/release", {"token": a["token"]}).status, 200)
        self.assertEqual(c.post(f"/v1/locks/{lock}/release", {"token": a["token"]}).status, 200)
        t.join(30)
        self.assertEqual(served[0].status, 200, served)
        b = served[0].body
        self.assertEqual(c.request("PATCH", f"/v1/pg/{TABLE}/{row}", {"set": {"note": "b"}},
                                   {"Fence-Token": b["token"]}).status, 200)
        stale = c.request("PATCH", f"/v1/pg/{TABLE}/{row}", {"set": {"note": "late"}}, hdr)
        self.assertEqual(stale.status, 409, stale)
        self.assertEqual(c.request("PUT", f"/v1/redis/app:{tag}", {"value": "b"},
                                   {"Fence-Token": b["token"]}).status, 200)
        self.assertEqual(c.request("PUT", f"/v1/redis/app:{tag}", {"value": "late"}, hdr).status, 409)
        self.assertEqual(c.get(f"/v1/audit/rejections?resource=pg:{TABLE}/{row}").status, 200)
        self.assertEqual(c.post(f"/v1/locks/{lock}/renew", {"token": b["token"]}).status, 200)

        # Semaphores, bad input, and a waiter still parked when SIGTERM comes.
        sem = f"{tag}:sem"
        s1 = c.post(f"/v1/semaphores/{sem}/acquire", {"limit": 1, "ttl_ms": 5000}).body
        self.assertEqual(c.post(f"/v1/semaphores/{sem}/acquire", {"limit": 2}).status, 409)
        self.assertEqual(c.post(f"/v1/semaphores/{sem}/renew", {"token": s1["token"]}).status, 200)
        self.assertEqual(c.post(f"/v1/semaphores/{sem}/release", {"token": s1["token"]}).status, 200)
        for bad in ("{", "[]", '{"ttl_ms": "x"}', '{"ttl_ms": 1}'):
            self.assertEqual(c.post(f"/v1/locks/{lock}/acquire", bad).status, 400)
        self.assertEqual(c.request("PATCH", f"/v1/pg/{TABLE}/{row}", {"set": {"note": "y"}},
                                   {"Fence-Token": "fgt1.l.1.x.y.z"}).status, 403)
        self.assertEqual(c.get("/metrics").status, 200)
        parked: list = []
        t2 = threading.Thread(target=post_into, args=(parked, gw.port, f"/v1/locks/{lock}/acquire",
                                                       {"wait_ms": 20000}))
        t2.start()
        wait_for(lambda: c.get(f"/v1/locks/{lock}").body["waiting"] == 1, timeout=20, what="a parked waiter")
        c.close()
        time.sleep(0.2)
        code = gw.stop(timeout=30, check=False)
        t2.join(30)
        log = gw.log_text()
        found = [word for word in REPORTS if word in log]
        self.assertEqual(found, [], f"sanitizer report in the gateway's output:\n{gw.log_tail(80)}")
        self.assertEqual(code, 0, gw.log_tail(40))
        self.assertEqual(parked[0].status, 503, parked)


if __name__ == "__main__":
    unittest.main()
