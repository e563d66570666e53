# SPDX-License-Identifier: Apache-2.0
"""What a fenced Postgres write answers to a key that may write a table but not read it (`pg:<table>:write`
without `pg:<table>:read`): its `row` holds the key and the columns the request itself named (PATCH `set`,
PUT and POST `row`), nothing it did not write; a DELETE a trigger of the table skipped answers the key alone;
in a batch each op's row by the same rule for its own table. A key with the read scope sees the whole row,
as with auth off (test_pg_answers.py).

Caught before the rule: a write-only key that GET refuses (403 naming pg:<table>:read) read every column of
a row written by others through the 200 of a PATCH of one column, of a PUT, a POST, a skipped DELETE and the
`results` of a batch.

Owns: docs/api.md "Fenced writes to Postgres", what `row` holds for a key without the read scope. Must not:
test the scope check of the routes themselves (test_auth.py) or the rows answered with auth off
(test_pg_answers.py).
"""

import hashlib
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Client, GatewayTest, psql  # noqa: E402
from pg_helpers import assert_problem, quote, skip_trigger_sql, tokens, unique  # noqa: E402

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.rs_rows (id text PRIMARY KEY, secret text, amount numeric, note text);
CREATE TABLE IF NOT EXISTS public.rs_column (id text PRIMARY KEY, secret text, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.rs_skip (id text PRIMARY KEY, secret text, note text);
""" + skip_trigger_sql("rs_skip", "rs_skip")
TABLES = {"rs_rows": {"key": "id", "columns": ["secret", "amount", "note"]},
          "rs_column": {"key": "id", "columns": ["secret", "note"], "fence_column": "lock_fence"},
          "rs_skip": {"key": "id", "columns": ["secret", "note"]}}
WRITE_ALL = [f"pg:{t}:write" for t in TABLES]
KEYS = {"admin": ["admin"],
        "writer": ["lock:rs:*", *WRITE_ALL],
        "reader": ["lock:rs:*", *WRITE_ALL, *(f"pg:{t}:read" for t in TABLES)],
        "mixed": ["lock:rs:*", *WRITE_ALL, "pg:rs_rows:read"]}
SECRET = {"secret": "ACME-SECRET", "amount": 999999, "note": "theirs"}


def key_text(key_id: str) -> str:
    return f"rs-key-{key_id}"


class KeyClient(Client):
    """A client that sends every request with the API key key_id."""

    def __init__(self, port: int, key_id: str):
        super().__init__(port)
        self.auth = {"Authorization": f"Bearer {key_text(key_id)}"}

    def request(self, method, path, body=None, headers=None, timeout=None):
        return super().request(method, path, body, {**self.auth, **(headers or {})}, timeout)


class PgRowScopeTest(GatewayTest):
    gateway_config = {"tables": TABLES, "auth": {"mode": "required", "keys": [
        {"id": k, "sha256": hashlib.sha256(key_text(k).encode()).hexdigest(), "scopes": s}
        for k, s in KEYS.items()]}}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the tables first: the gateway reads their catalog at start-up
        super().setUpClass()
        cls.clients = {k: KeyClient(cls.gw.port, k) for k in KEYS}
        cls.lock = unique("rs:lock")  # one lock: every token's fence above the ones before it

    @classmethod
    def tearDownClass(cls):
        for client in cls.clients.values():
            client.close()
        super().tearDownClass()

    def token(self, key_id: str) -> str:
        """A token of the class's lock, taken with key_id, fencing above every token before it."""
        (token, _), = tokens(self.clients[key_id], self.lock, 1)
        return token

    def send(self, key_id, method, table, key, body, token, extra=None):
        path = f"/v1/pg/{quote(table)}" + (f"/{quote(key)}" if key is not None else "")
        return self.clients[key_id].request(method, path, body, {"Fence-Token": token, **(extra or {})})

    def seed(self, table: str) -> str:
        """A row of table that the admin key wrote, holding what the others did not write."""
        key = unique("rs")
        row = {c: v for c, v in SECRET.items() if c in TABLES[table]["columns"]}
        r = self.send("admin", "PUT", table, key, {"row": row}, self.token("admin"))
        self.assertEqual(r.status, 200, r)
        return key

    def test_single_writes_answer_what_they_wrote(self):
        """PATCH, PUT, POST and DELETE of a write-only key, in both fence modes: the key and the columns the
        request named, never the others; the same writes of a key that may read answer the whole row."""
        for table in ("rs_rows", "rs_column"):
            with self.subTest(table=table):
                key = self.seed(table)
                assert_problem(self, self.clients["writer"].get(f"/v1/pg/{table}/{key}"), 403, "forbidden")
                writer, reader = self.token("writer"), self.token("reader")
                r = self.send("writer", "PATCH", table, key, {"set": {"note": "mine"}}, writer)
                self.assertEqual((r.status, r.body["row"]), (200, {"id": key, "note": "mine"}), r)
                self.assertNotIn(b"ACME-SECRET", r.raw)
                r = self.send("writer", "PUT", table, key, {"row": {"id": key, "note": "put"}}, writer)
                self.assertEqual((r.status, r.body["row"]), (200, {"id": key, "note": "put"}), r)
                r = self.send("writer", "PUT", table, key, {"row": {}}, writer)
                self.assertEqual((r.status, r.body["row"]), (200, {"id": key}), r)
                posted = unique("rs")
                r = self.send("writer", "POST", table, None, {"row": {"id": posted, "note": "new"}}, writer)
                self.assertEqual((r.status, r.body["row"]), (201, {"id": posted, "note": "new"}), r)
                r = self.send("writer", "DELETE", table, posted, None, writer)
                self.assertEqual((r.status, r.body["row"]), (200, None), r)
                # The key that may read sees what stands, whoever wrote it.
                stored = psql(f"SELECT secret FROM public.{table} WHERE id = :'k'", {"k": key})
                r = self.send("reader", "PATCH", table, key, {"set": {"note": "read"}}, reader)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.body["row"]["secret"], stored[0] or None, r)
                self.assertEqual(set(r.body["row"]), {"id", *TABLES[table]["columns"]}, r)
                # Minimal stays minimal.
                r = self.send("writer", "PATCH", table, key, {"set": {"note": "m"}}, self.token("writer"),
                              {"Prefer": "return=minimal"})
                self.assertEqual((r.status, r.raw), (204, b""), r)

    def test_columns_written_answer_as_stored(self):
        """The columns a write-only key named come back as Postgres stored them (a numeric with every digit),
        and only those: a PATCH of the amount alone shows neither the secret nor the note."""
        key = self.seed("rs_rows")
        r = self.send("writer", "PATCH", "rs_rows", key, {"set": {"amount": "12345678901234567890.10"}},
                      self.token("writer"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(set(r.body["row"]), {"id", "amount"}, r)
        self.assertIn(b'"row":{"id":"' + key.encode() + b'","amount":12345678901234567890.10}', r.raw)

    def test_batch_results_by_table(self):
        """A batch of a key that may read rs_rows but not rs_column: each op's row by the rule of its own
        table (rs_rows whole, rs_column the key and the columns the op named); a write-only key's batch shows
        only what it wrote; a reader's the whole rows."""
        rows_key, column_key = self.seed("rs_rows"), self.seed("rs_column")
        posted, put = unique("rs"), unique("rs")
        ops = {"ops": [{"op": "patch", "table": "rs_rows", "key": rows_key, "set": {"note": "b1"}},
                       {"op": "patch", "table": "rs_column", "key": column_key, "set": {"note": "b2"}},
                       {"op": "put", "table": "rs_column", "key": put, "row": {"note": "b3"}},
                       {"op": "post", "table": "rs_rows", "row": {"id": posted, "secret": "own"}},
                       {"op": "delete", "table": "rs_column", "key": put}]}
        whole_rows = {"id": rows_key, **SECRET, "note": "b1"}
        expect = {"mixed": [whole_rows, {"id": column_key, "note": "b2"}, {"id": put, "note": "b3"},
                            {"id": posted, "secret": "own", "amount": None, "note": None}, None],
                  "writer": [{"id": rows_key, "note": "b1"}, {"id": column_key, "note": "b2"},
                             {"id": put, "note": "b3"}, {"id": posted, "secret": "own"}, None],
                  "reader": [whole_rows, {"id": column_key, "secret": "ACME-SECRET", "note": "b2"},
                             {"id": put, "secret": None, "note": "b3"},
                             {"id": posted, "secret": "own", "amount": None, "note": None}, None]}
        for key_id, rows in expect.items():
            with self.subTest(key=key_id):
                psql("DELETE FROM public.rs_rows WHERE id = :'k'", {"k": posted})
                r = self.clients[key_id].request("POST", "/v1/pg/batch", ops, {"Fence-Token": self.token(key_id)})
                self.assertEqual(r.status, 200, r)
                self.assertEqual([x["row"] for x in r.body["results"]], rows, r)

    def test_writes_a_trigger_skipped_answer_what_they_named(self):
        """A write that a trigger of the table skipped answers the row as it stands (test_pg_answers.py): to a
        write-only key the key alone, since the write stored nothing (the columns it named hold another
        writer's values); alone and in a batch. Caught: the skipped PATCH showed the column it named as
        another key left it ("kept")."""
        key = unique("rs")
        psql("INSERT INTO public.rs_skip (id, secret, note) VALUES (:'k', 'ACME-SECRET', 'kept')", {"k": key})
        whole = {"id": key, "secret": "ACME-SECRET", "note": "kept"}
        ops = {"ops": [{"op": "patch", "table": "rs_skip", "key": key, "set": {"note": "skipped"}},
                       {"op": "delete", "table": "rs_skip", "key": key}]}
        for key_id, patched, deleted in (("writer", {"id": key}, {"id": key}),
                                         ("reader", whole, whole)):
            with self.subTest(key=key_id):
                token = self.token(key_id)
                r = self.send(key_id, "PATCH", "rs_skip", key, {"set": {"note": "skipped"}}, token)
                self.assertEqual((r.status, r.body["row"]), (200, patched), r)
                r = self.send(key_id, "DELETE", "rs_skip", key, None, token)
                self.assertEqual((r.status, r.body["row"]), (200, deleted), r)
                r = self.clients[key_id].request("POST", "/v1/pg/batch", ops, {"Fence-Token": token})
                self.assertEqual((r.status, [x["row"] for x in r.body["results"]]), (200, [patched, deleted]), r)


if __name__ == "__main__":
    unittest.main()
