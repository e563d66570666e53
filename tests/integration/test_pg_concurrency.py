# SPDX-License-Identifier: Apache-2.0
"""Concurrent fenced writers on one row: the fence rule holds under contention.

Many threads PATCH one row, each with its own token, the tokens' fences handed out in shuffled order.
Commit order is observed by Postgres itself, not by the gateway: a trigger on the test table appends
every new row version's fence to a log table. Because an UPDATE holds the row lock until its
transaction ends, the trigger of the next version can only run after the previous one committed, so
the log's order is the commit order. Then:
  - the fences of accepted writes, in commit order, never decrease (no lower fence after a higher one);
  - every write answered 200 is in the log exactly once, and nothing else is (no lost or phantom write);
  - the stored row is the last accepted write and the stored fence the highest accepted one;
  - every write answered 409 left exactly one audit row, and no accepted write left one.
A write that waits for another session's DELETE of its row answers 404 and stores no fence.

Owns: the concurrency contract of fenced Postgres writes. Must not: test single-request semantics.
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql  # noqa: E402
from pg_helpers import (assert_problem, check_commit_order, commit_log_sql, config, open_transaction,  # noqa: E402
                        rejections, run_writers, stored_fence, tokens, unique, wait_for_lock_waiter, write)

SETUP_SQL = ("CREATE TABLE IF NOT EXISTS public.pg_conc_rows (id text PRIMARY KEY, fence bigint, note text);"
             + commit_log_sql("pg_conc_rows", "pg_conc_log", "fence"))

WRITERS = 8
TOKENS = 120


class ConcurrentWritersTest(GatewayTest):
    gateway_config = config(pg_conc_rows={"key": "id", "columns": ["fence", "note"]})
    gateway_env = {"FENCEGATE_HTTP_THREADS": WRITERS, "FENCEGATE_PG_POOL_SIZE": WRITERS}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the table first: the gateway reads its catalog at start-up
        super().setUpClass()

    def run_writers(self, key, toks, method, body_of):
        return run_writers(self, self.gw, WRITERS, "pg_conc_rows", key, toks, method, body_of)

    def check(self, key, statuses, create_fence=None):
        log = [int(x) for x in psql("SELECT fence FROM public.pg_conc_log WHERE id = :'k' ORDER BY seq", {"k": key})]
        if create_fence is not None:
            self.assertEqual(log[0], create_fence)
            log = log[1:]
        resource = f"pg:pg_conc_rows/{key}"
        accepted = check_commit_order(self, log, statuses, resource)
        row = psql("SELECT fence, note FROM public.pg_conc_rows WHERE id = :'k'", {"k": key})
        self.assertEqual(row, [f"{accepted[-1]}|w{accepted[-1]}"])
        self.assertEqual(stored_fence(resource), accepted[-1])

    def test_interleaved_patches_on_one_row(self):
        key = unique("conc")
        toks = tokens(self.c, unique("conc-lock"), TOKENS)
        first_token, first_fence = toks[0]
        r = write(self.c, "PUT", "pg_conc_rows", key, {"row": {"fence": first_fence, "note": f"w{first_fence}"}},
                  first_token)
        self.assertEqual(r.status, 200, r)
        statuses = self.run_writers(key, toks[1:], "PATCH",
                                    lambda f: {"set": {"fence": f, "note": f"w{f}"}})
        self.check(key, statuses, create_fence=first_fence)

    def test_interleaved_puts_on_a_new_row(self):
        """Writers race to create and replace a row that does not exist yet (insert-or-update path)."""
        key = unique("conc-put")
        toks = tokens(self.c, unique("conc-lock"), TOKENS)
        statuses = self.run_writers(key, toks, "PUT", lambda f: {"row": {"fence": f, "note": f"w{f}"}})
        self.check(key, statuses)

    def behind_a_newer_fence_in_flight(self, first_write: bool):
        """A write whose stored fence is about to be raised by a transaction in flight (an UPDATE of the fence
        row, or for a resource without one an INSERT of it) waits for it and is then refused: the stored fence
        is judged after that commit, never from the write's snapshot."""
        key = unique("conc")
        resource = f"pg:pg_conc_rows/{key}"
        (old, old_fence), (_, new_fence) = tokens(self.c, unique("conc-lock"), 2)
        if first_write:
            raise_sql = "INSERT INTO fencegate.resource_fences (resource, fence) VALUES (:'r', :'f');"
        else:
            self.assertEqual(write(self.c, "PUT", "pg_conc_rows", key, {"row": {"note": "a"}}, old).status, 200)
            raise_sql = "UPDATE fencegate.resource_fences SET fence = :'f' WHERE resource = :'r';"

        def raise_in_flight():  # another writer's transaction: the fence raised, the commit 2 s later
            psql(f"BEGIN;\n{raise_sql}\nSELECT pg_sleep(2.0123);\nCOMMIT;\n", {"f": new_fence, "r": resource})
        other = threading.Thread(target=raise_in_flight)
        other.start()
        raised = False
        for _ in range(200):  # until the raise holds the fence row (its statement is done: it sleeps)
            raised = psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(2.0123)%'"
                          " AND state = 'active'") != ["0"]
            if raised:
                break
            time.sleep(0.02)
        self.assertTrue(raised)
        r = write(self.c, "PUT", "pg_conc_rows", key, {"row": {"note": "b"}}, old)
        other.join()
        self.assertEqual((r.status, r.body.get("current_fence")), (409, new_fence), r)
        self.assertEqual(psql("SELECT note FROM public.pg_conc_rows WHERE id = :'k'", {"k": key}),
                         [] if first_write else ["a"])
        self.assertEqual(stored_fence(resource), new_fence)
        self.assertEqual(len(psql("SELECT 1 FROM fencegate.rejections WHERE resource = :'r'", {"r": resource})), 1)
        self.assertLess(old_fence, new_fence)

    def test_a_holder_behind_a_newer_fence_in_flight(self):
        """Caught when tried: the fence row read without FOR UPDATE (the holder's second write, whose fence
        equals the stored one, answered 200 after the newer fence had committed)."""
        self.behind_a_newer_fence_in_flight(first_write=False)

    def test_a_first_write_behind_a_newer_fence_in_flight(self):
        """Caught when tried: the fence upsert without its WHERE (the older write, waiting on the newer fence
        row's insert, lowered the fence to its own and answered 200)."""
        self.behind_a_newer_fence_in_flight(first_write=True)

    def test_a_write_whose_row_a_delete_took_stores_no_fence(self):
        """A PATCH or DELETE with a new holder's token meets its row while another session's DELETE of it is
        being committed: it waits for that delete, finds no row and answers 404, and stores no fence: the
        resource keeps the fence it had (or none), so that a holder whose fence lies between the two is not
        refused afterwards. The delete is held open in a psql session. Caught: the write's claim of its fence,
        which looked for the row in the statement's snapshot, committed although the write then found the row
        gone (the 404 left the new fence stored, and the holder in between was refused)."""
        for method in ("PATCH", "DELETE"):
            for fenced in (True, False):
                with self.subTest(method=method, fence_stored_before=fenced):
                    key = unique("conc-gone")
                    resource = f"pg:pg_conc_rows/{key}"
                    (old, old_fence), (between, between_fence), (new, _) = tokens(self.c, unique("conc-lock"), 3)
                    psql("INSERT INTO public.pg_conc_rows (id, note) VALUES (:'k', 'start')", {"k": key})
                    if fenced:
                        r = write(self.c, "PATCH", "pg_conc_rows", key, {"set": {"note": "old"}}, old)
                        self.assertEqual(r.status, 200, r)
                    held = open_transaction(f"DELETE FROM public.pg_conc_rows WHERE id = '{key}';")
                    try:
                        answer = []
                        body = {"set": {"note": "new"}} if method == "PATCH" else None
                        writer = threading.Thread(target=lambda: answer.append(
                            write(self.gw.client(), method, "pg_conc_rows", key, body, new)))
                        writer.start()
                        wait_for_lock_waiter()
                    finally:
                        held.communicate("COMMIT;\n", timeout=30)
                    writer.join(30)
                    assert_problem(self, answer[0], 404, "not_found")
                    self.assertEqual(stored_fence(resource), old_fence if fenced else None)
                    self.assertEqual(rejections(resource), [])
                    r = write(self.c, "PUT", "pg_conc_rows", key, {"row": {"note": "between"}}, between)
                    self.assertEqual((r.status, stored_fence(resource)), (200, between_fence), r)

if __name__ == "__main__":
    unittest.main()
