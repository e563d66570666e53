# SPDX-License-Identifier: Apache-2.0
"""docs/operations.md, "Backup and restore": after Postgres is restored from an older backup, the fences
go back with the rows, and a holder whose write was applied after the backup could write again over the
restored row; the documented SQL (run as written, with the sequence Redis issued) raises every stored
fence so that such a holder is refused (409 stale_fence), while a new lease writes.

The restore is played on one table and its rows of fencegate.resource_fences (what a restore of the whole
database does to them), so that the other tests' data stays.

Broken variant this caught when tried: the procedure without its resource_fences update (the late
holder's write over the restored row was applied).

Owns: the restore procedure of the operations guide. Must not: test backups of the whole database.
"""

import os
import re
import subprocess
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, env, psql, skip_in_cluster  # noqa: E402
from pg_helpers import acquire, headers  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def procedure() -> str:
    """The SQL of the restore procedure, as docs/operations.md shows it."""
    with open(os.path.join(ROOT, "docs", "operations.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Backup and restore"):text.index("## Moving a table to fence_column")]
    return re.search(r"<<'SQL'\n(.*?)\nSQL\n", section, re.S).group(1)


class RestoreTest(unittest.TestCase):
    @skip_in_cluster("it restores the one Redis from a dump and reads its one fence sequence, fg:fence")
    def test_fences_raised_after_a_restore_refuse_the_late_holder(self):
        table = f"restore_{uuid.uuid4().hex[:8]}"
        psql(f'CREATE TABLE public."{table}" (id integer PRIMARY KEY, note text)')
        try:
            with Gateway(config={"tables": {table: {"key": "id", "columns": ["note"]}}}) as gw:
                c = gw.client()
                lock = f"restore-{uuid.uuid4().hex[:8]}"
                early, _ = acquire(c, lock)
                self.assertEqual(c.request("PUT", f"/v1/pg/{table}/1", {"row": {"note": "backed up"}},
                                           headers(early)).status, 200)
                c.post(f"/v1/locks/{lock}/release", {"token": early})
                backup = psql(f"SELECT fence FROM fencegate.resource_fences WHERE resource = 'pg:{table}/1'")
                late, _ = acquire(c, lock)   # its write comes after the backup, and the restore loses it
                self.assertEqual(c.request("PATCH", f"/v1/pg/{table}/1", {"set": {"note": "lost"}},
                                           headers(late)).status, 200)
                # The restore: the row and its fence as they were at the backup.
                psql(f"UPDATE public.\"{table}\" SET note = 'backed up' WHERE id = 1;"
                     f"UPDATE fencegate.resource_fences SET fence = {backup[0]} WHERE resource = 'pg:{table}/1'")
                with Redis() as r:
                    issued = r.cmd("GET", "fg:fence")
                sql = procedure().replace("BEGIN;", "").replace("COMMIT;", "")
                out = subprocess.run(
                    [os.path.join(env("FG_PGBIN", "/usr/lib/postgresql/15/bin"), "psql"), "-X", "-q",
                     "-v", "ON_ERROR_STOP=1", "-v", f"f={int(issued)}", "-1", "-d", env("FG_TEST_PG_DSN")],
                    input=sql, capture_output=True, text=True, timeout=60)
                self.assertEqual(out.returncode, 0, out.stderr)
                again = c.request("PATCH", f"/v1/pg/{table}/1", {"set": {"note": "over the restore"}},
                                  headers(late))
                self.assertEqual(again.status, 409, again)
                fresh, _ = acquire(c, lock + "-after")
                self.assertEqual(c.request("PATCH", f"/v1/pg/{table}/1", {"set": {"note": "new"}},
                                           headers(fresh)).status, 200)
                c.close()
            self.assertEqual(psql(f'SELECT note FROM public."{table}" WHERE id = 1'), ["new"])
        finally:
            psql(f'DROP TABLE IF EXISTS public."{table}"')


if __name__ == "__main__":
    unittest.main()
