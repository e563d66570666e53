# SPDX-License-Identifier: Apache-2.0
"""Fenced writes through the gateway: rows of configured Postgres tables and keys under configured Redis
prefixes, each write carrying the ``Fence-Token`` of a lease.

Owns: the paths, bodies and :class:`~fencegate.transport.Effect` of the write and read calls of
``/v1/pg`` and ``/v1/redis``. Must not: decide whether a lease is still held (the :class:`Holder`
passed in does, before each write, and hears about refusals after it).
"""

from __future__ import annotations

from typing import Any, Dict, Generic, Iterable, List, Mapping, Optional, TypeVar

from .errors import GatewayUnreachable, OutcomeUnknown, ProblemError
from .transport import Answer, Effect, Transport, quote

Row = Dict[str, Any]

IDEMPOTENT_OPS = frozenset({"patch", "put"})
"""Batch ops that leave the same state when applied twice under the same fence."""

R = TypeVar("R")
"""What a call answers: a Row for the thread client, an Awaitable of one for the asyncio client."""


class Holder:
    """Where fenced writes get their token: a fixed token (no checks), or a lease (see Lease).

    token(): the Fence-Token to present, or raises LeaseLost when the lease is known to be gone.
    check(): raises that LeaseLost too; asked again before each retry of a write, which must not go out
    once the lease is gone.
    owner: the Fence-Owner header (who writes, for the audit trail), or None.
    refused(error): told about each write the gateway refused, so a lease can note its own loss.
    """

    def __init__(self, token: Optional[str] = None, owner: Optional[str] = None) -> None:
        self._token = token
        self.owner = owner

    def token(self) -> str:
        if self._token is None:
            raise ValueError("this write needs a fence token: write through a lease, or pass token=")
        return self._token

    def check(self) -> None:
        """A fixed token has no lease to check."""

    def refused(self, error: ProblemError) -> None:
        """A fixed token has nothing to update."""


class Calls(Generic[R]):
    """How the handles below send their calls: ``write`` presents the holder's token (with ``minimal``,
    ``Prefer: return=minimal``) and tells the holder of a refusal; ``read`` needs no token.
    :class:`SyncCalls` answers rows; the asyncio client's answers awaitables of them, so both share the
    paths, bodies and effects written here once."""

    def write(self, holder: "Holder", minimal: bool, method: str, path: str, body: Any, effect: Effect) -> R:
        raise NotImplementedError

    def read(self, path: str) -> R:
        raise NotImplementedError


