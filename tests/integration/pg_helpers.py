# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the fenced-Postgres-write tests (test_pg_*.py): the gateway configuration with the
writable tables, unique keys, tokens with known fences, the write calls of API.md and psql look-ups.

Owns: nothing but these helpers. Must not: start services or gateways (harness.py does), or hold state
between tests.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from typing import Any

from harness import Client, Response, psql

INVOICE_COLUMNS = ["customer", "amount_cents", "status", "note"]

# A table whose own name and column names need quoting everywhere (quote, semicolon, space, unicode).
ODD_TABLE = 'we"ird; tab\u2603'
ODD_COLUMN = 'co"l; \u00fc'
ODD_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS public."we""ird; tab\u2603" (
    k   integer PRIMARY KEY,
    "co""l; \u00fc" text,
    n   numeric(6, 2),
    j   jsonb,
    v   varchar(3)
);
"""


def config(**extra_tables: Any) -> dict:
    """A gateway configuration with invoices writable (and any extra tables)."""
    tables = {"invoices": {"key": "id", "columns": INVOICE_COLUMNS}}
    tables.update(extra_tables)
    return {"tables": tables}


def unique(prefix: str = "t") -> str:
    """A key or lock name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def quote(segment: str) -> str:
    """Percent-encodes one path segment (everything but unreserved characters)."""
    return urllib.parse.quote(segment, safe="")


def acquire(client: Client, lock: str, ttl_ms: int = 30000) -> tuple[str, int]:
    """Acquires lock; returns (token, fence)."""
    r = client.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": ttl_ms})
    assert r.status == 200, r
    return r.body["token"], r.body["fence"]


def tokens(client: Client, lock: str, n: int) -> list[tuple[str, int]]:
    """n tokens of lock with increasing fences (each lease released at once: tokens stay verifiable)."""
    out = []
    for _ in range(n):
        token, fence = acquire(client, lock)
        r = client.post(f"/v1/locks/{lock}/release", {"token": token})
        assert r.status == 200, r
        out.append((token, fence))
    return out


def headers(token: str | None, owner: str | None = None) -> dict[str, str]:
    h = {}
    if token is not None:
        h["Fence-Token"] = token
    if owner is not None:
        h["Fence-Owner"] = owner
    return h


def write(client: Client, method: str, table: str, key: str | None, body: Any, token: str | None,
          owner: str | None = None) -> Response:
    """A fenced write: PATCH/PUT/DELETE /v1/pg/{table}/{key}, or POST /v1/pg/{table} when key is None."""
    path = f"/v1/pg/{quote(table)}" + (f"/{quote(key)}" if key is not None else "")
    return client.request(method, path, body, headers(token, owner))


def insert_invoice(key: str, note: str = "", amount_cents: int | None = None) -> None:
    """Inserts an invoice row directly (no fence), for tests that start from an existing row."""
    psql("INSERT INTO public.invoices (id, note, amount_cents) VALUES (:'k', :'n', NULLIF(:'a', '')::bigint)",
         {"k": key, "n": note, "a": "" if amount_cents is None else amount_cents})


def invoice(key: str) -> dict | None:
    """The invoice row as psql sees it ({column: text}), or None."""
    out = psql("SELECT row_to_json(i) FROM public.invoices i WHERE id = :'k'", {"k": key})
    if not out:
        return None
    return json.loads(out[0])


def stored_fence(resource: str) -> int | None:
    out = psql("SELECT fence FROM fencegate.resource_fences WHERE resource = :'r'", {"r": resource})
    return int(out[0]) if out else None


def rejections(resource: str) -> list[dict]:
    """Audit rows of resource, oldest first."""
    out = psql("SELECT row_to_json(r) FROM fencegate.rejections r WHERE resource = :'r' ORDER BY id",
               {"r": resource})
    return [json.loads(line) for line in out]


def assert_problem(test: Any, r: Response, status: int, code: str) -> dict:
    """Checks that r is a problem+json answer with this status and /problems/<code>; returns its body."""
    test.assertEqual(r.status, status, r)
    test.assertTrue(r.headers.get("content-type", "").startswith("application/problem+json"), r)
    test.assertIsInstance(r.body, dict, r)
    test.assertEqual(r.body.get("type"), f"/problems/{code}", r)
    return r.body
