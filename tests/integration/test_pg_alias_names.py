# SPDX-License-Identifier: Apache-2.0
"""Columns named like the aliases of the gateway's own SQL (src/store/fenced/fenced_sql.c: t, k, r, c, f, d,
w, e, s, rf, rv, v, excluded, and the names it gives its answers: resource, fence, found, revoked, created,
deleted, c0) are columns like any other: read, written, refused and read on the refusal path, in both fence
modes. A bare alias that Postgres reads as a column name where a column of that name is in scope would answer
another value or fail the statement.

- listed columns of every such name, the key among them, written with PUT, PATCH, POST, a batch and DELETE
  and read back with GET;
- a column named r that is not listed (the table around the statement's subquery still holds it), and a
  key named r;
- the refusals that read the row: a late write under require_live_lease (410) and a stale one (409).

What this caught on the code before the fix (`SELECT row_to_json(r) FROM (SELECT t."k", t."r", ...) AS r`,
where r is first a column of that name, of the subquery or of the table around it, and only then the subquery's
row): every GET of a table with a column r, listed or not, or a key r, in either mode, answered 500
(`postgres: function row_to_json(text) does not exist`), and so did a late write's refusal (410), which reads
the row; the writes themselves, whose answer the gateway writes, and a stale write's 409 went through.

Tables named like the WITH queries of those statements (c, k, ...) are tables like any other
(TableNamedLikeAQueryTest), and an application's tables named like the gateway's own (settings, revocations,
rejections) are the application's (TableNamedLikeTheGatewaysOwnTest).

Owns: column and table names that the generated SQL also uses. Must not: test the types of answered values
(test_pg_row_kinds.py) or which columns an answer holds (test_pg_answers.py).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, psql, run_fencegate, same_slot  # noqa: E402
from pg_helpers import assert_problem, rejections, unique, write  # noqa: E402

NAMES = ["r", "t", "c", "f", "d", "w", "e", "s", "rf", "rv", "v", "excluded", "resource", "fence", "found",
         "revoked", "created", "deleted", "c0"]
COLUMNS_SQL = ", ".join(f'"{n}" text' for n in NAMES if n != "r")
SETUP_SQL = f"""
DROP TABLE IF EXISTS public.an_default, public.an_column, public.an_hidden, public.an_hidden_col,
    public.an_key, public.an_key_col;
CREATE TABLE public.an_default (k text PRIMARY KEY, r real, {COLUMNS_SQL});
CREATE TABLE public.an_column (k text PRIMARY KEY, r real, {COLUMNS_SQL}, lock_fence bigint);
CREATE TABLE public.an_hidden (k text PRIMARY KEY, note text, r text);
CREATE TABLE public.an_hidden_col (k text PRIMARY KEY, note text, r text, lock_fence bigint);
CREATE TABLE public.an_key (r text PRIMARY KEY, note text);
CREATE TABLE public.an_key_col (r text PRIMARY KEY, note text, lock_fence bigint);
"""
LISTED = list(NAMES)
TABLES = {
    "an_default": {"key": "k", "columns": LISTED},
    "an_column": {"key": "k", "columns": LISTED, "fence_column": "lock_fence"},
    "an_hidden": {"key": "k", "columns": ["note"]},
    "an_hidden_col": {"key": "k", "columns": ["note"], "fence_column": "lock_fence"},
    "an_key": {"key": "r", "columns": ["note"]},
    "an_key_col": {"key": "r", "columns": ["note"], "fence_column": "lock_fence"},
}
KEYS = {table: cfg["key"] for table, cfg in TABLES.items()}


def row_of(table: str, i: int) -> dict:
    """A row of table's listed columns, each value naming its column (r a number where it is real)."""
    if TABLES[table]["columns"] == LISTED:
        return {n: (1.5 + i if n == "r" else f"{n} {i}") for n in LISTED}
    return {"note": f"note {i}"}


