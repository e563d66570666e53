# SPDX-License-Identifier: Apache-2.0
"""HTTP transport of the fencegate client: connections, JSON, bearer auth, TLS, timeouts and retries.

Owns: one keep-alive connection per thread (plus dedicated ones for long polls), the decision whether a
failed call may be sent again, and the conversion of error answers into exceptions. Must not: know what
any route means beyond the :class:`Effect` its caller declares.

Retries follow one rule: a call is sent again only if sending it twice cannot do more than sending it
once. Every call says so through its :class:`Effect`:

* ``READ`` and ``IDEMPOTENT`` calls are retried after a connection error and after a 503, waiting as
  the gateway's ``Retry-After`` says (else exponential backoff with jitter), within the
  :class:`RetryPolicy` budget. Acquires are ``IDEMPOTENT`` because they always carry a ``request_id``
  that the gateway uses to answer a repeat with the same lease.
* ``ONCE`` calls (inserts, deletes, batches, revoking a lock) are sent again only when the request
  certainly never reached the gateway (the connection was refused); otherwise the error is raised and
  the outcome is unknown to the caller.

A fenced write answered with a 5xx may have been applied: the gateway answers 503 when its connection to
a backend failed, also during the commit. It raises :class:`~fencegate.errors.OutcomeUnknown`, not the
refusal (:class:`~fencegate.errors.BackendUnavailable` would say that nothing changed), whether or not
its effect allows a retry. A write sent again after a try that may have been applied (it got no answer,
or a 5xx) is answered for the retry alone: the gateway takes a fence equal to the stored one, so a retry
of an applied write is applied again, but a refusal (a newer fence wrote, the lease was revoked meanwhile)
does not say that the earlier try changed nothing. Such a write raises OutcomeUnknown too. Before each
retry a write asks its caller's check (is its lease still held?): a lease lost during the pause ends the
write there, unsent.

An idle keep-alive connection that the gateway closed is noticed before it is used, so such a close
never turns into an ambiguous failure.

Every 2xx of the gateway is a JSON object, but for its 204 to ``Prefer: return=minimal``. A 2xx that is
not (an HTML page, an empty body, a 204 the call did not ask for) comes from something else at the
gateway's address (a web server at a wrong URL, a proxy's own page) and says nothing of the call: it is
no answer, as a lost reply is (:class:`~fencegate.errors.GatewayUnreachable` with ``sent`` true, retried
as its effect allows; an acquire gives back what it may have been granted; a write's outcome is unknown),
never a result.
"""

from __future__ import annotations

import enum
import http.client
import json
import random
import select
import socket
import ssl
import threading
import time
import urllib.parse
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .errors import FencegateError, GatewayUnreachable, OutcomeUnknown, ProblemError, UnexpectedStatus, problem_error

USER_AGENT = "fencegate-python/0.1.0"


class Effect(enum.Enum):
    """What sending a call twice would do (see the module documentation)."""

    READ = "read"
    IDEMPOTENT = "idempotent"
    ONCE = "once"


