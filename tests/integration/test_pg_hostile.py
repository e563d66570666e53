# SPDX-License-Identifier: Apache-2.0
"""Hostile input to the fenced Postgres writes: odd and malicious table, column and key names, values
that do not convert, huge values, missing or broken headers and bodies, values a table's own trigger or
generated column refuses. Each must get a clear 4xx
(never a 500), and the database must be unchanged afterwards. A configured table whose own name and
column name need quoting works like any other.

Owns: input validation and SQL safety of /v1/pg. Must not: test the fence rule itself.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, env, http, psql  # noqa: E402
from pg_helpers import (ODD_COLUMN, ODD_TABLE, ODD_TABLE_SQL, acquire, assert_problem, config,  # noqa: E402
                        headers, insert_invoice, quote, rejections, stored_fence, unique,
                        write)

# Everything a hostile request could have changed, as one digest.
STATE_SQL = """
SELECT md5(coalesce((SELECT string_agg(i::text, ',' ORDER BY id) FROM public.invoices i), '')
        || coalesce((SELECT string_agg(f::text, ',' ORDER BY resource) FROM fencegate.resource_fences f), '')
        || coalesce((SELECT string_agg(r::text, ',' ORDER BY id) FROM fencegate.rejections r), '')
        || coalesce((SELECT string_agg(o::text, ',' ORDER BY k) FROM public."we""ird; tab\u2603" o), '')
        || (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')::text)
"""


class HostileInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        psql(ODD_TABLE_SQL)
        odd = {ODD_TABLE: {"key": "k", "columns": [ODD_COLUMN, "n", "j", "v"]}}
        cls.gw = Gateway(config=config(**odd))
        cls.c = cls.gw.client()
        cls.token, cls.fence = acquire(cls.c, unique("hostile"))

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.gw.stop()

    def state(self):
        return psql(STATE_SQL)

    def assert_4xx(self, r, status=None, code=None):
        self.assertTrue(400 <= r.status < 500, r)
        self.assertTrue(r.headers.get("content-type", "").startswith("application/problem+json"), r)
        if status is not None:
            assert_problem(self, r, status, code)

    def test_odd_table_works_with_quoting(self):
        key = str(abs(hash(unique())) % 1000000)
        r = write(self.c, "PUT", ODD_TABLE, key, {"row": {ODD_COLUMN: "x'; DROP TABLE invoices; --", "n": "12.5",
                                                          "j": {"a": [1, "two"]}, "v": "abc"}}, self.token)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["row"][ODD_COLUMN], "x'; DROP TABLE invoices; --")
        self.assertEqual(r.body["row"]["j"], {"a": [1, "two"]})
        self.assertEqual(r.body["resource"], f"pg:{ODD_TABLE}/{key}")
        r = write(self.c, "PATCH", ODD_TABLE, key, {"set": {"j": "just a string", "n": 1}}, self.token)
        self.assertEqual((r.status, r.body["row"]["j"], r.body["row"]["n"]), (200, "just a string", 1), r)
        r = self.c.get(f"/v1/pg/{quote(ODD_TABLE)}/{key}")
        self.assertEqual((r.status, r.body["fence"]), (200, self.fence), r)
        # An integer key is canonical: "007" and "7" are one row and one resource.
        r = write(self.c, "PUT", ODD_TABLE, "007", {"row": {"v": "a"}}, self.token)
        self.assertEqual((r.status, r.body["resource"]), (200, f"pg:{ODD_TABLE}/7"), r)
        self.assertEqual(psql("SELECT count(*) FROM fencegate.rejections WHERE false"), ["0"])
        self.assertEqual(psql("SELECT count(*) FROM public.invoices WHERE false"), ["0"])  # still there

    def test_hostile_requests_change_nothing(self):
        key = unique("h")
        insert_invoice(key, note="keep")
        before = self.state()
        t = self.token
        cases = [
            # unknown tables, including quotes, semicolons and unicode
            ("PATCH", "/v1/pg/nope/1", {"set": {"note": "x"}}, t, 404, "not_found"),
            ("PATCH", f"/v1/pg/{quote('invoices; DROP TABLE invoices')}/1", {"set": {"note": "x"}}, t, 404,
             "not_found"),
            ("PATCH", "/v1/pg/" + quote('invoices"') + "/1", {"set": {"note": "x"}}, t, 404, "not_found"),
            ("PUT", f"/v1/pg/{quote('fencegate.resource_fences')}/x", {"row": {}}, t, 404, "not_found"),
            ("PUT", f"/v1/pg/{quote('Invoices')}/x", {"row": {}}, t, 404, "not_found"),
            ("PUT", "/v1/pg/" + quote("inv\u00f6ices\u2603") + "/x", {"row": {}}, t, 404, "not_found"),
            ("GET", "/v1/pg/pg_authid/1", None, None, 404, "not_found"),
            ("POST", "/v1/pg/" + quote('x";--'), {"row": {"id": "1"}}, t, 404, "not_found"),
            # unknown or forbidden columns
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"updated_at": "now"}}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note\"; DROP TABLE invoices; --": 1}}, t, 400,
             "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"n\u00f6te": 1}}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"id": "other"}}, t, 400, "invalid_field"),
            ("PUT", f"/v1/pg/invoices/{key}", {"row": {"id": "other", "note": "x"}}, t, 400, "invalid_field"),
            # values that do not convert
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"amount_cents": "12abc"}}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"amount_cents": 1.5}}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"amount_cents": "1" + "0" * 30}}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"amount_cents": [1, 2]}}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "ok", "amount_cents": {"a": 1}}}, t, 400,
             "invalid_field"),
            ("PUT", f"/v1/pg/{quote(ODD_TABLE)}/notanint", {"row": {"v": "a"}}, t, 400, "invalid_field"),
            ("PUT", f"/v1/pg/{quote(ODD_TABLE)}/1", {"row": {"n": "99999.999"}}, t, 400, "invalid_field"),
            ("PUT", f"/v1/pg/{quote(ODD_TABLE)}/1", {"row": {"v": "toolong"}}, t, 400, "invalid_field"),
            ("PUT", f"/v1/pg/{quote(ODD_TABLE)}/1", {"row": {"j": "{broken"}}, t, 200, None),
            ("GET", f"/v1/pg/{quote(ODD_TABLE)}/x1", None, None, 400, "invalid_field"),
            # bodies
            ("PATCH", f"/v1/pg/invoices/{key}", "{not json", t, 400, "invalid_json"),
            ("PATCH", f"/v1/pg/invoices/{key}", [1, 2], t, 400, "invalid_json"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": [1]}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "x"}, "extra": 1}, t, 400, "invalid_field"),
            ("POST", "/v1/pg/invoices", {"row": {"note": "no key"}}, t, 400, "invalid_field"),
            ("POST", "/v1/pg/batch", {"ops": "x"}, t, 400, "invalid_field"),
            ("POST", "/v1/pg/batch", {"ops": [{"op": "drop", "table": "invoices"}]}, t, 400, "invalid_field"),
            ("POST", "/v1/pg/batch", {"ops": [{"op": "patch", "table": "nope", "key": "1", "set": {"a": 1}}]}, t,
             404, "not_found"),
            ("POST", "/v1/pg/batch", {"ops": [{"op": "patch", "table": "invoices", "key": key,
                                               "set": {"note": "x"}}] * 101}, t, 400, "invalid_field"),
            # huge values: a key longer than any key, a body over the limit
            ("POST", "/v1/pg/invoices", {"row": {"id": "k" * 5000}}, t, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "x" * (2 << 20)}}, t, 413, "body_too_large"),
            # headers
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "x"}}, None, 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "x"}}, "", 400, "invalid_field"),
            ("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "x"}}, "'; DROP TABLE invoices; --", 403,
             "invalid_fence_token"),
            ("DELETE", f"/v1/pg/invoices/{key}", None, None, 400, "invalid_field"),
        ]
        for method, path, body, token, status, code in cases:
            with self.subTest(method=method, path=path[:80], body=str(body)[:80]):
                hdrs = {} if token is None else {"Fence-Token": token}
                r = http(method, self.gw.url(path), body, hdrs)
                if status == 200:
                    self.assertEqual(r.status, 200, r)  # jsonb takes any JSON, a string included
                    continue
                self.assert_4xx(r, status, code)
                if code == "invalid_field" and "amount_cents" in str(body) and status == 400:
                    self.assertIn("amount_cents", r.body["detail"])
        r = http("PATCH", self.gw.url(f"/v1/pg/invoices/{key}"), {"set": {"note": "x"}},
                 {"Fence-Token": t, "Fence-Owner": "o" * 300})
        self.assert_4xx(r, 400, "invalid_field")
        self.assertIn("Fence-Owner", r.body["detail"])
        psql(f'DELETE FROM public."we""ird; tab\u2603" WHERE k = 1')  # the one accepted write above
        psql("DELETE FROM fencegate.resource_fences WHERE resource = :'r'", {"r": f"pg:{ODD_TABLE}/1"})
        self.assertEqual(self.state(), before)
        self.assertEqual(self.gw.http("GET", "/readyz").status, 200)

    def test_large_value_is_stored_whole(self):
        key = unique("big")
        note = "\u00e9" * 150000  # 300 KB of UTF-8; 900 KB as escaped JSON, under the 1 MiB body limit
        r = write(self.c, "PUT", "invoices", key, {"row": {"note": note}}, self.token)
        self.assertEqual(r.status, 200, r.status)
        self.assertEqual(psql("SELECT length(note), octet_length(note) FROM public.invoices WHERE id = :'k'",
                              {"k": key}), ["150000|300000"])

    def test_key_with_quotes_and_unicode_is_just_a_key(self):
        key = "'; DROP TABLE invoices; -- \u2603 \"x\""
        r = write(self.c, "PUT", "invoices", key, {"row": {"note": "odd key"}}, self.token)
        self.assertEqual((r.status, r.body["row"]["id"]), (200, key), r)
        self.assertEqual(psql("SELECT note FROM public.invoices WHERE id = :'k'", {"k": key}), ["odd key"])


# Tables that refuse some values themselves: a trigger's RAISE and ASSERT, and a generated integer column that
# cannot take a numeric NaN (SQLSTATE 0A000). One in each fence mode.
REFUSING_SQL = """
CREATE OR REPLACE FUNCTION public.refuse_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.note = 'raised' THEN RAISE EXCEPTION 'note % is not for this table', NEW.note; END IF;
    ASSERT NEW.note IS DISTINCT FROM 'asserted', 'note may not be asserted';
    RETURN NEW;
END $$;
""" + "".join(f"""
CREATE TABLE IF NOT EXISTS public.{table} (id integer PRIMARY KEY, x numeric,
    whole integer GENERATED ALWAYS AS (x::integer) STORED, note text, lock_fence bigint);
CREATE OR REPLACE TRIGGER refuse_note BEFORE INSERT OR UPDATE ON public.{table}
    FOR EACH ROW EXECUTE FUNCTION public.refuse_note();
""" for table in ("refusing", "refusing_col"))

REFUSING = {"refusing": {"key": "id", "columns": ["x", "note"]},
            "refusing_col": {"key": "id", "columns": ["x", "note"], "fence_column": "lock_fence"}}


class TableRefusalsTest(unittest.TestCase):
    """What a table refuses on its own is the client's values: 400 invalid_field with the table's reason,
    nothing written, no fence raised (a 500 before for all three)."""

    @classmethod
    def setUpClass(cls):
        psql(REFUSING_SQL)
        cls.gw = Gateway(config=config(**REFUSING))
        cls.c = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.gw.stop()

    def stored(self, table, key):
        """The row's x, note and fence column, and its fence in the side table, as psql prints them."""
        return psql(f"SELECT (SELECT x || '|' || note || '|' || coalesce(lock_fence, 0) FROM public.{table}"
                    "     WHERE id = :'k'::integer),"
                    " (SELECT fence FROM fencegate.resource_fences WHERE resource = :'r')",
                    {"k": key, "r": f"pg:{table}/{key}"})

    def test_refused_values_answer_400_and_write_nothing(self):
        refused = [({"note": "raised"}, "note raised is not for this table"),
                   ({"note": "asserted"}, "note may not be asserted"),
                   ({"x": "NaN"}, "NaN")]
        for table in REFUSING:
            key = str(abs(hash(unique())) % 1000000)
            first, _ = acquire(self.c, unique("refusing"))
            token, _ = acquire(self.c, unique("refusing"))
            r = write(self.c, "PUT", table, key, {"row": {"x": 1, "note": "kept"}}, first)
            self.assertEqual(r.status, 200, r)
            before = self.stored(table, key)
            for values, reason in refused:
                with self.subTest(table=table, values=values):
                    for method, body in (("PATCH", {"set": values}),
                                         ("PUT", {"row": {"x": 2, "note": "new", **values}})):
                        r = write(self.c, method, table, key, body, token)
                        self.assertIn(reason, assert_problem(self, r, 400, "invalid_field")["detail"])
                    r = self.c.post("/v1/pg/batch", {"ops": [
                        {"op": "patch", "table": table, "key": key, "set": {"note": "in a batch"}},
                        {"op": "patch", "table": table, "key": key, "set": values}]}, headers=headers(token))
                    self.assertIn(reason, assert_problem(self, r, 400, "invalid_field")["detail"])
                    self.assertEqual(self.stored(table, key), before)


HIGH = 9000000000000000000  # a fence above any the tests take

# Tables whose row security hides rows from some commands: an UPDATE does not see a 'hidden' row, a DELETE an
# 'undeletable' one, though both are there to read. Each also skips what a table's triggers skip: an update
# that changes nothing, the delete of a 'kept' row. One in each fence mode.
SECURED_SQL = """
CREATE OR REPLACE FUNCTION public.secured_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RETURN CASE WHEN OLD.v = 'kept' THEN NULL ELSE OLD END; END $$;
""" + "".join(f"""
CREATE TABLE public.{table} (id integer PRIMARY KEY, v text, lock_fence bigint);
ALTER TABLE public.{table} ENABLE ROW LEVEL SECURITY;
CREATE POLICY seen ON public.{table} FOR SELECT USING (true);
CREATE POLICY added ON public.{table} FOR INSERT WITH CHECK (true);
CREATE POLICY changed ON public.{table} FOR UPDATE USING (v IS DISTINCT FROM 'hidden');
CREATE POLICY removed ON public.{table} FOR DELETE USING (v IS DISTINCT FROM 'undeletable');
CREATE TRIGGER same BEFORE UPDATE ON public.{table} FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
CREATE TRIGGER keep BEFORE DELETE ON public.{table} FOR EACH ROW EXECUTE FUNCTION public.secured_keep();
INSERT INTO public.{table} (id, v) VALUES (1, 'hidden'), (2, 'undeletable'), (3, 'kept'), (4, 'seen');
""" for table in ("secured", "secured_col")) + "".join(f"""
CREATE TABLE public.{table} (id integer PRIMARY KEY, v text, lock_fence bigint);
ALTER TABLE public.{table} ENABLE ROW LEVEL SECURITY;
CREATE POLICY seen ON public.{table} FOR SELECT USING (v IS DISTINCT FROM 'veiled');
CREATE POLICY added ON public.{table} FOR INSERT WITH CHECK (true);
CREATE POLICY changed ON public.{table} FOR UPDATE USING (v IS DISTINCT FROM 'hidden');
CREATE POLICY removed ON public.{table} FOR DELETE USING (true);
INSERT INTO public.{table} (id, v, lock_fence) VALUES (1, 'hidden', {HIGH}), (2, 'veiled', {HIGH});
""" for table in ("veiled", "veiled_col"))

SECURED = {"secured": {"key": "id", "columns": ["v"]},
           "secured_col": {"key": "id", "columns": ["v"], "fence_column": "lock_fence"},
           "veiled": {"key": "id", "columns": ["v"]},
           "veiled_col": {"key": "id", "columns": ["v"], "fence_column": "lock_fence"}}
SECURED_TABLES = ", ".join(f"public.{table}" for table in SECURED)


class RoleRefusalsTest(unittest.TestCase):
    """A gateway whose Postgres role may not do what a write asks (a row security policy's WITH CHECK, a table
    it may only read): 403 forbidden with Postgres's reason, nothing written (a 500 before). A row its row
    security hides from a write is missing to that write (404), although it is there to read."""

    ROLE = "fg_pg_hostile_writer"

    @classmethod
    def setUpClass(cls):
        with Gateway():  # the gateway's own schema, migrated by its owner
            pass
        psql(f"""
DROP TABLE IF EXISTS public.policed, public.read_only, {SECURED_TABLES};
DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{cls.ROLE}')
    THEN DROP OWNED BY {cls.ROLE}; DROP ROLE {cls.ROLE}; END IF; END $$;
CREATE ROLE {cls.ROLE} LOGIN;
GRANT CREATE ON DATABASE fencegate TO {cls.ROLE};
GRANT USAGE, CREATE ON SCHEMA fencegate TO {cls.ROLE};
GRANT ALL ON ALL TABLES IN SCHEMA fencegate TO {cls.ROLE};
GRANT ALL ON ALL SEQUENCES IN SCHEMA fencegate TO {cls.ROLE};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA fencegate TO {cls.ROLE};
CREATE TABLE public.policed (id integer PRIMARY KEY, v text);
ALTER TABLE public.policed ENABLE ROW LEVEL SECURITY;
CREATE POLICY seen ON public.policed FOR SELECT USING (true);
CREATE POLICY added ON public.policed FOR INSERT WITH CHECK (v IS DISTINCT FROM 'bad');
CREATE POLICY changed ON public.policed FOR UPDATE USING (true) WITH CHECK (v IS DISTINCT FROM 'bad');
GRANT ALL ON public.policed TO {cls.ROLE};
CREATE TABLE public.read_only (id integer PRIMARY KEY, v text);
GRANT SELECT ON public.read_only TO {cls.ROLE};
{SECURED_SQL}
GRANT ALL ON {SECURED_TABLES} TO {cls.ROLE};
""")
        dsn = env("FG_TEST_PG_DSN").replace("//fencegate@", f"//{cls.ROLE}@")
        cls.gw = Gateway(config=config(policed={"key": "id", "columns": ["v"]},
                                       read_only={"key": "id", "columns": ["v"]}, **SECURED),
                         env_overrides={"FENCEGATE_PG_DSN": dsn})
        cls.c = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.gw.stop()
        psql(f"DROP TABLE IF EXISTS public.policed, public.read_only, {SECURED_TABLES};"
             f" DROP OWNED BY {cls.ROLE};"
             f" DROP ROLE {cls.ROLE}")

    def test_what_the_role_may_not_do_answers_403(self):
        token, _ = acquire(self.c, unique("role"))
        r = write(self.c, "PUT", "policed", "1", {"row": {"v": "good"}}, token)
        self.assertEqual(r.status, 200, r)
        for table, key, body, reason in (("policed", "1", {"set": {"v": "bad"}}, "row-level security"),
                                         ("policed", "2", {"row": {"v": "bad"}}, "row-level security"),
                                         ("read_only", "1", {"row": {"v": "x"}}, "permission denied")):
            with self.subTest(table=table, key=key):
                r = write(self.c, "PATCH" if "set" in body else "PUT", table, key, body, token)
                self.assertIn(reason, assert_problem(self, r, 403, "forbidden")["detail"])
        self.assertEqual(psql("SELECT id || v FROM public.policed"), ["1good"])
        self.assertEqual(psql("SELECT count(*) FROM public.read_only"), ["0"])

    def test_rows_hidden_from_a_write_are_missing_to_it(self):
        """A PATCH of a row that row security hides from an UPDATE, and a DELETE of one hidden from a DELETE,
        write nothing and answer 404, alone and in a batch (on a fence_column table a DELETE answers 409
        conflict in a batch, where nothing is retried), and store no fence (caught: a default-mode PATCH
        claimed its fence where its row showed to reads, and kept it), although a trigger of the table skips writes too and the fence is
        current: that the write wrote nothing is not taken for the table's own decision (caught when tried:
        reading "nothing wrote and nothing refuses it" as a trigger's skip answered 200). Where row security
        hides nothing, an update the trigger skips answers the row as it stands in the default mode, and
        404 on a fence_column table, whose skipped writes are never answered as applied; a DELETE a trigger
        skips on a table whose row security applies answers 404, as a hidden row's does: its policies, not
        an UPDATE's, choose the rows it sees, which the gateway does not read."""
        token, fence = acquire(self.c, unique("role"))
        for table in ("secured", "secured_col"):
            column = table == "secured_col"
            with self.subTest(table=table):
                for method, key, body in (("PATCH", "1", {"set": {"v": "x"}}), ("DELETE", "2", None),
                                          ("DELETE", "3", None)):
                    r = write(self.c, method, table, key, body, token)
                    self.assertIn("no row with key", assert_problem(self, r, 404, "not_found")["detail"])
                    self.assertIsNone(stored_fence(f"pg:{table}/{key}"), "a 404 stores no fence")
                    op = {"op": method.lower(), "table": table, "key": key, **(body or {})}
                    r = self.c.post("/v1/pg/batch", {"ops": [op]}, headers=headers(token))
                    if column and method == "DELETE":  # the refusal statement sees the row
                        assert_problem(self, r, 409, "conflict")
                    else:
                        self.assertTrue(assert_problem(self, r, 404, "not_found")["detail"].startswith("ops[0]: "))
                r = write(self.c, "PATCH", table, "4", {"set": {"v": "seen"}}, token)
                self.assertEqual((r.status, r.body["row"], r.body["fence"]), (200, {"id": 4, "v": "seen"}, fence), r)
                r = write(self.c, "PATCH", table, "4", {"set": {"v": "seen"}}, token)  # the trigger skips it
                if column:
                    self.assertIn("no row with key", assert_problem(self, r, 404, "not_found")["detail"])
                else:
                    self.assertEqual((r.status, r.body["row"], r.body["fence"]), (200, {"id": 4, "v": "seen"}, fence),
                                     r)
                self.assertEqual(psql(f"SELECT string_agg(id || v, ',' ORDER BY id) FROM public.{table}"),
                                 ["1hidden,2undeletable,3kept,4seen"])
                self.assertEqual(rejections(f"pg:{table}/4"), [])

    def test_creates_onto_hidden_rows_are_never_applied(self):
        """A PUT or POST onto a row that row security hides from the gateway's UPDATE (1) or from its reads
        (2), a row that holds a fence above the writer's (the fence column's, or the gateway's fence row in
        the default mode), writes nothing and is never answered as applied, alone or in a batch: no fence is
        kept for it, nothing is written. Caught: on a fence_column table such a write was taken for one a
        trigger skipped (the verdict read the row through the same row security), answered 200 (201 for a
        POST) with nothing written and kept its fence in fencegate.resource_fences."""
        token, _ = acquire(self.c, unique("role"))
        audited = {(table, key): rejections(f"pg:{table}/{key}") for table in ("veiled", "veiled_col")
                   for key in ("1", "2")}
        # The default mode's upsert fails on a row hidden from its update or its read (403), its insert on
        # a row it cannot see (409): nothing there can say that a write its guard let through wrote nothing.
        expected = {("veiled", "PUT"): (403, "forbidden"), ("veiled", "POST"): (409, "conflict"),
                    ("veiled_col", "PUT"): (409, "conflict"), ("veiled_col", "POST"): (409, "conflict")}
        for (table, method), (status, code) in expected.items():
            for key in ("1", "2"):
                with self.subTest(table=table, method=method, key=key):
                    body = {"row": {"v": "x"}} if method == "PUT" else {"row": {"id": int(key), "v": "x"}}
                    r = write(self.c, method, table, None if method == "POST" else key, body, token)
                    assert_problem(self, r, status, code)
                    op = {"op": method.lower(), "table": table, "key": key, "row": {"v": "x"}}
                    r = self.c.post("/v1/pg/batch", {"ops": [op]}, headers=headers(token))
                    assert_problem(self, r, status, code)
        for table in ("veiled", "veiled_col"):
            self.assertEqual(psql(f"SET row_security = off; SELECT string_agg(id || v || lock_fence, ',' ORDER BY id)"
                                  f" FROM public.{table}"), [f"1hidden{HIGH},2veiled{HIGH}"])
            for key in ("1", "2"):
                self.assertIsNone(stored_fence(f"pg:{table}/{key}"), (table, key))
                self.assertEqual(rejections(f"pg:{table}/{key}"), audited[(table, key)], (table, key))

if __name__ == "__main__":
    unittest.main()
