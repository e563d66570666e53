# SPDX-License-Identifier: Apache-2.0
"""The connection buffer (limits.connection_buffer_bytes, docs/api.md "Configuration") holds a request's line
and headers and its reply's headers. Its default must take the largest request the contract allows on every
route family: a 1,024-byte API key (API.md "Authentication"), a token of a 200-byte lock name in Fence-Token,
a 200-byte Fence-Owner, a 128-byte X-Request-Id, a traceparent, and a path segment of 1,024 bytes that are all
percent-encoded (3,072 characters), beside the headers an ordinary client sends.

A gateway whose default buffer were 4096 fails test_the_largest_requests_fit_the_default (checked with the
same requests on a gateway configured so: test_a_smaller_buffer_refuses_them shows what a client then gets).

Owns: the default connection buffer against the contract's largest requests. Must not: test the routes'
own answers (their suites do); a request here counts as served once the gateway itself answers it.
"""

import hashlib
import os
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, raw_exchange  # noqa: E402
from pg_helpers import config as pg_config, unique  # noqa: E402

KEY = "K" * 1024  # API_KEY_TEXT_MAX
REQUEST_ID = "r" * 128  # X_REQUEST_ID_MAX_LEN
CLIENT_HEADERS = {"User-Agent": "python-requests/2.31.0", "Accept": "*/*", "Accept-Encoding": "gzip, deflate",
                  "Connection": "close", "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01",
                  "Content-Type": "application/json; charset=utf-8", "X-Request-Id": REQUEST_ID,
                  "Authorization": "Bearer " + KEY}


def config(buffer_bytes: int | None = None) -> dict:
    cfg = dict(pg_config(), redis_prefixes=["app:"],
               auth={"mode": "required", "keys": [{"id": "root", "sha256": hashlib.sha256(KEY.encode()).hexdigest(),
                                                   "scopes": ["admin"]}]})
    if buffer_bytes is not None:
        cfg["limits"] = {"connection_buffer_bytes": buffer_bytes}
    return cfg


def exchange(port: int, method: str, path: str, headers: dict, body: bytes) -> tuple[bytes, int]:
    """Sends one request (Connection: close) on a fresh connection; returns the head of the answer (b"" if the
    connection closed without one) and the bytes of the request's line and headers."""
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + f"Content-Length: {len(body)}\r\n\r\n"
    return raw_exchange(port, head.encode() + body).partition(b"\r\n\r\n")[0], len(head)


class ConnectionBufferTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(config=config())
        c = cls.gw.client()
        cls.lock = unique("L").ljust(200, "l")  # NAME_MAX_LEN
        r = c.post(f"/v1/locks/{cls.lock}/acquire", {"ttl_ms": 60000}, headers={"Authorization": "Bearer " + KEY})
        assert r.status == 200, r
        cls.token = r.body["token"]
        c.close()

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def largest(self) -> list[tuple[str, str, dict, bytes]]:
        """The largest request of each route family: a lock acquire, a fenced Redis write and a fenced row
        write, each with every header at its bound."""
        fenced = dict(CLIENT_HEADERS, **{"Fence-Token": self.token, "Fence-Owner": "o" * 200,
                                         "Prefer": "return=minimal"})
        segment = "é" * 512  # 1,024 bytes, each percent-encoded
        acquire = b'{"ttl_ms": 1000, "wait_ms": 0, "owner": "%s", "request_id": "%s"}' % (b"o" * 200, b"q" * 200)
        return [("POST", f"/v1/locks/{unique('A').ljust(200, 'a')}/acquire", CLIENT_HEADERS, acquire),
                ("PATCH", "/v1/redis/" + urllib.parse.quote("app:" + segment[2:], safe=""), fenced,
                 b'{"set": {"f": "v"}}'),
                ("PATCH", "/v1/pg/invoices/" + urllib.parse.quote(segment, safe=""), fenced,
                 b'{"set": {"status": "paid"}}')]

    def test_the_largest_requests_fit_the_default(self):
        sizes = []
        for method, path, headers, body in self.largest():
            head, size = exchange(self.gw.port, method, path, headers, body)
            sizes.append(size)
            # The gateway's own answer (the library's 414/431 or a closed connection carry no request id).
            self.assertIn(f"X-Request-Id: {REQUEST_ID}".encode(), head, (method, size, head[:80]))
            self.assertNotIn(head.split(b"\r\n")[0][9:12], (b"414", b"431"), head[:80])
        self.assertGreater(max(sizes), 5000, sizes)  # the fenced Redis write: the largest the contract allows

    def test_a_smaller_buffer_refuses_them(self):
        """The control: with 4096 bytes the library refuses or drops the largest requests itself."""
        with Gateway(config=config(4096)) as small:
            heads = [exchange(small.port, m, p, h, b)[0] for m, p, h, b in self.largest()]
        refused = [h[:40] for h in heads if f"X-Request-Id: {REQUEST_ID}".encode() not in h]
        self.assertGreaterEqual(len(refused), 2, heads)


if __name__ == "__main__":
    unittest.main()
