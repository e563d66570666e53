"""A hostile client's reproductions, as a suite (issue 11 and API.md 1.1 "Strict requests").

Each test reproduces one way a review found to wedge the gateway, lose audit records, fill the stores or
make a request mean something else than it says, and checks the fixed behaviour. Each was run against the
code before its fix (or a deliberately broken variant, named in its docstring) and failed there.

Owns: strict requests (unknown fields and parameters, media type, Host, body framing, request ids,
generic details), Fence-Owner and owner validation, the audit drain's dead letters, bounded growth of the
stores, connection limits. Must not: test the fence rule itself (test_pg_writes, test_redis_writes do).
"""

import json
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, psql, wait_for  # noqa: E402
from pg_helpers import config as pg_config, unique  # noqa: E402

CONFIG = dict(pg_config(), redis_prefixes=["app:"])


def raw_exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Sends data on a fresh connection and returns every byte the gateway sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def statuses(raw: bytes) -> list[int]:
    """The status codes of every HTTP answer in raw."""
    return [int(line.split(b" ")[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


class StrictRequestsTest(unittest.TestCase):
    """API.md 1.1, Strict requests."""

    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(config=CONFIG)
        cls.c = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.gw.stop()

    def problem(self, r, status, code):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.body["type"], f"/problems/{code}", r)

    def test_unknown_body_field_is_named(self):
        """{"ttl": 30000} was granted with the default ttl (a typo changed behaviour); now 400 naming it."""
        name = unique("strict")
        r = self.c.post(f"/v1/locks/{name}/acquire", {"ttl": 30000, "owner": "a"})
        self.problem(r, 400, "invalid_field")
        self.assertIn("'ttl'", r.body["detail"])
        self.assertFalse(self.c.get(f"/v1/locks/{name}").body["held"])
        r = self.c.post(f"/v1/semaphores/{name}/acquire", {"limit": 2, "limt": 3, "wait": 1})
        self.problem(r, 400, "invalid_field")
        self.assertIn("'limt'", r.body["detail"])
        self.assertIn("'wait'", r.body["detail"])
        r = self.c.post(f"/v1/locks/{name}/release", {"token": "x", "force": True})
        self.problem(r, 400, "invalid_field")
        self.assertIn("'force'", r.body["detail"])
        r = self.c.request("PUT", "/v1/redis/app:k", {"value": "v", "ttl": 5}, headers={"Fence-Token": "x"})
        self.problem(r, 400, "invalid_field")

    def test_unknown_query_parameter_is_named(self):
        r = self.c.get("/v1/audit/rejections?resourse=pg:invoices/1")
        self.problem(r, 400, "invalid_field")
        self.assertIn("'resourse'", r.body["detail"])
        self.assertEqual(self.c.get("/v1/audit/rejections?resource=pg:invoices/1&limit=5").status, 200)
        self.problem(self.c.get(f"/v1/locks/{unique()}?verbose=1"), 400, "invalid_field")

    def test_body_must_be_json(self):
        """A form post (what a web page can send without a preflight) is refused with 415 and does nothing."""
        name = unique("csrf")
        for ctype in ("application/x-www-form-urlencoded", "text/plain", "application/jsonx", None):
            headers = {"Content-Type": ctype} if ctype else {"Content-Type": ""}
            r = self.c.request("POST", f"/v1/locks/{name}/acquire", '{"ttl_ms": 1000}', headers=headers)
            self.problem(r, 415, "unsupported_media_type")
        self.assertFalse(self.c.get(f"/v1/locks/{name}").body["held"])
        r = self.c.request("POST", f"/v1/locks/{name}/acquire", '{"ttl_ms": 1000}',
                           headers={"Content-Type": "Application/JSON; charset=utf-8"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.c.post(f"/v1/locks/{unique()}/acquire").status, 200)  # no body at all

    def test_foreign_host_is_misdirected(self):
        """DNS rebinding: a page served from evil.example reaching 127.0.0.1 is refused with 421."""
        name = unique("rebind")
        req = (f"POST /v1/locks/{name}/acquire HTTP/1.1\r\nHost: evil.example:{self.gw.port}\r\n"
               f"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}").encode()
        raw = raw_exchange(self.gw.port, req)
        self.assertEqual(statuses(raw), [421], raw)
        self.assertIn(b"misdirected_request", raw)
        self.assertFalse(self.c.get(f"/v1/locks/{name}").body["held"])
        for host in (f"127.0.0.1:{self.gw.port}", "localhost", f"LOCALHOST:{self.gw.port}", "127.0.0.1"):
            req = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
            self.assertEqual(statuses(raw_exchange(self.gw.port, req)), [200], host)

    def test_ambiguous_body_length_is_refused_and_closed(self):
        """Request smuggling: with two Content-Lengths or CL + TE, libmicrohttpd ran the rest of the body
        as a second request. Now one 400 and the connection closes: the smuggled request never runs."""
        name = unique("smuggle")
        smuggled = f"POST /v1/locks/{name}/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
        cases = [
            f"Content-Length: 2\r\nContent-Length: {2 + len(smuggled)}\r\n",
            "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
        ]
        for framing in cases:
            body = "{}" if "chunked" not in framing else "2\r\n{}\r\n0\r\n\r\n"
            req = (f"POST /v1/locks/{unique()}/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   f"Content-Type: application/json\r\n{framing}\r\n{body}{smuggled}").encode()
            raw = raw_exchange(self.gw.port, req)
            self.assertEqual(statuses(raw), [400], raw)
            self.assertIn(b"connection: close", raw.lower())
        self.assertFalse(self.c.get(f"/v1/locks/{name}").body["held"])

    def test_request_id_echoed_or_generated(self):
        r = self.c.get("/healthz", headers={"X-Request-Id": "abc-123"})
        self.assertEqual(r.headers.get("x-request-id"), "abc-123")
        r1, r2 = self.c.get("/healthz"), self.c.get("/v1/nope")
        self.assertTrue(r1.headers.get("x-request-id"))
        self.assertNotEqual(r1.headers["x-request-id"], r2.headers.get("x-request-id"))
        r = self.c.get("/healthz", headers={"X-Request-Id": "bad id\u00e9".encode().decode("latin-1")})
        self.assertNotIn(" ", r.headers["x-request-id"])

    def test_insert_answers_201(self):
        key = str(int(time.time() * 1000) % 100000000 + 500000000)
        tok = self.c.post(f"/v1/locks/{unique()}/acquire").body["token"]
        r = self.c.request("POST", "/v1/pg/invoices", {"row": {"id": key, "customer": "a"}},
                           headers={"Fence-Token": tok})
        self.assertEqual(r.status, 201, r)
        r = self.c.request("POST", "/v1/pg/invoices", {"row": {"id": key, "customer": "a"}},
                           headers={"Fence-Token": tok})
        self.problem(r, 409, "conflict")
        self.assertNotIn("pkey", r.body["detail"])  # no constraint name
        self.assertIn(r.headers["x-request-id"], r.body["detail"])
        self.assertIn(r.headers["x-request-id"], wait_for(lambda: "pkey" in self.gw.log_text() and self.gw.log_text()))


if __name__ == "__main__":
    unittest.main()
