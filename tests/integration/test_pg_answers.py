# SPDX-License-Identifier: Apache-2.0
"""What a fenced Postgres write or read answers: the row holds the key and the listed columns, nothing else of
the table, in both fence modes and in batches; Prefer: return=minimal answers 204 and the row is not read back;
refusals answer as usual whatever the preference; the first return preference decides; a write that a trigger of the table skipped answers the row as
it stands in the default mode, and on a fence_column table as any write that wrote nothing (never applied).

A column added to the table after the gateway started (card_number) must stay private: before this rule every
answer carried it (row_to_json of the whole row), so a key that may write but not read got the whole row
through its PATCH. The fence column is answered as the answer's own `fence`, never inside the row.

Broken variants caught while writing this: the write statement answering row_to_json(t) (card_number and
lock_fence in every row); the minimal write reading the row back anyway (its statement, caught waiting for
a row lock in pg_stat_activity, carried row_to_json); the skipped writes below taken for a missing row or a
lost race (404 "no row with key", 409 conflict), as they were before the judged form of a write said itself
that its guard had passed.

Owns: what fenced writes answer (docs/api.md "Fenced writes to Postgres"). Must not: test the fence rule itself
(test_pg_writes.py, test_fence_column.py).
"""

import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql, raw_exchange  # noqa: E402
from pg_helpers import (assert_problem, quote, rejections, skip_trigger_sql, stored_fence, tokens, unique,  # noqa: E402
                        write)

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.ans_default (id text PRIMARY KEY, note text, amount integer);
CREATE TABLE IF NOT EXISTS public.ans_column (id text PRIMARY KEY, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.ans_minimal (id text PRIMARY KEY, note text);
ALTER TABLE public.ans_default DROP COLUMN IF EXISTS card_number;
ALTER TABLE public.ans_column DROP COLUMN IF EXISTS card_number;
CREATE TABLE IF NOT EXISTS public.ans_skip (id text PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ans_skip_column (id text PRIMARY KEY, note text, lock_fence bigint);
CREATE OR REPLACE TRIGGER b_same BEFORE UPDATE ON public.ans_skip
    FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
CREATE OR REPLACE TRIGGER b_same BEFORE UPDATE ON public.ans_skip_column
    FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
""" + skip_trigger_sql("ans_skip", "ans_skip", "ans_skip_column")
# Added once the gateway runs: a column that no configuration lists.
LATER_SQL = """
ALTER TABLE public.ans_default ADD COLUMN card_number text DEFAULT '4111111111111111';
ALTER TABLE public.ans_column ADD COLUMN card_number text DEFAULT '4111111111111111';
"""
TABLES = {"ans_default": {"key": "id", "columns": ["note", "amount"]},
          "ans_column": {"key": "id", "columns": ["note"], "fence_column": "lock_fence"},
          "ans_minimal": {"key": "id", "columns": ["note"]},
          "ans_skip": {"key": "id", "columns": ["note"]},
          "ans_skip_column": {"key": "id", "columns": ["note"], "fence_column": "lock_fence"}}
MINIMAL = {"Prefer": "return=minimal"}


def wait_for(condition, seconds: float = 10.0) -> bool:
    """Polls condition every 20 ms until it is true or seconds have passed; returns whether it came true."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def hold_row(table: str, key: str) -> subprocess.Popen:
    """A psql session that locks row key of table (FOR UPDATE) and holds its transaction open until "COMMIT;"
    is written to its stdin."""
    cmd = [os.path.join(os.environ.get("FG_PGBIN", "/usr/lib/postgresql/15/bin"), "psql"), "-X", "-q", "-At",
           "-v", "ON_ERROR_STOP=1", "-v", f"k={key}", "-d", os.environ["FG_TEST_PG_DSN"], "-f", "-"]
    held = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held.stdin.write(f"BEGIN;\nSELECT 1 FROM public.{table} WHERE id = :'k' FOR UPDATE;\nSELECT 'held';\n")
    held.stdin.flush()
    if held.stdout.readline().strip() != "1" or held.stdout.readline().strip() != "held":
        held.kill()
        raise AssertionError(f"the row was not locked: {held.communicate()[1]}")
    return held


class PgAnswersTest(GatewayTest):
    gateway_config = {"tables": TABLES}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the tables first: the gateway reads their catalog at start-up
        super().setUpClass()
        psql(LATER_SQL)

    def send(self, method, table, key, body, token, extra=None):
        path = f"/v1/pg/{quote(table)}" + (f"/{quote(key)}" if key is not None else "")
        return self.c.request(method, path, body, {"Fence-Token": token, **(extra or {})})

    def test_rows_hold_the_key_and_the_listed_columns(self):
        (token, fence), = tokens(self.c, unique("ans-lock"), 1)
        for table, row in (("ans_default", {"note": "n", "amount": 7}), ("ans_column", {"note": "n"})):
            with self.subTest(table=table):
                key, other = unique("ans"), unique("ans")
                expect = {"id": key, **row}
                r = write(self.c, "PUT", table, key, {"row": row}, token)
                self.assertEqual((r.status, r.body["row"], r.body["fence"]), (200, expect, fence), r)
                r = write(self.c, "PATCH", table, key, {"set": {"note": "m"}}, token)
                self.assertEqual((r.status, r.body["row"]), (200, {**expect, "note": "m"}), r)
                r = write(self.c, "POST", table, None, {"row": {"id": other, **row}}, token)
                self.assertEqual((r.status, r.body["row"]), (201, {"id": other, **row}), r)
                r = self.c.get(f"/v1/pg/{table}/{key}")
                self.assertEqual((r.status, r.body["row"], r.body["fence"]), (200, {**expect, "note": "m"}, fence), r)
                ops = {"ops": [{"op": "patch", "table": table, "key": key, "set": {"note": "b"}},
                               {"op": "put", "table": table, "key": other, "row": row}]}
                r = self.c.request("POST", "/v1/pg/batch", ops, {"Fence-Token": token})
                self.assertEqual(r.status, 200, r)
                self.assertEqual([x["row"] for x in r.body["results"]],
                                 [{**expect, "note": "b"}, {"id": other, **row}])
                stored = psql(f"SELECT card_number FROM public.{table} WHERE id = :'k'", {"k": key})
                self.assertEqual(stored, ["4111111111111111"], "the private column is there, only not answered")

    def test_return_minimal(self):
        (token, fence), = tokens(self.c, unique("ans-lock"), 1)
        for table in ("ans_default", "ans_column"):
            with self.subTest(table=table):
                key, other = unique("ans"), unique("ans")
                for method, k, body, prefer in (
                        ("PUT", key, {"row": {"note": "a"}}, "return=minimal"),
                        ("PATCH", key, {"set": {"note": "b"}}, "handling=lenient, Return=\"minimal\"; x=1"),
                        ("POST", None, {"row": {"id": other, "note": "c"}}, "respond-async,return=minimal"),
                        ("DELETE", other, None, "return=minimal")):
                    r = self.send(method, table, k, body, token, {"Prefer": prefer})
                    self.assertEqual((r.status, r.raw), (204, b""), (method, r))
                    self.assertEqual(r.headers.get("preference-applied"), "return=minimal", (method, r))
                    self.assertNotIn("content-type", r.headers, (method, r))
                self.assertEqual(psql(f"SELECT note FROM public.{table} WHERE id = :'k'", {"k": key}), ["b"])
                self.assertEqual(psql(f"SELECT note FROM public.{table} WHERE id = :'k'", {"k": other}), [])
                r = self.c.request("POST", "/v1/pg/batch",
                                   {"ops": [{"op": "patch", "table": table, "key": key, "set": {"note": "d"}}]},
                                   {"Fence-Token": token, **MINIMAL})
                self.assertEqual((r.status, r.headers.get("preference-applied")), (204, "return=minimal"), r)
                # Another preference, or none: the row as usual.
                r = self.send("PATCH", table, key, {"set": {"note": "e"}}, token, {"Prefer": "return=representation"})
                self.assertEqual((r.status, r.body["row"]["note"]), (200, "e"), r)
                self.assertNotIn("preference-applied", r.headers)

    def test_preferences_on_several_lines(self):
        """RFC 7240 lets a client send Prefer on several header lines: return=minimal on the second counts
        as on the first (caught: only the first line read, the row answered with 200)."""
        (token, _), = tokens(self.c, unique("ans-lock"), 1)
        key = unique("ans")
        body = b'{"row": {"note": "a"}}'
        head = (f"PUT /v1/pg/ans_default/{key} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nFence-Token: {token}\r\n"
                f"Prefer: handling=strict\r\nPrefer: return=minimal\r\nContent-Length: {len(body)}\r\n\r\n")
        answer = raw_exchange(self.gw.port, head.encode() + body)
        self.assertTrue(answer.startswith(b"HTTP/1.1 204 "), answer)
        self.assertIn(b"\r\nPreference-Applied: return=minimal\r\n", answer)
        self.assertEqual(psql("SELECT note FROM public.ans_default WHERE id = :'k'", {"k": key}), ["a"])

    def test_the_first_return_preference_decides(self):
        """Only the first return preference counts (RFC 7240 2: "If any preference is specified more than
        once, only the first instance is to be considered"), on one Prefer line or across several, in the
        order sent: return=representation first answers the row, whatever follows it (caught: any
        return=minimal anywhere answered 204)."""
        (token, _), = tokens(self.c, unique("ans-lock"), 1)
        key = unique("ans")
        for lines, minimal in ((["return=representation, return=minimal"], False),
                               (["return=minimal, return=representation"], True),
                               (["handling=strict", "return=representation", "return=minimal"], False),
                               (["handling=strict; x=\"return=minimal\"", "return=minimal"], True),
                               (["return=representation", "Return=minimal, return=minimal"], False)):
            with self.subTest(lines=lines):
                body = b'{"row": {"note": "a"}}'
                head = (f"PUT /v1/pg/ans_default/{key} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                        f"Content-Type: application/json\r\nFence-Token: {token}\r\n"
                        + "".join(f"Prefer: {line}\r\n" for line in lines)
                        + f"Content-Length: {len(body)}\r\n\r\n")
                answer = raw_exchange(self.gw.port, head.encode() + body)
                status = answer.split(b"\r\n", 1)[0]
                if minimal:
                    self.assertEqual(status, b"HTTP/1.1 204 No Content", answer)
                    self.assertIn(b"\r\nPreference-Applied: return=minimal\r\n", answer)
                else:
                    self.assertEqual(status, b"HTTP/1.1 200 OK", answer)
                    self.assertNotIn(b"Preference-Applied", answer)
                    self.assertIn(f'"row":{{"id":"{key}","note":"a","amount":null}}'.encode(), answer)
        ops = {"ops": [{"op": "patch", "table": "ans_default", "key": key, "set": {"note": "b"}}]}
        r = self.c.request("POST", "/v1/pg/batch", ops,
                           {"Fence-Token": token, "Prefer": "return=representation, return=minimal"})
        self.assertEqual((r.status, [x["row"]["note"] for x in r.body["results"]]), (200, ["b"]), r)

    def test_refusals_answer_as_usual(self):
        (old, old_fence), (new, new_fence) = tokens(self.c, unique("ans-lock"), 2)
        for table in ("ans_default", "ans_column"):
            with self.subTest(table=table):
                key = unique("ans")
                self.assertEqual(self.send("PUT", table, key, {"row": {"note": "new"}}, new, MINIMAL).status, 204)
                r = self.send("PATCH", table, key, {"set": {"note": "old"}}, old, MINIMAL)
                body = assert_problem(self, r, 409, "stale_fence")
                self.assertEqual((body["presented_fence"], body["current_fence"]), (old_fence, new_fence))
                self.assertNotIn("preference-applied", r.headers)
                self.assertEqual([a["presented_fence"] for a in rejections(f"pg:{table}/{key}")], [old_fence])
                r = self.send("PATCH", table, unique("missing"), {"set": {"note": "x"}}, new, MINIMAL)
                assert_problem(self, r, 404, "not_found")

    def test_a_write_the_table_skipped_answers_the_row_as_it_stands(self):
        """A write that a BEFORE trigger of the table skips (returns NULL) is the table's own decision, not a
        missing row: it answers as applied with the row as it stands, and its fence holds as any applied
        write's, whether the table kept a row or none. suppress_redundant_updates_trigger() skips an update
        that changes nothing (an idempotent retry of a PATCH or PUT); ans_skip() skips writes of the note
        'skipped' and deletes of the note 'kept'. Caught: the retry answered 404 "no row with key" (a PUT
        or a batch: 409 conflict) although the row was there; a skipped insert answered 409. Only in the
        default mode, whose write claims its fence under the lock of the resource's fence row in the
        statement that judges it: a fence_column table answers as below."""
        (old, old_fence), (token, fence) = tokens(self.c, unique("ans-lock"), 2)
        for table in ("ans_skip",):
            with self.subTest(table=table):
                key, kept, new, posted, other = (unique("ans") for _ in range(5))
                same = {"id": key, "note": "a"}
                self.assertEqual(write(self.c, "PUT", table, key, {"row": {"note": "a"}}, old).status, 200)
                # A new holder's write of the same values, then its retries: each a write that changes nothing.
                for method, body in (("PATCH", {"set": {"note": "a"}}), ("PUT", {"row": {"note": "a"}})):
                    for _ in range(2):
                        r = write(self.c, method, table, key, body, token)
                        self.assertEqual(r.status, 200, (method, r))
                        self.assertEqual((r.body["fence"], r.body["row"]), (fence, same), (method, r))
                    self.assertEqual(self.send(method, table, key, body, token, MINIMAL).status, 204, method)
                ops = {"ops": [{"op": "patch", "table": table, "key": key, "set": {"note": "a"}}]}
                r = self.c.request("POST", "/v1/pg/batch", ops, {"Fence-Token": token})
                self.assertEqual((r.status, [x["row"] for x in r.body["results"]]), (200, [same]), r)
                # The table's own decisions: a row it keeps as it was, a row it does not create.
                psql(f"INSERT INTO public.{table} (id, note) VALUES (:'k', 'kept')", {"k": kept})
                for method, body in (("PATCH", {"set": {"note": "skipped"}}), ("DELETE", None)):
                    r = write(self.c, method, table, kept, body, token)
                    self.assertEqual((r.status, r.body["row"]), (200, {"id": kept, "note": "kept"}), (method, r))
                    self.assertEqual(self.send(method, table, kept, body, token, MINIMAL).status, 204, method)
                r = write(self.c, "PUT", table, new, {"row": {"note": "skipped"}}, token)
                self.assertEqual((r.status, r.body["applied"], r.body["row"]), (200, True, None), r)
                r = write(self.c, "POST", table, None, {"row": {"id": posted, "note": "skipped"}}, token)
                self.assertEqual((r.status, r.body["resource"], r.body["row"]),
                                 (201, f"pg:{table}/{posted}", None), r)
                # A batch goes on past the ops its tables skipped.
                ops = {"ops": [{"op": "patch", "table": table, "key": kept, "set": {"note": "skipped"}},
                               {"op": "put", "table": table, "key": other, "row": {"note": "c"}},
                               {"op": "delete", "table": table, "key": kept},
                               {"op": "put", "table": table, "key": new, "row": {"note": "skipped"}}]}
                r = self.c.request("POST", "/v1/pg/batch", ops, {"Fence-Token": token})
                self.assertEqual((r.status, [x["row"] for x in r.body["results"]]),
                                 (200, [{"id": kept, "note": "kept"}, {"id": other, "note": "c"},
                                        {"id": kept, "note": "kept"}, None]), r)
                rows = psql(f"SELECT id, note FROM public.{table} WHERE id IN (:'k', :'j', :'n', :'p') ORDER BY 1",
                            {"k": key, "j": kept, "n": new, "p": posted})
                self.assertEqual(rows, sorted([f"{key}|a", f"{kept}|kept"]))
                # Each fence is the resource's, the gateway's fence row, as for every write there.
                kept_fences = {k: stored_fence(f"pg:{table}/{k}") for k in (key, kept, new, posted)}
                self.assertEqual(kept_fences, {key: fence, kept: fence, new: fence, posted: fence})
                # Nothing of that was refused; each fence holds: the older token is refused, audited once.
                for k, method, body in ((key, "PATCH", {"set": {"note": "old"}}),
                                        (kept, "PATCH", {"set": {"note": "old"}}),
                                        (new, "PUT", {"row": {"note": "old"}}),
                                        (posted, "POST", {"row": {"id": posted, "note": "old"}})):
                    r = write(self.c, method, table, None if method == "POST" else k, body, old)
                    found = assert_problem(self, r, 409, "stale_fence")
                    self.assertEqual((found["presented_fence"], found["current_fence"]), (old_fence, fence))
                    self.assertEqual([a["presented_fence"] for a in rejections(f"pg:{table}/{k}")], [old_fence])

    def test_a_write_a_fence_column_table_skipped_is_never_applied(self):
        """On a fence_column table a write that a BEFORE trigger skipped wrote nothing, and is answered as
        any write that wrote nothing with nothing refusing it: 404 "no row with key" for a PATCH or DELETE,
        409 conflict for a PUT, a POST or a batch, nothing audited, nothing written, no fence moved (neither
        the row's fence column nor one kept for the resource). The gateway cannot tell a trigger's skip
        there from a row hidden from the write or a create below a kept fence without reading the row's
        fence apart from the write. Caught: answered applied, its fence raised by a second UPDATE of the
        fence column that the table's triggers saw, or skipped too, or kept for the resource beside the
        row's own fence column, which a later older write did not read."""
        (old, _), (token, fence) = tokens(self.c, unique("ans-lock"), 2)
        table = "ans_skip_column"
        key, kept, new, posted = (unique("ans") for _ in range(4))
        self.assertEqual(write(self.c, "PUT", table, key, {"row": {"note": "a"}}, old).status, 200)
        r = write(self.c, "PATCH", table, key, {"set": {"note": "a"}}, token)  # its fence column changes
        self.assertEqual((r.status, r.body["row"], r.body["fence"]), (200, {"id": key, "note": "a"}, fence), r)
        psql(f"INSERT INTO public.{table} (id, note) VALUES (:'k', 'kept')", {"k": kept})
        # Its retries change nothing (suppress_redundant_updates_trigger skips them), as do the writes that
        # ans_skip() skips.
        cases = ((key, "PATCH", {"set": {"note": "a"}}, 404, "not_found"),
                 (key, "PUT", {"row": {"note": "a"}}, 409, "conflict"),
                 (kept, "PATCH", {"set": {"note": "skipped"}}, 404, "not_found"),
                 (kept, "DELETE", None, 404, "not_found"),
                 (new, "PUT", {"row": {"note": "skipped"}}, 409, "conflict"),
                 (posted, "POST", {"row": {"id": posted, "note": "skipped"}}, 409, "conflict"))
        for k, method, body, status, code in cases:
            with self.subTest(key=k, method=method):
                target = None if method == "POST" else k
                for extra in (None, MINIMAL):
                    found = assert_problem(self, self.send(method, table, target, body, token, extra), status, code)
                    if status == 404:
                        self.assertIn("no row with key", found["detail"])
                op = {"op": method.lower(), "table": table, "key": k, **(body or {})}
                if method == "POST":
                    op["row"] = {"note": "skipped"}
                r = self.c.request("POST", "/v1/pg/batch", {"ops": [op]}, {"Fence-Token": token})
                assert_problem(self, r, 409, "conflict")  # nothing is retried inside a batch
        rows = psql(f"SELECT id || ':' || note || ':' || coalesce(lock_fence::text, '-') FROM public.{table}"
                    " WHERE id IN (:'k', :'j', :'n', :'p') ORDER BY id", {"k": key, "j": kept, "n": new, "p": posted})
        self.assertEqual(rows, sorted([f"{key}:a:{fence}", f"{kept}:kept:-"]))
        for k in (key, kept, new, posted):
            self.assertIsNone(stored_fence(f"pg:{table}/{k}"), k)
            self.assertEqual(rejections(f"pg:{table}/{k}"), [], k)

    def test_minimal_writes_read_no_row(self):
        """The statement of a minimal write answers nothing of the row: its row count tells whether it wrote.
        It is caught in the act: another transaction holds the row, so the gateway's statement waits, and its
        text, as pg_stat_activity shows it meanwhile, returns neither row_to_json, nor the resource, nor a
        column: only key_kept, its look at the written row's key (test_pg_key_kept.py)."""
        for table in ("ans_minimal", "ans_column"):
            with self.subTest(table=table):
                self.minimal_write_caught(table)

    def minimal_write_caught(self, table):
        (token, _), = tokens(self.c, unique("ans-lock"), 1)
        key = unique("ans")
        self.assertEqual(self.send("PUT", table, key, {"row": {"note": "a"}}, token).status, 200)
        locker = hold_row(table, key)
        try:
            answer = {}
            client = self.gw.client()
            writer = threading.Thread(target=lambda: answer.update(r=client.request(
                "PATCH", f"/v1/pg/{table}/{key}", {"set": {"note": "b"}}, {"Fence-Token": token, **MINIMAL})))
            writer.start()
            seen = []
            self.assertTrue(wait_for(lambda: seen.extend(psql(
                "SELECT query FROM pg_stat_activity WHERE application_name = 'fencegate'"
                f" AND wait_event_type = 'Lock' AND query LIKE '%\"{table}\"%'")) or seen))
            locker.communicate("COMMIT;\n", timeout=30)  # the row lock goes only now that the write was seen
        finally:
            if locker.poll() is None:
                locker.kill()
                locker.wait()
        writer.join()
        client.close()
        self.assertEqual(answer["r"].status, 204, answer)
        self.assertEqual(psql(f"SELECT note FROM public.{table} WHERE id = :'k'", {"k": key}), ["b"])
        for query in seen:
            self.assertIn(f'UPDATE ONLY "public"."{table}"', query)
            returning = query.split(" RETURNING ", 1)[1]
            self.assertEqual(returning, 'CASE WHEN t."id" = $2::text THEN true ELSE '
                                        'fencegate.key_moved($2::text, t."id") END AS key_kept', query)
            for answered in ("row_to_json", " AS resource", " AS c0", " AS c1", '"note"'):
                self.assertNotIn(answered, returning, query)

if __name__ == "__main__":
    unittest.main()
