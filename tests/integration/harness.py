# SPDX-License-Identifier: Apache-2.0
"""Integration-test harness for fencegate (Python 3.11, standard library only).

Owns: starting and stopping real gateway processes, an HTTP client (keep-alive and one-shot), a tiny
RESP client for the test Redis, psql access to the test Postgres, and helpers to reset both between
tests. It must not: mock Redis or Postgres, start Redis or Postgres itself (scripts/test does, through
scripts/services.sh), or depend on anything outside the standard library.

Environment (exported by scripts/test; the servers' variables by tests/with_backends.sh, for the pair of test
servers the test holds):
  FG_BIN              path of the fencegate binary under test
  FG_TEST_REDIS_PORT  port of the test Redis on 127.0.0.1
  FG_TEST_REDIS_URL   the same as a URL, e.g. redis://127.0.0.1:26379/0; a redis-cluster:// URL (the cluster
                      lab's, tests/cluster/run_integration.py) runs the gateways on that cluster, Redis()
                      routes each command to the node owning its key's slot, and tests marked
                      skip_in_cluster are skipped with their reason
  FG_TEST_PG_PORT     port of the test Postgres on 127.0.0.1
  FG_TEST_PG_DSN      libpq URI, e.g. postgresql://fencegate@127.0.0.1:25432/fencegate
  FG_PGBIN            directory holding psql
  FG_TEST_DATA        scratch directory: gateway config files and logs go here
  FG_SERVICES, FG_TEST_SVC_DIR  (optional) scripts/services.sh and its datadir, for services()

Test files import it after putting their own directory on sys.path:

    import os, sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from harness import Gateway, Client, http, Redis, psql

A test class whose tests share one gateway derives from GatewayTest and names its configuration in class
attributes (gateway_config, gateway_env).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import typing
import unittest
import urllib.parse
import uuid
from http import client as httpclient
from typing import Any

# Token-signing key given to every gateway the harness starts, unless a test overrides FENCEGATE_SECRET.
TEST_SECRET = "fencegate-integration-test-secret-do-not-use-elsewhere"

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
DEFAULT_HTTP_TIMEOUT_S = 30.0

_serial = itertools.count(1)


class HarnessError(RuntimeError):
    """The test environment is broken (missing variable, gateway that would not start, psql error)."""


def env(name: str, default: str | None = None) -> str:
    """The value of an FG_* variable; raises HarnessError naming it when it is unset and has no default."""
    value = os.environ.get(name, default)
    if value is None or value == "":
        raise HarnessError(f"{name} is not set; run the integration tests through scripts/test (or ctest "
                           f"with the FG_* variables that scripts/test exports)")
    return value


def test_data_dir() -> str:
    """FG_TEST_DATA, created if missing."""
    path = env("FG_TEST_DATA")
    os.makedirs(path, exist_ok=True)
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: str, lines: int = 60) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return "\n".join(data.splitlines()[-lines:])


# --------------------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------------------

class Response(tuple):
    """One HTTP answer; unpacks as (status, headers, body), also readable as .status, .headers, .body.

    headers: dict with lowercased names (repeated headers joined with ", ").
    body: parsed JSON when the Content-Type says JSON and the body parses, else the text ("" if empty).
    raw: the body's bytes as received.
    """

    def __new__(cls, status: int, headers: dict[str, str], body: Any, raw: bytes = b"") -> "Response":
        self = super().__new__(cls, (status, headers, body))
        self.raw = raw
        return self

    @property
    def status(self) -> int:
        return self[0]

    @property
    def headers(self) -> dict[str, str]:
        return self[1]

    @property
    def body(self) -> Any:
        return self[2]

    def __repr__(self) -> str:
        return f"Response(status={self[0]}, headers={self[1]!r}, body={self[2]!r})"


def _encode_body(body: Any, headers: dict[str, str]) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, (bytes, bytearray)):
        data = bytes(body)
    elif isinstance(body, str):
        data = body.encode("utf-8")
    else:
        data = json.dumps(body).encode("utf-8")
    if not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    return data


def _decode_response(resp: httpclient.HTTPResponse) -> Response:
    raw = resp.read()
    headers: dict[str, str] = {}
    for name, value in resp.getheaders():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    ctype = headers.get("content-type", "")
    text = raw.decode("utf-8", "replace")
    body: Any = text
    if raw and "json" in ctype:
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    return Response(resp.status, headers, body, raw)


def _split_url(url: str) -> tuple[str, int, str]:
    """(host, port, path-with-query) of an http:// URL."""
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or not u.hostname:
        raise ValueError(f"not an http:// URL: {url!r}")
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    return u.hostname, u.port or 80, path


