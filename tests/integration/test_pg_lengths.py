# SPDX-License-Identifier: Apache-2.0
"""Columns and keys of a type with a length (bit(n), bit varying(n), char(n)[] ...) take a value of their
length and refuse any other with 400 invalid_field naming the column, writing nothing (docs/api.md
"Fenced writes to Postgres": a value that does not convert), in both fence modes, alone and in a batch.

- bit(4) takes '1010' and refuses '10'; bit(1) refuses '10'; bit varying(3) refuses '1011';
- char(3)[] keeps 'abc' whole and refuses 'abcd';
- a bit(4) key: '1010' names row 1010; '10' names no row (404) and is refused when written, never taken
  for row '1000'.

What this caught on the code before the fix, which cast each value to format_type's name of its column's
type without the length (`$4::bit`, `$4::character[]`), which means a length of one, and the key to its type
with the length (`$2::bit(4)`), which pads or cuts: '1010' into bit(4) was refused (`bit string length 1 does
not match type bit(4)`, naming no column), so no value could be written; '10' into bit(1) was stored as '1'
with 200; '{abc,de}' into char(3)[] as '{a,d}' and '{abcd}' as '{a}'; bit varying(3)'s refusal named no
column; the key '10' wrote and read row '1000' (200), and '10101' read row 1010.

Owns: values and keys of types with a length. Must not: test the JSON of answered values
(test_pg_row_kinds.py) or how the gateway reads the keys it reads itself (test_pg_identity.py).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql  # noqa: E402
from pg_helpers import assert_problem, stored_fence, tokens, unique, write  # noqa: E402

COLUMNS_SQL = "id text PRIMARY KEY, b4 bit(4), b1 bit(1), vb varbit(3), chs char(3)[]"
SETUP_SQL = f"""
DROP TABLE IF EXISTS public.len_default, public.len_column, public.len_key;
CREATE TABLE public.len_default ({COLUMNS_SQL});
CREATE TABLE public.len_column ({COLUMNS_SQL}, lock_fence bigint);
CREATE TABLE public.len_key (id bit(4) PRIMARY KEY, note text);
"""
COLUMNS = ["b4", "b1", "vb", "chs"]
TABLES = {"len_default": {"key": "id", "columns": COLUMNS},
          "len_column": {"key": "id", "columns": COLUMNS, "fence_column": "lock_fence"},
          "len_key": {"key": "id", "columns": ["note"]}}
GOOD = {"b4": "1010", "b1": "1", "vb": "101", "chs": "{abc,de}"}
# a value of another length for each column
BAD = [("b4", "10"), ("b4", "10101"), ("b1", "10"), ("vb", "1011"), ("chs", "{abcd}")]


def stored(table: str, key: str) -> list[str]:
    return psql(f"SELECT b4::text, b1::text, vb::text, chs::text FROM public.{table} WHERE id = :'k'", {"k": key})


class PgLengthsTest(GatewayTest):
    gateway_config = {"tables": TABLES}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the tables first: the gateway reads their catalog at start-up
        super().setUpClass()

    def assert_refused(self, r, column: str) -> None:
        body = assert_problem(self, r, 400, "invalid_field")
        self.assertIn(f"column '{column}'", body["detail"], r)

    def test_values_of_their_length_are_written_whole(self):
        (token, _), = tokens(self.c, unique("len"), 1)
        answered = {"b4": "1010", "b1": "1", "vb": "101", "chs": ["abc", "de "]}
        kept = {"b4": "1010", "b1": "1", "vb": "101", "chs": "{abc,\"de \"}"}
        for table in ("len_default", "len_column"):
            for column, value in GOOD.items():
                with self.subTest(table=table, column=column):
                    key = unique("len")
                    r = write(self.c, "PUT", table, key, {"row": {column: value}}, token)
                    self.assertEqual(r.status, 200, r)
                    self.assertEqual(r.body["row"][column], answered[column], r)
                    self.assertEqual(psql(f"SELECT {column}::text FROM public.{table} WHERE id = :'k'",
                                          {"k": key}), [kept[column]])
                    r = self.c.get(f"/v1/pg/{table}/{key}")
                    self.assertEqual((r.status, r.body["row"][column]), (200, answered[column]), r)

    def test_values_of_another_length_are_refused_naming_the_column(self):
        (token, _), = tokens(self.c, unique("len"), 1)
        for table in ("len_default", "len_column"):
            for column, value in BAD:
                with self.subTest(table=table, column=column, value=value):
                    key, new = unique("len"), unique("len")
                    psql(f"INSERT INTO public.{table} (id, b4, b1, vb, chs) VALUES (:'k', '1010', '1', '101', "
                         "'{abc,de}')", {"k": key})
                    before = stored(table, key)
                    self.assert_refused(write(self.c, "PATCH", table, key, {"set": {column: value}}, token), column)
                    self.assert_refused(write(self.c, "PUT", table, key, {"row": {column: value}}, token), column)
                    self.assert_refused(write(self.c, "POST", table, None, {"row": {"id": new, column: value}},
                                              token), column)
                    r = self.c.request("POST", "/v1/pg/batch", {"ops": [
                        {"op": "put", "table": table, "key": new, "row": {"b1": "0"}},
                        {"op": "patch", "table": table, "key": key, "set": {column: value}}]},
                        {"Fence-Token": token})
                    self.assert_refused(r, column)
                    self.assertIn("ops[1]", r.body["detail"], r)
                    self.assertEqual(stored(table, key), before)
                    self.assertEqual(stored(table, new), [])
                    for resource in (f"pg:{table}/{key}", f"pg:{table}/{new}"):
                        self.assertIsNone(stored_fence(resource))
                    if table == "len_column":
                        self.assertEqual(psql("SELECT lock_fence FROM public.len_column WHERE id = :'k'",
                                              {"k": key}), [""])

    def test_a_bit_key_names_the_row_of_its_bits(self):
        (token, _), = tokens(self.c, unique("len"), 1)
        r = write(self.c, "PUT", "len_key", "1010", {"row": {"note": "ten"}}, token)
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.body["resource"], r.body["row"]), ("pg:len_key/1010", {"id": "1010", "note": "ten"}), r)
        self.assertEqual(self.c.get("/v1/pg/len_key/1010").body["row"]["note"], "ten")
        for key in ("10", "10101"):
            with self.subTest(key=key):
                # another length names no row: not 1000, nor 1010 cut from 10101
                self.assertEqual(self.c.get(f"/v1/pg/len_key/{key}").status, 404)
                r = write(self.c, "PUT", "len_key", key, {"row": {"note": "cut"}}, token)
                body = assert_problem(self, r, 400, "invalid_field")
                self.assertIn("key column 'id'", body["detail"], r)
                self.assertEqual(write(self.c, "PATCH", "len_key", key, {"set": {"note": "cut"}}, token).status, 404)
                self.assertIsNone(stored_fence(f"pg:len_key/{key}"))
        self.assertEqual(psql("SELECT id::text || ' ' || note FROM public.len_key ORDER BY id"), ["1010 ten"])


if __name__ == "__main__":
    unittest.main()
