# SPDX-License-Identifier: Apache-2.0
"""`fencegate fence-column TABLE` (docs/operations.md, "Moving a table to fence_column"): a table whose
fences lived in fencegate.resource_fences gets its configured fence column (added as a bigint when
missing) with each row's fence moved there, so that once the gateways restart with the column configured a
stale holder's write is still refused. Run twice, it moves nothing more; a table without fence_column in
the config, or not in the config, is refused with exit status 2, and so is the command without a TABLE.

Broken variant this caught when tried: a move that matched no resource (the column stayed empty, so the
switch would have let the stale holder's write through). The key written as `07` checks that the move
finds row 7 under its canonical resource `pg:<table>/7`.

Owns: the fence-column command. Must not: test fence_column writes themselves (test_fence_column.py does).
"""

import os
import re
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, psql, run_fencegate  # noqa: E402
from pg_helpers import acquire, headers  # noqa: E402


class FenceMoveTest(unittest.TestCase):
    def setUp(self):
        self.table = f"fence_move_{uuid.uuid4().hex[:8]}"
        psql(f'CREATE TABLE public."{self.table}" (id integer PRIMARY KEY, note text)')
        self.plain = {"tables": {self.table: {"key": "id", "columns": ["note"]}}}
        self.column = {"tables": {self.table: {"key": "id", "columns": ["note"], "fence_column": "fence"}}}

    def tearDown(self):
        psql(f'DROP TABLE IF EXISTS public."{self.table}"')
        psql(f"DELETE FROM fencegate.resource_fences WHERE resource LIKE 'pg:{self.table}/%'")

    def move(self, config: dict):
        return run_fencegate(["fence-column", self.table], config=config)

    def test_fences_follow_the_rows_into_the_column(self):
        lock = f"fm-{uuid.uuid4().hex[:8]}"
        with Gateway(config=self.plain) as gw:
            c = gw.client()
            old, old_fence = acquire(c, lock)
            self.assertEqual(c.post(f"/v1/locks/{lock}/release", {"token": old}).status, 200)
            new, new_fence = acquire(c, lock)
            for key, token in (("07", new), ("8", old)):  # a key spelled with a leading zero is row 7
                r = c.request("PUT", f"/v1/pg/{self.table}/{key}", {"row": {"note": "before"}}, headers(token))
                self.assertEqual(r.status, 200, r)
            c.close()
        r = self.move(self.column)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn('"auth_off"', r.stderr)  # it serves nothing: no serving-time warning
        self.assertEqual(r.stdout.strip(), f"fencegate: {self.table}: 2 fences moved from fencegate.resource_fences")
        rows = psql(f'SELECT id, fence FROM public."{self.table}" ORDER BY id')
        self.assertEqual(rows, [f"7|{new_fence}", f"8|{old_fence}"])
        self.assertRegex(self.move(self.column).stdout, r": 0 fences moved")   # once is enough
        with Gateway(config=self.column) as gw:
            c = gw.client()
            stale = c.request("PATCH", f"/v1/pg/{self.table}/7", {"set": {"note": "late"}}, headers(old))
            self.assertEqual(stale.status, 409, stale)
            fresh = c.request("PATCH", f"/v1/pg/{self.table}/7", {"set": {"note": "after"}}, headers(new))
            self.assertEqual(fresh.status, 200, fresh)
            c.close()
        self.assertEqual(psql(f'SELECT note FROM public."{self.table}" WHERE id = 7'), ["after"])

    def test_a_row_whose_key_a_trigger_changes_moves_nothing(self):
        """A BEFORE UPDATE trigger that lowers the key would carry row ABC's fence (pg:<table>/ABC) onto
        row abc, another resource, under the move's UPDATE: the move fails whole, naming both, and nothing
        of the table changes. Caught before: the move answered 1 fence moved and renamed the row."""
        table = f"fence_move_trg_{uuid.uuid4().hex[:8]}"
        self.assertEqual(run_fencegate(["migrate"]).returncode, 0)  # fencegate.resource_fences
        psql(f'CREATE TABLE public."{table}" (id text PRIMARY KEY, note text, fence bigint)')
        self.addCleanup(psql, f'DROP TABLE IF EXISTS public."{table}"')
        self.addCleanup(psql, f"DELETE FROM fencegate.resource_fences WHERE resource LIKE 'pg:{table}/%'")
        psql(f"""INSERT INTO public."{table}" (id, note) VALUES ('ABC', 'upper'), ('k', 'plain')""")
        psql(f"""CREATE FUNCTION public."{table}_lower"() RETURNS trigger LANGUAGE plpgsql AS
                 $$BEGIN NEW.id := lower(NEW.id); RETURN NEW; END$$""")
        self.addCleanup(psql, f'DROP FUNCTION IF EXISTS public."{table}_lower"() CASCADE')
        psql(f'CREATE TRIGGER lower_key BEFORE UPDATE ON public."{table}" FOR EACH ROW '
             f'EXECUTE FUNCTION public."{table}_lower"()')
        psql(f"INSERT INTO fencegate.resource_fences (resource, fence) VALUES "
             f"('pg:{table}/ABC', 41), ('pg:{table}/k', 42)")
        config = {"tables": {table: {"key": "id", "columns": ["note"], "fence_column": "fence"}}}
        r = run_fencegate(["fence-column", table], config=config)
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn(f"the table changed the key from 'pg:{table}/ABC' to 'pg:{table}/abc'", r.stdout + r.stderr)
        self.assertEqual(psql(f'SELECT id, note, fence FROM public."{table}" ORDER BY id'),
                         ["ABC|upper|", "k|plain|"], "the move changed the table")

    def test_refuses_a_table_without_a_fence_column(self):
        r = self.move(self.plain)
        self.assertEqual(r.returncode, 2, r)
        self.assertTrue(re.search(r"fence_column' is not set", r.stdout + r.stderr), r)
        r = run_fencegate(["fence-column", "no_such_table"], config=self.column)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("is not under tables", r.stdout + r.stderr)

    def test_names_a_missing_table(self):
        """`fencegate fence-column` without TABLE says the TABLE is missing, exit status 2. Failed before the
        fix: it called fence-column an unknown argument."""
        r = run_fencegate(["fence-column"])
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("fence-column needs a TABLE", r.stderr)
        self.assertNotIn("unknown argument", r.stderr)


if __name__ == "__main__":
    unittest.main()
