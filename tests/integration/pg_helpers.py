# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the fenced-Postgres-write tests (test_pg_*.py, test_fence_column.py): the gateway
configuration with the writable tables, unique keys, tokens with known fences, the write calls of docs/api.md,
psql look-ups, a psql session that holds its transaction open while a write waits for it, and concurrent
writers on one row with the checks of their commit order.

Owns: nothing but these helpers. Must not: start services or gateways (harness.py does), or hold state
between tests.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
import urllib.parse
import uuid
from typing import Any, Callable

from harness import Client, Gateway, Response, psql

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
          owner: str | None = None, minimal: bool = False) -> Response:
    """A fenced write: PATCH/PUT/DELETE /v1/pg/{table}/{key}, or POST /v1/pg/{table} when key is None;
    minimal: with Prefer: return=minimal."""
    path = f"/v1/pg/{quote(table)}" + (f"/{quote(key)}" if key is not None else "")
    return client.request(method, path, body,
                          {**headers(token, owner), **({"Prefer": "return=minimal"} if minimal else {})})


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


def records_listing(a: str, b: str) -> list[dict]:
    """The resource, resources, reason and current_fence of every audit record whose resources name a or b,
    oldest first."""
    out = psql("SELECT row_to_json(r) FROM (SELECT resource, resources, reason, current_fence"
               " FROM fencegate.rejections WHERE resources && ARRAY[:'a', :'b'] ORDER BY id) r", {"a": a, "b": b})
    return [json.loads(line) for line in out]


def open_transaction(sql: str) -> subprocess.Popen:
    """A psql session that runs sql (one or more statements, ";"-ended) inside a transaction and holds it open,
    with the locks it took, until "COMMIT;" is written to its stdin (held.communicate("COMMIT;\\n"))."""
    cmd = [os.path.join(os.environ.get("FG_PGBIN", "/usr/lib/postgresql/15/bin"), "psql"), "-X", "-q", "-At",
           "-v", "ON_ERROR_STOP=1", "-d", os.environ["FG_TEST_PG_DSN"], "-f", "-"]
    held = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held.stdin.write(f"BEGIN;\n{sql}\nSELECT 'held';\n")
    held.stdin.flush()
    if held.stdout.readline().strip() != "held":
        raise AssertionError(f"the transaction was not held: {held.stderr.read()}")
    return held


def wait_for_lock_waiter(seconds: float = 10.0) -> None:
    """Returns once a session waits for a lock held by another (a write meeting an open transaction's row)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") != ["0"]:
            return
        time.sleep(0.02)
    raise AssertionError("no write waited for the open transaction")


def assert_problem(test: Any, r: Response, status: int, code: str) -> dict:
    """Checks that r is a problem+json answer with this status and /problems/<code>; returns its body."""
    test.assertEqual(r.status, status, r)
    test.assertTrue(r.headers.get("content-type", "").startswith("application/problem+json"), r)
    test.assertIsInstance(r.body, dict, r)
    test.assertEqual(r.body.get("type"), f"/problems/{code}", r)
    return r.body


def skip_trigger_sql(function: str, *tables: str) -> str:
    """SQL of a trigger function public.<function>() that skips (returns NULL for) a write whose row has note
    'skipped' and a DELETE of a row whose note is 'kept', made trigger a_skip of each of tables: the table's
    own decision to write nothing, which the gateway answers as applied."""
    sql = f"""
