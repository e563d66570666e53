# SPDX-License-Identifier: Apache-2.0
"""Fenced writes through the gateway: rows of configured Postgres tables and keys under configured Redis
prefixes, each write carrying the ``Fence-Token`` of a lease.

Owns: the paths, bodies and :class:`~fencegate.transport.Effect` of the write and read calls of
``/v1/pg`` and ``/v1/redis``. Must not: decide whether a lease is still held (the :class:`Holder`
passed in does, before each write, and hears about refusals after it).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional

from .errors import ProblemError
from .transport import Effect, Transport, quote

Row = Dict[str, Any]

IDEMPOTENT_OPS = frozenset({"patch", "put"})
"""Batch ops that leave the same state when applied twice under the same fence."""


class Holder:
    """Where fenced writes get their token: a fixed token (no checks), or a lease (see Lease).

    token(): the Fence-Token to present, or raises LeaseLost when the lease is known to be gone.
    owner: the Fence-Owner header (who writes, for the audit trail), or None.
    refused(error): told about each refused write, so a lease can note its own loss.
    """

    def __init__(self, token: Optional[str] = None, owner: Optional[str] = None) -> None:
        self._token = token
        self.owner = owner

    def token(self) -> str:
        if self._token is None:
            raise ValueError("this write needs a fence token: write through a lease, or pass token=")
        return self._token

    def refused(self, error: ProblemError) -> None:
        """A fixed token has nothing to update."""


def _send(transport: Transport, holder: Holder, method: str, path: str, body: Any, effect: Effect) -> Row:
    headers = {"Fence-Token": holder.token()}
    if holder.owner:
        headers["Fence-Owner"] = holder.owner
    try:
        return transport.call(method, path, body, effect=effect, headers=headers).body
    except ProblemError as e:
        holder.refused(e)
        raise


class PgTable:
    """One configured Postgres table, e.g. ``lease.pg("invoices")``.

    Writes answer the gateway's ``{"applied": true, "resource", "fence", "row"}`` (``row`` as it is
    after the write; None after a delete) and raise StaleFence, LeaseLost, InvalidFenceToken, NotFound,
    Conflict, ... when refused. A refused write changes nothing.
    """

    def __init__(self, transport: Transport, table: str, holder: Holder) -> None:
        self._transport = transport
        self._holder = holder
        self.table = table

    def _path(self, key: Any = None) -> str:
        path = f"/v1/pg/{quote(self.table)}"
        return path if key is None else f"{path}/{quote(key)}"

    def get(self, key: Any) -> Row:
        """The row and the highest fence stored for it: ``{"row": {...}, "fence": n | None}``."""
        return self._transport.call("GET", self._path(key), effect=Effect.READ).body

    def patch(self, key: Any, values: Optional[Mapping[str, Any]] = None, **columns: Any) -> Row:
        """Updates columns of the row ``key``: ``patch(42, status="paid")`` or ``patch(42, {"status": ...})``."""
        return _send(self._transport, self._holder, "PATCH", self._path(key), {"set": _merge(values, columns)},
                     Effect.IDEMPOTENT)

    def put(self, key: Any, row: Optional[Mapping[str, Any]] = None, **columns: Any) -> Row:
        """Inserts or replaces the row ``key`` (columns not given become NULL)."""
        return _send(self._transport, self._holder, "PUT", self._path(key), {"row": _merge(row, columns)},
                     Effect.IDEMPOTENT)

    def insert(self, row: Optional[Mapping[str, Any]] = None, **columns: Any) -> Row:
        """Inserts a new row, its key among the columns; Conflict if the key exists. Not retried once
        sent (a repeat would answer Conflict for a row this call inserted)."""
        return _send(self._transport, self._holder, "POST", self._path(), {"row": _merge(row, columns)},
                     Effect.ONCE)

    def delete(self, key: Any) -> Row:
        """Deletes the row ``key``; NotFound if there is none. Not retried once sent."""
        return _send(self._transport, self._holder, "DELETE", self._path(key), None, Effect.ONCE)

    def batch(self, ops: Iterable[Mapping[str, Any]]) -> Row:
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
        return _send(self._transport, self._holder, "POST", "/v1/pg/batch", {"ops": full}, effect)


class RedisKeys:
    """Keys under the configured Redis prefixes, e.g. ``lease.redis.put("app:invoice:42", "paid")``."""

    def __init__(self, transport: Transport, holder: Holder) -> None:
        self._transport = transport
        self._holder = holder

    @staticmethod
    def _path(key: str) -> str:
        return f"/v1/redis/{quote(key)}"

    def get(self, key: str) -> Row:
        """``{"value": ...}`` or ``{"fields": {...}}``, with the highest stored ``fence``."""
        return self._transport.call("GET", self._path(key), effect=Effect.READ).body

    def put(self, key: str, value: str) -> Row:
        """Sets a string value."""
        return _send(self._transport, self._holder, "PUT", self._path(key), {"value": value}, Effect.IDEMPOTENT)

    def patch(self, key: str, fields: Optional[Mapping[str, Any]] = None, **more: Any) -> Row:
        """Sets fields of a hash."""
        return _send(self._transport, self._holder, "PATCH", self._path(key), {"fields": _merge(fields, more)},
                     Effect.IDEMPOTENT)

    def delete(self, key: str) -> Row:
        """Deletes the key. Not retried once sent."""
        return _send(self._transport, self._holder, "DELETE", self._path(key), None, Effect.ONCE)


def _merge(given: Optional[Mapping[str, Any]], columns: Mapping[str, Any]) -> Dict[str, Any]:
    merged = dict(given or {})
    merged.update(columns)
    return merged
