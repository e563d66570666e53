# SPDX-License-Identifier: Apache-2.0
"""The entry point of the fencegate client: one :class:`Client` per gateway, shared by all threads.

Owns: the gateway's address, key and TLS settings, the factories of leases and table/key handles, and
the calls that need no lease (status, revoke, reads, the audit trail). Must not: hold lease state
(lease.py) or open connections itself (transport.py).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Callable, Iterator, Optional, Sequence, Type

from .lease import Lease, LockSet
from .transport import Effect, RetryPolicy, Transport, quote
from .writes import Holder, PgTable, RedisKeys, Row, SyncCalls

DEFAULT_URL = "http://127.0.0.1:8480"


class Audit:
    """The audit trail of refused writes (``client.audit``)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def rejections(self, resource: Optional[str] = None, lock: Optional[str] = None,
                   since_ms: Optional[int] = None, page_size: int = 100,
                   after_id: Optional[int] = None) -> Iterator[Row]:
        """Every refused write matching the filters, oldest first, fetching pages of ``page_size`` as
        the iteration goes: ``{"id", "at_ms", "resource", "lock", "presented_fence", "current_fence",
        "owner", "client_addr", "method", "reason", ...}``. ``after_id`` starts after that record."""
        while True:
            query = {"resource": resource, "lock": lock, "since_ms": since_ms, "limit": page_size,
                     "after_id": after_id}
            page = self._transport.call("GET", "/v1/audit/rejections", effect=Effect.READ, query=query).body
            yield from page["items"]
            after_id = page.get("next_after_id")
            if after_id is None or not page["items"]:
                return


