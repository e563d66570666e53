# SPDX-License-Identifier: Apache-2.0
"""Leases held through the gateway: a lock, a semaphore slot, or a lock set, used as context managers.

Owns: acquiring (with a ``request_id`` that makes retries safe), giving back what an interrupted acquire,
or one that failed unanswered, may have been granted, the lease's lost state and callback, explicit renew
and release, and handing the lease's token to fenced writes. Must not: schedule renewals or watch
(keeper.py does) or build write calls (writes.py does).

A lease is *lost* when the client learns that it no longer holds it: a renewal refused or not answered
for a whole TTL, the watch endpoint reporting it released, expired or revoked, or the gateway answering
410 to a write, renew or release. From then on ``lease.lost`` is set, ``lease.lost_reason`` says why,
the ``on_lost`` callback has run once, nothing renews it, and its fenced writes raise LeaseLost without
being sent. A write is checked so before each of its tries: one waiting to be retried as the lease is
lost goes out no more, and raises OutcomeUnknown (its ``last`` the LeaseLost) when an earlier try may have
been applied. The gateway's fence check still guards the moment between the client's check and the
write's arrival.
"""

from __future__ import annotations

import contextlib
import logging
import math
import numbers
import threading
import time
import uuid
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type

from .errors import FencegateError, GatewayUnreachable, LeaseLost, MaxHoldExceeded, ProblemError, lease_lost
from .keeper import Keeper
from .transport import NO_RETRY, Connection, Effect, RetryPolicy, Transport, quote
from .writes import Holder, PgTable, RedisKeys, Row, SyncCalls

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("fencegate")

class _LostState:
    """The shared lost flag of a lease (a lock set shares one among its locks)."""

    def __init__(self, name: str, on_lost: Optional[Callable[[Any], None]]) -> None:
        self.name = name
        self.event = threading.Event()
        self.reason: Optional[str] = None
        self.on_lost = on_lost
        self.keeper: Optional[Keeper] = None
        self.kept = False
        self.releasing = False  # release() was called: nothing keeps the lease, no write goes out under it
        self.released = False  # the gateway answered a release (200, or 410): it is not sent again
        self._guard = threading.Lock()

    def mark(self, reason: str, lease: Any) -> None:
        """Records the loss once and calls the callback (errors in it are logged, not raised)."""
        with self._guard:
            if self.event.is_set():
                return
            self.reason = reason
            self.event.set()
        log.warning("lease on %s lost (%s)", self.name, reason)
        if self.on_lost is not None:
            try:
                self.on_lost(lease)
            except Exception:  # noqa: BLE001 - a callback's failure must not kill the keeper
                log.exception("on_lost callback of %s failed", self.name)
        if self.keeper is not None:
            self.keeper.stop()

    def check(self, lease: Any) -> None:
        """Raises LeaseLost if the lease is known to be lost (or, while kept alive, past what its last
        successful renewal granted), or was released: a write must never go out under a lease its holder
        gave up, also while its release is still to be sent again."""
        if self.releasing:
            raise lease_lost(self.name, "released")
        lapsed = self.keeper.lapsed() if self.kept and self.keeper is not None else None
        if lapsed is not None:
            self.mark(lapsed, lease)
        if self.event.is_set():
            raise lease_lost(self.name, self.reason or "lost")


class _LeaseHolder(Holder):
    """Hands a lease's token to writes, refusing once the lease is lost."""

    def __init__(self, lease: "_Fenced") -> None:
        super().__init__(None, lease.owner)
        self._lease = lease

    def token(self) -> str:
        return self._lease._token_for_write()

    def check(self) -> None:
        self._lease.check()

    def refused(self, error: ProblemError) -> None:
        if isinstance(error, LeaseLost):
            self._lease._state.mark(error.reason or "lease_lost", self._lease)


