# SPDX-License-Identifier: Apache-2.0
"""The kind of lease an audit record names (docs/api.md, "Audit"): a lock and a semaphore may share a name,
and a record's `lock` holds either's, so each record says which kind its token was issued for
(`lease_kind`), and `?lease_kind=` keeps one kind, whichever path stored the record: a stale Postgres write
(audited in the write's own statement), a stale Redis write (its script's stream entry, drained), and a
refusal audited apart (a lease over on a require_live_lease resource, fenced_refusal.c). A record stored
before the kind was kept (sql/120) answers null and matches neither kind.

Broken variant this file is meant to catch: records of semaphore N listed under `?lock=N` with nothing
that tells them from lock N's (the kind not stored by one of the paths, or not answered, or the filter
ignored).

Owns: lease_kind in records and the lease_kind filter. Must not: depend on the drain's timing (it waits for
the drained row).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql, same_slot, wait_for  # noqa: E402
from pg_helpers import (INVOICE_COLUMNS, assert_problem, insert_invoice, tokens, unique,  # noqa: E402
                        write)


class AuditKindTest(GatewayTest):
    gateway_config = {"tables": {"invoices": {"key": "id", "columns": INVOICE_COLUMNS}},
                      "redis_prefixes": ["kind:", {"prefix": "live:", "require_live_lease": True}]}

    def records(self, query: str) -> list[dict]:
        r = self.c.get(f"/v1/audit/rejections?{query}")
        self.assertEqual(r.status, 200, r)
        return r.body["items"]

    def sem_tokens(self, name: str) -> tuple[dict, dict]:
        """Two leases of semaphore name (limit 2), the older first."""
        a, b = (self.c.post(f"/v1/semaphores/{name}/acquire", {"limit": 2, "ttl_ms": 60000}) for _ in range(2))
        self.assertEqual((a.status, b.status), (200, 200), (a, b))
        self.assertLess(a.body["fence"], b.body["fence"])
        return a.body, b.body

    def redis_write(self, key: str, token: str) -> int:
        return self.c.request("PUT", f"/v1/redis/{key}", {"value": "v"}, {"Fence-Token": token}).status

    def test_semaphore_and_lock_of_one_name_are_told_apart(self):
        key = unique("inv")
        insert_invoice(key)
        name = same_slot("invoice", like=f"kind:{key}")[0]
        older, newer = self.sem_tokens(name)
        # Semaphore `name`: one stale write to each store.
        self.assertEqual(write(self.c, "PATCH", "invoices", key, {"set": {"note": "s"}}, newer["token"]).status, 200)
        assert_problem(self, write(self.c, "PATCH", "invoices", key, {"set": {"note": "s"}}, older["token"]),
                       409, "stale_fence")
        self.assertEqual(self.redis_write(f"kind:{key}", newer["token"]), 200)
        self.assertEqual(self.redis_write(f"kind:{key}", older["token"]), 409)
        # Lock `name`: a stale write to another row, refused in the write's own statement.
        lock_key = unique("inv")
        insert_invoice(lock_key)
        (stale, stale_fence), (fresh, _) = tokens(self.c, name, 2)
        self.assertEqual(write(self.c, "PATCH", "invoices", lock_key, {"set": {"note": "l"}}, fresh).status, 200)
        assert_problem(self, write(self.c, "PATCH", "invoices", lock_key, {"set": {"note": "l"}}, stale),
                       409, "stale_fence")
        # And a refusal audited apart: the released lock's lease is over on a require_live_lease prefix.
        self.assertEqual(self.redis_write(f"live:{lock_key}", fresh), 410)
        # A record from before the kind was kept.
        psql("INSERT INTO fencegate.rejections (resource, lock_name, presented_fence, current_fence, method,"
             " reason) VALUES (:'r', :'n', 1, 2, 'PATCH', 'stale_fence')", {"r": f"pg:invoices/{key}", "n": name})

        every = wait_for(lambda: (lambda items: len(items) == 5 and items)(self.records(f"lock={name}")),
                         timeout=60, interval=0.1, what="the stale Redis write's record, copied by the drain")
        kinds = sorted(((i["resource"], i["lease_kind"], i["reason"]) for i in every), key=repr)
        self.assertEqual(kinds, sorted([
            (f"pg:invoices/{key}", "semaphore", "stale_fence"),
            (f"redis:kind:{key}", "semaphore", "stale_fence"),
            (f"pg:invoices/{lock_key}", "lock", "stale_fence"),
            (f"redis:live:{lock_key}", "lock", "lease_expired"),
            (f"pg:invoices/{key}", None, "stale_fence"),
        ], key=repr), every)
        sems = self.records(f"lock={name}&lease_kind=semaphore")
        self.assertEqual(sorted(i["presented_fence"] for i in sems), [older["fence"]] * 2, sems)
        self.assertEqual({i["lease_kind"] for i in sems}, {"semaphore"})
        locks = self.records(f"lock={name}&lease_kind=lock")
        self.assertEqual(sorted(i["reason"] for i in locks), ["lease_expired", "stale_fence"], locks)
        self.assertEqual({(i["lease_kind"], i["presented_fence"]) for i in locks if i["reason"] == "stale_fence"},
                         {("lock", stale_fence)})
        # The kind filter alone, and with a resource.
        self.assertEqual([i["id"] for i in self.records(f"resource=pg:invoices/{key}&lease_kind=semaphore")],
                         [i["id"] for i in sems if i["resource"] == f"pg:invoices/{key}"])
        self.assertTrue(all(i["lease_kind"] == "lock" for i in self.records("lease_kind=lock&limit=1000")))
        for bad in ("Lock", "locks", "l", "lock%00"):
            assert_problem(self, self.c.get(f"/v1/audit/rejections?lease_kind={bad}"), 400, "invalid_field")


if __name__ == "__main__":
    unittest.main()
