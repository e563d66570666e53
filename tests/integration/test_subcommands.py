# SPDX-License-Identifier: Apache-2.0
"""The command line of `fencegate` itself (fencegate(8), SYNOPSIS and EXIT STATUS): one command per run
(`migrate`, `audit-dead-letters`, `fence-column TABLE`), a command given twice or two of them refused with
exit status 2 and a message naming the argument, before any backend is asked; `fence-column` of a table the
configuration does not give a fence_column refused before Postgres is reached (nothing migrated, nothing
altered); an empty `FENCEGATE_CONFIG` refused like every other empty variable; and a start-up stopped by
the HTTPS certificate logged as the one `startup_failed` JSON line, like every other.

Broken variants these caught (the code before them): `migrate audit-dead-letters` listed the dead letters
and exited 0 without migrating; `fence-column a fence-column b` moved b's fences alone; `fence-column ''`
migrated the database, then refused the table ''; `fence-column` of an unconfigured table waited 30 s for an
unreachable Postgres and exited 1; an empty FENCEGATE_CONFIG started on the defaults alone; a missing
certificate printed a plain-text line that a log pipeline of JSON lines drops.

Owns: main.c's reading of the command line and its start-up refusals. Must not: test `keys new`
(tests/unit/test_keygen.c), the fence move itself (test_fence_move.py) or the migrations (test_migrations.py).
"""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import env, free_port, run_fencegate  # noqa: E402

# A Postgres and a Redis that are not there: a command that reached for them would wait, then exit 1.
NO_BACKENDS = {"FENCEGATE_PG_DSN": "postgresql://fencegate@127.0.0.1:1/fencegate?connect_timeout=1",
               "FENCEGATE_REDIS_URL": "redis://127.0.0.1:1/0"}


def startup_failures(stderr: str) -> list[dict]:
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == "startup_failed"]


class CommandLineTest(unittest.TestCase):
    def assert_refused(self, args: list[str], message: str) -> None:
        r = run_fencegate(args, env_overrides=NO_BACKENDS, timeout=15)
        self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
        self.assertEqual(r.stdout, "", args)
        self.assertIn(message, r.stderr, args)
        self.assertIn("usage: fencegate", r.stderr, args)

    def test_one_command_at_a_time(self):
        cases = [
            (["migrate", "audit-dead-letters"], "fencegate: audit-dead-letters: one command at a time"),
            (["audit-dead-letters", "migrate"], "fencegate: migrate: one command at a time"),
            (["migrate", "fence-column", "t"], "fencegate: fence-column: one command at a time"),
            (["fence-column", "a", "fence-column", "b"], "fencegate: fence-column: given twice"),
            (["migrate", "migrate"], "fencegate: migrate: given twice"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                self.assert_refused(args, message)

    def test_missing_empty_or_misplaced_arguments(self):
        cases = [
            (["fence-column"], "fencegate: fence-column needs a TABLE: none given, or empty"),
            (["fence-column", ""], "fencegate: fence-column needs a TABLE: none given, or empty"),
            (["bogus"], "fencegate: bogus: unknown argument"),
            (["--bogus"], "fencegate: --bogus: unknown argument"),
            (["migrate", "keys", "new"], "fencegate: keys: keys must come first"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                self.assert_refused(args, message)

    def test_help_and_version_win_anywhere(self):
        for args in (["migrate", "--help"], ["fence-column", "-h"], ["bogus", "--help"]):
            r = run_fencegate(args, env_overrides=NO_BACKENDS, timeout=15)
            self.assertEqual((r.returncode, r.stderr), (0, ""), args)
            self.assertTrue(r.stdout.startswith("usage: fencegate"), args)
        r = run_fencegate(["migrate", "--version"], env_overrides=NO_BACKENDS, timeout=15)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^fencegate \d+\.\d+\.\d+\n$")

    def test_output_not_written_is_no_success(self):
        """--version or --help to a full disk exited 0, having printed nothing."""
        for args in (["--version"], ["--help"]):
            with open("/dev/full", "w") as full:
                r = subprocess.run([env("FG_BIN"), *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=15)
            self.assertEqual(r.returncode, 1, (args, r.stderr))
            self.assertIn("fencegate: cannot write to standard output", r.stderr)


class FenceColumnCheckTest(unittest.TestCase):
    def test_a_table_it_would_refuse_is_refused_before_postgres(self):
        config = {"tables": {"with_column": {"key": "id", "columns": ["note"], "fence_column": "fence"},
                             "without_column": {"key": "id", "columns": ["note"]}}}
        cases = [("not_configured", "table 'not_configured' is not under tables of the config"),
                 ("without_column", "config key 'tables.without_column.fence_column' is not set")]
        for table, message in cases:
            with self.subTest(table=table):
                r = run_fencegate(["fence-column", table], env_overrides=NO_BACKENDS, config=config, timeout=15)
                self.assertEqual(r.returncode, 2, r.stderr)
                failed = startup_failures(r.stderr)
                self.assertEqual(len(failed), 1, r.stderr)
                self.assertEqual(failed[0]["code"], "config")
                self.assertIn(message, failed[0]["detail"])
                self.assertNotIn("backend_down", r.stderr)


class StartupRefusalTest(unittest.TestCase):
    def test_empty_config_variable_is_named(self):
        r = run_fencegate(env_overrides={**NO_BACKENDS, "FENCEGATE_CONFIG": "",
                                         "FENCEGATE_LISTEN": f"127.0.0.1:{free_port()}"}, timeout=15)
        self.assertEqual(r.returncode, 2, r.stderr)
        failed = startup_failures(r.stderr)
        self.assertEqual(len(failed), 1, r.stderr)
        self.assertIn("FENCEGATE_CONFIG: must not be empty", failed[0]["detail"])

    def test_unreadable_certificate_is_one_json_line(self):
        missing = "/nonexistent/fencegate-test.pem"
        r = run_fencegate(env_overrides={**NO_BACKENDS, "FENCEGATE_TLS_CERT": missing, "FENCEGATE_TLS_KEY": missing,
                                         "FENCEGATE_LISTEN": f"127.0.0.1:{free_port()}"}, timeout=15)
        self.assertEqual(r.returncode, 2, r.stderr)
        for line in r.stderr.splitlines():
            self.assertIsInstance(json.loads(line), dict, line)
        failed = startup_failures(r.stderr)
        self.assertEqual(len(failed), 1, r.stderr)
        self.assertEqual((failed[0]["level"], failed[0]["code"]), ("error", "config"))
        self.assertIn(missing, failed[0]["detail"])


if __name__ == "__main__":
    unittest.main()
