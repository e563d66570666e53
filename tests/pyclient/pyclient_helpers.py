# SPDX-License-Identifier: Apache-2.0
"""Helpers of the Python client's tests: import paths, unique names, gateway configurations, and a
fault-injecting HTTP proxy that sits between the client and a real gateway.

Owns: nothing but these helpers. Must not: start Redis or Postgres (scripts/test does), or fake the
gateway's answers beyond the faults a test asks for (the proxy forwards everything else unchanged).
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLIENT_SRC = os.path.join(ROOT, "clients", "python", "src")
EXAMPLES = os.path.join(ROOT, "examples")
for path in (CLIENT_SRC, os.path.join(ROOT, "tests", "integration")):
    if path not in sys.path:
        sys.path.insert(0, path)

INVOICE_COLUMNS = ["customer", "amount_cents", "status", "note"]


def config(**extra: Any) -> Dict[str, Any]:
    """A gateway configuration with invoices writable and Redis keys under app: (plus extra keys)."""
    base: Dict[str, Any] = {"tables": {"invoices": {"key": "id", "columns": INVOICE_COLUMNS}},
                            "redis_prefixes": ["app:"]}
    base.update(extra)
    return base


def unique(prefix: str = "py") -> str:
    """A lock name or row key that no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def child_env(gateway_url: str) -> Dict[str, str]:
    """The environment of a child Python process that imports the client and talks to gateway_url."""
    env = dict(os.environ, FENCEGATE_URL=gateway_url, PYTHONPATH=CLIENT_SRC)
    env.pop("FENCEGATE_KEY", None)
    return env


def wait_ready(gateway: Any, url: str, ca_file: Optional[str] = None) -> None:
    """Waits until a harness Gateway that serves where the harness does not look (HTTPS, [::1]) answers
    /readyz 200 to the client at url; HarnessError when it exits or is not ready in time."""
    import fencegate
    from harness import HarnessError

    client = fencegate.Client(url, ca_file=ca_file, timeout=2.0, retry=fencegate.RetryPolicy(attempts=1))
    deadline = time.monotonic() + gateway.ready_timeout
    try:
        while time.monotonic() < deadline:
            if gateway.proc.poll() is not None:
                raise HarnessError(f"{gateway.name} exited: {gateway.log_tail()}")
            if client.ready():
                return
            time.sleep(0.05)
    finally:
        client.close()
    raise HarnessError(f"{gateway.name} not ready at {url}: {gateway.log_tail()}")


CONTROL_PATH = "/_proxy/requests"
"""GET on the proxy answers, without forwarding, the requests it received so far as a JSON list of
{"method", "path" (percent-decoded), "body"}: how a test in another language asks what its client sent."""

# A rule decides what the proxy does with one request: (method, path, JSON body or None, how many requests
# with this method and path came before) -> "forward", "drop" (forward, then close without answering),
# "refuse503" (answer 503 backend_unavailable with Retry-After, not forwarding) or "close_after"
# (forward and answer, then close the connection although the answer promised keep-alive), "stall"
# (wait stall_s seconds, then forward), "late" (forward, then wait stall_s seconds before answering: the
# gateway has answered, the client has not heard it yet), "redirect" (answer 301 with a Location naming
# the same path on the proxy, not forwarding) or "forward503" (forward, then answer 503 backend_unavailable
# in place of the gateway's answer, as a gateway whose backend failed after the commit would) or
# "unframed503" (answer a proxy's own HTML 503 page without Content-Length, ended by the close, not
# forwarding).
Rule = Callable[[str, str, Any, int], str]


def late_waits(method: str, path: str, body: Any, seen: int) -> str:
    """A proxy rule: the answer to a waiting acquire (``wait_ms`` above 0) comes late, after stall_s; anything
    else is forwarded."""
    waits = path.endswith("/acquire") and isinstance(body, dict) and (body.get("wait_ms") or 0) > 0
    return "late" if waits else "forward"


def first_acquire_refused(method: str, path: str, body: Any, seen: int) -> str:
    """A proxy rule: 503 to the first acquire of each path, so that the client tries it again; anything else
    is forwarded."""
    return "refuse503" if path.endswith("/acquire") and seen == 0 else "forward"


DURATIONS = ("ttl_ms", "wait_ms", "max_hold_ms")
"""The members of lease calls that the gateway takes as durations, in whole milliseconds."""


def durations_sent(proxy: "FaultProxy") -> List[Tuple[str, str, Any]]:
    """(path, member, value) of every duration member of every request the proxy received, in order."""
    with proxy._guard:
        return [(path, member, body[member]) for _, path, body in proxy.requests if isinstance(body, dict)
                for member in DURATIONS if member in body]


