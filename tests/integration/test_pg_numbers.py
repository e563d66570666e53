# SPDX-License-Identifier: Apache-2.0
"""Numbers reach Postgres as the client wrote them and come back as Postgres stored them: a JSON number with
a fraction goes to a text, numeric or jsonb column as its shortest decimal text (19.99, not
19.989999999999998), and a row goes into every answer (GET, PUT, PATCH, POST, batch results) as the text
Postgres or the gateway's row writer made of it, never read into doubles: a numeric(10,2) of 99999999.99,
a numeric key of 1234567890123456.7891, a numeric of 30 digits and such a number inside a jsonb value come
back digit for digit, in a row that is an object. Answers are compared as text (json.loads with
parse_float=Decimal, or substrings of the body), since Python's floats would round as doubles do.

Caught on the code before this test (each test failed there): 19.99 stored as '19.989999999999998' in the
text column, 0.1 as 0.10000000000000001 in the numeric column and {"price": 19.989999999999998} in the
jsonb column (test_fractions_are_stored_as_written); 99999999.99 answered as 99999999.989999995, 1.10 as
1.1000000000000001 and the key 1234567890123456.7891 as 1234567890123456.8 by GET, POST, PUT and batches
(test_numerals_come_back_exact); the 31-digit numeric answered as 1.2345678901234568e29, and the row whose
jsonb holds it and 1e308 answered by GET, PATCH and batches as a JSON string of its text
(test_numbers_beyond_a_double_stay_in_an_object_row).

Owns: the digits of numbers written and answered (docs/api.md "Fenced writes to Postgres"). Must not: test
the JSON types of each kind of column (test_pg_row_kinds.py) or which columns an answer holds
(test_pg_answers.py).
"""

import decimal
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql  # noqa: E402
from pg_helpers import quote, tokens, unique, write  # noqa: E402

SETUP_SQL = """
DROP TABLE IF EXISTS public.num_values, public.num_ledger, public.num_counts;
CREATE TABLE public.num_values (id text PRIMARY KEY, t text, n numeric, jb jsonb, m numeric(10, 2));
CREATE TABLE public.num_ledger (id numeric PRIMARY KEY, n numeric, lock_fence bigint);
CREATE TABLE public.num_counts (id text PRIMARY KEY, b bigint);
"""
TABLES = {"num_values": {"key": "id", "columns": ["t", "n", "jb", "m"]},
          "num_ledger": {"key": "id", "columns": ["n"], "fence_column": "lock_fence"},
          "num_counts": {"key": "id", "columns": ["b"]}}
D = decimal.Decimal
BIG = "123456789012345678901234567890.5"  # 31 digits: no double holds it
LEDGER_KEY = "1234567890123456.7891"


def exact(r) -> dict:
    """The body of answer r read with every number as it is written (Decimal, int)."""
    return json.loads(r.raw, parse_float=D)