class Client:
    """A keep-alive HTTP/1.1 client bound to one gateway: one connection, reopened when needed.

    base: "http://127.0.0.1:PORT" (or just the port number). A request that fails because the server had
    closed an idle kept-alive connection is sent once more on a fresh connection; any other failure
    (timeout, refused connection, a reset on a fresh connection) is raised, and the next request reconnects.
    """

    def __init__(self, base: str | int, timeout: float = DEFAULT_HTTP_TIMEOUT_S):
        if isinstance(base, int):
            base = f"http://127.0.0.1:{base}"
        self.host, self.port, _ = _split_url(base)
        self.timeout = timeout
        self._conn: httpclient.HTTPConnection | None = None
        self._requests_on_conn = 0

    def _connection(self, timeout: float) -> httpclient.HTTPConnection:
        if self._conn is None:
            self._conn = httpclient.HTTPConnection(self.host, self.port, timeout=timeout)
            self._requests_on_conn = 0
        if self._conn.sock is None:
            self._conn.connect()
        self._conn.sock.settimeout(timeout)
        return self._conn

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                timeout: float | None = None) -> Response:
        """Sends one request and returns its Response.

        body: None (no body), dict/list (sent as JSON), str or bytes (sent as is, e.g. broken JSON).
        headers: extra request headers; Content-Type defaults to application/json when there is a body.
        timeout: seconds for connecting and for each read; defaults to the client's timeout.
        """
        hdrs = dict(headers or {})
        data = _encode_body(body, hdrs)
        t = self.timeout if timeout is None else timeout
        for attempt in (1, 2):
            conn = self._connection(t)
            reused = self._requests_on_conn > 0
            try:
                conn.request(method, path, body=data, headers=hdrs)
                resp = conn.getresponse()
                result = _decode_response(resp)
            except (httpclient.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if reused and attempt == 1:
                    continue  # the server dropped an idle keep-alive connection before reading: resend
                raise
            except BaseException:
                self.close()  # state of the connection unknown (timeout, interrupted read)
                raise
            self._requests_on_conn += 1
            if resp.will_close:
                self.close()
            return result
        raise AssertionError("unreachable")

    __call__ = request

    def get(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Response:
        return self.request("POST", path, body, **kw)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def http(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None,
         timeout: float = DEFAULT_HTTP_TIMEOUT_S) -> Response:
    """One request on a new connection (Connection: close). url: a full http:// URL."""
    host, port, path = _split_url(url)
    hdrs = dict(headers or {})
    hdrs.setdefault("Connection", "close")
    data = _encode_body(body, hdrs)
    conn = httpclient.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        return _decode_response(conn.getresponse())
    finally:
        conn.close()


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


# --------------------------------------------------------------------------------------------------------
# The gateway process
# --------------------------------------------------------------------------------------------------------

_live_gateways: set["Gateway"] = set()


@atexit.register
def _kill_leftovers() -> None:
    for gw in list(_live_gateways):
        gw.kill()


class Gateway:
    """A fencegate process under test, listening on a free 127.0.0.1 port.

    env_overrides: variables to set for it; a value of None removes that variable (to test defaults).
    config: dict written as JSON to a file in FG_TEST_DATA and passed as FENCEGATE_CONFIG.
    args: extra command-line arguments for fencegate.
    start: start (and wait for /readyz 200) right away.
    nofile: the process's descriptor limit, soft and hard (as `ulimit -n`); by default the test's own.
    The gateway gets FENCEGATE_LISTEN, FENCEGATE_REDIS_URL, FENCEGATE_PG_DSN and FENCEGATE_SECRET (TEST_SECRET)
    unless overridden; other FENCEGATE_* variables of the test's environment are not passed on.
    Its stdout and stderr go to `log_path` in FG_TEST_DATA.

        with Gateway(config={...}) as gw:
            status, headers, body = gw.http("GET", "/healthz")
    On leaving the block the gateway gets SIGTERM and must exit 0 (unless the block raised).
    """

    def __init__(self, env_overrides: dict[str, str | None] | None = None, config: dict | None = None,
                 args: list[str] | tuple[str, ...] = (), start: bool = True,
                 ready_timeout: float = READY_TIMEOUT_S, nofile: int | None = None):
        self.env_overrides = dict(env_overrides or {})
        self.nofile = nofile
        self.config = config
        self.args = list(args)
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.returncode: int | None = None
        self.name = f"gateway-{os.getpid()}-{next(_serial)}"
        data = test_data_dir()
        self.log_path = os.path.join(data, self.name + ".log")
        self.config_path = os.path.join(data, self.name + ".json") if config is not None else None
        self._client: Client | None = None
        if start:
            self.start()

    # -- lifecycle --

    def _environment(self, port: int) -> dict[str, str]:
        e = {k: v for k, v in os.environ.items() if not k.startswith("FENCEGATE_")}
        e["FENCEGATE_LISTEN"] = f"127.0.0.1:{port}"
        e["FENCEGATE_REDIS_URL"] = env("FG_TEST_REDIS_URL")
        e["FENCEGATE_PG_DSN"] = env("FG_TEST_PG_DSN")
        e["FENCEGATE_SECRET"] = TEST_SECRET
        if self.config_path:
            e["FENCEGATE_CONFIG"] = self.config_path
        for k, v in self.env_overrides.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = str(v)
        return e

    def _limits(self) -> typing.Callable[[], None] | None:
        """What the child runs before fencegate: lowers its descriptor limit when nofile says so."""
        if self.nofile is None:
            return None
        limit = self.nofile
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    def start(self, until_logged: str | None = None) -> "Gateway":
        """Starts the process and waits until GET /readyz answers 200, or with until_logged until its log has
        that event (a gateway that cannot get ready, telling why); raises HarnessError otherwise."""
        if self.proc is not None and self.proc.poll() is None:
            raise HarnessError(f"{self.name} is already running")
        binary = env("FG_BIN")
        if not os.access(binary, os.X_OK):
            raise HarnessError(f"FG_BIN={binary} is not an executable file")
        if self.config_path:
            with open(self.config_path, "w", encoding="utf-8") as f:
                json.dump(self.config, f, indent=2)
        fixed_listen = self.env_overrides.get("FENCEGATE_LISTEN")
        for attempt in range(3):
            self.port = _port_of(str(fixed_listen)) if fixed_listen else free_port()
            with open(self.log_path, "ab") as log:
                log.write(f"==== {self.name} start on port {self.port} ====\n".encode())
                log.flush()
                self.proc = subprocess.Popen([binary, *self.args], env=self._environment(self.port),
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             start_new_session=True, preexec_fn=self._limits())
            self.returncode = None
            _live_gateways.add(self)
            try:
                self._wait_ready() if until_logged is None else self._wait_logged(until_logged)
                return self
            except HarnessError:
                exited = self.proc.poll() is not None
                if exited and not fixed_listen and attempt < 2 and "in use" in self.log_tail(5).lower():
                    continue  # lost the race for the free port: pick another
                self.kill()
                raise
        raise AssertionError("unreachable")

    def _wait_logged(self, event: str) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            self._check_running()
            if f'"{event}"' in self.log_text():
                return
            time.sleep(0.05)
        raise HarnessError(f"{self.name} logged no {event} within {self.ready_timeout:.0f}s; "
                           f"log {self.log_path}:\n{self.log_tail()}")

    def _check_running(self) -> None:
        """Raises HarnessError if the process exited (before it was ready)."""
        code = self.proc.poll()
        if code is not None:
            self.returncode = code
            _live_gateways.discard(self)
            raise HarnessError(f"{self.name} exited with {_describe_exit(code)} before it was ready; "
                               f"log {self.log_path}:\n{self.log_tail()}")

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.ready_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            self._check_running()
            try:
                r = http("GET", self.url("/readyz"), timeout=2.0)
                if r.status == 200:
                    return
                last = f"/readyz answered {r.status}: {r.body!r}"
            except OSError as e:
                last = f"/readyz: {e}"
            time.sleep(0.05)
        raise HarnessError(f"{self.name} not ready within {self.ready_timeout:.0f}s ({last}); "
                           f"log {self.log_path}:\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S, check: bool = True, expect: int = 0) -> int | None:
        """SIGTERM, wait up to `timeout` s, then SIGKILL. Returns the exit code (negative: signal).

        check: raise AssertionError (with the log tail) unless the exit code is `expect`. A gateway that
        needed SIGKILL fails the check whatever `expect` is.
        """
        if self._client:
            self._client.close()
        if self.proc is None:
            return None
        killed = False
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                killed = True
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        _live_gateways.discard(self)
        if check and (killed or self.returncode != expect):
            why = (f"did not exit within {timeout:.0f}s of SIGTERM (killed)" if killed
                   else f"exited with {_describe_exit(self.returncode)}, expected {expect}")
            raise AssertionError(f"{self.name} {why}; log {self.log_path}:\n{self.log_tail()}")
        return self.returncode

    def kill(self) -> None:
        """SIGKILL (a crash, as far as Redis and Postgres can tell); does not check the exit code."""
        if self._client:
            self._client.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self.returncode = self.proc.returncode
        _live_gateways.discard(self)

    def signal(self, sig: int) -> None:
        """Sends a signal to the running gateway (e.g. signal.SIGTERM, to test draining). SIGSTOP returns once
        every thread has stopped: kill returns before that, and a thread woken meanwhile (a doorbell, a
        Redis reply) may still run a script."""
        assert self.proc is not None and self.proc.poll() is None, f"{self.name} is not running"
        self.proc.send_signal(sig)
        if sig == signal.SIGSTOP:
            pid = self.proc.pid
            wait_for(lambda: threads_stopped(pid), what=f"every thread of {self.name} stopped")

    def seconds_to_exit(self, timeout: float = 60) -> float:
        """Sends SIGTERM and waits for the process to exit, timeout at most: the seconds that took (timeout if
        it still runs then; stop() kills it and gives the exit status)."""
        signalled = time.monotonic()
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        return time.monotonic() - signalled

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.stop(check=False)  # do not hide the test's own failure

    # -- talking to it --

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def client(self, timeout: float = DEFAULT_HTTP_TIMEOUT_S) -> Client:
        """A new keep-alive Client for this gateway (the caller closes it)."""
        return Client(self.base, timeout=timeout)

    def http(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             timeout: float | None = None) -> Response:
        """A request over this gateway's shared keep-alive Client."""
        if self._client is None:
            self._client = self.client()
        return self._client.request(method, path, body, headers, timeout)

    def log_tail(self, lines: int = 60) -> str:
        return _tail(self.log_path, lines)

    def why(self, r: Response) -> str:
        """r, and the lines of this gateway's log that name its request id (a 5xx's cause is logged there,
        not answered): for the message of an assertion on r."""
        rid = r.headers.get("x-request-id", "") if isinstance(r, Response) else ""
        if not rid:
            return repr(r)
        lines = [line for line in self.log_text().splitlines() if rid in line]
        return f"{r!r}; its lines in {self.log_path}:\n" + "\n".join(lines)

    def log_text(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()


class GatewayTest(unittest.TestCase):
    """Tests sharing one gateway: cls.gw, started with the class attributes gateway_config (its config) and
    gateway_env (its env_overrides) before the first test and stopped (it must exit 0) after the last, and
    cls.c, a keep-alive client of it. A subclass that sets up more calls super().setUpClass() first."""

    gateway_config: dict | None = None
    gateway_env: dict[str, str | None] | None = None

    @classmethod
    def setUpClass(cls) -> None:
        cls.gw = Gateway(config=cls.gateway_config, env_overrides=cls.gateway_env)
        cls.c = cls.gw.client()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.c.close()
        cls.gw.stop()


def metric(gw: Gateway, name: str) -> float:
    """The value of an unlabelled metric on gw's /metrics."""
    for line in gw.http("GET", "/metrics").body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def _port_of(listen: str) -> int:
    """The port of a host:port string, or 0 when there is none (a test of a bad FENCEGATE_LISTEN)."""
    try:
        return int(listen.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return 0


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def run_fencegate(args: list[str] | tuple[str, ...] = (), env_overrides: dict[str, str | None] | None = None,
                  config: dict | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Runs fencegate to completion (e.g. `migrate`, or a start-up that must fail) with the test
    environment; returns the CompletedProcess with text stdout and stderr."""
    gw = Gateway(env_overrides=env_overrides, config=config, args=args, start=False)
    if gw.config_path:
        with open(gw.config_path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
    return subprocess.run([env("FG_BIN"), *args], env=gw._environment(free_port()), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------------------------------------
# Redis (RESP2 over a plain socket)
# --------------------------------------------------------------------------------------------------------

class RedisError(Exception):
    """An error reply from Redis (the message as Redis sent it, e.g. 'WRONGTYPE ...')."""


def cluster_mode() -> bool:
    """True when the gateways under test run on a Redis Cluster (FG_TEST_REDIS_URL is redis-cluster://)."""
    return os.environ.get("FG_TEST_REDIS_URL", "").startswith("redis-cluster://")


def skip_in_cluster(reason: str) -> Any:
    """Skips a test or test class when the gateways run on a Redis Cluster, saying why it cannot hold there
    (e.g. it stops the one test Redis, or reads the deployment-wide keys of the one-Redis layout)."""
    return unittest.skipIf(cluster_mode(), f"not in cluster mode: {reason}")


class Redis:
    """A minimal blocking Redis client: Redis().cmd('SET', 'k', 'v') -> 'OK'.

    Replies: simple string -> str, integer -> int, bulk -> str (or bytes with decode=False) or None,
    array -> list (or None), error -> raises RedisError. Reconnects on the next command after an I/O error.
    In cluster mode (cluster_mode()) Redis() without a port talks to the whole cluster (_ClusterRoute).
    """

    def __init__(self, port: int | None = None, host: str = "127.0.0.1", db: int | None = None,
                 timeout: float = 10.0, decode: bool = True):
        self._sock: socket.socket | None = None
        self._rfile: Any = None
        self._route: _ClusterRoute | None = None
        if port is None and cluster_mode():
            self._route = _ClusterRoute(os.environ["FG_TEST_REDIS_URL"], timeout, decode)
            port, db = self._route.seeds[0][1], 0
        if port is None:
            port = int(env("FG_TEST_REDIS_PORT"))
        if db is None:
            url = os.environ.get("FG_TEST_REDIS_URL", "")
            db = int(urllib.parse.urlsplit(url).path.lstrip("/") or 0) if url else 0
        self.host, self.port, self.db = host, int(port), db
        self.timeout, self.decode = timeout, decode

    def _connect(self) -> None:
        self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        self._rfile = self._sock.makefile("rb")
        if self.db:
            self._roundtrip(("SELECT", self.db))

    @staticmethod
    def _encode(args: tuple) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, (bytes, bytearray)):
                b = bytes(a)
            else:
                b = str(a).encode("utf-8")
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def _read(self) -> Any:
        line = self._rfile.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("Redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode("utf-8", "replace")
        if kind == b"-":
            return RedisError(rest.decode("utf-8", "replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self._rfile.read(n + 2)
            if len(data) != n + 2:
                raise ConnectionError("Redis closed the connection mid-reply")
            data = data[:-2]
            return data.decode("utf-8", "replace") if self.decode else data
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            items = [self._read() for _ in range(n)]
            return items
        raise ConnectionError(f"unexpected RESP reply {line!r}")

    def _roundtrip(self, args: tuple) -> Any:
        assert self._sock is not None
        self._sock.sendall(self._encode(args))
        reply = self._read()
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def cmd(self, *args: Any) -> Any:
        """Sends one command and returns its decoded reply."""
        if self._route is not None:
            return self._route.cmd(args)
        if self._sock is None:
            self._connect()
        try:
            return self._roundtrip(args)
        except (OSError, ConnectionError):
            self.close()
            raise

    def psubscribe(self, pattern: str) -> None:
        """Turns this connection into a subscriber of the channels matching pattern."""
        self.cmd("PSUBSCRIBE", pattern)

    def hear(self, name: str, pattern: str, channel: str) -> None:
        """Turns this connection into a subscriber of what the lease scripts publish about lock or semaphore
        name: on one Redis the channels matching pattern (PSUBSCRIBE); on a Redis Cluster, where a script
        publishes to the shard channel of its slot (SPUBLISH, which no pattern hears), channel's copy in
        name's slot, "channel:{T(slot)}", on the primary that owns the slot (SSUBSCRIBE)."""
        if self._route is None:
            self.psubscribe(pattern)
            return
        route, self._route = self._route, None
        route.primaries()  # reads the slot map
        self.host, self.port = route.owners[key_slot(name)]
        route.close()
        self.cmd("SSUBSCRIBE", slot_key(channel, name))

    def messages(self, seconds: float) -> list[tuple[str, str]]:
        """(channel, message) of every message published to a psubscribe'd pattern (or a channel hear()
        follows) within seconds."""
        assert self._sock is not None
        out = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self._sock.settimeout(left)
            try:
                reply = self._read()
            except (TimeoutError, socket.timeout):
                self._rfile = self._sock.makefile("rb")  # a reader that timed out reads no more
                break
            if isinstance(reply, list) and reply and reply[0] == "pmessage":
                out.append((reply[2], reply[3]))
            elif isinstance(reply, list) and reply and reply[0] == "smessage":
                out.append((reply[1], reply[2]))
        self._sock.settimeout(self.timeout)
        return out

    def close(self) -> None:
        if self._route is not None:
            self._route.close()
        if self._sock is not None:
            try:
                self._rfile.close()
                self._sock.close()
            finally:
                self._sock = None
                self._rfile = None

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Redis":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
        table.append(crc)
    return table


_CRC16_TABLE = _crc16_table()


def _crc16(data: bytes, crc: int = 0) -> int:
    """CRC16 (XMODEM), as Redis Cluster computes a key's slot; from crc, the CRC of the bytes before data."""
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16_TABLE[(crc >> 8) ^ byte]
    return crc


def key_slot(key: Any) -> int:
    """The hash slot of a key: CRC16 of its hash tag (between the first '{' and the next '}', when not
    empty) or of the whole key, modulo 16384."""
    data = key if isinstance(key, bytes) else str(key).encode("utf-8")
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1:end]
    return _crc16(data) % 16384


# --------------------------------------------------------------------------------------------------------
# The key layout a test reads: one Redis, or a Redis Cluster's per-slot keys (docs/cluster.md)
# --------------------------------------------------------------------------------------------------------

def slot_key(base: str, name: str) -> str:
    """The deployment-wide key `base` (fg:audit, fg:audit:dead, fg:gateways, fg:idx:lk, fg:fence, ...) that
    serves the lock or Redis key `name`: base itself on one Redis; on a Redis Cluster, base's copy in name's
    slot, "base:{T(slot)}" (src/store/backend/key_slot.c, slot_tag_key)."""
    if not cluster_mode():
        return base
    lab = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster")
    if lab not in sys.path:
        sys.path.append(lab)
    from cluster_lab import slot_tag  # the lab's table of slot tags, checked against CLUSTER KEYSLOT

    return f"{base}:{{{slot_tag(key_slot(name))}}}"


def write_fence_key(key: str) -> str:
    """Where the gateway keeps the highest fence of fenced Redis key `key`: fg:rf:<key> on one Redis,
    fg:rf:{T(slot(key))}:<key> on a Redis Cluster (src/store/backend/shared_keys.c)."""
    return f"{slot_key('fg:rf', key)}:{key}" if cluster_mode() else f"fg:rf:{key}"


def lease_keys(kind: str, name: str, request_id: str | None = None) -> list[str]:
    """The KEYS of a full script of lock or semaphore `name` (kind "locks" or "semaphores") on one Redis, in
    order: the kind's own (lua/lib_lock.lua, lua/lib_sem.lua), then lua/lib_lease.lua's
    (src/lease/lease_keys.c); for an acquire, of request_id, the key its id moves to last
    (lease_keys_rid_moved)."""
    short = "lk" if kind == "locks" else "sm"
    b = f"fg:{short}:{{{name}}}:"
    own = "hqwt" if kind == "locks" else "hdqwlt"
    keys = [b + s for s in own] + ["fg:fence", "fg:fence_limit", "fg:gateways", b + "r", b + "e", f"fg:idx:{short}",
                                   b + "n", "fg:revoked", b + "v", b + "i"]
    return keys if request_id is None else keys + [b + "i:" + request_id]


def request_id_kept(r: "Redis", kind: str, name: str, rid: str) -> tuple[str | None, int | None]:
    """Where lock or semaphore `name` keeps request_id `rid` (lua/lib_lease.lua): in its one-id key, or the
    key a first try moved that key's value to ("i:<rid>"), or else in its request-id set; (the lease id it
    names, until when in Redis ms), (None, None) when in none. The time is the one-id or moved key's; in the
    set, the id's score, or the set's keys' time where that is sooner."""
    b = f"fg:{'lk' if kind == 'locks' else 'sm'}:{{{name}}}:"
    for key in (b + "i", b + "i:" + rid):
        one = r.cmd("GET", key)
        if one is not None:
            lease, _, one_rid = one.partition(" ")
            if one_rid == rid:
                return lease, r.cmd("PEXPIRETIME", key)
    lease, till = r.cmd("HGET", b + "r", rid), r.cmd("ZSCORE", b + "e", rid)
    if lease is None or till is None:
        return None, None
    lives = [r.cmd("PEXPIRETIME", b + suffix) for suffix in "re"]
    return lease, min([int(till)] + [t for t in lives if t >= 0])


def same_slot(*prefixes: str, like: str | None = None) -> list[str]:
    """Fresh names, one per prefix ("<prefix>-<12 hex digits>", as pg_helpers.unique makes them). On a Redis
    Cluster they all hash to one slot, the slot of `like` when given, else of the first name (a lock's keys
    hash its name; a Redis key hashes itself), so: fences of locks there come from one sequence, a lock
    taken later having the higher fence as on one Redis (locks of different slots have no such order),
    and a Redis key there meets no write floor that its lock's fences are below (docs/cluster.md, "Fences
    in cluster mode")."""
    names = [f"{p}-{uuid.uuid4().hex[:12]}" for p in prefixes]
    if not cluster_mode() or not names:
        return names
    slot = key_slot(like if like is not None else names[0])
    for i, p in enumerate(prefixes):
        head = f"{p}-".encode()
        if b"{" in head:  # a hash tag may decide the slot: whole names, tried at random
            while key_slot(names[i]) != slot:
                names[i] = f"{p}-{uuid.uuid4().hex[:12]}"
            continue
        # The next names after the random one, the prefix's CRC taken once: about 16384 tries of 12 digits
        # each (a whole name's CRC of a fresh uuid each try took seconds of a loaded machine's CPU a call).
        before, n = _crc16(head), int(names[i][-12:], 16)
        while _crc16(names[i][-12:].encode(), before) % 16384 != slot:
            n = (n + 1) & 0xFFFFFFFFFFFF
            names[i] = f"{p}-{n:012x}"
    return names


def warm_semaphore_slot(c: Client, name: str) -> None:
    """Takes and releases a semaphore of another name in semaphore `name`'s slot, so that the slot's fences are
    reserved: a slot's first lease after its fence sequence was recovered (on a Redis Cluster, a slot no test
    used yet) is the full script's, where a test wants the first try's, kept in the limit key."""
    warm = c.post(f"/v1/semaphores/{same_slot('warm', like=name)[0]}/acquire", {"limit": 1})
    assert warm.status == 200, warm
    done = c.post(f"/v1/semaphores/{warm.body['semaphore']}/release", {"token": warm.body["token"]})
    assert done.status == 200, done


def bound_key(prefix: str) -> str:
    """A fresh Redis key "<prefix>-<12 hex digits>" for a test that writes it with the token of a lock of
    another slot (a binding's lock, "acct-lock:{key}", never shares its key's slot). On a Redis Cluster the
    key's slot is one whose fence sequence was never recovered (not in fencegate.fence_slots): its first
    recovery raises no write floor, so the key meets none above its lock's fences (a slot used before the
    suite's FLUSHALL raises one on its next use; docs/cluster.md)."""
    used = {int(s) for s in psql("SELECT slot FROM fencegate.fence_slots")} if cluster_mode() else set()
    key = f"{prefix}-{uuid.uuid4().hex[:12]}"
    while key_slot(key) in used:
        key = f"{prefix}-{uuid.uuid4().hex[:12]}"
    return key


class _ClusterRoute:
    """Redis() in cluster mode: each keyed command goes to the primary owning its key's slot (the slot map
    read with CLUSTER SLOTS, MOVED followed and the map read again, ASK followed with ASKING on the same
    connection, TRYAGAIN and CLUSTERDOWN retried for a few seconds); a command of several keys in different
    slots (DEL, EXISTS, UNLINK, TOUCH) is split and its counts added; a command of no key that reads or
    changes the server (INFO, FLUSHALL, CONFIG, FUNCTION, ACL, CLIENT, ...) goes to every primary, and their
    replies are merged: one when all agree, else integers added, arrays and texts joined."""

    EVERY_PRIMARY = {"FLUSHALL", "FLUSHDB", "INFO", "DBSIZE", "KEYS", "CONFIG", "FUNCTION", "SCRIPT", "ACL",
                     "CLIENT", "SAVE", "MEMORY", "SLOWLOG", "LATENCY"}
    SPLIT = {"DEL", "EXISTS", "UNLINK", "TOUCH"}
    NO_KEY = {"PING", "TIME", "ROLE", "COMMAND", "ECHO", "HELLO", "CLUSTER", "LASTSAVE"}

    def __init__(self, url: str, timeout: float, decode: bool):
        hosts = urllib.parse.urlsplit(url).netloc.rsplit("@", 1)[-1]
        self.seeds = [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1]) if ":" in h else 6379)
                      for h in hosts.split(",")]
        self.timeout, self.decode = timeout, decode
        self.conns: dict[tuple[str, int], Redis] = {}
        self.owners: list[tuple[str, int] | None] = []

    def _conn(self, addr: tuple[str, int]) -> "Redis":
        if addr not in self.conns:
            self.conns[addr] = Redis(port=addr[1], host=addr[0], db=0, timeout=self.timeout, decode=self.decode)
        return self.conns[addr]

    def _refresh(self) -> None:
        """Reads the slot map from the first node that answers: the primaries of the last map, then the seeds."""
        known = list(dict.fromkeys([a for a in self.owners if a] + self.seeds))
        for addr in known:
            try:
                ranges = self._conn(addr).cmd("CLUSTER", "SLOTS")
            except (OSError, ConnectionError, RedisError):
                continue
            owners: list[tuple[str, int] | None] = [None] * 16384
            for first, last, primary, *_ in ranges:
                host = primary[0] if isinstance(primary[0], str) else primary[0].decode()
                for slot in range(first, last + 1):
                    owners[slot] = (host or addr[0], int(primary[1]))
            self.owners = owners
            return
        raise ConnectionError("no node of the cluster answers CLUSTER SLOTS")

    def primaries(self) -> list[tuple[str, int]]:
        if not self.owners:
            self._refresh()
        return sorted({a for a in self.owners if a})

    @staticmethod
    def _keys(args: tuple) -> list[Any]:
        name = str(args[0]).upper()
        if name in ("FCALL", "FCALL_RO", "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO"):
            return list(args[3:3 + int(args[2])])
        if name in _ClusterRoute.SPLIT:
            return list(args[1:])
        if name in ("XREAD", "XREADGROUP") and "STREAMS" in [str(a).upper() for a in args]:
            at = [str(a).upper() for a in args].index("STREAMS") + 1
            return list(args[at:at + (len(args) - at) // 2])
        return [args[1]] if len(args) > 1 else []

    @staticmethod
    def _merge(replies: list[Any]) -> Any:
        if all(r == replies[0] for r in replies):
            return replies[0]
        if all(isinstance(r, int) for r in replies):
            return sum(replies)
        if all(isinstance(r, list) for r in replies):
            return [x for r in replies for x in r]
        return "\n".join(str(r) for r in replies)

    def cmd(self, args: tuple) -> Any:
        name = str(args[0]).upper()
        if name in self.EVERY_PRIMARY:
            return self._merge([self._conn(p).cmd(*args) for p in self.primaries()])
        keys = [] if name in self.NO_KEY else self._keys(args)
        if name in self.SPLIT and len({key_slot(k) for k in keys}) > 1:
            return sum(self.cmd((args[0], k)) for k in keys)
        slot = key_slot(keys[0]) if keys else None
        addr, asking = None, False
        deadline = time.monotonic() + self.timeout
        while True:
            if addr is None:
                addr = self.primaries()[0] if slot is None else (self.owners[slot] if self.owners else None)
                if addr is None:
                    self._refresh()
                    addr = self.owners[slot] or self.primaries()[0]
            conn = self._conn(addr)
            try:
                if asking:
                    conn.cmd("ASKING")
                return conn.cmd(*args)
            except RedisError as e:
                kind, _, rest = str(e).partition(" ")
                if kind in ("MOVED", "ASK"):
                    where = rest.split()[1]
                    host, port = where.rsplit(":", 1)
                    addr, asking = (host or conn.host, int(port)), kind == "ASK"
                    if kind == "MOVED":
                        self._refresh()
                    continue
                if kind not in ("TRYAGAIN", "CLUSTERDOWN") or time.monotonic() > deadline:
                    raise
            except (OSError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)
            addr, asking = None, False
            self._refresh()

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def flush_redis() -> None:
    """Empties the test Redis (FLUSHALL: every database, including the gateway's fence sequence)."""
    with Redis() as r:
        r.cmd("FLUSHALL")


class TcpProxy:
    """A TCP proxy on 127.0.0.1 to target (a port): cut() closes its connections at once, as a crashed server or
    a failed network leaves them; with hold, it holds back, once, what a connection sends from the first chunk
    containing hold until let_go() (and again after arm(); armed=False: only after arm()), held set once it holds
    it. hold_every: instead, what every connection sends from its first chunk containing hold is kept until
    let_go(), which passes it on in the order it came, one connection's before the next's (a server that runs
    the calls naming hold only later, in the order they were sent, and answers the rest at once).
    stop_reading() leaves what connections send next unread (it fills their senders' socket buffers) until
    resume_reading(); rcvbuf, the receive buffer of its accepted sockets, bounds what they take meanwhile.
    trickle(s) passes what the target answers from then on one byte every s seconds.
    redis_url: the one test Redis's URL through it, when target is that Redis (not on a cluster:
    skip_in_cluster)."""

    def __init__(self, target: int, hold: bytes | None = None, armed: bool = True, rcvbuf: int | None = None,
                 hold_every: bool = False):
        self.port, self.target, self.hold, self.hold_every = free_port(), target, hold, hold_every
        self.redis_url = env("FG_TEST_REDIS_URL").replace(f":{target}", f":{self.port}")
        self.held, self.go = threading.Event(), threading.Event()
        self.armed = armed and hold is not None and not hold_every
        self.kept: list[tuple[socket.socket, bytes]] = []  # hold_every: (to whom, what) in the order it came
        self.kept_from: set[socket.socket] = set()
        self.kept_lock = threading.Lock()
        self.reading = threading.Event()
        self.reading.set()
        self.trickle_s = 0.0
        self.listener = socket.create_server(("127.0.0.1", self.port))
        if rcvbuf is not None:  # set before accept: accepted sockets inherit it, and their window with it
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client = self.listener.accept()[0]
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, server]
            threading.Thread(target=self.pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(server, client, False), daemon=True).start()

    def pump(self, src: socket.socket, dst: socket.socket, outbound: bool) -> None:
        try:
            while (not outbound or self.reading.wait(30)) and (data := src.recv(65536)):
                if outbound and self.hold_every and self.keep(src, dst, data):
                    continue
                if outbound and self.armed and self.hold in data:
                    self.armed = False
                    self.held.set()
                    self.go.wait(30)
                self.send(dst, data, outbound)
        except OSError:
            pass

    def send(self, dst: socket.socket, data: bytes, outbound: bool) -> None:
        if outbound or not self.trickle_s:
            dst.sendall(data)
            return
        for i in range(len(data)):
            dst.sendall(data[i:i + 1])
            time.sleep(self.trickle_s)

    def trickle(self, interval_s: float) -> None:
        """Passes what the target answers one byte every interval_s: a server that answers each read in time for
        a per-read timeout, and a whole reply only much later."""
        self.trickle_s = interval_s

    def keep(self, src: socket.socket, dst: socket.socket, data: bytes) -> bool:
        """hold_every: keeps data for let_go() if src's connection is held back (or data starts holding it)."""
        with self.kept_lock:
            if self.go.is_set() or (src not in self.kept_from and self.hold not in data):
                return False
            self.kept_from.add(src)
            self.kept.append((dst, data))
            self.held.set()
            return True

    def let_go(self) -> None:
        with self.kept_lock:
            last = None
            for dst, data in self.kept:
                if last is not None and dst is not last:
                    time.sleep(0.05)  # the server runs what one connection sent before the next one's
                last = dst
                try:
                    dst.sendall(data)
                except OSError:
                    pass
            self.kept.clear()
            self.go.set()

    def arm(self) -> None:
        """Holds back the next chunk containing hold, as the first."""
        self.held, self.go, self.armed = threading.Event(), threading.Event(), True

    def stop_reading(self) -> None:
        """Reads nothing more that connections send (a chunk held back still goes on at let_go())."""
        self.reading.clear()

    def resume_reading(self) -> None:
        self.reading.set()

    def cut(self) -> None:
        # The connections open now: one a client makes again while these close (its first closed early) stays.
        for s in list(self.sockets):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.go.set()
        self.reading.set()
        self.cut()
        self.listener.close()


class MonitoredCall(typing.NamedTuple):
    """One command a client sent Redis, as its MONITOR stream shows it."""
    client: str  # "127.0.0.1:<port>" of the connection that sent it
    args: list[str]  # the command and its arguments
    ran: list[list[str]]  # a script call's: the commands its script ran, oldest first; else empty

    @property
    def function(self) -> str:
        """The function a script call (FCALL, FCALL_RO) calls, less its hash; "" for any other command."""
        return self.args[1].rsplit("_", 1)[0] if self.args[0].lower() in ("fcall", "fcall_ro") else ""


class Monitor:
    """What the one test Redis runs while a with-block runs, from its MONITOR stream: afterwards .calls, the
    commands clients sent (a script call with the commands its script ran: Redis runs a script at once and
    shows the call first, then its commands, from the client "lua"). The stream is read when the block ends,
    up to a marker sent then, so it holds everything Redis ran before the block's end (a monitor's output is
    buffered without limit). Commands Redis never shows (CONFIG, other administrative ones) are not there.
    Not on a cluster (skip_in_cluster)."""

    def __init__(self) -> None:
        self.calls: list[MonitoredCall] = []
        self._sock: socket.socket | None = None
        self._stream: Any = None

    def __enter__(self) -> "Monitor":
        self._sock = socket.create_connection(("127.0.0.1", int(env("FG_TEST_REDIS_PORT"))), timeout=30)
        self._sock.sendall(b"MONITOR\r\n")
        self._stream = self._sock.makefile("rb")
        if self._stream.readline().strip() != b"+OK":
            raise HarnessError("Redis did not start a MONITOR")
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        try:
            if kind is None:
                self.calls = self._read()
        finally:
            self._stream.close()
            self._sock.close()

    def _read(self) -> list[MonitoredCall]:
        marker = ["ECHO", f"monitor-end-{uuid.uuid4().hex}"]
        with Redis() as r:
            r.cmd(*marker)
        calls: list[MonitoredCall] = []
        while True:
            line = self._stream.readline().decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                raise HarnessError("the MONITOR stream ended before its end marker")
            bracket = line.find("]")
            if bracket < 0:
                continue
            args = monitor_args(line[bracket + 1:])
            if args == marker:
                return calls
            if not args:
                continue
            client = line[line.find("[") + 1:bracket].split(" ", 1)[-1]
            if client == "lua":
                if calls:
                    calls[-1].ran.append(args)
            else:
                calls.append(MonitoredCall(client, args, []))


def monitor_args(text: str) -> list[str]:
    """The quoted arguments of one MONITOR line (after the client part)."""
    args, i = [], 0
    while True:
        i = text.find('"', i)
        if i < 0:
            return args
        j, out = i + 1, []
        while text[j] != '"':
            if text[j] == "\\":
                nxt = text[j + 1]
                if nxt == "x":
                    out.append(chr(int(text[j + 2:j + 4], 16)))
                    j += 4
                    continue
                out.append({"n": "\n", "r": "\r", "t": "\t"}.get(nxt, nxt))
                j += 2
                continue
            out.append(text[j])
            j += 1
        args.append("".join(out))
        i = j + 1


# --------------------------------------------------------------------------------------------------------
# Postgres (through psql)
# --------------------------------------------------------------------------------------------------------

def psql(sql: str, variables: dict[str, Any] | None = None, dsn: str | None = None,
         timeout: float = 60.0) -> list[str]:
    """Runs SQL (one or more statements) with psql -X -q -At against FG_TEST_PG_DSN and returns the output
    lines (columns separated by '|'). variables: psql variables, usable safely quoted in the SQL as
    :'name' (literal) or :"name" (identifier). Raises HarnessError with psql's message on any error.
    """
    cmd = [os.path.join(env("FG_PGBIN", "/usr/lib/postgresql/15/bin"), "psql"), "-X", "-q", "-At",
           "-v", "ON_ERROR_STOP=1", "-d", dsn or env("FG_TEST_PG_DSN"), "-f", "-"]
    for k, v in (variables or {}).items():
        cmd[1:1] = ["-v", f"{k}={v}"]
    e = dict(os.environ, PGCONNECT_TIMEOUT="10")
    r = subprocess.run(cmd, input=sql, capture_output=True, text=True, timeout=timeout, env=e)
    if r.returncode != 0:
        raise HarnessError(f"psql failed ({r.returncode}): {r.stderr.strip()}\nSQL: {sql.strip()}")
    return r.stdout.splitlines()


def reset_pg(sql: str) -> None:
    """Runs the given SQL to bring Postgres back to a known state (e.g. TRUNCATE of the test tables)."""
    psql(sql)


class PrivateBackends(typing.NamedTuple):
    dsn: str  # the database's
    redis_port: int
    env: dict[str, str]  # FENCEGATE_PG_DSN and FENCEGATE_REDIS_URL naming them, for Gateway(env_overrides=)


def private_backends(test: unittest.TestCase, tag: str) -> PrivateBackends:
    """A Postgres database (named fg_<tag>_...) and a Redis server of test's own, gone when it ends, for state
    that must reach no other test."""
    db = f"fg_{tag}_{uuid.uuid4().hex[:10]}"
    psql(f'CREATE DATABASE "{db}"')
    test.addCleanup(psql, f'DROP DATABASE "{db}" WITH (FORCE)')
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    test.addCleanup(redis.wait, 10)
    test.addCleanup(redis.kill)

    def answers() -> bool:
        try:
            with Redis(port=port, timeout=2) as r:
                return r.cmd("PING") == "PONG"
        except (RedisError, OSError):
            return False

    wait_for(answers, what="the test's own redis")
    dsn = env("FG_TEST_PG_DSN").rsplit("/", 1)[0] + "/" + db
    return PrivateBackends(dsn, port, {"FENCEGATE_PG_DSN": dsn, "FENCEGATE_REDIS_URL": f"redis://127.0.0.1:{port}/0"})


# --------------------------------------------------------------------------------------------------------
# Backends on and off
# --------------------------------------------------------------------------------------------------------

def services(action: str) -> None:
    """Runs scripts/services.sh ACTION on the test datadir and ports, e.g. services('stop-pg') then
    services('start-pg') to test a Postgres outage. Actions: start-redis, stop-redis, start-pg, stop-pg."""
    cmd = [env("FG_SERVICES"), action, env("FG_TEST_SVC_DIR"), env("FG_TEST_REDIS_PORT"), env("FG_TEST_PG_PORT")]
    r = subprocess.run(["bash", *cmd], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise HarnessError(f"services.sh {action} failed: {r.stderr.strip() or r.stdout.strip()}")


def threads_stopped(pid: int) -> bool:
    """True once every thread of process pid is stopped. A SIGSTOP stops the thread the kernel hands it
    to, which then stops the others: until it runs, the others run on (and on a loaded machine that takes
    milliseconds)."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            continue
    return bool(states) and all(state in ("T", "t") for state in states)


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.05, what: str = "condition") -> Any:
    """Polls predicate() until it returns a truthy value, which is returned; AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit("harness.py is a library for the integration tests; run scripts/test")