class _Fenced:
    """What every held lease offers: its token and fence, its lost state, and fenced writes."""

    _state: _LostState
    token: Optional[str]
    fence: Optional[int]
    owner: Optional[str]

    def __init__(self, client: "Client") -> None:
        self._client = client
        self._holder = _LeaseHolder(self)

    @property
    def lost(self) -> threading.Event:
        """Set as soon as the client knows the lease is lost."""
        return self._state.event

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the lease was lost (``expired``, ``revoked``, ``released``, ``lease_lost``, ``unrenewed``,
        ``max_hold_exceeded``, ...), or None while it is held."""
        return self._state.reason

    def check(self) -> None:
        """Raises LeaseLost if the lease is known to be lost; a cheap call to make between steps of work."""
        self._state.check(self)

    def _token_for_write(self) -> str:
        if self.token is None:
            raise RuntimeError("the lease is not held: acquire it first")
        self.check()
        return self.token

    def pg(self, table: str) -> PgTable[Row]:
        """A configured Postgres table, written with this lease's token: ``lease.pg("invoices").patch(...)``."""
        return PgTable(SyncCalls(self._client.transport), table, self._holder)

    @property
    def redis(self) -> RedisKeys[Row]:
        """Keys under the configured Redis prefixes, written with this lease's token."""
        return RedisKeys(SyncCalls(self._client.transport), self._holder)


def _fresh_start(state: _LostState, lease: Any, sent_at: float, ttl_ms: int,
                 renew: Callable[[float], Any], timeout_s: float) -> Tuple[float, Any]:
    """When the lease's validity starts, by this host's monotonic clock, and the renewal answer it starts
    with (None: the acquire's whole TTL).

    The gateway granted the lease at some moment between sending the acquire (sent_at) and its answer;
    counting from sent_at is safe, but after a long wait in the queue it would make a fresh lease look
    nearly expired. An acquire whose answer took over a third of the TTL is therefore renewed once at
    once (one try, within timeout_s), and validity counts from that renewal and what it granted. Only
    a kept lease is: one acquired with renew=False is renewed when its caller says so, as in the Go and
    TypeScript clients. As there, the renewal raises nothing: a 410 or ``max_hold_exceeded`` marks the
    lease lost, and after any other failure the keeper's renewals try again while validity still counts
    from sent_at, the acquire's whole TTL. Only a renewal that succeeded moves the start: the grant may
    have come as soon as the acquire arrived, its answer late, and then the gateway ends it a TTL after.
    """
    if time.monotonic() - sent_at <= ttl_ms / 3000.0:
        return sent_at, None
    renewed_at = time.monotonic()
    try:
        return renewed_at, renew(timeout_s)
    except (LeaseLost, MaxHoldExceeded) as e:
        state.mark(losing_reason(e) or "lease_lost", lease)
    except FencegateError as e:
        log.warning("renewal of %s after its acquire failed (%s); the keeper tries again", state.name, e)
    return sent_at, None


def _keep(state: _LostState, lease: Any, transport: Transport, ttl_ms: int,
          renew_call: Callable[[float, Connection], Any], watches: List[Tuple[str, int]], sent_at: float) -> None:
    """Starts keeping a lease acquired with a call sent at sent_at, unless its fresh start found it lost."""
    sent_at, grant = _fresh_start(state, lease, sent_at, ttl_ms,
                                  lambda timeout_s: renew_call(timeout_s, transport.connection()), transport.timeout)
    if state.event.is_set():
        return  # nothing to keep: releasing it (leaving `with`) raises LeaseLost
    keeper = Keeper(transport, ttl_ms, renew_call, watches, lambda reason: state.mark(reason, lease), sent_at, grant)
    state.keeper, state.kept = keeper, True
    keeper.start()