class PgNumbersTest(GatewayTest):
    gateway_config = {"tables": TABLES}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the tables first: the gateway reads their catalog at start-up
        super().setUpClass()

    def batch(self, ops, token):
        r = self.c.request("POST", "/v1/pg/batch", {"ops": ops}, {"Fence-Token": token})
        self.assertEqual(r.status, 200, r)
        return r

    def stored(self, key: str) -> list[str]:
        return psql("SELECT t, n::text, jb::text, m::text FROM public.num_values WHERE id = :'k'", {"k": key})

    def test_fractions_are_stored_as_written(self):
        """19.99 and 0.1 as JSON numbers, into a text, a numeric and a jsonb column (and inside a batch), are
        what psql reads, and what the answer holds."""
        (token, _), = tokens(self.c, unique("num-lock"), 1)
        key, other = unique("num"), unique("num")
        body = '{"row": {"t": 19.99, "n": 0.1, "jb": {"price": 19.99, "rate": 0.1, "n": 7}, "m": 0.1}}'
        r = write(self.c, "PUT", "num_values", key, body, token)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.stored(key), ['19.99|0.1|{"n": 7, "rate": 0.1, "price": 19.99}|0.10'])
        self.assertEqual(exact(r)["row"], {"id": key, "t": "19.99", "n": D("0.1"),
                                          "jb": {"n": 7, "rate": D("0.1"), "price": D("19.99")}, "m": D("0.10")})
        r = write(self.c, "PATCH", "num_values", key, '{"set": {"t": 0.1, "n": 19.99, "jb": [0.1, 19.99]}}', token)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.stored(key), ["0.1|19.99|[0.1, 19.99]|0.10"])
        self.assertIn('"t":"0.1","n":19.99,"jb":[0.1, 19.99],"m":0.10}', r.raw.decode())
        ops = ('[{"op": "post", "table": "num_values", "row": {"id": "%s", "t": 19.99, "n": 0.1,'
               ' "jb": {"price": 19.99}}}]' % other)
        r = self.c.request("POST", "/v1/pg/batch", '{"ops": %s}' % ops, {"Fence-Token": token})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.stored(other), ['19.99|0.1|{"price": 19.99}|'])
        self.assertEqual(exact(r)["results"][0]["row"],
                         {"id": other, "t": "19.99", "n": D("0.1"), "jb": {"price": D("19.99")}, "m": None})

    def test_whole_numbers_with_an_exponent_reach_an_integer_column(self):
        """A whole number written with an exponent below 1e21 (Python's json writes 1e16 as 1e+16) goes to
        Postgres with its digits written out, which a bigint column reads: 1e16, 1.5e3 and 6.26643345147825e16
        are 10000000000000000, 1500 and 62664334514782500 (caught: "1e+16" and "6.26643345147825e+16" sent
        as they are, answered 400 by the column)."""
        (token, _), = tokens(self.c, unique("num-lock"), 1)
        for written, stored in (("1e16", "10000000000000000"), ("1.5e3", "1500"),
                                ("6.26643345147825e16", "62664334514782500"), ("-1e+18", "-1000000000000000000")):
            key = unique("num")
            r = write(self.c, "PUT", "num_counts", key, '{"row": {"b": %s}}' % written, token)
            self.assertEqual(r.status, 200, (written, r))
            self.assertEqual(psql("SELECT b FROM public.num_counts WHERE id = :'k'", {"k": key}), [stored])
            self.assertEqual(exact(r)["row"]["b"], int(stored))

    def test_numerals_come_back_exact(self):
        """A numeric(10,2) of 99999999.99 and a numeric key of 1234567890123456.7891 in GET, PUT, PATCH, POST
        and batch answers, digit for digit, and the key as the resource names it."""
        (token, fence), = tokens(self.c, unique("num-lock"), 1)
        key = unique("num")
        r = write(self.c, "PUT", "num_values", key, {"row": {"m": "99999999.99"}}, token)
        self.assertEqual((r.status, exact(r)["row"]["m"]), (200, D("99999999.99")), r)
        r = write(self.c, "PATCH", "num_values", key, {"set": {"n": "0.1"}}, token)
        self.assertEqual(exact(r)["row"], {"id": key, "t": None, "n": D("0.1"), "jb": None, "m": D("99999999.99")})
        r = self.c.get(f"/v1/pg/num_values/{quote(key)}")
        self.assertEqual(exact(r), {"row": {"id": key, "t": None, "n": D("0.1"), "jb": None, "m": D("99999999.99")},
                                    "fence": fence, "resource": f"pg:num_values/{key}"})
        r = self.batch([{"op": "patch", "table": "num_values", "key": key, "set": {"t": "x"}}], token)
        self.assertIn('"n":0.1,"jb":null,"m":99999999.99}', r.raw.decode())

        resource = f"pg:num_ledger/{LEDGER_KEY}"
        r = write(self.c, "POST", "num_ledger", None, {"row": {"id": LEDGER_KEY, "n": "99999999.99"}}, token)
        self.assertEqual((r.status, exact(r)["resource"], exact(r)["row"]),
                         (201, resource, {"id": D(LEDGER_KEY), "n": D("99999999.99")}), r)
        r = write(self.c, "PUT", "num_ledger", LEDGER_KEY, {"row": {"n": "1.10"}}, token)
        self.assertEqual(exact(r)["row"], {"id": D(LEDGER_KEY), "n": D("1.10")}, r)
        r = self.c.get(f"/v1/pg/num_ledger/{LEDGER_KEY}")
        self.assertIn('"row":{"id":1234567890123456.7891,"n":1.10}', r.raw.decode())
        self.assertEqual(exact(r)["resource"], resource, r)
        r = self.batch([{"op": "patch", "table": "num_ledger", "key": LEDGER_KEY, "set": {"n": "2"}},
                        {"op": "delete", "table": "num_ledger", "key": LEDGER_KEY}], token)
        self.assertEqual([(i["op"], i["resource"], i["row"]) for i in exact(r)["results"]],
                         [("PATCH", resource, {"id": D(LEDGER_KEY), "n": 2}), ("DELETE", resource, None)], r)

    def test_numbers_beyond_a_double_stay_in_an_object_row(self):
        """A numeric of 31 digits, sent as a JSON string, and a jsonb holding such a number (and 1e308) are
        answered inside a row that is an object, by the write, a batch and GET alike."""
        (token, _), = tokens(self.c, unique("num-lock"), 1)
        key = unique("num")
        r = write(self.c, "PUT", "num_values", key, {"row": {"n": BIG}}, token)
        self.assertEqual((r.status, exact(r)["row"]["n"]), (200, D(BIG)), r)
        self.assertEqual(psql("SELECT n::text FROM public.num_values WHERE id = :'k'", {"k": key}), [BIG])
        r = self.batch([{"op": "patch", "table": "num_values", "key": key, "set": {"t": "b"}}], token)
        self.assertEqual(exact(r)["results"][0]["row"], {"id": key, "t": "b", "n": D(BIG), "jb": None, "m": None})
        psql("UPDATE public.num_values SET jb = jsonb_build_object('x', :'b'::numeric, 'y', 1e308) WHERE id = :'k'",
             {"b": BIG, "k": key})
        r = self.c.get(f"/v1/pg/num_values/{quote(key)}")
        self.assertEqual(r.status, 200, r)
        self.assertIsInstance(r.body["row"], dict, r)
        self.assertEqual(exact(r)["row"]["jb"], {"x": D(BIG), "y": 10 ** 308}, r)
        text = psql("SELECT row_to_json(r) FROM (SELECT id, t, n, jb, m FROM public.num_values"
                    " WHERE id = :'k') AS r", {"k": key})[0]
        self.assertIn(f'"row":{text}', r.raw.decode())
        r = write(self.c, "PATCH", "num_values", key, {"set": {"t": "c"}}, token)
        self.assertIsInstance(r.body["row"], dict, r)
        self.assertEqual(exact(r)["row"]["jb"], {"x": D(BIG), "y": 10 ** 308}, r)


if __name__ == "__main__":
    unittest.main()