class Client:
    """A connection to one gateway, safe to share between threads (each gets its own keep-alive
    connection). Also a context manager that closes the connections on exit.

    url: ``http://host:port`` or ``https://host:port`` (default ``$FENCEGATE_URL``, else
    ``http://127.0.0.1:8480``). api_key: the bearer key (default ``$FENCEGATE_KEY``, as for fencectl;
    none when unset). ca_file: CA bundle that signed the gateway's certificate (default
    ``$FENCEGATE_CACERT``, else the system's). timeout: seconds to connect and to wait for an answer, on top of any wait the
    call itself asks for (an acquire's ``wait_ms``). retry: how calls that may be repeated are retried
    (see :class:`~fencegate.transport.RetryPolicy`). owner: default ``owner`` of leases and
    ``Fence-Owner`` of writes, shown in lock status and in the audit trail.
    """

    def __init__(self, url: Optional[str] = None, *, api_key: Optional[str] = None, ca_file: Optional[str] = None,
                 timeout: float = 10.0, retry: RetryPolicy = RetryPolicy(), owner: Optional[str] = None) -> None:
        self.transport = Transport(url or os.environ.get("FENCEGATE_URL") or DEFAULT_URL,
                                   api_key=api_key if api_key is not None else os.environ.get("FENCEGATE_KEY"),
                                   ca_file=ca_file or os.environ.get("FENCEGATE_CACERT") or None,
                                   timeout=timeout, retry=retry)
        self.owner = owner
        self.audit = Audit(self.transport)

    # -- leases --

    def lock(self, name: str, ttl_ms: Optional[int] = None, wait_ms: Optional[int] = None, *,
             owner: Optional[str] = None, max_hold_ms: Optional[int] = None, request_id: Optional[str] = None,
             on_lost: Optional[Callable[[Lease], None]] = None, renew: bool = True, watch: bool = True) -> Lease:
        """A lease on the lock ``name``, acquired on ``with`` entry (or by ``.acquire()``).

        ttl_ms, wait_ms, max_hold_ms: as in the API (None: the gateway's defaults; ``wait_ms`` 0 tries
        once; without it the client waits for the answer as long as the gateway's ``defaults.wait_ms`` may
        be, up to an hour). owner: shown in the lock's status. request_id: makes the acquire idempotent (default: a
        fresh one, reused by retries). on_lost(lease): called once, from a background thread, when the
        lease is lost. renew=False: no background renewal or watch (you call ``lease.renew()``; the
        client then learns of a loss only from the gateway's answers). watch=False: renew only.
        """
        return Lease(self, "lock", name, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner or self.owner,
                     max_hold_ms=max_hold_ms, request_id=request_id, on_lost=on_lost, renew=renew, watch=watch)

    def semaphore(self, name: str, limit: int, ttl_ms: Optional[int] = None, wait_ms: Optional[int] = None, *,
                  owner: Optional[str] = None, max_hold_ms: Optional[int] = None, request_id: Optional[str] = None,
                  on_lost: Optional[Callable[[Lease], None]] = None, renew: bool = True,
                  watch: bool = True) -> Lease:
        """A lease on one of the ``limit`` slots of semaphore ``name``; otherwise as :meth:`lock`."""
        return Lease(self, "semaphore", name, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner or self.owner,
                     max_hold_ms=max_hold_ms, limit=limit, request_id=request_id, on_lost=on_lost, renew=renew,
                     watch=watch)

    def lockset(self, names: Sequence[str], ttl_ms: int = 30000, wait_ms: Optional[int] = None, *,
                owner: Optional[str] = None, max_hold_ms: Optional[int] = None, request_id: Optional[str] = None,
                on_lost: Optional[Callable[[LockSet], None]] = None, renew: bool = True,
                watch: bool = True) -> LockSet:
        """Leases on every lock of ``names`` (1-32 distinct), all or none; otherwise as :meth:`lock`."""
        return LockSet(self, names, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner or self.owner,
                       max_hold_ms=max_hold_ms, request_id=request_id, on_lost=on_lost, renew=renew, watch=watch)

    def lock_status(self, name: str) -> Row:
        """``{"lock", "held", "fence", "owner", "expires_in_ms", "waiting"}``; never the token."""
        return self.transport.call("GET", f"/v1/locks/{quote(name)}", effect=Effect.READ).body

    def semaphore_status(self, name: str) -> Row:
        """``{"semaphore", "limit", "holders", "waiting"}``."""
        return self.transport.call("GET", f"/v1/semaphores/{quote(name)}", effect=Effect.READ).body

    def locks(self, prefix: str = "", page_size: int = 100) -> Iterator[Row]:
        """Every lock held or waited for whose name starts with ``prefix``, in name order, fetched page
        by page: ``{"lock", "held", "fence", "owner", "expires_in_ms", "waiting"}``."""
        return self._pages("/v1/locks", prefix, page_size)

    def semaphores(self, prefix: str = "", page_size: int = 100) -> Iterator[Row]:
        """Every semaphore with holders or waiters whose name starts with ``prefix``, page by page:
        ``{"semaphore", "limit", "holders", "waiting", ...}``."""
        return self._pages("/v1/semaphores", prefix, page_size)

    def _pages(self, path: str, prefix: str, page_size: int) -> Iterator[Row]:
        cursor: Optional[str] = None
        while True:
            page = self.transport.call("GET", path, effect=Effect.READ,
                                       query={"prefix": prefix or None, "limit": page_size, "cursor": cursor}).body
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def revoke_lock(self, name: str, reason: str = "") -> Optional[int]:
        """Ends the current holder's lease on ``name`` at once (scope ``admin``); returns the revoked
        fence, or None when nobody held it. Not retried once sent: a repeat would revoke the next holder.
        Its outcome is unknown, as a write's, when it got no answer (GatewayUnreachable, ``sent``) or a
        5xx (OutcomeUnknown, holding it): the gateway may have recorded the revocation before its backend
        failed to answer, so a 503 is no refusal. Read the lock's status to find out."""
        body = self.transport.call("POST", f"/v1/locks/{quote(name)}/revoke", {"reason": reason},
                                   effect=Effect.ONCE, write=True).body
        return body.get("revoked_fence")

    def revoke_semaphore(self, name: str, fence: int, reason: str = "") -> Optional[int]:
        """Ends the lease of the holder of ``fence`` on semaphore ``name`` (scope ``admin``); returns
        ``fence``, or None when no live holder has it (also when an earlier try of this call, unanswered or
        answered 5xx, ended it). Retried as the policy allows: it names the lease it ends, so a repeat ends
        nobody else. As :meth:`revoke_lock`, its outcome is unknown when its last try got no answer or a
        5xx (OutcomeUnknown): a 503 is no refusal. Read the semaphore's status to find out."""
        body = self.transport.call("POST", f"/v1/semaphores/{quote(name)}/revoke",
                                   {"fence": fence, "reason": reason}, effect=Effect.IDEMPOTENT, write=True).body
        return body.get("revoked_fence")

    # -- storage without a lease --

    def pg(self, table: str, token: Optional[str] = None, owner: Optional[str] = None) -> PgTable[Row]:
        """A configured table: reads need no token; writes present ``token`` (for a token received from
        elsewhere, e.g. ``$FENCE_TOKEN`` under ``fencectl lock``). Prefer ``lease.pg(table)``."""
        return PgTable(SyncCalls(self.transport), table, Holder(token, owner or self.owner))

    def redis(self, token: Optional[str] = None, owner: Optional[str] = None) -> RedisKeys[Row]:
        """Keys under the configured Redis prefixes; as :meth:`pg`."""
        return RedisKeys(SyncCalls(self.transport), Holder(token, owner or self.owner))

    def ready(self) -> bool:
        """True when the gateway answers ``/readyz`` with 200 (Redis and Postgres reachable)."""
        try:
            self.transport.call("GET", "/readyz", effect=Effect.READ, retry=RetryPolicy(attempts=1))
        except Exception:  # noqa: BLE001 - any failure means not ready
            return False
        return True

    def close(self) -> None:
        """Closes every connection (leases still held keep their own until released)."""
        self.transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<fencegate.Client {self.transport.base_url}>"


