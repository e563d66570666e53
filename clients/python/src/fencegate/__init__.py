# SPDX-License-Identifier: Apache-2.0
"""fencegate: a client for the fencegate gateway that makes the safe path the easy one.

::

    import fencegate

    client = fencegate.Client("http://127.0.0.1:8480")
    with client.lock("invoice:42", ttl_ms=30000, wait_ms=10000) as lease:
        lease.pg("invoices").patch(42, status="paid")      # carries the lease's Fence-Token
        lease.redis.put("app:invoice:42:state", "paid")

Inside the block the lease is renewed in the background and watched; ``lease.lost`` (a
threading.Event) is set, and the ``on_lost`` callback called, as soon as it is lost, after which
its writes raise :class:`LeaseLost` without being sent. Leaving the block releases the lease.
Refusals raise one exception class per problem code (:class:`LockBusy`, :class:`StaleFence`,
:class:`LeaseLost`, :class:`Unauthorized`, ...; see :mod:`fencegate.errors`).

The asyncio API is beside it: ``async with fencegate.AsyncClient() as client: async with
client.lock("invoice:42") as lease: await lease.pg("invoices").patch(42, status="paid")``
(:mod:`fencegate.aio`). Leases are not reentrant: a second acquire of a lock its holder holds waits or
raises :class:`LockBusy` like any other.

Modules: :mod:`fencegate.client` (Client, Audit), :mod:`fencegate.aio` (AsyncClient and its leases),
:mod:`fencegate.lease` (Lease, LockSet), :mod:`fencegate.writes` (PgTable, RedisKeys), :mod:`fencegate.keeper`
(renewal and watch), :mod:`fencegate.transport` (connections, retries), :mod:`fencegate.errors`.
"""

import logging

from .aio import AsyncClient, AsyncLease, AsyncLockSet, AsyncLockSetMember
from .client import Audit, Client
from .errors import (PROBLEM_CLASSES, BackendUnavailable, BodyTooLarge, Conflict, FencegateError, Forbidden,
                     GatewayUnreachable, InternalError, InvalidFenceToken, InvalidField, InvalidJson, InvalidName,
                     LeaseLost, LimitMismatch, LockBusy, MaxHoldExceeded, MethodNotAllowed, MisdirectedRequest, NotFound,
                     OutcomeUnknown, ProblemError, StaleFence, TooManyWaiters, Unauthorized, UnexpectedStatus,
                     UnsupportedMediaType)
from .lease import Lease, LockSet, LockSetMember
from .transport import Effect, RetryPolicy
from .writes import PgTable, RedisKeys

__version__ = "0.1.0"

logging.getLogger("fencegate").addHandler(logging.NullHandler())

__all__ = [
    "AsyncClient", "AsyncLease", "AsyncLockSet", "AsyncLockSetMember", "Audit", "BackendUnavailable", "BodyTooLarge", "Client", "Conflict", "Effect", "FencegateError",
    "Forbidden", "GatewayUnreachable", "InternalError", "InvalidFenceToken", "InvalidField", "InvalidJson",
    "InvalidName", "Lease", "LeaseLost", "LimitMismatch", "LockBusy", "LockSet", "LockSetMember",
    "MaxHoldExceeded", "MethodNotAllowed", "MisdirectedRequest", "NotFound", "OutcomeUnknown", "PROBLEM_CLASSES",
    "PgTable",
    "ProblemError", "RedisKeys", "RetryPolicy", "StaleFence", "TooManyWaiters", "Unauthorized",
    "UnexpectedStatus", "UnsupportedMediaType",
]