class PgAliasNamesTest(GatewayTest):
    gateway_config = {"tables": {t: dict(cfg, require_live_lease=True) for t, cfg in TABLES.items()}}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the tables first: the gateway reads their catalog at start-up
        super().setUpClass()

    def lease(self, ttl_ms: int = 30000, name: str | None = None) -> dict:
        r = self.c.post(f"/v1/locks/{name or unique('an')}/acquire", {"ttl_ms": ttl_ms})
        self.assertEqual(r.status, 200, r)
        return r.body

    def read(self, table: str, key: str):
        return self.c.get(f"/v1/pg/{table}/{key}")

    def assert_read(self, table: str, key: str, row: dict, fence: int) -> None:
        r = self.read(table, key)
        self.assertEqual(r.status, 200, (table, r))
        self.assertEqual(r.body["row"], {KEYS[table]: key, **row}, table)
        self.assertEqual(r.body["fence"], fence, table)

    def test_columns_named_like_aliases_are_read_and_written(self):
        for table in TABLES:
            with self.subTest(table=table):
                token = self.lease()["token"]
                key = unique("an")
                r = write(self.c, "PUT", table, key, {"row": row_of(table, 0)}, token)
                self.assertEqual(r.status, 200, r)
                fence = r.body["fence"]
                self.assertEqual(r.body["row"], {KEYS[table]: key, **row_of(table, 0)}, r)
                self.assert_read(table, key, row_of(table, 0), fence)
                r = write(self.c, "PATCH", table, key, {"set": row_of(table, 1)}, token)
                self.assertEqual(r.status, 200, r)
                self.assert_read(table, key, row_of(table, 1), fence)
                other = unique("an")
                r = write(self.c, "POST", table, None, {"row": {KEYS[table]: other, **row_of(table, 2)}}, token)
                self.assertEqual(r.status, 201, r)
                self.assert_read(table, other, row_of(table, 2), fence)
                r = self.c.request("POST", "/v1/pg/batch", {"ops": [
                    {"op": "put", "table": table, "key": key, "row": row_of(table, 3)},
                    {"op": "delete", "table": table, "key": other}]}, {"Fence-Token": token})
                self.assertEqual(r.status, 200, r)
                self.assert_read(table, key, row_of(table, 3), fence)
                self.assertEqual(self.read(table, other).status, 404)
                r = write(self.c, "DELETE", table, key, None, token)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(self.read(table, key).status, 404)

    def test_a_late_write_is_refused_reading_the_row(self):
        for table in TABLES:
            with self.subTest(table=table):
                key = unique("an")
                late = self.lease(ttl_ms=300)
                time.sleep(0.4)  # the lease ends: the refusal under require_live_lease reads the row
                r = write(self.c, "PUT", table, key, {"row": row_of(table, 0)}, late["token"])
                body = assert_problem(self, r, 410, "lease_lost")
                self.assertEqual(body["reason"], "lease_expired", r)
                self.assertEqual(self.read(table, key).status, 404)
                self.assertEqual([a["reason"] for a in rejections(f"pg:{table}/{key}")], ["lease_expired"])

    def test_a_stale_write_is_refused(self):
        for table in TABLES:
            with self.subTest(table=table):
                key = unique("an")
                # one slot: on a Redis Cluster only locks of one slot take fences in the order taken
                old, new = (self.lease(name=name) for name in same_slot("an", "an"))
                r = write(self.c, "PUT", table, key, {"row": row_of(table, 1)}, new["token"])
                self.assertEqual(r.status, 200, r)
                r = write(self.c, "PATCH", table, key, {"set": row_of(table, 2)}, old["token"])
                body = assert_problem(self, r, 409, "stale_fence")
                self.assertEqual(body["current_fence"], new["fence"], r)
                self.assertEqual([a["reason"] for a in rejections(f"pg:{table}/{key}")], ["stale_fence"])
                self.assert_read(table, key, row_of(table, 1), new["fence"])


# Tables named like the WITH queries of the gateway's own statements (src/store/fenced/fenced_sql.c).
WITH_NAMES = ["c", "f", "w", "d", "k", "a", "g", "e", "s"]
# What writes to those tables leave behind (their resources are pg:<one letter>/<key>).
FORGET_SQL = ("DELETE FROM fencegate.rejections WHERE resource LIKE 'pg:_/%';"
              " DELETE FROM fencegate.resource_fences WHERE resource LIKE 'pg:_/%';")


class TableNamedLikeAQueryTest(unittest.TestCase):
    """A table named like one of the WITH queries of the gateway's statements (c, k, ...) is a table like any
    other, in both fence modes and partitioned: a WITH query stands for a table of its name in a FROM, so a
    statement that named the table alone read the query's rows instead. Caught on the code before: on a table
    named k (both modes) or c (default mode, partitioned too) a stale PATCH or PUT answered 500 instead of 409
    stale_fence and left no audit record ("postgres did not store the audit record of the refusal: postgres:
    column t.id does not exist"), and a PATCH or DELETE of a missing row answered 500 instead of 404. Every
    statement now names the table in the schema Postgres found it in at start-up."""

    def test_tables_named_like_the_statements_queries(self):
        for mode in ("default", "fence_column", "partitioned"):
            with self.subTest(mode=mode):
                self.tables_named_like_queries(mode)

    def tables_named_like_queries(self, mode):
        part = " PARTITION BY RANGE (id)" if mode == "partitioned" else ""
        psql(FORGET_SQL + "".join(f'DROP TABLE IF EXISTS public."{n}"; CREATE TABLE public."{n}" (id integer PRIMARY KEY,'
                     f' v text, lock_fence bigint){part};'
                     + (f' CREATE TABLE public."{n}_p" PARTITION OF public."{n}" FOR VALUES FROM (0) TO (100);'
                        if part else "") for n in WITH_NAMES))
        spec = {"key": "id", "columns": ["v"], **({"fence_column": "lock_fence"} if mode == "fence_column" else {})}
        try:
            with Gateway(config={"tables": {n: spec for n in WITH_NAMES}}) as gw:
                c = gw.client()
                lock = unique("an")
                old = c.post(f"/v1/locks/{lock}/acquire", {}).body
                self.assertEqual(c.post(f"/v1/locks/{lock}/release", {"token": old["token"]}).status, 200)
                new = c.post(f"/v1/locks/{lock}/acquire", {}).body
                for n in WITH_NAMES:
                    r = write(c, "PUT", n, "1", {"row": {"v": "new"}}, new["token"])
                    self.assertEqual(r.status, 200, (n, r))
                    for method, body in (("PATCH", {"set": {"v": "old"}}), ("PUT", {"row": {"v": "old"}})):
                        r = write(c, method, n, "1", body, old["token"])
                        self.assertEqual((r.status, r.body.get("current_fence")), (409, new["fence"]),
                                         f"{n} {method}: {r} {gw.why(r)}")
                    r = c.request("POST", "/v1/pg/batch", {"ops": [{"op": "patch", "table": n, "key": "1",
                                                                    "set": {"v": "old"}}]}, {"Fence-Token": old["token"]})
                    self.assertEqual(r.status, 409, (n, r))
                    self.assertEqual([a["reason"] for a in rejections(f"pg:{n}/1")], ["stale_fence"] * 3, n)
                    for method, body in (("PATCH", {"set": {"v": "x"}}), ("DELETE", None)):
                        r = write(c, method, n, "9", body, new["token"])
                        self.assertEqual(r.status, 404, f"{n} {method}: {r} {gw.why(r)}")
                    r = write(c, "POST", n, None, {"row": {"id": 2, "v": "p"}}, new["token"])
                    self.assertEqual(r.status, 201, (n, r))
                    self.assertEqual(write(c, "DELETE", n, "2", None, new["token"]).status, 200, n)
                    self.assertEqual(c.get(f"/v1/pg/{n}/1").body["row"], {"id": 1, "v": "new"}, n)
                    self.assertEqual(psql(f'SELECT id, v FROM public."{n}"'), ["1|new"], n)
        finally:
            psql("".join(f'DROP TABLE IF EXISTS public."{n}";' for n in WITH_NAMES) + FORGET_SQL)


