# SPDX-License-Identifier: Apache-2.0
"""A fenced write writes the row of the key it names, or nothing: a table that moves it onto another key (a
BEFORE trigger that rewrites the key, NEW.id := lower(NEW.id); a unique index under an operator class that
takes 'ABC' and 'abc' for one key, so that ON CONFLICT (id) updates the row 'abc') has the write refused with
400 invalid_field saying so, the whole statement undone: no row written, no fence claimed for either key, no
audit record. Every form that writes: PUT, POST, PATCH (DELETE returns the row its key matched, which a
trigger cannot change), alone and in a batch, in both fence modes, on ordinary and partitioned tables, and
the forms that run a write once more after a first try wrote nothing (the judged form of the default mode, a
fence_column write's second try, a batch run op by op). A write of the key the table keeps, and a trigger
that leaves the key alone or sets it to an equal value (numeric 1.0 to 1.00), write as before.

Caught before the fix: PUT /v1/pg/km_default/ABC answered 200 {"resource": "pg:km_default/abc"} and overwrote
the row abc under the fence and the lock of ABC; a POST or PUT of a new upper-case key stored its lower-case
row; a PATCH of XYZ renamed the row to xyz; the operator class's PUT of ABC overwrote abc.

Owns: the key a write's row ends with (docs/api.md "Fenced writes to Postgres"). Must not: test what a
trigger's skip answers (test_pg_answers.py) or values a table refuses (test_pg_hostile.py).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql  # noqa: E402
from pg_helpers import assert_problem, quote, rejections, stored_fence, tokens, unique, write  # noqa: E402

# km_lower() lowers every key but that of a row whose note is 'as is' (how the tests plant a row whose key
# a later write would change); it skips (returns NULL for) a write of the note 'skipped', and the first write
# of the note 'twice' after km_calls is reset: a write whose first try is skipped and whose next moves the key.
LOWERING = ("km_default", "km_column", "km_part", "km_part_column")
# The case-insensitive btree operator class's operators, in strategy order: (function suffix, operator, comparison)
CI_OPERATORS = (("lt", "<~", "<"), ("le", "<=~", "<="), ("eq", "=~", "="), ("ge", ">=~", ">="), ("gt", ">~", ">"))
SETUP_SQL = """
CREATE SEQUENCE IF NOT EXISTS public.km_calls;
CREATE OR REPLACE FUNCTION public.km_lower() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.note = 'skipped' THEN RETURN NULL; END IF;
    IF NEW.note = 'twice' AND nextval('public.km_calls') = 1 THEN RETURN NULL; END IF;
    IF NEW.note IS DISTINCT FROM 'as is' THEN NEW.id := lower(NEW.id); END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION public.km_same() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.id := NEW.id; RETURN NEW; END $$;
