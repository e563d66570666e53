# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the lock integration tests (test_lock_*.py): unique lock names, the lock calls of
docs/api.md over a harness Client, raw-socket requests for what http.client will not send, and the check that
an error answer is a well-formed problem+json.

Owns: nothing but these helpers. Must not: start services or gateways (harness.py does), or hold state
between tests.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from typing import Any

from harness import Client, Response


class Waiter(threading.Thread):
    """One request that waits (an acquire with wait_ms), sent in the background through gw (a harness Gateway);
    response is its answer, or the exception when the gateway died under it."""

    def __init__(self, gw: Any, path: str, body: dict):
        super().__init__(daemon=True)
        self.gw, self.path, self.body = gw, path, body
        self.response = None

    def run(self) -> None:
        try:
            with self.gw.client(timeout=90) as c:
                self.response = c.post(self.path, self.body)
        except Exception as e:  # noqa: BLE001 - the gateway may be killed under it
            self.response = e


def unique_name(prefix: str = "t") -> str:
    """A lock name no other test uses."""
    return f"{prefix}:{uuid.uuid4().hex[:12]}"


def acquire(client: Client, name: str, timeout: float | None = None, **fields: Any) -> Response:
    """POST /v1/locks/{name}/acquire with the given body fields."""
    return client.post(f"/v1/locks/{name}/acquire", fields, timeout=timeout)


def release(client: Client, name: str, token: str) -> Response:
    return client.post(f"/v1/locks/{name}/release", {"token": token})


def renew(client: Client, name: str, token: str, **fields: Any) -> Response:
    return client.post(f"/v1/locks/{name}/renew", {"token": token, **fields})


def status(client: Client, name: str) -> dict:
    r = client.get(f"/v1/locks/{name}")
    assert r.status == 200, r
    return r.body


def wait_for_waiting(client: Client, name: str, n: int, timeout: float = 15.0) -> None:
    """Polls GET /v1/locks/{name} until it shows exactly n waiters."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = status(client, name)
        if last["waiting"] == n:
            return
        time.sleep(0.02)
    raise AssertionError(f"lock {name} did not reach waiting={n} within {timeout}s; last status {last}")


def assert_problem(test: Any, r: Response, status: int, code: str) -> dict:
    """Checks that r is a problem+json answer with this status and /problems/<code>; returns its body."""
    test.assertEqual(r.status, status, r)
    test.assertTrue(r.headers.get("content-type", "").startswith("application/problem+json"), r)
    test.assertIsInstance(r.body, dict, r)
    test.assertEqual(r.body.get("type"), f"/problems/{code}", r)
    test.assertEqual(r.body.get("status"), status, r)
    test.assertIsInstance(r.body.get("title"), str, r)
    test.assertIsInstance(r.body.get("detail"), str, r)
    if status in (429, 503):
        test.assertIn("retry-after", r.headers, r)
    return r.body


def raw_request(port: int, data: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
    """Sends data as is on a new connection and reads the answer until the server closes or a whole
    response (by Content-Length) has arrived. Returns (status, raw response bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        return read_response(s)


def raw_acquire(port: int, name: str, body: dict, timeout: float = 30.0, kind: str = "locks") -> socket.socket:
    """Sends POST /v1/{kind}/{name}/acquire with body on a new raw socket and returns the socket without
    reading the answer (for tests that close, half-close or reset a waiting client)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(f"POST /v1/{kind}/{name}/acquire HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
              f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


def read_response(s: socket.socket) -> tuple[int, bytes]:
    """Reads one HTTP response with a Content-Length from s; returns (status, raw bytes)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    if not head:
        raise ConnectionError("connection closed without a response")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ")[1]), head + b"\r\n\r\n" + body


class Recorder:
    """An independent record of the critical section, kept by the clients themselves (never by the
    gateway): who is inside, how many entered, and every overlap seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside: list[str] = []
        self.entries = 0
        self.overlaps: list[str] = []
        self.fences: list[int] = []

    def enter(self, who: str, fence: int) -> None:
        with self.lock:
            if self.inside:
                self.overlaps.append(f"{who} (fence {fence}) entered while {self.inside} inside")
            if self.fences and fence <= self.fences[-1]:
                self.overlaps.append(f"{who} entered with fence {fence} after fence {self.fences[-1]}")
            self.inside.append(who)
            self.entries += 1
            self.fences.append(fence)

    def leave(self, who: str) -> None:
        with self.lock:
            self.inside.remove(who)