@dataclass(frozen=True)
class RetryPolicy:
    """How calls that may be repeated are retried.

    attempts: most tries of one call, the first included. budget_s: most seconds spent waiting between
    tries of one call. backoff_s / max_backoff_s: first and largest pause when the gateway names none
    (doubled each time, with jitter). A ``Retry-After`` longer than what is left of the budget ends the
    retries.
    """

    attempts: int = 5
    budget_s: float = 15.0
    backoff_s: float = 0.05
    max_backoff_s: float = 2.0

    def pause(self, attempt: int, retry_after: Optional[float]) -> float:
        """Seconds to wait before try number ``attempt + 1`` (attempt counts from 1)."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        return random.uniform(ceiling / 2, ceiling)

    def next_pause(self, attempt: int, waited_s: float, again: bool, retry_after: Optional[float]) -> Optional[float]:
        """Seconds to wait before trying a failed call again, or None when it is not to be tried again: the
        failure does not allow it (``again`` False), the attempts are spent, or the pause would overrun the
        budget (``waited_s`` already waited)."""
        pause = self.pause(attempt, retry_after)
        if not again or attempt >= self.attempts or waited_s + pause > self.budget_s:
            return None
        return pause


NO_RETRY = RetryPolicy(attempts=1)


@dataclass
class Answer:
    """A successful answer: status, headers (lower-cased names) and the parsed JSON body (or None)."""

    status: int
    headers: Dict[str, str]
    body: Any


class _NotSent(Exception):
    """The connection could not be opened: the request never left this process.

    again: whether trying later may help (False for a certificate the client refuses).
    """

    def __init__(self, message: str, again: bool = True) -> None:
        super().__init__(message)
        self.again = again


class _Aborted(Exception):
    """The connection was aborted by another thread: the call is not to be tried again."""


class Connection:
    """One keep-alive HTTP(S) connection to the gateway, used by one thread at a time.

    ``abort()`` may be called from another thread: it shuts the socket down so that a request blocked
    on it (a long poll) fails at once.
    """

    def __init__(self, transport: "Transport") -> None:
        self._transport = transport
        self._http: Optional[http.client.HTTPConnection] = None
        self._aborted = False

    def _open(self, timeout: float) -> http.client.HTTPConnection:
        t = self._transport
        if t.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                t.host, t.port, timeout=timeout, context=t.ssl_context)
        else:
            conn = http.client.HTTPConnection(t.host, t.port, timeout=timeout)
        try:
            conn.connect()
        except ssl.SSLError as e:
            conn.close()
            raise _NotSent(f"TLS with {t.base_url} failed: {e}", again=False) from e
        except OSError as e:
            conn.close()
            raise _NotSent(f"cannot connect to {t.base_url}: {e}") from e
        return conn

    def _usable(self) -> Optional[http.client.HTTPConnection]:
        """The open connection, unless the gateway closed it (or sent something unasked) while idle."""
        conn = self._http
        if conn is None or conn.sock is None:
            return None
        sock = conn.sock
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return conn
            sock.setblocking(False)
            try:
                sock.recv(1)  # b"" (closed) or stray bytes: either way the connection is done
            finally:
                sock.setblocking(True)
        except (ssl.SSLWantReadError, BlockingIOError):
            return conn  # only TLS housekeeping records (e.g. session tickets) were waiting
        except (OSError, ValueError):
            pass
        self.close()
        return None

    def request(self, method: str, path: str, body: Optional[bytes], headers: Mapping[str, bytes],
                timeout: float) -> Tuple[int, Dict[str, str], bytes]:
        """Sends one request and reads the whole answer.

        Raises _NotSent when no connection could be opened, OSError or http.client.HTTPException when
        the request may have been sent but no complete answer came back.
        """
        if self._aborted:
            raise _Aborted("connection aborted")
        conn = self._usable()
        if conn is None:
            conn = self._http = self._open(timeout)
        if self._aborted:  # abort() ran while the socket was being opened and did not see it
            self.close()
            raise _Aborted("connection aborted")
        assert conn.sock is not None
        conn.sock.settimeout(timeout)
        try:
            conn.request(method, path, body=body, headers=dict(headers))
            resp = conn.getresponse()
            data = resp.read()
        except BaseException:
            self.close()
            raise
        answer_headers = {k.lower(): v for k, v in resp.getheaders()}
        if resp.will_close:
            self.close()
        return resp.status, answer_headers, data

    def abort(self) -> None:
        """Makes a request blocked on this connection fail now, and any later one fail at once."""
        self._aborted = True
        conn = self._http
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        """Closes the socket (the next request opens a new one)."""
        conn, self._http = self._http, None
        if conn is not None:
            conn.close()

    def __del__(self) -> None:
        # A thread's connection goes when the thread ends: close its socket rather than leak it.
        self.close()


class Endpoint:
    """Where and how calls go, for the thread transport and the asyncio one alike: the parsed gateway URL,
    the TLS context, the headers every call carries, the timeout and the retry policy.

    base_url: ``http://host:port`` or ``https://host:port``, optionally with a path prefix.
    api_key: bearer key sent as ``Authorization: Bearer``. ca_file: CA bundle for HTTPS (else the
    system's). timeout: seconds to connect and for each answer (a call that waits on the gateway, like
    an acquire with ``wait_ms``, adds its wait to it). retry: the :class:`RetryPolicy`.
    """

    def __init__(self, base_url: str, api_key: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, retry: RetryPolicy = RetryPolicy()) -> None:
        parts, port = _split_url(base_url)
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("gateway URL must be http://host[:port] or https://host[:port], "
                             f"not {_without_credentials(base_url)!r}")
        # Credentials in the URL are never sent (the key goes in api_key), so they are never printed either.
        self.base_url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])).rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = port or DEFAULT_PORTS[parts.scheme]
        self.host_header = _host_header(self.host, self.port, parts.scheme)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.retry = retry
        self.ssl_context = ssl.create_default_context(cafile=ca_file) if parts.scheme == "https" else None
        self._headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    def target(self, path: str, query: Optional[Mapping[str, Any]]) -> str:
        """The request target of path (percent-encoded) with the query (None values left out)."""
        target = self.prefix + path
        if query:
            target += "?" + urllib.parse.urlencode({k: _query_value(v) for k, v in query.items() if v is not None})
        return target

    def headers(self, body: Any, extra: Optional[Mapping[str, str]]) -> Dict[str, bytes]:
        """The headers of a call with this body (None for none) and the caller's extra headers, each value
        as the UTF-8 bytes to send (an owner is UTF-8 text; http.client would send a str as Latin-1).
        Raises ValueError, naming the header but never showing its value (it may be the API key or a
        fence token), for a value that cannot be sent: a line break or NUL in it, or a lone surrogate."""
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        headers.update(extra or {})
        return {name: _header_value(name, value) for name, value in headers.items()}

    def no_answer(self, method: str, target: str, error: BaseException) -> str:
        """The message of a try that got no answer: the error's class and text, never its repr (the repr
        of an encoding error holds all the text it was encoding)."""
        return f"{method} {target}: no answer from {self.base_url}: {type(error).__name__}: {error}"


DEFAULT_PORTS = {"http": 80, "https": 443}


def _split_url(url: str) -> Tuple[Optional[urllib.parse.SplitResult], Optional[int]]:
    """The parts of url and its port, or (None, None) for a URL that does not parse (a bad IPv6 literal,
    a port that is no number or out of range). Returns rather than raises, so that urllib's ValueError,
    which may quote part of a password, becomes no error's context."""
    try:
        parts = urllib.parse.urlsplit(url)
        return parts, parts.port
    except ValueError:
        return None, None


