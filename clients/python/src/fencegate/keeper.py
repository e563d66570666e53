# SPDX-License-Identifier: Apache-2.0
"""Keeps a lease alive in the background and notices its loss: one renewal thread, one watch thread per
watched lock or semaphore slot.

Owns: when to renew, how long a lease counts as valid without a successful renewal, and the long polls
of the watch endpoint. Must not: release the lease (its owner does, after :meth:`Keeper.stop`) or
retry anything itself through the transport (each renewal is tried once; the loop decides).

Renewal: every third of the TTL. A renewal is valid for the ``ttl_ms`` it answers, which is less than
the TTL asked once the hold deadline (acquire time + ``max_hold_ms``) cuts it, counted from the moment it
was *sent*; the next one goes a third of that later. A renewal whose expiry reached the hold deadline is
the last: no renewal can move it, and the lease is lost ("max_hold_exceeded") when that validity runs
out. A refusal (410 ``lease_lost``, 409 ``max_hold_exceeded``, 401, 403, ...) ends the lease at once. No
answer, or a 5xx, is tried again after a short pause until the lease would have run out, counted from the
moment the last successful renewal was *sent*; then the lease is lost too ("unrenewed").

Watch: ``GET /v1/<kind>/<name>?watch=true&fence=N&wait_ms=W`` answers as soon as the lease ends
("released", "expired", "revoked"), so the loss is known within a round trip instead of at the next
renewal. A gateway without the endpoint answers the plain status at once (or 400 for the unknown query
parameter): the watch thread then stops and renewals alone detect the loss. A poll that gets no answer, a
5xx, or 429 ``too_many_waiters`` (the API key's quota of parked waits and watches is full for now) is
repeated after ``Retry-After`` when the gateway gives one, else after a pause that doubles from
WATCH_RETRY_S up to WATCH_WAIT_MS.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import FencegateError, GatewayUnreachable, ProblemError
from .transport import NO_RETRY, Connection, Effect, Transport

log = logging.getLogger("fencegate")

WATCH_WAIT_MS = 25000
"""Longest single watch poll (below the idle timeouts of common proxies)."""

RETRY_MIN_S = 0.05
"""Shortest pause between renewals that got no answer."""

WATCH_RETRY_S = 1.0
"""First pause before polling again after a watch poll that got no answer, a 5xx or a 429 without
Retry-After; it doubles with each such poll in a row, up to WATCH_WAIT_MS."""

WATCH_HELD, WATCH_LOST, WATCH_OVER = "held", "lost", "over"


def shortest_grant(answer: Any) -> Optional[Dict[str, Any]]:
    """What a renewal answer granted: the answer itself for a lease, the lock with the shortest grant for a
    lock set (``{"locks": [...]}``: the set is valid as long as the first of its locks to end)."""
    if not isinstance(answer, dict):
        return None
    locks = answer.get("locks")
    if isinstance(locks, list):
        grants = [lock for lock in locks if isinstance(lock, dict)]
        return min(grants, key=lambda lock: lock.get("ttl_ms") or float("inf"), default=None)
    return answer


class RenewalSchedule:
    """When to renew one lease and how long it counts as valid, apart from the I/O (the thread and the
    asyncio keepers share it; times are monotonic seconds): the lease is valid for what its last
    successful renewal granted (``ttl_ms``; the whole TTL for the acquire's own grant), counted from the
    sending of that renewal (or acquire), and is renewed a third of that later; a grant that reached the
    hold deadline (``expires_at_ms`` at ``hold_until_ms``) is final, renewed no more; after a failed
    renewal try again soon, a quarter of what is left, between RETRY_MIN_S and a second."""

    def __init__(self, ttl_s: float, sent_at: float, grant: Optional[Dict[str, Any]] = None) -> None:
        self.ttl_s = ttl_s
        self.final = False
        self.valid_until = self.next_at = sent_at
        self.renewed(sent_at, grant)

    def delay(self, now: float) -> float:
        """Seconds to wait before the next renewal."""
        return max(0.0, self.next_at - now)

    def lapsed(self, now: float) -> Optional[str]:
        """Why the lease counts as lost once it outlived what its last successful renewal granted
        ("max_hold_exceeded" after a final grant, else "unrenewed"), or None while it is valid."""
        if now < self.valid_until:
            return None
        return "max_hold_exceeded" if self.final else "unrenewed"

    def call_timeout(self, now: float, timeout_s: float) -> float:
        """How long a renewal sent at now may take: at most the transport's timeout, and no longer than
        the lease is valid (but at least RETRY_MIN_S)."""
        return max(RETRY_MIN_S, min(timeout_s, self.valid_until - now))

    def renewed(self, sent_at: float, grant: Optional[Dict[str, Any]] = None) -> None:
        """The renewal sent at sent_at succeeded and granted grant (None: the whole TTL). Its ``ttl_ms``
        counted from the sending is never later than the gateway's expiry; an answer without it (an older
        gateway) counts as the TTL asked."""
        grant = grant or {}
        ttl_ms, expires_at, hold_until = grant.get("ttl_ms"), grant.get("expires_at_ms"), grant.get("hold_until_ms")
        granted_s = ttl_ms / 1000.0 if isinstance(ttl_ms, (int, float)) and ttl_ms > 0 else self.ttl_s
        self.final = isinstance(expires_at, int) and isinstance(hold_until, int) and expires_at >= hold_until
        self.valid_until = sent_at + granted_s
        self.next_at = self.valid_until if self.final else sent_at + granted_s / 3

    def failed(self, now: float) -> None:
        """A renewal got no answer or a retryable refusal; now is when that was known."""
        self.next_at = now + max(RETRY_MIN_S, min(1.0, (self.valid_until - now) / 4))

    def outcome(self, sent_at: float, error: Optional[FencegateError], now: float,
                answer: Any = None) -> Optional[str]:
        """Takes the outcome of the renewal sent at sent_at (error None: it succeeded and answered answer),
        known at now: the reason it ends the lease with, or None to go on with the next renewal scheduled."""
        if error is None:
            self.renewed(sent_at, shortest_grant(answer))
            return None
        if isinstance(error, ProblemError):
            reason = renewal_refused(error)
            if reason is not None:
                return reason
            log.warning("renewal failed (%s), retrying", error)
        else:
            log.warning("renewal got no answer (%s), retrying", error)
        self.failed(now)
        return None


def renewal_refused(error: ProblemError) -> Optional[str]:
    """The reason a refused renewal ends the lease with, or None for a failure worth retrying (a 5xx)."""
    if error.status is not None and error.status < 500:
        return str(error.extra("reason") or error.code)
    return None


def watch_failed(error: FencegateError) -> Optional[str]:
    """What a watch poll that raised error means: why watching is over (a refusal: this gateway watches
    no such lease), or None to poll again after :func:`watch_pause` (no answer, a 5xx, or a 429: the
    key's quota of parked waits and watches is full for now)."""
    if isinstance(error, ProblemError) and error.status is not None and error.status < 500 and error.status != 429:
        return error.code
    return None


def watch_pause(error: FencegateError, failures: int) -> float:
    """Seconds to wait before polling again after the failures-th failed poll in a row, which raised error:
    its Retry-After when the gateway gave one, else WATCH_RETRY_S doubled for each earlier failure, up to
    WATCH_WAIT_MS."""
    retry_after = error.retry_after if isinstance(error, ProblemError) else None
    if retry_after is not None:
        return retry_after
    return min(WATCH_WAIT_MS / 1000.0, WATCH_RETRY_S * 2 ** (failures - 1))


def watch_verdict(answer: Any, fence: int, elapsed_s: float) -> Tuple[str, str]:
    """What one watch answer says: (WATCH_HELD, ""), (WATCH_LOST, reason) or (WATCH_OVER, why) when the
    gateway answered a plain status instead (no watch endpoint: renewals alone detect the loss)."""
    if not isinstance(answer, dict) or "held" not in answer:
        return WATCH_OVER, "no watch endpoint"
    if answer["held"] is False:
        return WATCH_LOST, str(answer.get("reason") or "not held")
    if answer.get("fence", fence) != fence:
        return WATCH_LOST, "taken over"
    if "waiting" in answer or elapsed_s < WATCH_WAIT_MS / 2000.0:
        return WATCH_OVER, "status answered instead of a watch"
    return WATCH_HELD, ""


def watch_query(fence: int) -> Dict[str, Any]:
    """The query of one watch poll of the lease with this fence."""
    return {"watch": True, "fence": fence, "wait_ms": WATCH_WAIT_MS}


RenewCall = Callable[[float, Connection], Dict[str, Any]]
"""Sends one renewal with a timeout (seconds) on a connection; returns the answer body or raises."""


class Keeper:
    """Renews one lease (or lock set) and watches it until :meth:`stop` or until it is lost.

    transport: the client's transport. ttl_ms: the lease's TTL, renewed to the same length.
    renew_call: one renewal (see RenewCall). watches: (status path, fence) of each lease to watch; empty
    for none. on_lost: called once, from a keeper thread, with the reason, when the lease is lost.
    sent_at: monotonic time at which the acquire (or the renewal that answered grant) was sent: the lease
    is valid until sent_at + ttl, or + the ttl_ms that grant answered.
    """

    def __init__(self, transport: Transport, ttl_ms: int, renew_call: RenewCall,
                 watches: List[Tuple[str, int]], on_lost: Callable[[str], None], sent_at: float,
                 grant: Any = None) -> None:
        self._transport = transport
        self._ttl_s = ttl_ms / 1000.0
        self._renew_call = renew_call
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._guard = threading.Lock()
        self._schedule = RenewalSchedule(self._ttl_s, sent_at, shortest_grant(grant))
        self.watching = 0
        self._conns: List[Connection] = []
        self._threads = [threading.Thread(target=self._renew_loop, args=(self._connection(),),
                                          name="fencegate-renew", daemon=True)]
        for path, fence in watches:
            self._threads.append(threading.Thread(target=self._watch_loop, args=(self._connection(), path, fence),
                                                  name="fencegate-watch", daemon=True))
        self.watching = len(watches)

    def _connection(self) -> Connection:
        conn = self._transport.dedicated()
        self._conns.append(conn)
        return conn

    def start(self) -> None:
        """Starts the threads."""
        for t in self._threads:
            t.start()

    def stop(self, wait_s: float = 5.0) -> None:
        """Stops renewing and watching; in-flight calls are cut short. Safe to call more than once and
        from a keeper thread (which then does not wait for itself)."""
        self._stop.set()
        for conn in self._conns:
            conn.abort()
        me = threading.current_thread()
        for t in self._threads:
            if t is not me and t.is_alive():
                t.join(wait_s)
        for conn in self._conns:
            conn.close()

    def lapsed(self) -> Optional[str]:
        """Why the lease counts as lost once it outlived what its last successful renewal granted (by this
        host's clock), or None while it is valid."""
        return self._schedule.lapsed(time.monotonic())

    def _lost(self, reason: str) -> None:
        with self._guard:
            if self._stop.is_set():
                return
            self._stop.set()
        for conn in self._conns:
            conn.abort()
        self._on_lost(reason)

    # -- renewals --

    def _renew_loop(self, conn: Connection) -> None:
        schedule = self._schedule
        while not self._stop.wait(schedule.delay(time.monotonic())):
            now = time.monotonic()
            lapsed = schedule.lapsed(now)
            if lapsed is not None:
                self._lost(lapsed)
                return
            error: Optional[FencegateError] = None
            answer: Any = None
            try:
                answer = self._renew_call(schedule.call_timeout(now, self._transport.timeout), conn)
            except (ProblemError, GatewayUnreachable) as e:
                error = e
            if isinstance(error, GatewayUnreachable) and self._stop.is_set():
                return  # stopped: the keeper aborted the call
            reason = schedule.outcome(now, error, time.monotonic(), answer)
            if reason is not None:
                self._lost(reason)
                return

    # -- watching --

    def _watch_loop(self, conn: Connection, path: str, fence: int) -> None:
        failures = 0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                answer = self._transport.call("GET", path, effect=Effect.READ, connection=conn, retry=NO_RETRY,
                                              query=watch_query(fence), wait_s=WATCH_WAIT_MS / 1000.0).body
            except (ProblemError, GatewayUnreachable) as e:
                over = watch_failed(e)
                if over is not None:
                    self._unwatched(over)
                    return
                failures += 1
                self._stop.wait(watch_pause(e, failures))
                continue
            failures = 0
            if not self._still_held(answer, fence, time.monotonic() - started):
                return

    def _still_held(self, answer: Any, fence: int, elapsed_s: float) -> bool:
        """Reads one watch answer; False once the watch is over (lease lost, or no watch endpoint)."""
        verdict, why = watch_verdict(answer, fence, elapsed_s)
        if verdict == WATCH_LOST:
            self._lost(why)
        elif verdict == WATCH_OVER:
            self._unwatched(why)
        return verdict == WATCH_HELD

    def _unwatched(self, why: str) -> None:
        with self._guard:
            self.watching -= 1
        log.info("not watching the lease (%s); renewals detect its loss", why)