@contextlib.contextmanager
def _released_on_error(release: Callable[[], Any]) -> Iterator[None]:
    """Releases a lease just acquired if starting to keep it raises (an interrupt, no thread to be had):
    its acquire raises then, so no `with` block would leave and release it."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(FencegateError):
            release()
        raise


def losing_reason(error: FencegateError) -> Optional[str]:
    """Why a refusal of a renewal, release or write ends the lease (the 410's own ``reason``, e.g.
    ``revoked``, else ``lease_lost``; ``max_hold_exceeded``), or None when it does not."""
    if isinstance(error, LeaseLost):
        return error.reason or "lease_lost"
    if isinstance(error, MaxHoldExceeded):
        return "max_hold_exceeded"
    return None


def _release(state: _LostState, lease: Any, call: Callable[[], Any]) -> None:
    """Sends a release, unless the gateway already answered one: after a 200 or a 410 it is done, after
    any other failure (no answer within the retries, a 503, an interrupt) the next release() sends it
    again, as the gateway answers a repeated release 200 (API.md). A lease the client already counts as
    lost is released all the same (it may still be held, e.g. when only renewals failed to get
    through), and then failures are no news."""
    if state.released:
        return
    try:
        call()
    except FencegateError as e:
        if _release_failed(state, lease, e):
            raise
    else:
        state.released = True


def _release_failed(state: _LostState, lease: Any, error: FencegateError) -> bool:
    """Records a release that failed with error (a 410 ends it; anything else leaves it to be sent again);
    True when error is to be raised, False when the lease was lost and so the failure is no news."""
    if isinstance(error, LeaseLost):
        state.released = True
        state.mark(error.reason or "lease_lost", lease)
        return False
    return not state.event.is_set()


def _leave(name: str, release: Callable[[], None], block_raised: bool) -> None:
    """Releases on leaving a `with` block: a failure is raised, unless the block raised (see
    _release_unraised)."""
    if not block_raised:
        release()
        return
    try:
        release()
    except FencegateError as e:
        _release_unraised(name, e)


def _release_unraised(name: str, error: FencegateError) -> None:
    """Logs the failure of a release made on leaving a block that raised: the block's exception is the
    one that goes on, as in the Go and TypeScript clients. A loss was logged when it was learnt."""
    if not isinstance(error, LeaseLost):
        log.warning("release of %s on leaving a failed block failed (%s); release() sends it again", name, error)


MAX_GATEWAY_WAIT_MS = 3_600_000
"""The longest ``wait_ms`` a gateway takes, and so the longest its ``defaults.wait_ms`` may be: an hour."""


def _gateway_wait_s(wait_ms: Optional[int]) -> float:
    """How long the gateway may hold an acquire with this wait_ms before it answers, added to the call's
    timeout: without one (None), the gateway's ``defaults.wait_ms``, which the client cannot know."""
    return (MAX_GATEWAY_WAIT_MS if wait_ms is None else wait_ms) / 1000.0


def _request_id() -> str:
    return "py-" + uuid.uuid4().hex


_Release = Callable[[Dict[str, Any]], Tuple[str, Dict[str, Any]]]
"""Gives the release of what an acquire answered: its path and body."""


def _lease_release(path: str) -> _Release:
    """The release of a lock's or semaphore's lease at path (``/v1/locks/<name>``)."""
    return lambda granted: (path + "/release", {"token": granted["token"]})


