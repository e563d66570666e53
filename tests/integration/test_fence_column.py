# SPDX-License-Identifier: Apache-2.0
"""Tables with a fence_column: the fence lives in a bigint column of the row itself, guarded by one statement.

A trigger on the test table appends every new row version's fence column to a log table: because an UPDATE
holds the row lock until its transaction ends, the log's order is the commit order, observed by Postgres and
not by the gateway. Many concurrent writers with shuffled fences then show that
  - accepted fences never decrease in commit order, exactly the 200 answers are in the log;
  - every 409 left exactly one audit record (same shape as the default mode), no 200 left one;
  - nothing is kept in fencegate.resource_fences for the table;
and single requests show the rest of the contract: the column is not client-writable, GET answers it as
`fence`, 404 leaves nothing behind, POST onto an existing row, a DELETE keeps the row's fence (its one row in
fencegate.resource_fences) so that an older token cannot create the row again, batches all-or-nothing with the
stale audit, and the start-up refusals (missing column, not bigint, listed in columns).

Broken variants caught while writing this (each tried, then reverted): the row guard dropped from the UPDATE
(`coalesce(fence) <= $1` removed: the log showed a lower fence committed after a higher one and 409s became
200s); the current fence read without FOR UPDATE, from the statement's snapshot (a writer that lost a race to
a concurrent commit was answered as if the row were not stale, and the log and the answers disagreed); the
delete's kept fence left out (the older PUT and POST recreated the deleted row with 200 and 201).

Owns: docs/api.md "Resources bound to locks" `fence_column`. Must not: test lock/semaphore templates (test_bound.py).
"""