CREATE OR REPLACE FUNCTION public.{function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RETURN CASE WHEN OLD.note = 'kept' THEN NULL ELSE OLD END;
    END IF;
    RETURN CASE WHEN NEW.note = 'skipped' THEN NULL ELSE NEW END;
END $$;
"""
    return sql + "".join(f"CREATE OR REPLACE TRIGGER a_skip BEFORE INSERT OR UPDATE OR DELETE ON public.{t}\n"
                         f"    FOR EACH ROW EXECUTE FUNCTION public.{function}();\n" for t in tables)


def commit_log_sql(table: str, log: str, fence_column: str) -> str:
    """SQL creating public.<log> (seq, id, fence) and a trigger on public.<table> that appends each new row
    version's id and fence_column to it. An UPDATE holds the row lock until its transaction ends, so the
    next version's trigger runs only after the previous one committed: the log's order is the commit
    order, observed by Postgres and not by the gateway."""
    return f"""
CREATE TABLE IF NOT EXISTS public.{log} (seq bigserial PRIMARY KEY, id text NOT NULL, fence bigint);
CREATE OR REPLACE FUNCTION public.{log}_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.{log} (id, fence) VALUES (NEW.id, NEW.{fence_column});
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS {log}_version ON public.{table};
CREATE TRIGGER {log}_version AFTER INSERT OR UPDATE ON public.{table}
    FOR EACH ROW EXECUTE FUNCTION public.{log}_version();
"""


def run_writers(test: Any, gw: Gateway, writers: int, table: str, key: str, toks: list[tuple[str, int]],
                method: str, body_of: Callable[[int], Any]) -> dict[int, int]:
    """One write per (token, fence) of toks, in shuffled order, from `writers` threads at once, each with
    Fence-Owner w<fence>, those of odd fences with Prefer: return=minimal (answered 204 when accepted, judged
    by the statement's row count, not by a row read back). Every answer must be 200 (204) or a 409
    stale_fence naming a higher current fence. Returns {fence: status}, an accepted minimal write as 200."""
    queue = list(toks)
    random.shuffle(queue)
    lock = threading.Lock()
    statuses: dict[int, int] = {}
    errors: list[Any] = []
    start = threading.Barrier(writers)

    def worker() -> None:
        client = gw.client()
        start.wait()
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    token, fence = queue.pop()
                minimal = fence % 2 == 1
                r = write(client, method, table, key, body_of(fence), token, owner=f"w{fence}", minimal=minimal)
                with lock:
                    statuses[fence] = 200 if r.status == (204 if minimal else 200) else r.status
                    if statuses[fence] not in (200, 409):
                        errors.append(r)
                    elif r.status == 409 and (r.body.get("type") != "/problems/stale_fence"
                                              or r.body.get("current_fence", 0) <= fence):
                        errors.append(r)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            client.close()

    threads = [threading.Thread(target=worker) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    test.assertEqual(errors, [])
    test.assertEqual(len(statuses), len(toks))
    return statuses


def check_commit_order(test: Any, log: list[int], statuses: dict[int, int], resource: str) -> list[int]:
    """Checks concurrent writers' outcome against log, the fences of the committed row versions in commit
    order (as a trigger saw them): accepted fences never decrease, exactly the 200 answers committed, the
    highest fence won; every 409 left exactly one stale_fence audit row of resource naming a higher fence and
    its writer (Fence-Owner w<fence>), no 200 left one; there were refusals. Returns the accepted fences."""
    accepted = sorted(f for f, s in statuses.items() if s == 200)
    refused = sorted(f for f, s in statuses.items() if s == 409)
    test.assertEqual(log, sorted(log), f"accepted fences out of order in commit order: {log}")
    test.assertEqual(log, accepted, "exactly the acknowledged writes were committed")
    test.assertEqual(max(statuses), accepted[-1], "the highest fence must win")
    audit = rejections(resource)
    test.assertEqual(sorted(a["presented_fence"] for a in audit), refused, "one audit row per refusal")
    for a in audit:
        test.assertGreater(a["current_fence"], a["presented_fence"])
        test.assertEqual((a["owner"], a["reason"]), (f"w{a['presented_fence']}", "stale_fence"))
    test.assertGreater(len(refused), 0, "shuffled fences must produce refusals")
    return accepted


def check_ops_judged_where_they_stand(test: Any, client: Client, token: str, table: str,
                                      absent: Callable[[str], bool]) -> str:
    """A batch's ops are judged where they stand: a PATCH or DELETE of a missing row answers 404 for its op
    even when a later op of the batch creates that row, and nothing is applied (absent(key): neither the row
    nor a fence for it is stored); a batch that creates a row and then patches it applies both. table has a
    key column id and a text column note. Returns the key of that last batch's row."""
    for first in ({"op": "patch", "table": table, "set": {"note": "p"}}, {"op": "delete", "table": table}):
        for then in ("put", "post"):
            with test.subTest(first=first["op"], then=then):
                key = unique(table)
                later = ({"op": "put", "table": table, "key": key, "row": {"note": "n"}} if then == "put"
                         else {"op": "post", "table": table, "row": {"id": key, "note": "n"}})
                r = client.request("POST", "/v1/pg/batch", {"ops": [{**first, "key": key}, later]},
                                   {"Fence-Token": token})
                body = assert_problem(test, r, 404, "not_found")
                test.assertTrue(body["detail"].startswith("ops[0]: no row with key"), body)
                test.assertTrue(absent(key), key)
    key = unique(table)
    ops = {"ops": [{"op": "post", "table": table, "row": {"id": key, "note": "n"}},
                   {"op": "patch", "table": table, "key": key, "set": {"note": "p"}}]}
    r = client.request("POST", "/v1/pg/batch", ops, {"Fence-Token": token})
    test.assertEqual((r.status, [x["row"]["note"] for x in r.body["results"]]), (200, ["n", "p"]), r)
    return key