def _without_credentials(url: str) -> str:
    """The URL text url as an error may show it: what comes before the last "@" after its scheme
    (user:password) as "***". Read as text, not parsed, so that a URL that does not parse is cut too; an
    "@" later in the URL only hides more of it."""
    scheme = url.find("://")
    start = 0 if scheme < 0 else scheme + 3
    at = url.rfind("@")
    return url if at < start else url[:start] + "***" + url[at:]


def _host_header(host: str, port: int, scheme: str) -> str:
    """The Host header that http.client sends: an IPv6 literal in brackets, a name that is not ASCII in
    IDNA, and no port when it is the scheme's default."""
    try:
        name = host.encode("ascii").decode("ascii")
    except UnicodeEncodeError:
        name = host.encode("idna").decode("ascii")
    if ":" in name:
        name = f"[{name}]"
    return name if port == DEFAULT_PORTS[scheme] else f"{name}:{port}"


def _header_value(name: str, value: str) -> bytes:
    """The bytes of one header value (see Endpoint.headers). Checked before encoding, so that no
    UnicodeEncodeError, which holds the whole value, becomes the ValueError's context."""
    if any(c in "\r\n\0" or "\ud800" <= c <= "\udfff" for c in value):
        raise ValueError(f"the {name} header cannot be sent: its value holds a line break, a NUL or a lone surrogate")
    return value.encode("utf-8")


def encode(body: Any) -> Optional[bytes]:
    """The JSON bytes of one try's body: body itself, or what the function body returns (None: no body)."""
    payload = body() if callable(body) else body
    return None if payload is None else json.dumps(payload, separators=(",", ":")).encode("utf-8")


def judge(status: int, headers: Dict[str, str], raw: bytes, effect: Effect) -> Tuple[Answer, Optional[ProblemError],
                                                                                      bool, Optional[float]]:
    """Reads one answer: (answer, error or None, whether a retry is allowed, Retry-After seconds). Only a
    2xx is a success: a 3xx or another status the gateway never gives raises UnexpectedStatus."""
    answer = Answer(status, headers, _parse(headers, raw))
    if 200 <= status < 300:
        return answer, None, False, None
    if not 400 <= status < 600:  # a redirect or a status of no one's protocol: never a success
        return answer, UnexpectedStatus(status, headers.get("location"), headers.get("x-request-id")), False, None
    retry_after = _retry_after(headers)
    error = problem_error(status, answer.body, headers.get("x-request-id"), retry_after)
    return answer, error, status == 503 and effect is not Effect.ONCE, retry_after