class TableNamedLikeTheGatewaysOwnTest(unittest.TestCase):
    """An application's table named like one of the gateway's own (settings, revocations, rejections) is the
    application's table: the gateway's role, named fencegate in every shipped deployment, finds the schema
    fencegate first in its search_path ("$user"), and the gateway looked its tables up there. Caught on the
    code before: a listed settings (name, value) was fencegate.settings, so a PUT answered 200 and wrote the
    gateway's own settings (where it keeps a signing key it generated), the application's row unchanged; a
    listed revocations (id, note) stopped start-up ("table has no column id"); `fencegate fence-column
    rejections` added its column to fencegate.rejections."""

    SQL = """
    DROP TABLE IF EXISTS public.settings, public.revocations, public.rejections;
    CREATE TABLE public.settings (name text PRIMARY KEY, value text);
    CREATE TABLE public.revocations (id text PRIMARY KEY, note text);
    CREATE TABLE public.rejections (id integer PRIMARY KEY, note text);
    INSERT INTO public.settings VALUES ('theme', 'dark');
    """

    def test_the_gateways_own_tables_are_never_served(self):
        psql(self.SQL)
        tables = {"settings": {"key": "name", "columns": ["value"]},
                  "revocations": {"key": "id", "columns": ["note"]},
                  "rejections": {"key": "id", "columns": ["note"], "fence_column": "lock_fence"}}
        try:
            moved = run_fencegate(["fence-column", "rejections"], config={"tables": tables})
            self.assertEqual(moved.returncode, 0, moved.stderr[-2000:])
            columns = "SELECT attname FROM pg_attribute WHERE attrelid = :'t'::regclass AND attname = 'lock_fence'"
            self.assertEqual(psql(columns, {"t": "public.rejections"}), ["lock_fence"])
            self.assertEqual(psql(columns, {"t": "fencegate.rejections"}), [])
            with Gateway(config={"tables": tables}) as gw:
                c = gw.client()
                token = c.post(f"/v1/locks/{unique('own')}/acquire", {}).body["token"]
                r = c.get("/v1/pg/settings/theme")
                self.assertEqual((r.status, r.body.get("row")), (200, {"name": "theme", "value": "dark"}), r)
                r = write(c, "PUT", "settings", "theme", {"row": {"value": "light"}}, token)
                self.assertEqual(r.status, 200, r)
                for table, key in (("revocations", "r1"), ("rejections", "7")):
                    r = write(c, "PUT", table, key, {"row": {"note": "n"}}, token)
                    self.assertEqual(r.status, 200, (table, r, gw.why(r)))
                self.assertEqual(psql("SELECT value FROM public.settings WHERE name = 'theme'"), ["light"])
                self.assertEqual(psql("SELECT count(*) FROM fencegate.settings WHERE name = 'theme'"), ["0"])
                self.assertEqual(psql("SELECT id || note FROM public.revocations"), ["r1n"])
                self.assertEqual(psql("SELECT id || note FROM public.rejections"), ["7n"])
        finally:
            psql("DROP TABLE IF EXISTS public.settings, public.revocations, public.rejections;"
                 " ALTER TABLE fencegate.rejections DROP COLUMN IF EXISTS lock_fence;"
                 " DELETE FROM fencegate.settings WHERE name = 'theme'")


if __name__ == "__main__":
    unittest.main()
