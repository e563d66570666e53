# SPDX-License-Identifier: Apache-2.0
"""Smoke test: a gateway starts against the test Redis and Postgres, answers its health endpoints,
answers an unknown route with a problem+json 404, and exits 0 on SIGTERM.

Owns: the minimal end-to-end check, and the example of how an integration test uses harness.py.
Must not: test lock semantics (those have their own files).
Run through scripts/test (ctest), or by hand with the FG_* variables set: python3 test_smoke.py -v
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, http, psql  # noqa: E402


class BackendsTest(unittest.TestCase):
    """The harness reaches the real Redis and Postgres that scripts/test started (no gateway needed)."""

    def test_redis_answers(self):
        with Redis() as r:
            self.assertEqual(r.cmd("PING"), "PONG")
            self.assertEqual(r.cmd("CONFIG", "GET", "maxmemory-policy"), ["maxmemory-policy", "noeviction"])

    def test_postgres_answers(self):
        self.assertEqual(psql("SELECT current_database(), 1 + :'n'::int", {"n": 1}), ["fencegate|2"])


class SmokeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway()  # starts and waits for GET /readyz 200
        cls.client = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.gw.stop()  # SIGTERM; fails unless the gateway exits 0

    def test_healthz(self):
        status, _, _ = self.client.request("GET", "/healthz")
        self.assertEqual(status, 200)

    def test_readyz(self):
        status, _, _ = self.client.request("GET", "/readyz")
        self.assertEqual(status, 200)

    def test_unknown_route_is_problem_json_404(self):
        status, headers, body = self.client.request("GET", "/no/such/route")
        self.assertEqual(status, 404)
        self.assertTrue(headers.get("content-type", "").startswith("application/problem+json"), headers)
        self.assertIsInstance(body, dict, body)
        self.assertEqual(body.get("status"), 404)
        self.assertEqual(body.get("type"), "/problems/not_found")

    def test_keep_alive_and_one_shot_agree(self):
        for _ in range(3):  # several requests over the one kept-alive connection
            self.assertEqual(self.client.request("GET", "/healthz").status, 200)
        self.assertEqual(http("GET", self.gw.url("/healthz")).status, 200)


class ShutdownTest(unittest.TestCase):
    def test_sigterm_exits_zero(self):
        with Gateway() as gw:
            self.assertEqual(gw.http("GET", "/healthz").status, 200)
        self.assertEqual(gw.returncode, 0)


if __name__ == "__main__":
    unittest.main()
