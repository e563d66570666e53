# SPDX-License-Identifier: Apache-2.0
"""Migrations: `fencegate migrate` applies every migration of sql/ once, a migration missing from
the middle (an older number added later) is still applied, and a database migrated by a newer gateway
(a version this binary does not know) is refused by both `migrate` and the server.

Run through scripts/test (ctest), or by hand with the FG_* variables set.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import env, psql, run_fencegate  # noqa: E402

SQL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sql")


def known_versions() -> list[str]:
    return sorted((str(int(f.split("_")[0])) for f in os.listdir(SQL_DIR) if f.endswith(".sql")), key=int)


def applied_versions() -> list[str]:
    return psql("SELECT version FROM fencegate.schema_migrations ORDER BY version")


class MigrationsTest(unittest.TestCase):
    def setUp(self):
        r = run_fencegate(["migrate"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_every_migration_is_applied_once(self):
        self.assertEqual(applied_versions(), known_versions())
        r = run_fencegate(["migrate"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("migration_applied", r.stderr)
        self.assertNotIn('"auth_off"', r.stderr)  # it serves nothing: no serving-time warning
        self.assertEqual(applied_versions(), known_versions())

    def test_a_gap_is_filled(self):
        last = known_versions()[-1]
        row = psql("SELECT name FROM fencegate.schema_migrations WHERE version = :'v'", {"v": last})
        psql("DELETE FROM fencegate.schema_migrations WHERE version = :'v'", {"v": last})
        try:
            # The last migration is recorded as missing: migrate runs it again (every migration of
            # sql/ is written to be re-runnable) and records it.
            r = run_fencegate(["migrate"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("migration_applied", r.stderr)
            self.assertEqual(applied_versions(), known_versions())
        finally:
            psql("INSERT INTO fencegate.schema_migrations (version, name) VALUES (:'v', :'n') "
                 "ON CONFLICT DO NOTHING", {"v": last, "n": row[0]})

    def test_a_newer_schema_is_refused(self):
        psql("INSERT INTO fencegate.schema_migrations (version, name) VALUES (9999, '9999_future.sql')")
        try:
            r = run_fencegate(["migrate"])
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("9999", r.stderr)
            r = run_fencegate()
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("does not know", r.stderr)
        finally:
            psql("DELETE FROM fencegate.schema_migrations WHERE version = 9999")

    def test_a_deployment_gets_no_application_table(self):
        """The migrations create the gateway's own objects only: the example invoices table of the README
        and the tests is examples/invoices.sql, which scripts/services.sh applies to the test database."""
        db = "fg_deploy_" + os.urandom(4).hex()
        psql(f'CREATE DATABASE "{db}"')
        try:
            dsn = env("FG_TEST_PG_DSN").rsplit("/", 1)[0] + "/" + db
            r = run_fencegate(["migrate"], env_overrides={"FENCEGATE_PG_DSN": dsn})
            self.assertEqual(r.returncode, 0, r.stderr)
            tables = psql("SELECT table_schema || '.' || table_name FROM information_schema.tables "
                          "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')", dsn=dsn)
            self.assertTrue(tables)
            self.assertEqual([t for t in tables if not t.startswith("fencegate.")], [])
        finally:
            psql(f'DROP DATABASE "{db}"')
        self.assertEqual(psql("SELECT to_regclass('public.invoices') IS NOT NULL"), ["t"])


if __name__ == "__main__":
    unittest.main()