CREATE OR REPLACE FUNCTION public.km_scale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.id := round(NEW.id, 2) + CASE WHEN NEW.note = 'shifted' THEN 1 ELSE 0 END; RETURN NEW; END $$;
CREATE TABLE IF NOT EXISTS public.km_default (id text PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.km_column (id text PRIMARY KEY, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.km_part (id text PRIMARY KEY, note text) PARTITION BY RANGE (id);
CREATE TABLE IF NOT EXISTS public.km_part_all PARTITION OF public.km_part FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
CREATE TABLE IF NOT EXISTS public.km_part_column (id text PRIMARY KEY, note text, lock_fence bigint)
    PARTITION BY RANGE (id);
CREATE TABLE IF NOT EXISTS public.km_part_column_all PARTITION OF public.km_part_column
    FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
CREATE TABLE IF NOT EXISTS public.km_same (id text PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.km_same_column (id text PRIMARY KEY, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.km_num (id numeric PRIMARY KEY, note text);
CREATE OR REPLACE TRIGGER km_same BEFORE INSERT OR UPDATE ON public.km_same
    FOR EACH ROW EXECUTE FUNCTION public.km_same();
CREATE OR REPLACE TRIGGER km_same BEFORE INSERT OR UPDATE ON public.km_same_column
    FOR EACH ROW EXECUTE FUNCTION public.km_same();
CREATE OR REPLACE TRIGGER km_scale BEFORE INSERT OR UPDATE ON public.km_num
    FOR EACH ROW EXECUTE FUNCTION public.km_scale();
""" + "".join(f"""
CREATE OR REPLACE TRIGGER km_lower BEFORE INSERT OR UPDATE ON public.{t}
    FOR EACH ROW EXECUTE FUNCTION public.km_lower();
""" for t in LOWERING) + """
CREATE OR REPLACE FUNCTION public.km_ci_cmp(a text, b text) RETURNS integer LANGUAGE sql IMMUTABLE STRICT
    AS 'SELECT bttextcmp(lower(a), lower(b))';
""" + "".join(f"""CREATE OR REPLACE FUNCTION public.km_ci_{name}(a text, b text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT AS 'SELECT public.km_ci_cmp(a, b) {compare} 0';
""" for name, _, compare in CI_OPERATORS) + """
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_opclass WHERE opcname = 'km_ci_ops') THEN
""" + "".join(f"""        CREATE OPERATOR public.{op} (LEFTARG = text, RIGHTARG = text, FUNCTION = public.km_ci_{name});
""" for name, op, _ in CI_OPERATORS) + """        CREATE OPERATOR CLASS public.km_ci_ops FOR TYPE text USING btree AS
            """ + ", ".join(f"OPERATOR {i} public.{op}" for i, (_, op, _) in enumerate(CI_OPERATORS, 1)) + """,
            FUNCTION 1 public.km_ci_cmp(text, text);
    END IF;
END $$;
CREATE TABLE IF NOT EXISTS public.km_ci (id text NOT NULL, note text);
CREATE UNIQUE INDEX IF NOT EXISTS km_ci_id ON public.km_ci (id public.km_ci_ops);
CREATE TABLE IF NOT EXISTS public.km_ci_column (id text NOT NULL, note text, lock_fence bigint);
CREATE UNIQUE INDEX IF NOT EXISTS km_ci_column_id ON public.km_ci_column (id public.km_ci_ops);
"""
COLUMN = {"key": "id", "columns": ["note"], "fence_column": "lock_fence"}
DEFAULT = {"key": "id", "columns": ["note"]}
TABLES = {t: COLUMN if t.endswith("_column") else DEFAULT
          for t in LOWERING + ("km_same", "km_same_column", "km_num", "km_ci", "km_ci_column")}
MINIMAL = {"Prefer": "return=minimal"}


class KeyKeptTest(GatewayTest):
    gateway_config = {"tables": TABLES}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the tables first: the gateway reads their catalog at start-up
        super().setUpClass()

    def rows(self, table: str, *keys: str) -> list[str]:
        """The rows of keys as Postgres holds them, id|note|fence column ('-' for none), read directly."""
        fence = "coalesce(lock_fence::text, '-')" if table.endswith("_column") else "'-'"
        return psql(f"SELECT id || '|' || note || '|' || {fence} FROM public.{table}"
                    " WHERE id = ANY (string_to_array(:'keys', ',')) ORDER BY id", {"keys": ",".join(keys)})

    def assert_untouched(self, table: str, keys: list[str]) -> None:
        """No fence stored and no audit record for any of keys of table."""
        for k in keys:
            self.assertIsNone(stored_fence(f"pg:{table}/{k}"), k)
            self.assertEqual(rejections(f"pg:{table}/{k}"), [], k)

    def assert_moved(self, r, frm: str, to: str, where: str = "") -> None:
        """r is the refusal of a write that the table moved from key frm to key to."""
        detail = assert_problem(self, r, 400, "invalid_field")["detail"]
        self.assertIn(f"{where}postgres: the table changed the key from '{frm}' to '{to}'", detail)
        self.assertIn("so the write was not applied", detail)

    def batch(self, ops, token, extra=None):
        return self.c.request("POST", "/v1/pg/batch", {"ops": ops}, {"Fence-Token": token, **(extra or {})})

    def test_a_write_the_table_moves_is_refused(self):
        for table in LOWERING:
            with self.subTest(table=table):
                self.moved_writes_refused(table)

    def moved_writes_refused(self, table):
        (token, fence), = tokens(self.c, unique("tr-km"), 1)
        low = unique("km")  # lower case: the row a write of its upper case would reach
        up, xyz, fresh = low.upper(), unique("kx").upper(), unique("kf").upper()
        psql(f"INSERT INTO public.{table} (id, note) VALUES (:'l', 'orig'), (:'x', 'as is')", {"l": low, "x": xyz})
        keys = [low, up, xyz, xyz.lower(), fresh, fresh.lower()]
        before = self.rows(table, *keys)
        self.assertEqual(before, sorted([f"{xyz}|as is|-", f"{low}|orig|-"]))
        for extra in (None, MINIMAL):
            with self.subTest(extra=extra):
                r = self.c.request("PUT", f"/v1/pg/{table}/{quote(up)}", {"row": {"note": "moved"}},
                                   {"Fence-Token": token, **(extra or {})})
                self.assert_moved(r, up, low)
                r = self.c.request("PUT", f"/v1/pg/{table}/{quote(fresh)}", {"row": {"note": "moved"}},
                                   {"Fence-Token": token, **(extra or {})})
                self.assert_moved(r, fresh, fresh.lower())
                r = self.c.request("POST", f"/v1/pg/{table}", {"row": {"id": fresh, "note": "moved"}},
                                   {"Fence-Token": token, **(extra or {})})
                self.assert_moved(r, fresh, fresh.lower())
                r = self.c.request("PATCH", f"/v1/pg/{table}/{quote(xyz)}", {"set": {"note": "moved"}},
                                   {"Fence-Token": token, **(extra or {})})
                self.assert_moved(r, xyz, xyz.lower())
                # A DELETE returns the row its key matched: there is no row ABC, only abc.
                r = self.c.request("DELETE", f"/v1/pg/{table}/{quote(up)}", None,
                                   {"Fence-Token": token, **(extra or {})})
                assert_problem(self, r, 404, "not_found")
                r = self.batch([{"op": "put", "table": table, "key": up, "row": {"note": "moved"}}], token, extra)
                self.assert_moved(r, up, low, "ops[0]: ")
                r = self.batch([{"op": "patch", "table": table, "key": low, "set": {"note": "in a batch"}},
                                {"op": "post", "table": table, "row": {"id": fresh, "note": "moved"}}], token, extra)
                self.assert_moved(r, fresh, fresh.lower(), "ops[1]: ")
                r = self.batch([{"op": "patch", "table": table, "key": low, "set": {"note": "in a batch"}},
                                {"op": "patch", "table": table, "key": xyz, "set": {"note": "moved"}}], token, extra)
                self.assert_moved(r, xyz, xyz.lower(), "ops[1]: ")
                self.assertEqual(self.rows(table, *keys), before)
                self.assert_untouched(table, keys)
        # The key the table keeps writes as ever, and a DELETE of a row the trigger would rename deletes it.
        r = write(self.c, "PUT", table, low, {"row": {"note": "new"}}, token)
        self.assertEqual((r.status, r.body["resource"], r.body["row"]),
                         (200, f"pg:{table}/{low}", {"id": low, "note": "new"}), r)
        r = write(self.c, "DELETE", table, xyz, None, token)
        self.assertEqual((r.status, r.body["resource"]), (200, f"pg:{table}/{xyz}"), r)
        self.assertEqual(self.rows(table, *keys),
                         [f"{low}|new|{fence if table.endswith('_column') else '-'}"])

    def test_the_forms_that_run_a_write_once_more_refuse_it_too(self):
        """A PATCH whose first try the table skips (km_lower() skips the first write of 'twice') runs once
        more: in the default mode in its judged form, on a fence_column table as it ran; the table moves
        that one. A batch whose op wrote nothing runs again op by op (default mode: each op in its judged
        form). Each is refused as any moved write, everything undone."""
        (token, _), = tokens(self.c, unique("tr-km"), 1)
        for table in LOWERING:
            with self.subTest(table=table):
                low, xyz = unique("km"), unique("kx").upper()
                psql(f"INSERT INTO public.{table} (id, note) VALUES (:'l', 'orig'), (:'x', 'as is')",
                     {"l": low, "x": xyz})
                keys = [low, low.upper(), xyz, xyz.lower()]
                before = self.rows(table, *keys)
                psql("SELECT setval('public.km_calls', 1, false)")
                r = write(self.c, "PATCH", table, xyz, {"set": {"note": "twice"}}, token)
                self.assert_moved(r, xyz, xyz.lower())
                calls = int(psql("SELECT last_value FROM public.km_calls")[0])
                self.assertGreaterEqual(calls, 2, "it ran once more")
                if not table.endswith("_column"):  # there a skipped op fails the batch (test_pg_answers.py)
                    r = self.batch([{"op": "patch", "table": table, "key": low, "set": {"note": "skipped"}},
                                    {"op": "put", "table": table, "key": low.upper(), "row": {"note": "moved"}}],
                                   token)
                    self.assert_moved(r, low.upper(), low, "ops[1]: ")
                self.assertEqual(self.rows(table, *keys), before)
                self.assert_untouched(table, keys)

    def test_a_unique_index_that_takes_two_keys_for_one(self):
        """km_ci's unique index compares keys without case: a PUT of ABC meets the row abc in its ON CONFLICT
        (id) and would update it."""
        (token, _), = tokens(self.c, unique("tr-km"), 1)
        for table in ("km_ci", "km_ci_column"):
            with self.subTest(table=table):
                low = unique("km")
                up = low.upper()
                psql(f"INSERT INTO public.{table} (id, note) VALUES (:'l', 'orig')", {"l": low})
                before = self.rows(table, low, up)
                for extra in (None, MINIMAL):
                    r = self.c.request("PUT", f"/v1/pg/{table}/{quote(up)}", {"row": {"note": "moved"}},
                                       {"Fence-Token": token, **(extra or {})})
                    self.assert_moved(r, up, low)
                    r = self.batch([{"op": "put", "table": table, "key": up, "row": {"note": "moved"}}], token)
                    self.assert_moved(r, up, low, "ops[0]: ")
                self.assertEqual(self.rows(table, low, up), before)
                self.assert_untouched(table, [low, up])
                r = write(self.c, "PUT", table, low, {"row": {"note": "new"}}, token)
                self.assertEqual((r.status, r.body["row"]), (200, {"id": low, "note": "new"}), r)

    def test_a_trigger_that_keeps_the_key_writes(self):
        """km_same() sets the key to itself, km_scale() a numeric key to an equal value of another scale (1.0
        to 1.00, one key by the column's own equality): every form writes as on a table without them. Where
        km_scale() adds 1 (note 'shifted'), the write is refused as any moved write."""
        (token, fence), = tokens(self.c, unique("tr-km"), 1)
        for table in ("km_same", "km_same_column"):
            with self.subTest(table=table):
                key, other = unique("KM"), unique("KM")
                for method, k, body, status in (("PUT", key, {"row": {"note": "a"}}, 200),
                                                ("PATCH", key, {"set": {"note": "b"}}, 200),
                                                ("POST", None, {"row": {"id": other, "note": "c"}}, 201),
                                                ("DELETE", other, None, 200)):
                    r = write(self.c, method, table, k, body, token)
                    self.assertEqual((r.status, r.body["resource"]), (status, f"pg:{table}/{k or other}"), r)
                r = self.batch([{"op": "patch", "table": table, "key": key, "set": {"note": "d"}},
                                {"op": "put", "table": table, "key": other, "row": {"note": "e"}}], token)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(self.rows(table, key, other),
                                 sorted(f"{k}|{n}|{fence if table.endswith('_column') else '-'}"
                                        for k, n in ((key, "d"), (other, "e"))))
        n = str(abs(hash(unique())) % 1000000)
        r = write(self.c, "PUT", "km_num", f"{n}.0", {"row": {"note": "a"}}, token)
        self.assertEqual((r.status, r.body["resource"], r.body["row"]),
                         (200, f"pg:km_num/{n}", {"id": float(f"{n}.00"), "note": "a"}), r)
        r = write(self.c, "PATCH", "km_num", n, {"set": {"note": "b"}}, token)
        self.assertEqual((r.status, r.body["resource"]), (200, f"pg:km_num/{n}"), r)
        self.assertEqual(psql("SELECT id || '|' || note FROM public.km_num WHERE id = :'k'", {"k": n}), [f"{n}.00|b"])
        self.assertEqual(stored_fence(f"pg:km_num/{n}"), fence)
        # A key of another type that the table does change: refused the same way, each key as Postgres prints it.
        r = write(self.c, "PATCH", "km_num", f"{n}.0", {"set": {"note": "shifted"}}, token)
        self.assert_moved(r, f"{n}.0", f"{int(n) + 1}.00")
        self.assertEqual(psql("SELECT id || '|' || note FROM public.km_num WHERE id >= :'k' ORDER BY id",
                              {"k": n}), [f"{n}.00|b"])
        self.assertIsNone(stored_fence(f"pg:km_num/{int(n) + 1}"))


if __name__ == "__main__":
    unittest.main()