class Attempts:
    """The retry decisions of one call apart from its I/O, shared by the thread and the asyncio transports:
    each try's outcome goes in (:meth:`answered`, :meth:`not_sent`, :meth:`no_answer`), and out come the
    answer to return, the pause before the next try (:meth:`pause`) or the error to raise.

    op: the call, for messages ("PATCH /v1/pg/t/1"). write: a fenced write or a revoke, whose failure after
    a try that may have been applied raises OutcomeUnknown. check: asked before every try but the first
    (:meth:`before_try`); what it raises ends the call. minimal: the call asked for ``Prefer:
    return=minimal``, so a 204 without a body is the gateway's answer to it."""

    def __init__(self, policy: RetryPolicy, effect: Effect, op: str = "", write: bool = False,
                 check: Optional[Callable[[], None]] = None, minimal: bool = False) -> None:
        self.policy = policy
        self.effect = effect
        self.op = op
        self.write = write
        self.check = check
        self.minimal = minimal
        self.attempt = 0
        self.waited = 0.0
        self._error: Exception = GatewayUnreachable("no try yet")
        self._applied: Optional[Exception] = None  # a write's first failed try that may have been applied
        self._unanswered = False  # a try may have reached the gateway and got no answer
        self._again = False
        self._retry_after: Optional[float] = None

    def _failed(self, error: Exception, again: bool, retry_after: Optional[float]) -> None:
        """A try failed with error; a write's first such failure that may have been applied is kept."""
        self._error, self._again, self._retry_after = error, again, retry_after
        if self.write and self._applied is None and _may_have_applied(error):
            self._applied = error

    def before_try(self) -> None:
        """Asks the call's check before a retry (a fenced write: whether its lease is still held, as the
        pause may have outlasted it). A FencegateError it raises ends the call: as OutcomeUnknown when a
        try may have been applied, else as it is (LeaseLost: nothing was sent)."""
        if self.check is None or self.attempt == 0:
            return
        try:
            self.check()
        except FencegateError as e:
            self._error = e
            raise self._final() from None

    def answered(self, status: int, headers: Dict[str, str], raw: bytes) -> Optional[Answer]:
        """The answer of a try that got one, or None for an error answer, or for a 2xx that is no answer of
        the gateway's (see :func:`gateway_success`; then ask :meth:`pause`)."""
        answer, problem, again, retry_after = judge(status, headers, raw, self.effect)
        if problem is None and not gateway_success(answer, self.minimal):
            self.no_answer(f"{self.op}: no answer from the gateway: a {status} whose body is not the gateway's "
                           f"(Content-Type {headers.get('content-type', 'none')!r}, {len(raw)} bytes)")
            return None
        self.attempt += 1
        if problem is None:
            return answer
        self._failed(problem, again, retry_after)
        return None

    def not_sent(self, error: "_NotSent") -> None:
        """A try whose request never left this process (retried when ``error.again``)."""
        self.attempt += 1
        self._failed(GatewayUnreachable(str(error), sent=False), error.again, None)

    def no_answer(self, message: str) -> None:
        """A try that may have reached the gateway but got no answer: retried unless the call is ONCE."""
        self.attempt += 1
        self._unanswered = True
        self._failed(GatewayUnreachable(message), self.effect is not Effect.ONCE, None)

    def pause(self) -> float:
        """Seconds to wait before the next try; raises the last try's error when there is to be none."""
        pause = self.policy.next_pause(self.attempt, self.waited, self._again, self._retry_after)
        if pause is None:
            raise self._final()
        self.waited += pause
        return pause

    def _final(self) -> Exception:
        """The error of the call: the last try's, or OutcomeUnknown when a try of a write may have been
        applied (the last one too: a 5xx) and the last one's error does not say by itself that the outcome
        is unknown. A GatewayUnreachable is ``sent`` when any try may have reached the gateway unanswered,
        the last one refused or not."""
        error = self._error
        if self._applied is not None and not (isinstance(error, GatewayUnreachable) and error.sent):
            return OutcomeUnknown(self.op, self._applied, error)
        if isinstance(error, GatewayUnreachable) and self._unanswered:
            error.sent = True
        return error


def gateway_success(answer: Answer, minimal: bool) -> bool:
    """Whether a 2xx is one the gateway gives: a JSON object, or no body at all in a 204 to a call that asked
    for ``Prefer: return=minimal``."""
    if answer.status == 204:
        return minimal and answer.body is None
    return isinstance(answer.body, dict)