import itertools
import os
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql, run_fencegate  # noqa: E402
from pg_helpers import (assert_problem, check_commit_order, check_ops_judged_where_they_stand,  # noqa: E402
                        commit_log_sql, open_transaction, rejections, run_writers, stored_fence, tokens, unique,
                        wait_for_lock_waiter, write)

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.fc_rows (id text PRIMARY KEY, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.fc_parted (id text PRIMARY KEY, note text, lock_fence bigint) PARTITION BY HASH (id);
CREATE TABLE IF NOT EXISTS public.fc_parted_0 PARTITION OF public.fc_parted FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE IF NOT EXISTS public.fc_parted_1 PARTITION OF public.fc_parted FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE IF NOT EXISTS public.fc_text_fence (id text PRIMARY KEY, note text, lock_fence text);
CREATE TABLE IF NOT EXISTS public.fc_guarded (id text PRIMARY KEY, note text, frozen boolean NOT NULL DEFAULT false,
    lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.fc_guarded_log (seq bigserial PRIMARY KEY, id text, note text, lock_fence bigint);
CREATE OR REPLACE FUNCTION public.fc_guarded_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.frozen OR NEW.note IS NOT DISTINCT FROM OLD.note OR NEW.note = 'skipped' THEN RETURN NULL; END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION public.fc_guarded_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.fc_guarded_log (id, note, lock_fence) VALUES (NEW.id, NEW.note, NEW.lock_fence);
    RETURN NULL; END $$;
CREATE OR REPLACE TRIGGER skip BEFORE UPDATE ON public.fc_guarded
    FOR EACH ROW EXECUTE FUNCTION public.fc_guarded_skip();
CREATE OR REPLACE TRIGGER history AFTER UPDATE ON public.fc_guarded
    FOR EACH ROW EXECUTE FUNCTION public.fc_guarded_history();
""" + commit_log_sql("fc_rows", "fc_log", "lock_fence")

TABLE = {"key": "id", "columns": ["note"], "fence_column": "lock_fence"}
WRITERS = 8
TOKENS = 120


def row(key, table: str = "fc_rows"):
    out = psql(f"SELECT note, lock_fence FROM public.{table} WHERE id = :'k'", {"k": key})
    return out[0] if out else None


def open_delete(key: str, fence: int, table: str) -> subprocess.Popen:
    """A psql session that deletes row key of table and keeps its fence, as a gateway's DELETE does, and
    holds its transaction open until "COMMIT;" is written to its stdin."""
    return open_transaction(f"WITH d AS (DELETE FROM public.{table} WHERE id = '{key}' RETURNING id)"
                            f" INSERT INTO fencegate.resource_fences (resource, fence)"
                            f" SELECT 'pg:{table}/' || id, {fence} FROM d;")


def late_create(client, method: str, key: str, token: str, table: str):
    """Creates row key of table with token: PUT, POST or a batch of one put."""
    if method == "batch":
        ops = {"ops": [{"op": "put", "table": table, "key": key, "row": {"note": "late"}}]}
        return client.request("POST", "/v1/pg/batch", ops, {"Fence-Token": token})
    if method == "PUT":
        return write(client, "PUT", table, key, {"row": {"note": "late"}}, token)
    return write(client, "POST", table, None, {"row": {"id": key}}, token)


class FenceColumnTest(GatewayTest):
    gateway_config = {"tables": {"fc_rows": TABLE, "fc_guarded": TABLE, "fc_parted": TABLE}}
    gateway_env = {"FENCEGATE_HTTP_THREADS": WRITERS, "FENCEGATE_PG_POOL_SIZE": WRITERS}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the table first: the gateway reads its catalog at start-up
        super().setUpClass()

    def check(self, key, statuses):
        log = [int(x) for x in psql("SELECT fence FROM public.fc_log WHERE id = :'k' AND fence IS NOT NULL ORDER BY seq", {"k": key})]
        resource = f"pg:fc_rows/{key}"
        accepted = check_commit_order(self, log, statuses, resource)
        self.assertEqual(row(key), f"w{accepted[-1]}|{accepted[-1]}")
        self.assertIsNone(stored_fence(resource), "a fence-column table keeps no gateway fence row")

    def run_writers(self, key, toks, method, body_of):
        return run_writers(self, self.gw, WRITERS, "fc_rows", key, toks, method, body_of)

    def test_concurrent_patches(self):
        key = unique("fc")
        psql("INSERT INTO public.fc_rows (id, note) VALUES (:'k', 'start')", {"k": key})
        toks = tokens(self.c, unique("fc-lock"), TOKENS)
        self.check(key, self.run_writers(key, toks, "PATCH", lambda f: {"set": {"note": f"w{f}"}}))

    def test_concurrent_puts_on_a_new_row(self):
        key = unique("fc-put")
        toks = tokens(self.c, unique("fc-lock"), TOKENS)
        self.check(key, self.run_writers(key, toks, "PUT", lambda f: {"row": {"note": f"w{f}"}}))

    def test_single_requests(self):
        key = unique("fc")
        (t1, f1), (t2, f2) = tokens(self.c, unique("fc-lock"), 2)
        r = write(self.c, "PATCH", "fc_rows", key, {"set": {"note": "x"}}, t1)
        assert_problem(self, r, 404, "not_found")
        r = write(self.c, "POST", "fc_rows", None, {"row": {"id": key, "note": "new"}}, t2)
        self.assertEqual((r.status, r.body["fence"], r.body["row"]), (201, f2, {"id": key, "note": "new"}), r)
        r = self.c.get(f"/v1/pg/fc_rows/{key}")
        # The fence column is answered as the fence, not in the row.
        self.assertEqual((r.status, r.body["fence"], r.body["row"]), (200, f2, {"id": key, "note": "new"}), r)
        # The column is the gateway's: not writable by clients.
        r = write(self.c, "PATCH", "fc_rows", key, {"set": {"lock_fence": 1}}, t2)
        self.assertEqual(r.status, 400, r)
        # POST onto the existing row: 409 conflict with a fence that is not stale, stale_fence with an old one.
        r = write(self.c, "POST", "fc_rows", None, {"row": {"id": key}}, t2)
        assert_problem(self, r, 409, "conflict")
        r = write(self.c, "POST", "fc_rows", None, {"row": {"id": key}}, t1)
        body = assert_problem(self, r, 409, "stale_fence")
        self.assertEqual(body["current_fence"], f2)
        for method, b in (("PATCH", {"set": {"note": "old"}}), ("PUT", {"row": {"note": "old"}}), ("DELETE", None)):
            r = write(self.c, method, "fc_rows", key, b, t1)
            assert_problem(self, r, 409, "stale_fence")
        self.assertEqual(row(key), f"new|{f2}")
        self.assertEqual([a["presented_fence"] for a in rejections(f"pg:fc_rows/{key}")], [f1] * 4)
        r = write(self.c, "DELETE", "fc_rows", key, None, t2)
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(row(key))
        # GET answers the fence the delete kept, the one that refuses older tokens below (it answered null).
        r = self.c.get(f"/v1/pg/fc_rows/{key}")
        self.assertEqual(assert_problem(self, r, 404, "not_found")["fence"], f2)
        # The deleted row's fence stays: an older token cannot create the row again.
        self.assertEqual(stored_fence(f"pg:fc_rows/{key}"), f2)
        for method, k, b in (("PUT", key, {"row": {"note": "back"}}), ("POST", None, {"row": {"id": key}})):
            body = assert_problem(self, write(self.c, method, "fc_rows", k, b, t1), 409, "stale_fence")
            self.assertEqual((body["current_fence"], body["resource"]), (f2, f"pg:fc_rows/{key}"))
        self.assertIsNone(row(key))
        self.assertEqual([a["presented_fence"] for a in rejections(f"pg:fc_rows/{key}")], [f1] * 6)
        r = write(self.c, "PUT", "fc_rows", key, {"row": {"note": "again"}}, t2)
        self.assertIn(r.status, (200, 201), r)
        self.assertEqual(row(key), f"again|{f2}")

    def test_a_create_waiting_for_a_delete_meets_its_fence(self):
        """A PUT or POST with an older token that meets the row of a delete being committed waits for that
        delete, then finds the fence it kept: 409 stale_fence, audited, no row. The delete is held open in
        a psql session, written as the gateway writes it (the row's fence kept in fencegate.resource_fences).
        A batch that creates the row so is answered stale as well, and so is each on a partitioned table.
        Broken variant caught: the statement without fence_kept_check (its kept-fence guard reads what was
        committed as it began: the older PUT and POST created the row again, 200 and 201)."""
        for table, method in itertools.product(("fc_rows", "fc_parted"), ("PUT", "POST", "batch")):
            with self.subTest(table=table, method=method):
                key = unique("fc-race")
                (t1, f1), (_, f2) = tokens(self.c, unique("fc-lock"), 2)
                psql(f"INSERT INTO public.{table} (id, note) VALUES (:'k', 'start')", {"k": key})
                held = open_delete(key, f2, table)
                try:
                    answer = []
                    writer = threading.Thread(target=lambda: answer.append(late_create(self.gw.client(), method,
                                                                                       key, t1, table)))
                    writer.start()
                    wait_for_lock_waiter()
                finally:
                    held.communicate("COMMIT;\n", timeout=30)
                writer.join(30)
                r = answer[0]
                self.assertEqual((r.status, r.body.get("type"), r.body.get("current_fence")),
                                 (409, "/problems/stale_fence", f2), r)
                self.assertIsNone(row(key, table))
                self.assertEqual([a["presented_fence"] for a in rejections(f"pg:{table}/{key}")], [f1])

    def test_a_create_below_the_kept_fence_is_stale(self):
        """A row whose own fence column is below the fence kept for its resource (a row put back outside the
        gateway after the gateway deleted it): a PUT or POST, whose guard reads the kept fence, with a token
        between the two is refused as stale and audited once (409 stale_fence naming the kept fence), alone
        and in a batch, and the row keeps its fence, on a partitioned table too. Caught: the refusal statement
        read the row's fence alone and answered 409 "a concurrent write won", unaudited; before that, a write
        that wrote nothing with nothing refusing it was taken for one a trigger skipped and answered 200,
        writing nothing."""
        for table, method in itertools.product(("fc_rows", "fc_parted"), ("PUT", "POST", "batch")):
            with self.subTest(table=table, method=method):
                key = unique("fc-kept")
                (t1, f1), (t2, f2) = tokens(self.c, unique("fc-lock"), 2)
                psql(f"INSERT INTO public.{table} (id, note) VALUES (:'k', 'back')", {"k": key})
                psql("INSERT INTO fencegate.resource_fences (resource, fence) VALUES (:'r', :'f')",
                     {"r": f"pg:{table}/{key}", "f": f2})
                r = late_create(self.c, method, key, t1, table)
                body = assert_problem(self, r, 409, "stale_fence")
                self.assertEqual((body["presented_fence"], body["current_fence"]), (f1, f2))
                self.assertEqual(row(key, table), "back|")
                self.assertEqual([(a["presented_fence"], a["current_fence"], a["reason"])
                                  for a in rejections(f"pg:{table}/{key}")], [(f1, f2, "stale_fence")])

    def test_a_write_the_table_skipped_holds_no_fence(self):
        """fc_guarded's BEFORE UPDATE trigger skips an update that leaves the note as it was, one that writes
        the note 'skipped', and any update of a frozen row; its AFTER UPDATE trigger logs each update. A
        write it skipped wrote nothing: 404 for a PATCH, 409 conflict in a batch, nothing audited, nothing
        written or logged, the row's fence where it was and none kept for the resource, so that an older
        token's PATCH and DELETE, which read the row's fence column alone, are no violation of an answer
        the newer one got. Caught: the newer PATCH answered 200 applied, its fence kept only in
        fencegate.resource_fences (its update of the fence column alone skipped by the same trigger), and
        the older token then rewrote and deleted the row with 200s, unaudited; where the trigger let that
        update of the fence column through, the skipped write left an update in the table's log."""
        key = unique("fc-guarded")
        (t1, f1), (t2, f2), (t3, _) = tokens(self.c, unique("fc-lock"), 3)
        resource = f"pg:fc_guarded/{key}"

        def state():
            return (psql("SELECT note || '|' || frozen || '|' || lock_fence FROM public.fc_guarded WHERE id = :'k'",
                         {"k": key}),
                    psql("SELECT count(*) FROM public.fc_guarded_log WHERE id = :'k'", {"k": key}),
                    stored_fence(resource), rejections(resource))

        r = write(self.c, "PUT", "fc_guarded", key, {"row": {"note": "a"}}, t1)
        self.assertEqual((r.status, r.body["fence"]), (200, f1), r)
        before = state()
        self.assertEqual(before, ([f"a|false|{f1}"], ["0"], None, []))
        for body in ({"set": {"note": "a"}}, {"set": {"note": "skipped"}}):
            with self.subTest(body=body):
                r = write(self.c, "PATCH", "fc_guarded", key, body, t3)
                self.assertIn("no row with key", assert_problem(self, r, 404, "not_found")["detail"])
                ops = {"ops": [{"op": "patch", "table": "fc_guarded", "key": key, **body}]}
                r = self.c.request("POST", "/v1/pg/batch", ops, {"Fence-Token": t3})
                assert_problem(self, r, 409, "conflict")
                self.assertEqual(state(), before)
        psql("ALTER TABLE public.fc_guarded DISABLE TRIGGER skip;"
             " UPDATE public.fc_guarded SET frozen = true WHERE id = :'k';"
             " ALTER TABLE public.fc_guarded ENABLE TRIGGER skip", {"k": key})
        frozen = ([f"a|true|{f1}"], ["1"], None, [])
        self.assertEqual(state(), frozen)
        r = write(self.c, "PATCH", "fc_guarded", key, {"set": {"note": "b"}}, t3)
        self.assertIn("no row with key", assert_problem(self, r, 404, "not_found")["detail"])
        self.assertEqual(state(), frozen)
        # No newer write was answered as applied: the older token's fence is the newest one answered.
        r = write(self.c, "DELETE", "fc_guarded", key, None, t2)
        self.assertEqual((r.status, r.body["fence"]), (200, f2), r)
        self.assertEqual(stored_fence(resource), f2)

    def test_revoked_token_writes_nothing(self):
        """A revoked lease's token is refused on a fence-column row too (410, audited "revoked"), although
        its fence is the row's highest: the fence rule alone would accept it. Caught when tried: the column
        statement without the revocation guard (the PATCH answered 200 and changed the row)."""
        key, lock = unique("fc-rv"), unique("fc-rv-lock")
        psql("INSERT INTO public.fc_rows (id, note) VALUES (:'k', 'start')", {"k": key})
        lease = self.c.post(f"/v1/locks/{lock}/acquire", {}).body
        self.assertEqual(write(self.c, "PATCH", "fc_rows", key, {"set": {"note": "ok"}}, lease["token"]).status, 200)
        self.assertEqual(self.c.post(f"/v1/locks/{lock}/revoke", {"reason": "test"}).status, 200)
        for minimal in (False, True):  # a minimal write is judged by its row count: refused all the same
            for method, body in (("PATCH", {"set": {"note": "late"}}), ("PUT", {"row": {"note": "late"}}),
                                 ("DELETE", None)):
                r = write(self.c, method, "fc_rows", key, body, lease["token"], minimal=minimal)
                self.assertEqual(r.status, 410, (method, minimal, r.body))
                self.assertEqual(r.body.get("reason"), "revoked", (method, minimal, r.body))
        self.assertEqual(row(key), f"ok|{lease['fence']}")
        audit = rejections(f"pg:fc_rows/{key}")
        self.assertEqual([a["reason"] for a in audit], ["revoked"] * 6)

    def test_batch(self):
        a, b = unique("fc"), unique("fc")
        (t1, f1), (t2, f2) = tokens(self.c, unique("fc-lock"), 2)
        psql("INSERT INTO public.fc_rows (id, note) VALUES (:'k', 'a')", {"k": a})
        ops = {"ops": [{"op": "patch", "table": "fc_rows", "key": a, "set": {"note": "a2"}},
                       {"op": "put", "table": "fc_rows", "key": b, "row": {"note": "b2"}}]}
        r = self.c.request("POST", "/v1/pg/batch", ops, {"Fence-Token": t2})
        self.assertEqual(r.status, 200, r)
        self.assertEqual((row(a), row(b)), (f"a2|{f2}", f"b2|{f2}"))
        r = self.c.request("POST", "/v1/pg/batch", ops, {"Fence-Token": t1})
        body = assert_problem(self, r, 409, "stale_fence")
        self.assertEqual(body["current_fence"], f2)
        self.assertEqual((row(a), row(b)), (f"a2|{f2}", f"b2|{f2}"))
        # One audit record for the refused request, naming the first stale resource and listing both.
        recs = rejections(f"pg:fc_rows/{a}") + rejections(f"pg:fc_rows/{b}")
        self.assertEqual([x["presented_fence"] for x in recs], [f1])
        self.assertEqual(sorted(recs[0]["resources"]), sorted(f"pg:fc_rows/{k}" for k in (a, b)))

    def test_batch_judges_each_op_where_it_stands(self):
        """pg_helpers.check_ops_judged_where_they_stand on a fence_column table (caught: judged after the
        whole pipeline had run, the op found the row the op after it had created and answered 409 "a
        concurrent write won")."""
        (token, fence), = tokens(self.c, unique("fc-lock"), 1)
        key = check_ops_judged_where_they_stand(
            self, self.c, token, "fc_rows", lambda k: row(k) is None and stored_fence(f"pg:fc_rows/{k}") is None)
        self.assertEqual(row(key), f"p|{fence}")

    def test_startup_checks(self):
        psql(SETUP_SQL)
        for table, spec, words in (
                ("fc_rows", {**TABLE, "fence_column": "nope"}, "has no column"),
                ("fc_text_fence", TABLE, "bigint"),
                ("fc_rows", {**TABLE, "columns": ["note", "lock_fence"]}, "clients must not write it"),
                ("fc_rows", {**TABLE, "fence_column": 7}, "must be a string")):
            proc = run_fencegate(config={"tables": {table: spec}})
            self.assertNotEqual(proc.returncode, 0, proc)
            self.assertIn("fence_column", proc.stderr)
            self.assertIn(words, proc.stderr)


if __name__ == "__main__":
    unittest.main()
