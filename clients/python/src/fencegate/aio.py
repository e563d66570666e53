# SPDX-License-Identifier: Apache-2.0
"""The asyncio client of fencegate, beside the thread one: :class:`AsyncClient`, leases as ``async with``.

::

    async with fencegate.AsyncClient() as client:
        async with client.lock("invoice:42", ttl_ms=30000, wait_ms=10000) as lease:
            await lease.pg("invoices").patch(42, status="paid")

Owns: the asyncio transport (HTTP/1.1 over asyncio streams, one pool of keep-alive connections), the
asyncio keeper (renewal and watch as tasks) and the async lease objects. Shares with the thread client
everything that is protocol rather than I/O: the endpoint and headers, request bodies, the answer's
judgement and the retry decisions (transport.Attempts), the renewal schedule and the renewal and watch
verdicts (keeper.py), the lost state,
acquire bodies and request ids (lease.py), and the paths, bodies and effects of writes (writes.py).
Cancelling the task that awaits an acquire ends the wait (the connection closes and the gateway drops
the waiter, or keeps its place for a retry); a grant that came as it was cancelled is given back first.

Leases are not reentrant, here as in the thread client: a second acquire of a lock the same holder
holds waits in the queue or raises LockBusy like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import time
from types import TracebackType
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from .client import DEFAULT_URL
from .errors import (FencegateError, GatewayUnreachable, LeaseLost, MaxHoldExceeded, OutcomeUnknown, ProblemError,
                     lease_lost)
from .keeper import (WATCH_HELD, WATCH_LOST, WATCH_WAIT_MS, RenewalSchedule, shortest_grant, watch_failed,
                     watch_pause, watch_query, watch_verdict)
from .lease import (_acquire_body, granted, _gateway_wait_s, _give_back_body, _give_back_retry, _lease_body, _lease_release,
                    _LostState, _Release, _release_failed, _release_unraised, _request_id, _set_release, _whole_ms,
                    losing_reason)
from .transport import NO_RETRY, Answer, Attempts, Effect, Endpoint, RetryPolicy, _NotSent, encode, quote
from .writes import Calls, Holder, PgTable, RedisKeys, Row, refused, write_headers, write_result

log = logging.getLogger("fencegate")


class AsyncTransport(Endpoint):
    """Sends JSON calls to one gateway from one event loop, through a pool of keep-alive connections.
    The arguments are :class:`~fencegate.transport.Endpoint`'s."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, retry: RetryPolicy = RetryPolicy()) -> None:
        super().__init__(base_url, api_key, ca_file, timeout, retry)
        self._idle: List[Tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def close(self) -> None:
        """Closes the idle connections."""
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    async def _connection(self) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while self._idle:
            reader, writer = self._idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer  # a connection the gateway closed while idle is not reused
            writer.close()
        try:
            return await asyncio.open_connection(self.host, self.port, ssl=self.ssl_context)
        except ssl.SSLError as e:
            raise _NotSent(f"TLS with {self.base_url} failed: {e}", again=False) from e
        except OSError as e:
            raise _NotSent(f"cannot connect to {self.base_url}: {e}") from e

    def _head(self, method: str, target: str, headers: Mapping[str, bytes]) -> bytes:
        """The request line and headers of a call, without Content-Length (each try's body has its own)."""
        lines = [f"{method} {target} HTTP/1.1".encode("ascii"), f"Host: {self.host_header}".encode("ascii")]
        lines += [name.encode("ascii") + b": " + value for name, value in headers.items()]
        return b"\r\n".join(lines) + b"\r\n"

    async def _exchange(self, request: bytes) -> Tuple[int, Dict[str, str], bytes]:
        """Sends one request and reads its whole answer, framed as RFC 9112 section 6.3 says: no body for
        a 1xx, 204 or 304, else chunked, else Content-Length, else everything up to the close (what a proxy
        answering an HTTP/1.0-style error page sends); only a connection whose answer had a length of its
        own goes back to the pool. An answer that is no HTTP raises ValueError."""
        reader, writer = await self._connection()
        try:
            writer.write(request)
            await writer.drain()
            status_line = await reader.readline()
            if not status_line:
                raise ConnectionResetError("the gateway closed the connection without answering")
            version, status = _status_line(status_line)
            answer_headers: Dict[str, str] = {}
            while True:
                line = (await reader.readline()).decode("latin-1").rstrip("\r\n")
                if not line:
                    break
                name, _, value = line.partition(":")
                answer_headers[name.strip().lower()] = value.strip()
            keep = version == "HTTP/1.1" and answer_headers.get("connection", "").lower() != "close"
            if status < 200 or status in (204, 304):
                raw = b""
            elif answer_headers.get("transfer-encoding", "").lower() == "chunked":
                raw = b""
                while True:
                    size = int((await reader.readline()).split(b";")[0], 16)
                    chunk = await reader.readexactly(size + 2)
                    if size == 0:
                        break
                    raw += chunk[:-2]
            elif "content-length" in answer_headers:
                raw = await reader.readexactly(int(answer_headers["content-length"]))
            else:
                raw = await reader.read()  # delimited by the close: the connection is done
                keep = False
        except BaseException:
            writer.close()
            raise
        if keep:
            self._idle.append((reader, writer))
        else:
            writer.close()
        return status, answer_headers, raw

    async def call(self, method: str, path: str, body: Any = None, *, effect: Effect,
                   query: Optional[Mapping[str, Any]] = None, headers: Optional[Mapping[str, str]] = None,
                   wait_s: float = 0.0, timeout: Optional[float] = None,
                   retry: Optional[RetryPolicy] = None, write: bool = False,
                   check: Optional[Callable[[], None]] = None) -> Answer:
        """As :meth:`fencegate.transport.Transport.call`, awaited."""
        target = self.target(path, query)
        # Built before any try: a request that cannot be encoded never leaves, and is no try.
        head = self._head(method, target, self.headers(body, headers))
        limit = (self.timeout if timeout is None else timeout) + wait_s
        tries = Attempts(retry or self.retry, effect, f"{method} {target}", write, check,
                         minimal=(headers or {}).get("Prefer") == "return=minimal")
        while True:
            tries.before_try()
            data = encode(body) or b""
            request = head + b"Content-Length: %d\r\n\r\n" % len(data) + data
            try:
                status, answer_headers, raw = await asyncio.wait_for(self._exchange(request), limit)
            except _NotSent as e:
                tries.not_sent(e)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
                tries.no_answer(self.no_answer(method, target, e))
            else:
                answer = tries.answered(status, answer_headers, raw)
                if answer is not None:
                    return answer
            await asyncio.sleep(tries.pause())


def _status_line(line: bytes) -> Tuple[str, int]:
    """The HTTP version and status of an answer's status line; ValueError when it is none (a stray line of
    an earlier answer's body, a server that speaks no HTTP)."""
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit() or len(parts[1]) != 3:
        raise ValueError(f"not an HTTP status line: {line[:40]!r}")
    return parts[0].decode("ascii", "replace"), int(parts[1])


class AsyncCalls(Calls[Awaitable[Row]]):
    """Calls of the write and read handles through an :class:`AsyncTransport` (each answers a coroutine)."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def write(self, holder: Holder, minimal: bool, method: str, path: str, body: Any,  # type: ignore[override]
                    effect: Effect) -> Row:
        headers = write_headers(holder, minimal)
        try:
            return write_result(await self._transport.call(method, path, body, effect=effect, headers=headers,
                                                           write=True, check=holder.check), f"{method} {path}")
        except (ProblemError, OutcomeUnknown) as e:
            refused(holder, e)
            raise

    async def read(self, path: str) -> Row:  # type: ignore[override]
        return (await self._transport.call("GET", path, effect=Effect.READ)).body


class AsyncKeeper:
    """Renews one lease (or lock set) every third of its TTL and watches it, as tasks of the running loop,
    until :meth:`stop` or the loss (the rules of :mod:`fencegate.keeper`)."""

    def __init__(self, transport: AsyncTransport, ttl_ms: int, renew_call: Callable[[float], Awaitable[Any]],
                 watches: List[Tuple[str, int]], on_lost: Callable[[str], None], sent_at: float,
                 grant: Any = None) -> None:
        self._transport = transport
        self._ttl_s = ttl_ms / 1000.0
        self._renew_call = renew_call
        self._on_lost = on_lost
        self._stopped = False
        self._schedule = RenewalSchedule(self._ttl_s, sent_at, shortest_grant(grant))
        self.watching = len(watches)
        self._tasks = [asyncio.ensure_future(self._renew_loop())]
        self._tasks += [asyncio.ensure_future(self._watch_loop(path, fence)) for path, fence in watches]

    def stop(self) -> None:
        """Stops renewing and watching; in-flight calls are cancelled."""
        self._stopped = True
        current = asyncio.current_task() if _loop_running() else None
        for task in self._tasks:
            if task is not current:
                task.cancel()

    def lapsed(self) -> Optional[str]:
        return self._schedule.lapsed(time.monotonic())

    def _lost(self, reason: str) -> None:
        if not self._stopped:
            self.stop()
            self._on_lost(reason)

    async def _renew_loop(self) -> None:
        schedule = self._schedule
        while not self._stopped:
            await asyncio.sleep(schedule.delay(time.monotonic()))
            now = time.monotonic()
            lapsed = schedule.lapsed(now)
            if lapsed is not None:
                self._lost(lapsed)
                return
            error: Optional[FencegateError] = None
            answer: Any = None
            try:
                answer = await self._renew_call(schedule.call_timeout(now, self._transport.timeout))
            except (ProblemError, GatewayUnreachable) as e:
                error = e
            reason = schedule.outcome(now, error, time.monotonic(), answer)
            if reason is not None:
                self._lost(reason)
                return

    async def _watch_loop(self, path: str, fence: int) -> None:
        failures = 0
        while not self._stopped:
            started = time.monotonic()
            try:
                answer = (await self._transport.call("GET", path, effect=Effect.READ, retry=NO_RETRY,
                                                     query=watch_query(fence), wait_s=WATCH_WAIT_MS / 1000.0)).body
            except (ProblemError, GatewayUnreachable) as e:
                if watch_failed(e) is not None:
                    break
                failures += 1
                await asyncio.sleep(watch_pause(e, failures))
                continue
            failures = 0
            verdict, why = watch_verdict(answer, fence, time.monotonic() - started)
            if verdict == WATCH_LOST:
                self._lost(why)
            if verdict != WATCH_HELD:
                break
        self.watching -= 1


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _AsyncHolder(Holder):
    """Hands an async lease's token to writes, refusing once the lease is lost."""

    def __init__(self, state: _LostState, lease: Any, token: Optional[str], owner: Optional[str]) -> None:
        super().__init__(token, owner)
        self._state = state
        self._lease = lease

    def token(self) -> str:
        self.check()
        return super().token()

    def check(self) -> None:
        self._state.check(self._lease)

    def refused(self, error: ProblemError) -> None:
        if isinstance(error, LeaseLost):
            self._state.mark(error.reason or "lease_lost", self._lease)


class _AsyncLeaseBase:
    """What async leases and lock sets share: the lost state, keeping alive, release and ``async with``."""

    _state: _LostState
    ttl_ms: Optional[int]

    def __init__(self, client: "AsyncClient", name: str, body: Dict[str, Any], wait_ms: Optional[int],
                 on_lost: Optional[Callable[[Any], None]], renew: bool, watch: bool) -> None:
        self._client = client
        self._body = body
        self._wait_ms = wait_ms
        self._renew = renew
        self._watch = watch
        self._state = _LostState(name, on_lost)
        self.request_id: str = body["request_id"]

    @property
    def lost(self) -> Any:
        """A threading.Event, set as soon as the client knows the lease is lost (``await lease.wait_lost()``
        waits for it from the loop)."""
        return self._state.event

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the lease was lost (the reasons of :class:`fencegate.Lease`), or None while it is held."""
        return self._state.reason

    def check(self) -> None:
        """Raises LeaseLost if the lease is known to be lost or was released."""
        self._state.check(self)

    async def wait_lost(self) -> str:
        """Returns the reason once the lease is lost (cancel the awaiting task to stop waiting)."""
        while not self._state.event.is_set():
            await asyncio.sleep(0.01)
        return self._state.reason or "lost"

    async def _acquire_call(self, path: str, release: _Release) -> Dict[str, Any]:
        """Sends the acquire to path and returns the gateway's answer; as :func:`fencegate.lease._acquire`,
        a cancelled task (or another interruption), or a failure after a try that got no answer or with a
        5xx, first gives back what the gateway may have granted."""
        transport = self._client.transport
        try:
            return granted(path, (await transport.call("POST", path, _acquire_body(self._body, self._wait_ms),
                                                       effect=Effect.IDEMPOTENT,
                                                       wait_s=_gateway_wait_s(self._wait_ms))).body)
        except BaseException as e:
            retry = _give_back_retry(e, transport.retry)
            if retry is not None:
                await self._give_back(path, release, retry)
            raise

    async def _give_back(self, path: str, release: _Release, retry: RetryPolicy) -> None:
        """As :func:`fencegate.lease._give_back`, awaited."""
        transport = self._client.transport
        with contextlib.suppress(FencegateError):
            grant = granted(path, (await transport.call("POST", path, _give_back_body(self._body),
                                                        effect=Effect.IDEMPOTENT, retry=retry)).body)
            release_path, release_body = release(grant)
            await transport.call("POST", release_path, release_body, effect=Effect.IDEMPOTENT, retry=retry)

    async def _acquired(self, sent_at: float, watches: List[Tuple[str, int]]) -> None:
        """Starts keeping the lease just acquired (as :func:`fencegate.lease._fresh_start` says: a long wait
        in the queue renews it at once, a refusal of that renewal marks it lost and nothing keeps it, another
        failure leaves the retries to the keeper, validity counted from the acquire's sent_at); if that
        raises, the lease is released before the error leaves, since no `async with` block would."""
        ttl_ms = self.ttl_ms or 30000
        if not self._renew:  # renewed when its caller says so
            return
        try:
            grant = None
            if time.monotonic() - sent_at > ttl_ms / 3000.0:  # a long wait in the queue: renew at once
                renewed_at = time.monotonic()
                try:
                    grant = await self._renew_once(self._client.transport.timeout)
                    sent_at = renewed_at  # only a renewal that succeeded moves the start of validity
                except (LeaseLost, MaxHoldExceeded) as e:
                    self._state.mark(losing_reason(e) or "lease_lost", self)
                except FencegateError as e:
                    log.warning("renewal of %s after its acquire failed (%s); the keeper tries again",
                                self._state.name, e)
            if self._state.event.is_set():
                return  # nothing to keep: releasing it (leaving `async with`) raises LeaseLost
            keeper = AsyncKeeper(self._client.transport, ttl_ms, self._renew_once, watches if self._watch else [],
                                 lambda reason: self._state.mark(reason, self), sent_at, grant)
            self._state.keeper, self._state.kept = keeper, True  # type: ignore[assignment]
        except BaseException:
            with contextlib.suppress(FencegateError):
                await self.release()
            raise

    async def _renew_once(self, timeout_s: float) -> Any:
        raise NotImplementedError

    async def _send_release(self) -> Any:
        raise NotImplementedError

    async def release(self) -> None:
        """Stops keeping the lease alive and releases it; raises LeaseLost if it had been lost. As
        :meth:`fencegate.Lease.release`: from the first call on no write goes out under the lease, and a
        release that failed (no answer, a 503, a cancellation) is sent again by the next call."""
        self._state.releasing = True
        if self._state.keeper is not None:
            self._state.keeper.stop()
        self._state.kept = False
        if not self._state.released:
            try:
                await self._send_release()
            except FencegateError as e:
                if _release_failed(self._state, self, e):
                    raise
            else:
                self._state.released = True
        if self._state.event.is_set():
            raise lease_lost(self._state.name, self.lost_reason or "lost")

    async def _explicit_renew(self, call: Callable[[], Awaitable[Answer]]) -> Row:
        self.check()
        try:
            return (await call()).body
        except ProblemError as e:
            reason = losing_reason(e)
            if reason is not None:
                self._state.mark(reason, self)
            raise

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            await self.release()
            return
        try:
            await self.release()
        except FencegateError as e:
            _release_unraised(self._state.name, e)


class AsyncLease(_AsyncLeaseBase):
    """A lease on a lock or a semaphore slot, from :meth:`AsyncClient.lock` / :meth:`AsyncClient.semaphore`;
    the same attributes and rules as :class:`fencegate.Lease`, with awaited calls."""

    def __init__(self, client: "AsyncClient", kind: str, name: str, *, ttl_ms: Optional[int] = None,
                 wait_ms: Optional[int] = None, owner: Optional[str] = None, max_hold_ms: Optional[int] = None,
                 limit: Optional[int] = None, request_id: Optional[str] = None,
                 on_lost: Optional[Callable[["AsyncLease"], None]] = None, renew: bool = True,
                 watch: bool = True) -> None:
        body = _lease_body(ttl_ms, wait_ms, owner, max_hold_ms, request_id or _request_id(), limit=limit)
        super().__init__(client, name, body, wait_ms, on_lost, renew, watch)
        self.kind, self.name, self.owner = kind, name, owner
        self.token: Optional[str] = None
        self.fence: Optional[int] = None
        self.ttl_ms = ttl_ms
        self.expires_at_ms: Optional[int] = None
        self._path = f"/v1/{kind}s/{quote(name)}"

    @property
    def held(self) -> bool:
        """True from a successful acquire until the release or the loss."""
        return self.token is not None and not self._state.releasing and not self._state.event.is_set()

    async def acquire(self) -> "AsyncLease":
        """Acquires, waiting up to ``wait_ms`` in the FIFO queue, and starts keeping the lease alive."""
        if self.token is not None:
            raise RuntimeError(f"the lease on {self.name} is already acquired")
        sent_at = time.monotonic()
        answer = await self._acquire_call(self._path + "/acquire", _lease_release(self._path))
        self.token, self.fence = answer["token"], answer["fence"]
        self.ttl_ms, self.expires_at_ms = answer["ttl_ms"], answer.get("expires_at_ms")
        await self._acquired(sent_at, [(self._path, answer["fence"])])
        return self

    async def _renew_once(self, timeout_s: float) -> Any:
        answer = (await self._client.transport.call("POST", self._path + "/renew",
                                                    {"token": self.token, "ttl_ms": self.ttl_ms},
                                                    effect=Effect.IDEMPOTENT, timeout=timeout_s, retry=NO_RETRY)).body
        self.expires_at_ms = answer.get("expires_at_ms", self.expires_at_ms)
        return answer

    async def renew(self, ttl_ms: Optional[int] = None) -> Row:
        """Renews now (for leases acquired with ``renew=False``); a refusal marks the lease lost."""
        return await self._explicit_renew(lambda: self._client.transport.call(
            "POST", self._path + "/renew", {"token": self.token, "ttl_ms": _whole_ms(ttl_ms or self.ttl_ms)},
            effect=Effect.IDEMPOTENT))

    async def _send_release(self) -> Any:
        if self.token is not None:
            await self._client.transport.call("POST", self._path + "/release", {"token": self.token},
                                              effect=Effect.IDEMPOTENT)

    def pg(self, table: str) -> PgTable[Awaitable[Row]]:
        """A configured Postgres table written with this lease's token (each call is awaited)."""
        return PgTable(AsyncCalls(self._client.transport), table, _AsyncHolder(self._state, self, self.token, self.owner))

    @property
    def redis(self) -> RedisKeys[Awaitable[Row]]:
        """Keys under the configured Redis prefixes, written with this lease's token."""
        return RedisKeys(AsyncCalls(self._client.transport), _AsyncHolder(self._state, self, self.token, self.owner))

    async def __aenter__(self) -> "AsyncLease":
        if self.token is None:
            await self.acquire()
        return self


class AsyncLockSetMember:
    """One lock of a held async lock set: its token and fence for writes to that lock's resources."""

    def __init__(self, lockset: "AsyncLockSet", name: str, token: str, fence: int) -> None:
        self._set = lockset
        self.name, self.token, self.fence = name, token, fence

    def pg(self, table: str) -> PgTable[Awaitable[Row]]:
        """A configured Postgres table written with this lock's token."""
        return PgTable(AsyncCalls(self._set._client.transport), table,
                       _AsyncHolder(self._set._state, self._set, self.token, self._set.owner))

    @property
    def redis(self) -> RedisKeys[Awaitable[Row]]:
        """Keys under the configured Redis prefixes, written with this lock's token."""
        return RedisKeys(AsyncCalls(self._set._client.transport),
                         _AsyncHolder(self._set._state, self._set, self.token, self._set.owner))


class AsyncLockSet(_AsyncLeaseBase):
    """All-or-none leases on several locks, from :meth:`AsyncClient.lockset`; as :class:`fencegate.LockSet`."""

    def __init__(self, client: "AsyncClient", names: Sequence[str], *, ttl_ms: int = 30000,
                 wait_ms: Optional[int] = None, owner: Optional[str] = None, max_hold_ms: Optional[int] = None,
                 request_id: Optional[str] = None, on_lost: Optional[Callable[["AsyncLockSet"], None]] = None,
                 renew: bool = True, watch: bool = True) -> None:
        self.names = list(names)
        body = _lease_body(ttl_ms, wait_ms, owner, max_hold_ms, request_id or _request_id(), names=self.names)
        super().__init__(client, ",".join(self.names), body, wait_ms, on_lost, renew, watch)
        self.owner = owner
        self.ttl_ms = _whole_ms(ttl_ms)
        self.members: Dict[str, AsyncLockSetMember] = {}

    def __getitem__(self, name: str) -> AsyncLockSetMember:
        """The lock ``name`` of the held set."""
        return self.members[name]

    @property
    def tokens(self) -> List[str]:
        """The tokens of every lock of the set."""
        return [m.token for m in self.members.values()]

    async def acquire(self) -> "AsyncLockSet":
        """Acquires every lock or none (LockBusy names the lock not obtained within ``wait_ms``)."""
        sent_at = time.monotonic()
        answer = await self._acquire_call("/v1/locksets/acquire", _set_release)
        for item in answer["locks"]:
            self.members[item["lock"]] = AsyncLockSetMember(self, item["lock"], item["token"], item["fence"])
        await self._acquired(sent_at, [(f"/v1/locks/{quote(m.name)}", m.fence) for m in self.members.values()])
        return self

    async def _renew_once(self, timeout_s: float) -> Any:
        return (await self._client.transport.call("POST", "/v1/locksets/renew",
                                                  {"tokens": self.tokens, "ttl_ms": self.ttl_ms},
                                                  effect=Effect.IDEMPOTENT, timeout=timeout_s, retry=NO_RETRY)).body

    async def renew(self, ttl_ms: Optional[int] = None) -> Row:
        """Renews every lock of the set now."""
        return await self._explicit_renew(lambda: self._client.transport.call(
            "POST", "/v1/locksets/renew", {"tokens": self.tokens, "ttl_ms": _whole_ms(ttl_ms or self.ttl_ms)},
            effect=Effect.IDEMPOTENT))

    async def _send_release(self) -> Any:
        if self.members:
            await self._client.transport.call("POST", "/v1/locksets/release", {"tokens": self.tokens},
                                              effect=Effect.IDEMPOTENT)

    async def __aenter__(self) -> "AsyncLockSet":
        if not self.members:
            await self.acquire()
        return self


class AsyncClient:
    """The asyncio client of one gateway: the arguments and defaults of :class:`fencegate.Client`; use it
    from one event loop. ``async with AsyncClient() as client`` closes its connections on exit."""

    def __init__(self, url: Optional[str] = None, *, api_key: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, retry: RetryPolicy = RetryPolicy(), owner: Optional[str] = None) -> None:
        self.transport = AsyncTransport(url or os.environ.get("FENCEGATE_URL") or DEFAULT_URL,
                                        api_key=api_key if api_key is not None else os.environ.get("FENCEGATE_KEY"),
                                        ca_file=ca_file or os.environ.get("FENCEGATE_CACERT") or None,
                                        timeout=timeout, retry=retry)
        self.owner = owner

    def lock(self, name: str, ttl_ms: Optional[int] = None, wait_ms: Optional[int] = None, *,
             owner: Optional[str] = None, max_hold_ms: Optional[int] = None, request_id: Optional[str] = None,
             on_lost: Optional[Callable[[AsyncLease], None]] = None, renew: bool = True,
             watch: bool = True) -> AsyncLease:
        """A lease on the lock ``name``, acquired by ``async with`` (or ``await lease.acquire()``)."""
        return AsyncLease(self, "lock", name, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner or self.owner,
                          max_hold_ms=max_hold_ms, request_id=request_id, on_lost=on_lost, renew=renew, watch=watch)

    def semaphore(self, name: str, limit: int, ttl_ms: Optional[int] = None, wait_ms: Optional[int] = None, *,
                  owner: Optional[str] = None, max_hold_ms: Optional[int] = None, request_id: Optional[str] = None,
                  on_lost: Optional[Callable[[AsyncLease], None]] = None, renew: bool = True,
                  watch: bool = True) -> AsyncLease:
        """A lease on one of the ``limit`` slots of semaphore ``name``."""
        return AsyncLease(self, "semaphore", name, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner or self.owner,
                          max_hold_ms=max_hold_ms, limit=limit, request_id=request_id, on_lost=on_lost, renew=renew,
                          watch=watch)

    def lockset(self, names: Sequence[str], ttl_ms: int = 30000, wait_ms: Optional[int] = None, *,
                owner: Optional[str] = None, max_hold_ms: Optional[int] = None, request_id: Optional[str] = None,
                on_lost: Optional[Callable[[AsyncLockSet], None]] = None, renew: bool = True,
                watch: bool = True) -> AsyncLockSet:
        """Leases on every lock of ``names``, all or none."""
        return AsyncLockSet(self, names, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner or self.owner,
                            max_hold_ms=max_hold_ms, request_id=request_id, on_lost=on_lost, renew=renew, watch=watch)

    async def lock_status(self, name: str) -> Row:
        """``{"lock", "held", "fence", "owner", "expires_in_ms", "waiting"}``; never the token."""
        return (await self.transport.call("GET", f"/v1/locks/{quote(name)}", effect=Effect.READ)).body

    async def semaphore_status(self, name: str) -> Row:
        """``{"semaphore", "limit", "holders", "waiting"}``."""
        return (await self.transport.call("GET", f"/v1/semaphores/{quote(name)}", effect=Effect.READ)).body

    async def revoke_lock(self, name: str, reason: str = "") -> Optional[int]:
        """Ends the current holder's lease on ``name`` (scope ``admin``); not retried once sent, and as
        :meth:`fencegate.Client.revoke_lock`, a 5xx leaves its outcome unknown."""
        body = (await self.transport.call("POST", f"/v1/locks/{quote(name)}/revoke", {"reason": reason},
                                          effect=Effect.ONCE, write=True)).body
        return body.get("revoked_fence")

    async def revoke_semaphore(self, name: str, fence: int, reason: str = "") -> Optional[int]:
        """Ends the lease of the holder of ``fence`` on semaphore ``name`` (scope ``admin``); retried, and as
        :meth:`fencegate.Client.revoke_semaphore`, a 5xx to its last try leaves its outcome unknown."""
        body = (await self.transport.call("POST", f"/v1/semaphores/{quote(name)}/revoke",
                                          {"fence": fence, "reason": reason}, effect=Effect.IDEMPOTENT,
                                          write=True)).body
        return body.get("revoked_fence")

    def pg(self, table: str, token: Optional[str] = None, owner: Optional[str] = None) -> PgTable[Awaitable[Row]]:
        """A configured table: reads need no token; writes present ``token``."""
        return PgTable(AsyncCalls(self.transport), table, Holder(token, owner or self.owner))

    def redis(self, token: Optional[str] = None, owner: Optional[str] = None) -> RedisKeys[Awaitable[Row]]:
        """Keys under the configured Redis prefixes; as :meth:`pg`."""
        return RedisKeys(AsyncCalls(self.transport), Holder(token, owner or self.owner))

    async def audit_rejections(self, resource: Optional[str] = None, lock: Optional[str] = None,
                               since_ms: Optional[int] = None, page_size: int = 100,
                               after_id: Optional[int] = None) -> AsyncIterator[Row]:
        """Every refused write matching the filters, oldest first, page by page (``async for``)."""
        while True:
            query = {"resource": resource, "lock": lock, "since_ms": since_ms, "limit": page_size,
                     "after_id": after_id}
            page = (await self.transport.call("GET", "/v1/audit/rejections", effect=Effect.READ, query=query)).body
            for item in page["items"]:
                yield item
            after_id = page.get("next_after_id")
            if after_id is None or not page["items"]:
                return

    async def ready(self) -> bool:
        """True when the gateway answers ``/readyz`` with 200 (Redis and Postgres reachable)."""
        try:
            await self.transport.call("GET", "/readyz", effect=Effect.READ, retry=NO_RETRY)
        except (ProblemError, GatewayUnreachable):
            return False
        return True

    async def close(self) -> None:
        """Closes the idle connections (leases still held keep theirs until released)."""
        await self.transport.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await self.close()