def _may_have_applied(error: Exception) -> bool:
    """Whether a try that failed with error may have taken effect: it was sent and got no answer, or a 5xx
    (the gateway answers 503 when its connection to a backend failed during the commit)."""
    if isinstance(error, GatewayUnreachable):
        return error.sent
    return isinstance(error, ProblemError) and error.status is not None and error.status >= 500


class Transport(Endpoint):
    """Sends JSON calls to one gateway; thread-safe (each thread gets its own keep-alive connection).
    The arguments are :class:`Endpoint`'s."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, retry: RetryPolicy = RetryPolicy()) -> None:
        super().__init__(base_url, api_key, ca_file, timeout, retry)
        self._local = threading.local()
        self._connections: "weakref.WeakSet[Connection]" = weakref.WeakSet()
        self._guard = threading.Lock()

    def connection(self) -> Connection:
        """This thread's keep-alive connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self.dedicated()
        return conn

    def dedicated(self) -> Connection:
        """A new connection owned by the caller (for long polls that another thread may abort)."""
        conn = Connection(self)
        with self._guard:
            self._connections.add(conn)
        return conn

    def close(self) -> None:
        """Closes every connection this transport opened."""
        with self._guard:
            conns = list(self._connections)
        for conn in conns:
            conn.close()

    def call(self, method: str, path: str, body: Any = None, *, effect: Effect,
             query: Optional[Mapping[str, Any]] = None, headers: Optional[Mapping[str, str]] = None,
             wait_s: float = 0.0, timeout: Optional[float] = None, connection: Optional[Connection] = None,
             retry: Optional[RetryPolicy] = None, write: bool = False,
             check: Optional[Callable[[], None]] = None) -> Answer:
        """Sends a call and returns its answer; raises a ProblemError subclass for an error answer and
        GatewayUnreachable when none came, after the retries that ``effect`` allows.

        path: already percent-encoded, without the base URL's prefix. body: JSON-serialisable, None, or
        a function called before each try that returns it (an acquire sends what is left of its wait).
        query: parameters (None values are left out). wait_s: how long the gateway may hold the call
        before answering, added to the timeout (``timeout``, else the transport's). connection: the
        connection to use (else this thread's). retry: the policy (else the transport's). write: a fenced
        write or a revoke (a failure after a try that may have been applied raises OutcomeUnknown).
        check: called before each retry, which does not go out if it raises (a fenced write's lease check,
        see :meth:`Attempts.before_try`).
        """
        return self._with_retries(method, self.target(path, query), body, self.headers(body, headers), effect,
                                  (self.timeout if timeout is None else timeout) + wait_s,
                                  connection or self.connection(), retry or self.retry, write, check)

    def _with_retries(self, method: str, target: str, body: Any, headers: Dict[str, bytes],
                      effect: Effect, timeout: float, conn: Connection, policy: RetryPolicy,
                      write: bool = False, check: Optional[Callable[[], None]] = None) -> Answer:
        tries = Attempts(policy, effect, f"{method} {target}", write, check,
                         minimal=headers.get("Prefer") == b"return=minimal")
        while True:
            tries.before_try()
            try:
                status, answer_headers, raw = conn.request(method, target, encode(body), headers, timeout)
            except _Aborted as e:
                raise GatewayUnreachable(f"{method} {target}: {e}", sent=False) from None
            except _NotSent as e:
                tries.not_sent(e)
            except (OSError, http.client.HTTPException) as e:
                tries.no_answer(self.no_answer(method, target, e))
            else:
                answer = tries.answered(status, answer_headers, raw)
                if answer is not None:
                    return answer
            time.sleep(tries.pause())


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(headers: Mapping[str, str], raw: bytes) -> Any:
    """The JSON body of an answer, or its text when it is not JSON (None when empty)."""
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    if "json" in headers.get("content-type", ""):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _retry_after(headers: Mapping[str, str]) -> Optional[float]:
    """Retry-After in seconds (only the delay-seconds form; the gateway sends no dates)."""
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def quote(segment: str) -> str:
    """Percent-encodes one path segment (a name, a table, a key): everything but unreserved characters."""
    return urllib.parse.quote(str(segment), safe="")


__all__ = ["Answer", "Connection", "Effect", "Endpoint", "NO_RETRY", "ProblemError", "RetryPolicy", "Transport", "encode",
           "judge", "quote"]