class SyncCalls(Calls[Row]):
    """Calls through the thread client's :class:`~fencegate.transport.Transport`."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def write(self, holder: "Holder", minimal: bool, method: str, path: str, body: Any, effect: Effect) -> Row:
        headers = write_headers(holder, minimal)
        try:
            return write_result(self._transport.call(method, path, body, effect=effect, headers=headers, write=True,
                                                     check=holder.check), f"{method} {path}")
        except (ProblemError, OutcomeUnknown) as e:
            refused(holder, e)
            raise

    def read(self, path: str) -> Row:
        return self._transport.call("GET", path, effect=Effect.READ).body


def refused(holder: "Holder", error: Exception) -> None:
    """Tells the holder of a write the gateway refused, also when the refusal answered the retry of a write
    whose outcome is unknown (a 410 ends the lease all the same); not of a LeaseLost the holder's own check
    raised (no status), which it knows of."""
    if isinstance(error, OutcomeUnknown):
        error = error.last
    if isinstance(error, ProblemError) and error.status is not None:
        holder.refused(error)


def write_headers(holder: "Holder", minimal: bool) -> Dict[str, str]:
    """The headers of a fenced write: the holder's Fence-Token (LeaseLost if its lease is gone) and owner,
    and ``Prefer: return=minimal`` when asked."""
    headers = {"Fence-Token": holder.token()}
    if holder.owner:
        headers["Fence-Owner"] = holder.owner
    if minimal:
        headers["Prefer"] = "return=minimal"
    return headers


def write_result(answer: Answer, op: str = "write") -> Row:
    """What a write answers: the gateway's body, or ``{"applied": True, "minimal": True}`` for its 204 to
    ``Prefer: return=minimal``. A 2xx that does not say ``"applied": true`` is no answer of the gateway's
    (something else at its address answered): GatewayUnreachable with ``sent`` true, the write's outcome
    unknown."""
    if answer.status == 204:
        return {"applied": True, "minimal": True}
    if answer.body.get("applied") is not True:
        raise GatewayUnreachable(f"{op}: no answer from the gateway: a {answer.status} that does not say "
                                 "\"applied\": true", sent=True)
    return answer.body


class PgTable(Generic[R]):
    """One configured Postgres table, e.g. ``lease.pg("invoices")`` (with the asyncio client, each call
    answers an awaitable).

    Writes answer the gateway's ``{"applied": true, "resource", "fence", "row"}`` (``row`` as it is
    after the write; None after a delete) and raise StaleFence, LeaseLost, InvalidFenceToken, NotFound,
    Conflict, ... when refused. A refused write changes nothing. A write answered with a 5xx, or retried
    after a try that may have been applied, raises OutcomeUnknown instead. Through :meth:`return_minimal`, an
    applied write answers ``{"applied": True, "minimal": True}`` instead.
    """

    def __init__(self, calls: Calls[R], table: str, holder: Holder, minimal: bool = False) -> None:
        self._calls = calls
        self._holder = holder
        self._minimal = minimal
        self.table = table

    def return_minimal(self) -> "PgTable[R]":
        """The same table with writes sent with ``Prefer: return=minimal``: the gateway answers 204 without
        reading the row back."""
        return PgTable(self._calls, self.table, self._holder, True)

    def _path(self, key: Any = None) -> str:
        path = f"/v1/pg/{quote(self.table)}"
        return path if key is None else f"{path}/{quote(key)}"

    def get(self, key: Any) -> R:
        """The row and the highest fence stored for it: ``{"row": {...}, "fence": n | None}``."""
        return self._calls.read(self._path(key))

    def patch(self, key: Any, values: Optional[Mapping[str, Any]] = None, **columns: Any) -> R:
        """Updates columns of the row ``key``: ``patch(42, status="paid")`` or ``patch(42, {"status": ...})``."""
        return self._calls.write(self._holder, self._minimal, "PATCH", self._path(key),
                                 {"set": _merge(values, columns)}, Effect.IDEMPOTENT)

    def put(self, key: Any, row: Optional[Mapping[str, Any]] = None, **columns: Any) -> R:
        """Inserts or replaces the row ``key`` (columns not given become NULL)."""
        return self._calls.write(self._holder, self._minimal, "PUT", self._path(key), {"row": _merge(row, columns)},
                     Effect.IDEMPOTENT)

    def insert(self, row: Optional[Mapping[str, Any]] = None, **columns: Any) -> R:
        """Inserts a new row, its key among the columns; Conflict if the key exists. Not retried once
        sent (a repeat would answer Conflict for a row this call inserted)."""
        return self._calls.write(self._holder, self._minimal, "POST", self._path(), {"row": _merge(row, columns)},
                     Effect.ONCE)

    def delete(self, key: Any) -> R:
        """Deletes the row ``key``; NotFound if there is none. Not retried once sent."""
        return self._calls.write(self._holder, self._minimal, "DELETE", self._path(key), None, Effect.ONCE)

    def batch(self, ops: Iterable[Mapping[str, Any]]) -> R:
        """Several writes in one transaction, all or nothing, under one token.

        Each op is a dict as in the API: ``{"op": "patch", "key": 42, "set": {...}}``, ``"put"`` with
        ``key`` and ``row``, ``"post"`` (an insert) with ``row``, ``"delete"`` with ``key``; ``table``
        defaults to this table. Retried only when every op is a patch or a put.
        """
        full: List[Dict[str, Any]] = []
        for op in ops:
            entry = {"table": self.table, **op}
            if "key" in entry:
                entry["key"] = str(entry["key"])
            full.append(entry)
        effect = Effect.IDEMPOTENT if all(op.get("op") in IDEMPOTENT_OPS for op in full) else Effect.ONCE
        return self._calls.write(self._holder, self._minimal, "POST", "/v1/pg/batch", {"ops": full}, effect)


class RedisKeys(Generic[R]):
    """Keys under the configured Redis prefixes, e.g. ``lease.redis.put("app:invoice:42", "paid")``."""

    def __init__(self, calls: Calls[R], holder: Holder, minimal: bool = False) -> None:
        self._calls = calls
        self._holder = holder
        self._minimal = minimal

    def return_minimal(self) -> "RedisKeys[R]":
        """The same keys with writes sent with ``Prefer: return=minimal``."""
        return RedisKeys(self._calls, self._holder, True)

    @staticmethod
    def _path(key: str) -> str:
        return f"/v1/redis/{quote(key)}"

    def get(self, key: str) -> R:
        """``{"value": ...}`` or ``{"fields": {...}}``, with the highest stored ``fence``."""
        return self._calls.read(self._path(key))

    def put(self, key: str, value: str) -> R:
        """Sets a string value."""
        return self._calls.write(self._holder, self._minimal, "PUT", self._path(key), {"value": value},
                                 Effect.IDEMPOTENT)

    def patch(self, key: str, fields: Optional[Mapping[str, Any]] = None, **more: Any) -> R:
        """Sets fields of a hash."""
        return self._calls.write(self._holder, self._minimal, "PATCH", self._path(key),
                                 {"fields": _merge(fields, more)}, Effect.IDEMPOTENT)

    def delete(self, key: str) -> R:
        """Deletes the key. Not retried once sent."""
        return self._calls.write(self._holder, self._minimal, "DELETE", self._path(key), None, Effect.ONCE)


def _merge(given: Optional[Mapping[str, Any]], columns: Mapping[str, Any]) -> Dict[str, Any]:
    merged = dict(given or {})
    merged.update(columns)
    return merged
