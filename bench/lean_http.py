# SPDX-License-Identifier: Apache-2.0
"""bench/lean_http.py - a minimal HTTP/1.1 keep-alive client for the benchmarks (sem_bench.py, side_by_side.py).

One socket, requests with a JSON body, replies with a Content-Length (all the gateway sends). http.client
parses headers through the email package, which costs more than the gateway's whole request; this keeps the
client out of the figures.

Owns: the client side of the benchmarks' HTTP. Must not: retry, reconnect or time anything itself.
Standard library only.
"""

from __future__ import annotations

import json
import socket


class LeanConnection:
    """One keep-alive connection to host:port (timeout in seconds for every socket operation)."""

    def __init__(self, host: str, port: int, timeout: float = 30):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"{host}:{port}".encode()
        self.buf = b""

    def call(self, method: str, path: str, body: dict | None, headers: bytes = b"") -> tuple[int, dict]:
        """Sends method path with body as JSON (None: no body) and extra header lines (each ending in
        CRLF); returns (status, JSON body or {})."""
        data = json.dumps(body).encode() if body is not None else b""
        self.sock.sendall(b"%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s"
                          b"Content-Length: %d\r\n\r\n%s" % (method.encode(), path.encode(), self.host, headers,
                                                             len(data), data))
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buf) < length:
            self._fill()
        raw, self.buf = self.buf[:length], self.buf[length:]
        return status, json.loads(raw) if raw else {}

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        return self.call("POST", path, body)

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the gateway closed the connection")
        self.buf += chunk

    def close(self) -> None:
        self.sock.close()
