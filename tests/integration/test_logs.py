# SPDX-License-Identifier: Apache-2.0
"""The gateway's logs: one JSON object per line on stderr; one request line per request with time, route,
status, latency, lock or resource, owner and client; a lease_lost event when a renew or release finds the
lease gone; and never a token it handed out, nor its signing secret, whatever the calls were (acquire,
waits, renew, release, lost leases, fenced writes accepted and refused, fencectl runs).

Owns: what the logs say and must not say. Must not: test the behaviour behind the calls.
"""

import json
import os
import subprocess
import sys
import threading
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import TEST_SECRET, Gateway, Redis, env  # noqa: E402

INVOICES = {"tables": {"invoices": {"key": "id", "columns": ["customer", "amount_cents", "status", "note"]}}}


def ctl_path() -> str | None:
    path = os.environ.get("FG_CTL") or os.path.join(os.path.dirname(env("FG_BIN")), "fencectl")
    return path if os.access(path, os.X_OK) else None


class LogsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tokens: list[str] = []
        cls.names = {x: f"logs-{x}-{uuid.uuid4().hex[:8]}" for x in ("a", "b", "w", "ctl")}
        cls.key = f"logs-{uuid.uuid4().hex[:8]}"
        gw = Gateway(config=INVOICES, env_overrides={"FENCEGATE_LOG_LEVEL": "debug"})
        try:
            cls.run_calls(gw)
        finally:
            gw.stop()
        cls.lines = [json.loads(line) for line in gw.log_text().splitlines() if line.startswith("{")]
        cls.text = gw.log_text()

    @classmethod
    def acquire(cls, gw: Gateway, name: str, **body) -> str:
        r = gw.http("POST", f"/v1/locks/{name}/acquire", body)
        assert r.status == 200, r
        cls.tokens.append(r.body["token"])
        return r.body["token"]

    @classmethod
    def run_calls(cls, gw: Gateway) -> None:
        n = cls.names
        ta = cls.acquire(gw, n["a"], owner="logs-owner", ttl_ms=5000)
        assert gw.http("POST", f"/v1/locks/{n['a']}/renew", {"token": ta}).status == 200
        # A waiter, granted when the holder releases.
        got = {}

        def wait():
            with gw.client() as c:
                got["r"] = c.post(f"/v1/locks/{n['a']}/acquire", {"wait_ms": 15000, "owner": "waiter"})

        t = threading.Thread(target=wait)
        t.start()
        assert gw.http("POST", f"/v1/locks/{n['a']}/release", {"token": ta}).status == 200
        t.join(20)
        assert got["r"].status == 200, got
        cls.tokens.append(got["r"].body["token"])
        # A lease lost behind the holder's back: renew and release answer 410.
        tb = cls.acquire(gw, n["b"])
        with Redis() as r:
            r.cmd("DEL", f"fg:lk:{{{n['b']}}}:h")
        assert gw.http("POST", f"/v1/locks/{n['b']}/renew", {"token": tb}).status == 410
        assert gw.http("POST", f"/v1/locks/{n['b']}/release", {"token": tb}).status == 410
        # A forged token (a real one, altered): refused.
        altered = tb[:-10] + ("B" if tb[-10] == "A" else "A") + tb[-9:]  # a full signature character
        assert gw.http("POST", f"/v1/locks/{n['b']}/renew", {"token": altered}).status == 403
        # Fenced writes: one applied, then a stale one refused.
        old = cls.acquire(gw, n["w"])
        new = cls.acquire(gw, n["w"] + "-2")
        path = f"/v1/pg/invoices/{cls.key}"
        r = gw.http("PUT", path, {"row": {"id": cls.key, "note": "x"}}, headers={"Fence-Token": new})
        assert r.status == 200, r
        assert gw.http("PATCH", path, {"set": {"note": "y"}}, headers={"Fence-Token": old}).status == 409
        # fencectl: the token goes to its command only.
        ctl = ctl_path()
        if ctl is not None:
            out = subprocess.run([ctl, "--url", gw.base, "lock", n["ctl"], "--ttl", "900", "--", "sh", "-c",
                                  'echo "$FENCE_TOKEN"; sleep 0.4'], capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            cls.tokens.append(out.stdout.strip())

    def test_every_line_is_json(self):
        for line in self.text.splitlines():
            if line.startswith("===="):
                continue  # the harness's own start marker
            self.assertIsInstance(json.loads(line), dict, line)

    def test_no_token_and_no_secret(self):
        self.assertGreaterEqual(len(self.tokens), 6)
        for token in self.tokens:
            self.assertNotIn(token, self.text)
            signature = token.rsplit(".", 1)[-1]
            self.assertGreater(len(signature), 20)
            self.assertNotIn(signature, self.text)
        self.assertNotIn(TEST_SECRET, self.text)

    def test_request_lines(self):
        requests = [line for line in self.lines if line.get("event") == "request"]
        self.assertGreater(len(requests), 10)
        for line in requests:
            for field in ("ts", "route", "status", "latency_ms", "client", "method", "path"):
                self.assertIn(field, line, line)
        acquire = [line for line in requests if line.get("owner") == "logs-owner"]
        self.assertEqual(len(acquire), 1, requests)
        self.assertEqual(acquire[0]["route"], "lock_acquire")
        self.assertEqual(acquire[0]["subject"], f"lock:{self.names['a']}")
        self.assertEqual(acquire[0]["status"], 200)
        self.assertEqual(acquire[0]["client"], "127.0.0.1")
        waited = [line for line in requests if line.get("owner") == "waiter"]
        self.assertEqual([w["status"] for w in waited], [200])
        writes = [line for line in requests if line.get("subject") == f"pg:invoices/{self.key}"]
        self.assertEqual(sorted(w["status"] for w in writes), [200, 409])

    def test_lease_lost_events(self):
        lost = [line for line in self.lines if line.get("event") == "lease_lost"]
        self.assertEqual(sorted(line["op"] for line in lost), ["release", "renew"], lost)
        for line in lost:
            self.assertEqual(line["lock"], self.names["b"])
            self.assertEqual(line["level"], "warn")
            self.assertIsInstance(line["fence"], int)


if __name__ == "__main__":
    unittest.main()