def assert_whole_durations(test: Any, proxy: "FaultProxy", lock: str, sem: str) -> List[Tuple[str, str, Any]]:
    """Asserts what the durations scenario of test_leases.py and test_async.py sent through proxy: a lock
    acquired with ttl_ms 10000 / 3, wait_ms 1500.5 and max_hold_ms 20000 / 3 and renewed with ttl_ms 2500.9,
    the semaphore sem acquired with ttl_ms 2000.0 and wait_ms 0.0 and renewed, a lock set acquired with
    ttl_ms 1500.5 and renewed in the background and once by hand, each acquire tried twice. Every duration
    went out a whole number (an int), rounded down. Returns what was sent."""
    sent = durations_sent(proxy)
    test.assertTrue(all(type(value) is int for _, _, value in sent), sent)
    lock_path, sem_path = f"/v1/locks/{lock}", f"/v1/semaphores/{sem}"
    test.assertEqual([(m, v) for p, m, v in sent if p == lock_path + "/acquire" and m != "wait_ms"],
                     [("ttl_ms", 3333), ("max_hold_ms", 6666)] * 2)
    waits = [v for p, m, v in sent if m == "wait_ms" and p == lock_path + "/acquire"]
    test.assertEqual(len(waits), 2)
    test.assertTrue(waits[0] <= 1500 and waits[1] < waits[0], waits)  # the retry asks for what is left
    test.assertEqual([(m, v) for p, m, v in sent if p == lock_path + "/renew"], [("ttl_ms", 2500)])
    test.assertEqual([(m, v) for p, m, v in sent if p.startswith(sem_path)],
                     [("ttl_ms", 2000), ("wait_ms", 0)] * 2 + [("ttl_ms", 2000)])
    test.assertEqual([v for p, m, v in sent if p == "/v1/locksets/acquire" and m == "ttl_ms"], [1500, 1500])
    renewals = [v for p, m, v in sent if p == "/v1/locksets/renew"]
    test.assertGreaterEqual(len(renewals), 2, sent)  # one in the background at least, one by hand
    test.assertEqual(set(renewals), {1500})
    return sent


def refuse_while(refusing: threading.Event, path_end: str) -> Rule:
    """A proxy rule: 503 to every request whose path ends with path_end while refusing is set, else forward."""
    return lambda method, path, body, seen: "refuse503" if refusing.is_set() and path.endswith(path_end) else "forward"


class FaultProxy:
    """An HTTP/1.1 proxy to a real gateway that injects the faults its rule asks for.

    requests: (method, path, body) of every request received, in order. connections: how many TCP
    connections clients opened. retry_after: the Retry-After (seconds) of injected 503s. stall_s: how
    long a stalled request waits before it is forwarded, and a late answer before it is passed on. tls: a
    server context, to serve HTTPS (the proxy then terminates TLS in front of the plain-HTTP gateway).
    """

    def __init__(self, upstream_port: int, rule: Optional[Rule] = None, retry_after: int = 1,
                 port: int = 0, tls: Optional[ssl.SSLContext] = None) -> None:
        self.upstream_port = upstream_port
        self.rule: Rule = rule or (lambda method, path, body, seen: "forward")
        self.retry_after = retry_after
        self.stall_s = 2.0
        self.requests: List[Tuple[str, str, Any]] = []
        self.connections = 0
        self._guard = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with proxy._guard:
                    proxy.connections += 1

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                if self.path == CONTROL_PATH:
                    with proxy._guard:
                        seen = [{"method": m, "path": urllib.parse.unquote(p), "body": b}
                                for m, p, b in proxy.requests]
                    self._answer(200, {"Content-Type": "application/json"}, json.dumps(seen).encode())
                    return
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with proxy._guard:
                    seen = sum(1 for m, p, _ in proxy.requests if (m, p) == (self.command, self.path))
                    proxy.requests.append((self.command, self.path, body))
                action = proxy.rule(self.command, self.path, body, seen)
                if action == "stall":
                    time.sleep(proxy.stall_s)
                if action == "redirect":
                    self._answer(301, {"Location": f"{proxy.url}{self.path}"}, b"")
                    return
                if action == "refuse503":
                    self._refuse503()
                    return
                if action == "unframed503":
                    self._unframed503()
                    return
                status, headers, data = proxy._forward(self.command, self.path, dict(self.headers), raw)
                if action == "drop":
                    self.close_connection = True
                    return
                if action == "forward503":
                    self._refuse503()
                    return
                if action == "late":
                    time.sleep(proxy.stall_s)
                self._answer(status, headers, data)
                if action == "close_after":
                    self.close_connection = True

            def _refuse503(self) -> None:
                self._answer(503, {"Content-Type": "application/problem+json", "Retry-After": str(proxy.retry_after)},
                             json.dumps({"type": "/problems/backend_unavailable", "title": "injected",
                                         "status": 503, "detail": "injected by the test proxy"}).encode())

            def _unframed503(self) -> None:
                # A proxy's own error page, as HTTP/1.0-minded proxies answer: no Content-Length, the
                # close ends the body (RFC 9112 section 6.3).
                self.send_response_only(503)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(b"<html><body>upstream_unavailable</body></html>\n")
                self.close_connection = True

            def _answer(self, status: int, headers: Dict[str, str], data: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # clients that gave up: no tracebacks
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def _forward(self, method: str, path: str, headers: Dict[str, str], raw: bytes) -> Tuple[int, Dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=60)
        try:
            headers = {k: v for k, v in headers.items() if k.lower() not in ("connection", "host")}
            conn.request(method, path, body=raw or None, headers=headers)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def seen(self, method: str, path_start: str) -> List[Any]:
        """Bodies of the requests with this method whose path starts with path_start."""
        with self._guard:
            return [b for m, p, b in self.requests if m == method and p.startswith(path_start)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def slow_acquire_proxy(test: Any, port: int, acquire: str, stall_s: float) -> FaultProxy:
    """A FaultProxy in front of port, closed at test's cleanup, whose acquires take the action acquire
    ("stall", "late") for stall_s, whose renewals answer 503, and which forwards everything else."""
    proxy = FaultProxy(port, lambda method, path, body, seen:
                       acquire if path.endswith("/acquire") else "refuse503" if path.endswith("/renew")
                       else "forward")
    proxy.stall_s = stall_s
    test.addCleanup(proxy.close)
    return proxy