def _set_release(granted: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """The release of a lock set."""
    return "/v1/locksets/release", {"tokens": [lock["token"] for lock in granted["locks"]]}


def _interrupted(error: BaseException) -> bool:
    """Whether error ended a call from outside the client while it waited (a cancelled asyncio task,
    KeyboardInterrupt, SystemExit) rather than being its answer or its own failure."""
    return not isinstance(error, Exception)


def _unanswered(error: BaseException) -> bool:
    """Whether error ended an acquire after a try that may have reached the gateway and got no answer (a
    GatewayUnreachable with ``sent`` true): the gateway may have granted it and keep the grant."""
    return isinstance(error, GatewayUnreachable) and error.sent


def _give_back_retry(error: BaseException, retry: RetryPolicy) -> Optional[RetryPolicy]:
    """The retries of the give-back that an acquire ended by error calls for (see :func:`_acquire`), or None
    when it calls for none. An interruption should not wait: each call once. After a try that got no answer
    (see :func:`_unanswered`) the gateway may be back soon: retry, the client's policy. A 5xx answered to the
    last try may hide a grant too (the gateway answers 503 when Redis's reply to it missed its deadline):
    each call once, as the gateway has just answered the whole policy and waiting out its Retry-After again
    would only hold the error back. A refusal (a 4xx) answers for the request_id, so for every try, and an
    acquire whose every try was refused a connection was never granted: nothing to give back."""
    if _interrupted(error) or isinstance(error, ProblemError) and (error.status or 0) >= 500:
        return NO_RETRY
    if _unanswered(error):
        return retry
    return None


def _give_back_body(body: Dict[str, Any]) -> Dict[str, Any]:
    """The body of the acquire that gives back what an acquire of body that was interrupted, or that failed
    unanswered, may have been granted."""
    return dict(body, wait_ms=0)


def _acquire(transport: Transport, path: str, body: Dict[str, Any], wait_ms: Optional[int],
             release: _Release) -> Dict[str, Any]:
    """Sends the acquire of body to path and returns the gateway's answer.

    An acquire interrupted while it waits (see :func:`_interrupted`) may have been granted all the same, as
    its caller went: the gateway keeps a grant whose client hung up for a retry of its ``request_id``,
    holding the lock until the lease's TTL ends. So may one whose last retry failed after a try that got
    no answer (see :func:`_unanswered`: the gateway was stopped, or its answer lost), or with a 5xx (the
    gateway answers 503 to a grant whose reply from Redis missed its deadline). The interruption or the
    failure is raised, as it was, only once :func:`_give_back` has asked for that grant and released it,
    tried as :func:`_give_back_retry` says."""
    try:
        return granted(path, transport.call("POST", path, _acquire_body(body, wait_ms), effect=Effect.IDEMPOTENT,
                                            wait_s=_gateway_wait_s(wait_ms)).body)
    except BaseException as e:
        retry = _give_back_retry(e, transport.retry)
        if retry is not None:
            _give_back(transport, path, body, release, retry)
        raise


def _fence(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def granted(path: str, answer: Any) -> Dict[str, Any]:
    """The answer of the acquire at path, if it is a grant: a non-empty ``token`` and a positive ``fence``
    (for a lock set, each of its ``locks`` with its ``lock`` name too). Anything else, a JSON object from
    something else at the gateway's address, is no answer of the gateway's: GatewayUnreachable with
    ``sent`` true, never a lease without a token."""
    if path.endswith("/v1/locksets/acquire"):
        locks = answer.get("locks") if isinstance(answer, dict) else None
        ok = isinstance(locks, list) and len(locks) > 0 and all(
            isinstance(lock, dict) and isinstance(lock.get("lock"), str) and isinstance(lock.get("token"), str)
            and lock["token"] != "" and _fence(lock.get("fence")) for lock in locks)
    else:
        ok = (isinstance(answer, dict) and isinstance(answer.get("token"), str) and answer["token"] != ""
              and _fence(answer.get("fence")))
    if not ok:
        raise GatewayUnreachable(f"POST {path}: no answer from the gateway: an answer without a token and a fence "
                                 "is no grant", sent=True)
    return answer


def _give_back(transport: Transport, path: str, body: Dict[str, Any], release: _Release,
               retry: RetryPolicy) -> None:
    """Asks once more for the acquire of body at path, under its ``request_id`` and without waiting
    (``wait_ms`` 0), and releases what that answers: the lease the gateway granted as the caller went, if
    it did. A refusal (409 ``lock_busy``: not granted, and the place kept for a retry passes its turn on by
    itself; 410: over) or no answer leaves nothing to do. Each call is tried as retry allows, within the
    timeout."""
    with contextlib.suppress(FencegateError):
        grant = granted(path, transport.call("POST", path, _give_back_body(body), effect=Effect.IDEMPOTENT,
                                             retry=retry).body)
        release_path, release_body = release(grant)
        transport.call("POST", release_path, release_body, effect=Effect.IDEMPOTENT, retry=retry)


def _whole_ms(ms: Any) -> Any:
    """A duration as the gateway takes it, in whole milliseconds: a finite number that is not an integer
    (``10000 / 3``, ``3000.0``) rounded down, as the Go client's durations go out and as what is left of a
    wait is sent on a retry, so that a lease never asks for more than its caller said. Anything else (an
    int, a bool, None, NaN) goes as it is, for the gateway to judge as before; a negative number stays
    negative, and refused."""
    if isinstance(ms, numbers.Real) and not isinstance(ms, numbers.Integral) and math.isfinite(ms):
        return math.floor(ms)
    return ms


def _lease_body(ttl_ms: Optional[int], wait_ms: Optional[int], owner: Optional[str], max_hold_ms: Optional[int],
                request_id: str, **extra: Any) -> Dict[str, Any]:
    body = {"ttl_ms": _whole_ms(ttl_ms), "wait_ms": _whole_ms(wait_ms), "owner": owner,
            "max_hold_ms": _whole_ms(max_hold_ms), "request_id": request_id, **extra}
    return {k: v for k, v in body.items() if v is not None}


def _acquire_body(body: Dict[str, Any], wait_ms: Optional[int]) -> Callable[[], Dict[str, Any]]:
    """The acquire body for each try: a retry asks only for what is left of the original wait."""
    deadline = time.monotonic() + (wait_ms or 0) / 1000.0

    def build() -> Dict[str, Any]:
        if wait_ms:
            body["wait_ms"] = max(0, int((deadline - time.monotonic()) * 1000))
        return body

    return build


class Lease(_Fenced):
    """A lease on a lock or on one slot of a semaphore; made by ``Client.lock`` / ``Client.semaphore``.

    Use it as a context manager::

        with client.lock("invoice:42", ttl_ms=30000, wait_ms=10000) as lease:
            lease.pg("invoices").patch(42, status="paid")

    Entering acquires (raising LockBusy, TooManyWaiters, LimitMismatch, Unauthorized, ... on refusal),
    then renews in the background every third of the TTL and watches the lease; leaving stops that and
    releases. If the lease was lost inside the block (and nothing else is being raised), leaving raises
    LeaseLost: the block's work may not have been exclusive.

    Attributes once acquired: ``name``, ``kind`` (``"lock"`` or ``"semaphore"``), ``token`` (the
    holder's secret), ``fence``, ``ttl_ms``, ``expires_at_ms`` (gateway clock), ``lost``,
    ``lost_reason``. ``acquire()`` and ``release()`` may also be called directly.
    """

    def __init__(self, client: "Client", kind: str, name: str, *, ttl_ms: Optional[int] = None,
                 wait_ms: Optional[int] = None, owner: Optional[str] = None, max_hold_ms: Optional[int] = None,
                 limit: Optional[int] = None, request_id: Optional[str] = None,
                 on_lost: Optional[Callable[["Lease"], None]] = None, renew: bool = True,
                 watch: bool = True) -> None:
        self.kind = kind
        self.name = name
        self.owner = owner
        self.token = None
        self.fence = None
        self.ttl_ms = ttl_ms
        self.expires_at_ms: Optional[int] = None
        self.request_id = request_id or _request_id()
        self._wait_ms = wait_ms
        self._body = _lease_body(ttl_ms, wait_ms, owner, max_hold_ms, self.request_id, limit=limit)
        self._renew = renew
        self._watch = watch
        self._state = _LostState(name, on_lost)
        super().__init__(client)

    @property
    def _path(self) -> str:
        return f"/v1/{self.kind}s/{quote(self.name)}"

    @property
    def held(self) -> bool:
        """True from a successful acquire until the release or the loss."""
        return self.token is not None and not self._state.releasing and not self.lost.is_set()

    @property
    def watching(self) -> bool:
        """True while the background keeper watches the lease through the gateway's watch endpoint."""
        keeper = self._state.keeper
        return keeper is not None and keeper.watching > 0

    def acquire(self) -> "Lease":
        """Acquires the lease, waiting up to ``wait_ms`` in the FIFO queue, and starts keeping it alive
        (unless ``renew=False``). Returns self. Raises LockBusy when not obtained in time."""
        if self.token is not None:
            raise RuntimeError(f"the lease on {self.name} is already acquired")
        sent_at = time.monotonic()
        answer = _acquire(self._client.transport, self._path + "/acquire", self._body, self._wait_ms,
                          _lease_release(self._path))
        self.token, self.fence = answer["token"], answer["fence"]
        self.ttl_ms, self.expires_at_ms = answer["ttl_ms"], answer.get("expires_at_ms")
        if self._renew:
            watches = [(self._path, self.fence)] if self._watch else []
            with _released_on_error(self._stop_and_release):
                _keep(self._state, self, self._client.transport, self.ttl_ms, self._renew_once, watches, sent_at)
        return self

    def _renew_once(self, timeout_s: float, conn: Connection) -> Dict[str, Any]:
        answer = self._client.transport.call("POST", self._path + "/renew", {"token": self.token, "ttl_ms": self.ttl_ms},
                                             effect=Effect.IDEMPOTENT, connection=conn, timeout=timeout_s,
                                             retry=NO_RETRY).body
        self.expires_at_ms = answer.get("expires_at_ms", self.expires_at_ms)
        return answer

    def renew(self, ttl_ms: Optional[int] = None) -> Dict[str, Any]:
        """Renews now (for leases acquired with ``renew=False``); answers ``{"fence", "expires_at_ms",
        "hold_until_ms"}``. Raises LeaseLost or MaxHoldExceeded, and marks the lease lost, when refused."""
        self.check()
        try:
            answer = self._client.transport.call("POST", self._path + "/renew",
                                                 {"token": self.token, "ttl_ms": _whole_ms(ttl_ms or self.ttl_ms)},
                                                 effect=Effect.IDEMPOTENT).body
        except ProblemError as e:
            reason = losing_reason(e)
            if reason is not None:
                self._state.mark(reason, self)
            raise
        self.expires_at_ms = answer.get("expires_at_ms", self.expires_at_ms)
        return answer

    def release(self) -> None:
        """Stops keeping the lease alive and releases it (the next waiter gets it at once). Raises
        LeaseLost if the gateway says the lease had already ended. From the first call on no write goes
        out under the lease; a release that failed (GatewayUnreachable, BackendUnavailable, ...) is sent
        again by the next call."""
        lost = self._stop_and_release()
        if lost is not None:
            raise lost

    def _stop_and_release(self) -> Optional[LeaseLost]:
        """Releases; returns the LeaseLost to raise if the lease was lost before, else None."""
        self._state.releasing = True
        if self._state.keeper is not None:
            self._state.keeper.stop()
        self._state.kept = False
        if self.token is None:
            return None
        _release(self._state, self, lambda: self._client.transport.call(
            "POST", self._path + "/release", {"token": self.token}, effect=Effect.IDEMPOTENT))
        return lease_lost(self.name, self.lost_reason or "lost") if self.lost.is_set() else None

    def __enter__(self) -> "Lease":
        if self.token is None:
            self.acquire()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        _leave(self._state.name, self.release, exc_type is not None)

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("held" if self.token else "not acquired")
        return f"<Lease {self.kind} {self.name!r} fence={self.fence} {state}>"


class LockSetMember(_Fenced):
    """One lock of a held lock set: its own token and fence for writes to that lock's resources."""

    def __init__(self, client: "Client", state: _LostState, name: str, token: str, fence: int,
                 owner: Optional[str]) -> None:
        self.name = name
        self.token = token
        self.fence = fence
        self.owner = owner
        self._state = state
        super().__init__(client)

    def __repr__(self) -> str:
        return f"<LockSetMember {self.name!r} fence={self.fence}>"


class LockSet:
    """All-or-none leases on several locks (``Client.lockset``), kept alive and released together.

    ``with client.lockset(["acct:1", "acct:2"]) as locks: locks["acct:1"].pg("accounts").patch(...)``.
    The TTL is always sent (default 30 s), since renewals are scheduled from it.
    Indexing by name gives a :class:`LockSetMember` with that lock's token; iterating yields them in the
    order the gateway answered. ``lost`` covers the whole set: losing any of its locks loses the set.
    """

    def __init__(self, client: "Client", names: Sequence[str], *, ttl_ms: int = 30000,
                 wait_ms: Optional[int] = None, owner: Optional[str] = None, max_hold_ms: Optional[int] = None,
                 request_id: Optional[str] = None, on_lost: Optional[Callable[["LockSet"], None]] = None,
                 renew: bool = True, watch: bool = True) -> None:
        self._client = client
        self.names = list(names)
        self.owner = owner
        self.ttl_ms = _whole_ms(ttl_ms)
        self.request_id = request_id or _request_id()
        self._wait_ms = wait_ms
        self._body = _lease_body(ttl_ms, wait_ms, owner, max_hold_ms, self.request_id, names=self.names)
        self._renew = renew
        self._watch = watch
        self._state = _LostState(",".join(self.names), on_lost)
        self.members: Dict[str, LockSetMember] = {}

    @property
    def lost(self) -> threading.Event:
        """Set as soon as the client knows any lock of the set is lost."""
        return self._state.event

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the set was lost, or None while it is held."""
        return self._state.reason

    @property
    def tokens(self) -> List[str]:
        """The tokens of every lock of the set."""
        return [m.token for m in self.members.values() if m.token is not None]

    def check(self) -> None:
        """Raises LeaseLost if the set is known to be lost."""
        self._state.check(self)

    def __getitem__(self, name: str) -> LockSetMember:
        return self.members[name]

    def __iter__(self) -> Iterator[LockSetMember]:
        return iter(self.members.values())

    def __len__(self) -> int:
        return len(self.members)

    def acquire(self) -> "LockSet":
        """Acquires every lock or none (LockBusy names the lock not obtained within ``wait_ms``)."""
        if self.members:
            raise RuntimeError("the lock set is already acquired")
        sent_at = time.monotonic()
        answer = _acquire(self._client.transport, "/v1/locksets/acquire", self._body, self._wait_ms, _set_release)
        for item in answer["locks"]:
            self.members[item["lock"]] = LockSetMember(self._client, self._state, item["lock"], item["token"],
                                                       item["fence"], self.owner)
        if self._renew:
            watches = [(f"/v1/locks/{quote(m.name)}", m.fence) for m in self.members.values()] if self._watch else []
            with _released_on_error(self._stop_and_release):
                _keep(self._state, self, self._client.transport, self.ttl_ms, self._renew_once, watches, sent_at)
        return self

    def _renew_once(self, timeout_s: float, conn: Connection) -> Dict[str, Any]:
        return self._client.transport.call("POST", "/v1/locksets/renew", {"tokens": self.tokens, "ttl_ms": self.ttl_ms},
                                           effect=Effect.IDEMPOTENT, connection=conn, timeout=timeout_s,
                                           retry=NO_RETRY).body

    def renew(self, ttl_ms: Optional[int] = None) -> Row:
        """Renews every lock of the set now."""
        self.check()
        try:
            return self._client.transport.call("POST", "/v1/locksets/renew",
                                               {"tokens": self.tokens, "ttl_ms": _whole_ms(ttl_ms or self.ttl_ms)},
                                               effect=Effect.IDEMPOTENT).body
        except ProblemError as e:
            reason = losing_reason(e)
            if reason is not None:
                self._state.mark(reason, self)
            raise

    def release(self) -> None:
        """Stops keeping the set alive and releases every lock; LeaseLost if one had already ended. As
        :meth:`Lease.release`, a release that failed is sent again by the next call."""
        lost = self._stop_and_release()
        if lost is not None:
            raise lost

    def _stop_and_release(self) -> Optional[LeaseLost]:
        self._state.releasing = True
        if self._state.keeper is not None:
            self._state.keeper.stop()
        self._state.kept = False
        if not self.members:
            return None
        _release(self._state, self, lambda: self._client.transport.call(
            "POST", "/v1/locksets/release", {"tokens": self.tokens}, effect=Effect.IDEMPOTENT))
        return lease_lost(self._state.name, self.lost_reason or "lost") if self.lost.is_set() else None

    def __enter__(self) -> "LockSet":
        if not self.members:
            self.acquire()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        _leave(self._state.name, self.release, exc_type is not None)
