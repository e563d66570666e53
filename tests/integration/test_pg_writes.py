# SPDX-License-Identifier: Apache-2.0
"""Fenced writes to Postgres over HTTP: the stale-holder story end to end, each write call of docs/api.md,
forged tokens, batch atomicity, the audit query and its pagination, and the start-up check of the
configured tables.

Owns: the functional contract of /v1/pg and /v1/audit/rejections. Must not: test concurrency (see
test_pg_concurrency.py), hostile input (test_pg_hostile.py) or outages (test_pg_restart.py).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql, run_fencegate, same_slot  # noqa: E402
from pg_helpers import (acquire, assert_problem, check_ops_judged_where_they_stand, config,  # noqa: E402
                        insert_invoice, invoice, rejections, stored_fence, tokens, unique, write)


class PgWritesTest(GatewayTest):
    gateway_config = config()

    def test_stale_holder_story(self):
        """A's lease expires while it pauses; B takes over and writes; A's late write is refused."""
        lock, key = unique("story"), unique("inv")
        resource = f"pg:invoices/{key}"
        insert_invoice(key, note="initial")
        token_a, fence_a = acquire(self.c, lock, ttl_ms=300)
        time.sleep(0.4)  # A "pauses" (GC, network) past its lease
        token_b, fence_b = acquire(self.c, lock, ttl_ms=30000)
        self.assertGreater(fence_b, fence_a)
        r = write(self.c, "PATCH", "invoices", key, {"set": {"note": "B"}}, token_b, owner="worker-B")
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.headers["content-type"], list(r.body)),
                         ("application/json", ["applied", "resource", "fence", "row"]))
        self.assertIs(r.body["applied"], True)
        self.assertEqual(r.body["row"]["note"], "B")
        self.assertEqual(r.body["fence"], fence_b)
        self.assertEqual(r.body["resource"], resource)
        r = write(self.c, "PATCH", "invoices", key, {"set": {"note": "A"}}, token_a, owner="worker-A")
        body = assert_problem(self, r, 409, "stale_fence")
        self.assertEqual((body["presented_fence"], body["current_fence"], body["resource"]),
                         (fence_a, fence_b, resource))
        self.assertEqual(invoice(key)["note"], "B")
        audit = rejections(resource)
        self.assertEqual(len(audit), 1, audit)
        self.assertEqual((audit[0]["presented_fence"], audit[0]["current_fence"]), (fence_a, fence_b))
        self.assertEqual((audit[0]["lock_name"], audit[0]["owner"], audit[0]["method"]),
                         (lock, "worker-A", "PATCH"))
        self.assertEqual(audit[0]["reason"], "stale_fence")
        self.assertEqual(audit[0]["client_addr"], "127.0.0.1")
        # The same record through the API.
        r = self.c.get(f"/v1/audit/rejections?resource=pg:invoices/{key}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.body["items"]), 1, r)
        item = r.body["items"][0]
        self.assertEqual((item["lock"], item["presented_fence"], item["current_fence"], item["owner"]),
                         (lock, fence_a, fence_b, "worker-A"))
        self.assertLessEqual(abs(item["at_ms"] - time.time() * 1000), 60000)
        self.assertIsNone(r.body["next_after_id"])

    def test_each_call(self):
        lock, key = unique("calls"), unique("inv")
        token, fence = acquire(self.c, lock)
        r = write(self.c, "POST", "invoices", None, {"row": {"id": key, "customer": "c1", "amount_cents": 10}},
                  token)
        self.assertEqual(r.status, 201, r)  # docs/api.md: an insert answers 201
        self.assertEqual(r.body["row"]["amount_cents"], 10)
        r = write(self.c, "POST", "invoices", None, {"row": {"id": key}}, token)
        assert_problem(self, r, 409, "conflict")
        r = write(self.c, "PATCH", "invoices", key, {"set": {"amount_cents": "12", "status": "open"}}, token)
        self.assertEqual((r.status, r.body["row"]["amount_cents"], r.body["row"]["customer"]), (200, 12, "c1"), r)
        r = write(self.c, "PUT", "invoices", key, {"row": {"status": "replaced"}}, token)
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.body["row"]["status"], r.body["row"]["customer"]), ("replaced", None), r)
        r = self.c.get(f"/v1/pg/invoices/{key}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.body["row"]["status"], r.body["fence"]), ("replaced", fence))
        r = write(self.c, "DELETE", "invoices", key, None, token)
        self.assertEqual((r.status, r.body["row"]), (200, None), r)
        self.assertIsNone(invoice(key))
        assert_problem(self, self.c.get(f"/v1/pg/invoices/{key}"), 404, "not_found")
        assert_problem(self, write(self.c, "PATCH", "invoices", key, {"set": {"note": "x"}}, token),
                       404, "not_found")
        assert_problem(self, write(self.c, "DELETE", "invoices", key, None, token), 404, "not_found")
        r = write(self.c, "PUT", "invoices", key, {"row": {"id": key, "note": "again"}}, token)
        self.assertEqual((r.status, r.body["row"]["note"]), (200, "again"), r)
        self.assertEqual(stored_fence(f"pg:invoices/{key}"), fence)

    def test_missing_row_leaves_no_fence(self):
        """A PATCH or DELETE of a row that does not exist answers 404 and stores no fence, nor raises one that
        a deleted row left behind. Caught when tried: the fence claimed before the write looked for its row (a
        404 left the resource fenced, and a later holder with a lower fence was refused)."""
        (old, old_fence), (new, new_fence) = tokens(self.c, unique("missing"), 2)
        key = unique("inv")
        for method, body in (("PATCH", {"set": {"note": "x"}}), ("DELETE", None)):
            assert_problem(self, write(self.c, method, "invoices", key, body, new), 404, "not_found")
        self.assertIsNone(stored_fence(f"pg:invoices/{key}"))
        self.assertEqual(rejections(f"pg:invoices/{key}"), [])
        self.assertEqual(write(self.c, "PUT", "invoices", key, {"row": {"note": "a"}}, old).status, 200)
        self.assertEqual(write(self.c, "DELETE", "invoices", key, None, old).status, 200)
        for method, body in (("PATCH", {"set": {"note": "x"}}), ("DELETE", None)):
            assert_problem(self, write(self.c, method, "invoices", key, body, new), 404, "not_found")
        self.assertEqual(stored_fence(f"pg:invoices/{key}"), old_fence)
        self.assertEqual(write(self.c, "PUT", "invoices", key, {"row": {"note": "b"}}, old).status, 200)
        self.assertLess(old_fence, new_fence)

    def test_revoked_holder_writes_nothing(self):
        """A revoked lease's token is refused on a row whose stored fence is its own (410, audited "revoked"),
        where the fence rule alone would accept it. Caught when tried: the write's revocation test left to
        the fence raise, which an equal fence skips (the PATCH answered 200); the held form of the write (the
        stored fence locked, no upsert) without its revocation guard (200, and 204 for return=minimal)."""
        lock, key = unique("rv"), unique("inv")
        token, fence = acquire(self.c, lock)
        self.assertEqual(write(self.c, "PUT", "invoices", key, {"row": {"note": "ok"}}, token).status, 200)
        self.assertEqual(self.c.post(f"/v1/locks/{lock}/revoke", {"reason": "test"}).status, 200)
        for minimal in (False, True):
            for method, body in (("PATCH", {"set": {"note": "late"}}), ("PUT", {"row": {"note": "late"}}),
                                 ("DELETE", None)):
                r = write(self.c, method, "invoices", key, body, token, minimal=minimal)
                self.assertEqual((r.status, r.body.get("reason")), (410, "revoked"), (method, minimal, r.body))
        self.assertEqual(invoice(key)["note"], "ok")
        self.assertEqual(stored_fence(f"pg:invoices/{key}"), fence)
        self.assertEqual([a["reason"] for a in rejections(f"pg:invoices/{key}")], ["revoked"] * 6)

    def test_equal_fence_is_accepted_twice(self):
        lock, key = unique("eq"), unique("inv")
        insert_invoice(key)
        token, _ = acquire(self.c, lock)
        for note in ("one", "two"):
            r = write(self.c, "PATCH", "invoices", key, {"set": {"note": note}}, token)
            self.assertEqual(r.status, 200, r)
        self.assertEqual(invoice(key)["note"], "two")

    def test_forged_or_altered_token_is_refused(self):
        lock, key = unique("forge"), unique("inv")
        insert_invoice(key, note="orig")
        token, fence = acquire(self.c, lock)
        prefix, kind, fence_text, rest = token.split(".", 3)
        forged = ".".join([prefix, kind, str(fence + 1000000), rest])  # a higher fence, same signature
        altered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
        for bad in (forged, altered, "fgt1.l.99999999.x.y.z", "not-a-token"):
            for method, body in (("PATCH", {"set": {"note": "evil"}}), ("PUT", {"row": {"note": "evil"}}),
                                 ("DELETE", None)):
                r = write(self.c, method, "invoices", key, body, bad)
                assert_problem(self, r, 403, "invalid_fence_token")
        r = self.c.request("POST", "/v1/pg/batch", {"ops": [{"op": "delete", "table": "invoices", "key": key}]},
                           {"Fence-Token": forged})
        assert_problem(self, r, 403, "invalid_fence_token")
        self.assertEqual(invoice(key)["note"], "orig")
        self.assertIsNone(stored_fence(f"pg:invoices/{key}"))
        self.assertEqual(rejections(f"pg:invoices/{key}"), [])

    def test_batch_all_or_nothing(self):
        lock, k1, k2, k3 = unique("batch"), unique("inv"), unique("inv"), unique("inv")
        insert_invoice(k1, note="n1")
        token, fence = acquire(self.c, lock)
        ok = {"ops": [{"op": "patch", "table": "invoices", "key": k1, "set": {"note": "b1"}},
                      {"op": "post", "table": "invoices", "row": {"id": k2, "note": "b2"}},
                      {"op": "put", "table": "invoices", "key": k3, "row": {"note": "b3"}}]}
        r = self.c.request("POST", "/v1/pg/batch", ok, {"Fence-Token": token})
        self.assertEqual(r.status, 200, r)
        self.assertEqual((list(r.body), r.body["applied"], r.body["fence"]),
                         (["applied", "fence", "results"], True, fence))
        self.assertEqual([item["row"]["note"] for item in r.body["results"]], ["b1", "b2", "b3"])
        # One failing operation (a value that does not convert) leaves none applied.
        bad = {"ops": [{"op": "patch", "table": "invoices", "key": k1, "set": {"note": "x1"}},
                       {"op": "delete", "table": "invoices", "key": k2},
                       {"op": "patch", "table": "invoices", "key": k3, "set": {"amount_cents": "many"}}]}
        r = self.c.request("POST", "/v1/pg/batch", bad, {"Fence-Token": token})
        body = assert_problem(self, r, 400, "invalid_field")
        self.assertIn("ops[2]", body["detail"])
        self.assertIn("amount_cents", body["detail"])
        # A missing row and a duplicate insert fail the same way.
        for failing in ({"op": "patch", "table": "invoices", "key": unique("none"), "set": {"note": "x"}},
                        {"op": "post", "table": "invoices", "row": {"id": k1}}):
            r = self.c.request("POST", "/v1/pg/batch", {"ops": [bad["ops"][0], bad["ops"][1], failing]},
                               {"Fence-Token": token})
            self.assertIn(r.status, (404, 409), r)
        self.assertEqual([invoice(k)["note"] for k in (k1, k2, k3)], ["b1", "b2", "b3"])
        # A stale resource refuses the whole batch, with one audit record for the request.
        newer, newer_fence = acquire(self.c, same_slot("other", like=lock)[0])  # a fence above the token's
        r = write(self.c, "PATCH", "invoices", k3, {"set": {"note": "newer"}}, newer)
        self.assertEqual(r.status, 200, r)
        r = self.c.request("POST", "/v1/pg/batch",
                           {"ops": [{"op": "patch", "table": "invoices", "key": k1, "set": {"note": "x1"}},
                                    {"op": "patch", "table": "invoices", "key": k3, "set": {"note": "x3"}}]},
                           {"Fence-Token": token})
        body = assert_problem(self, r, 409, "stale_fence")
        self.assertEqual((body["resource"], body["current_fence"], body["presented_fence"]),
                         (f"pg:invoices/{k3}", newer_fence, fence))
        self.assertEqual([invoice(k)["note"] for k in (k1, k2, k3)], ["b1", "b2", "newer"])
        self.assertEqual(len(rejections(f"pg:invoices/{k3}")), 1)
        self.assertEqual(rejections(f"pg:invoices/{k1}"), [])

    def test_batch_judges_each_op_where_it_stands(self):
        """pg_helpers.check_ops_judged_where_they_stand in the default mode (caught: the batch's ops went in
        one pipeline and the op that wrote nothing was judged after the last one had run, found the row the
        PUT or POST after it had created, and answered 409 "a concurrent write won")."""
        token, fence = acquire(self.c, unique("where"))
        key = check_ops_judged_where_they_stand(
            self, self.c, token, "invoices",
            lambda k: invoice(k) is None and stored_fence(f"pg:invoices/{k}") is None)
        self.assertEqual(stored_fence(f"pg:invoices/{key}"), fence)

    def test_audit_pagination_and_filters(self):
        lock, key = unique("page"), unique("inv")
        insert_invoice(key)
        toks = tokens(self.c, lock, 6)
        newest_token, newest_fence = toks[-1]
        self.assertEqual(write(self.c, "PATCH", "invoices", key, {"set": {"note": "n"}}, newest_token).status, 200)
        for token, _ in toks[:5]:
            r = write(self.c, "PATCH", "invoices", key, {"set": {"note": "old"}}, token)
            assert_problem(self, r, 409, "stale_fence")
        seen, after = [], 0
        while True:
            r = self.c.get(f"/v1/audit/rejections?lock={lock}&limit=2&after_id={after}")
            self.assertEqual(r.status, 200, r)
            seen += r.body["items"]
            if r.body["next_after_id"] is None:
                break
            after = r.body["next_after_id"]
        self.assertEqual([i["presented_fence"] for i in seen], [f for _, f in toks[:5]])
        ids = [i["id"] for i in seen]
        self.assertEqual(ids, sorted(ids))
        self.assertTrue(all(i["current_fence"] == newest_fence for i in seen))
        r = self.c.get(f"/v1/audit/rejections?resource=pg%3Ainvoices%2F{key}&lock={lock}&since_ms=0")
        self.assertEqual(len(r.body["items"]), 5, r)
        r = self.c.get(f"/v1/audit/rejections?lock={lock}&since_ms={int(time.time() * 1000) + 60000}")
        self.assertEqual(r.body["items"], [], r)
        for bad in ("limit=0", "limit=1001", "limit=x", "after_id=-1", "since_ms=1.5", "resource=%zz"):
            assert_problem(self, self.c.get(f"/v1/audit/rejections?{bad}"), 400, "invalid_field")


class StartupCheckTest(unittest.TestCase):
    def test_missing_table_key_or_column_stops_startup(self):
        cases = [
            ({"no_such_table": {"key": "id", "columns": []}}, "no_such_table"),
            ({"invoices": {"key": "nokey", "columns": []}}, "nokey"),
            ({"invoices": {"key": "id", "columns": ["note", "no_such_column"]}}, "no_such_column"),
            ({"invoices": {"key": "customer", "columns": []}}, "customer"),  # not unique
        ]
        for tables, name in cases:
            r = run_fencegate(config={"tables": tables})
            self.assertEqual(r.returncode, 2, (tables, r.stderr))
            self.assertIn(name, r.stderr)

    def test_migrate_is_idempotent(self):
        for _ in range(2):
            r = run_fencegate(["migrate"])
            self.assertEqual(r.returncode, 0, r.stderr)
        versions = psql("SELECT version FROM fencegate.schema_migrations ORDER BY version")
        self.assertIn("1", versions)


if __name__ == "__main__":
    unittest.main()
