# SPDX-License-Identifier: Apache-2.0
"""Resources bound to locks over HTTP: the evil-lock story (a token of an unrelated lock writes nothing and
leaves the rightful holder's fence alone), the rightful lock writing, batches checked op by op, Redis
prefixes bound to a lock and to a semaphore, and configuration refusals naming the entry.

Broken variants caught while writing this (each tried, then reverted): the pg single-write check skipped
(op_bound always 0: the evil PATCH answered 200 and made the holder's next write stale); the batch check
skipped (the mixed batch applied its first op); the Redis check skipped (the evil PUT answered 200).

Owns: docs/api.md "Resources bound to locks" (lock/semaphore templates). Must not: test fence_column or
require_live_lease.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, Redis, bound_key, run_fencegate, same_slot  # noqa: E402
from pg_helpers import INVOICE_COLUMNS, insert_invoice, invoice, stored_fence, unique  # noqa: E402

CONFIG = {
    "tables": {"invoices": {"key": "id", "columns": INVOICE_COLUMNS, "lock": "invoice:{key}"}},
    "redis_prefixes": ["app:", {"prefix": "acct:", "lock": "acct-lock:{key}"},
                       {"prefix": "slot:", "semaphore": "slots:{key}"}],
}


class BoundTest(GatewayTest):
    gateway_config = CONFIG

    def acquire(self, name: str, semaphore: bool = False) -> dict:
        kind = "semaphores" if semaphore else "locks"
        body = {"ttl_ms": 30000, **({"limit": 2} if semaphore else {})}
        r = self.c.post(f"/v1/{kind}/{name}/acquire", body)
        self.assertEqual(r.status, 200, r)
        return r.body

    def assert_other_lock(self, r):
        self.assertEqual((r.status, r.body["type"]), (403, "/problems/invalid_fence_token"), r)
        self.assertIn("issued for another lock", r.body["detail"])

    def test_evil_lock_story(self):
        """A token of lock 'evil' cannot write invoices/<k>: 403, row and fence unchanged; the holder of
        invoice:<k> writes on, not stale."""
        key = unique("inv")
        insert_invoice(key, note="initial")
        holder = self.acquire(f"invoice:{key}")
        r = self.c.request("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "rightful"}},
                           {"Fence-Token": holder["token"]})
        self.assertEqual(r.status, 200, r)
        evil = self.acquire(same_slot("evil", like=f"invoice:{key}")[0])  # a lock whose fence is above the holder's
        self.assertGreater(evil["fence"], holder["fence"])
        for method, body in (("PATCH", {"set": {"note": "evil"}}), ("PUT", {"row": {"note": "evil"}}),
                             ("DELETE", None)):
            r = self.c.request(method, f"/v1/pg/invoices/{key}", body, {"Fence-Token": evil["token"]})
            self.assert_other_lock(r)
            self.assertIn(f"invoice:{key}", r.body["detail"])
        r = self.c.request("POST", "/v1/pg/invoices", {"row": {"id": unique("new"), "note": "evil"}},
                           {"Fence-Token": evil["token"]})
        self.assert_other_lock(r)
        self.assertEqual(invoice(key)["note"], "rightful")
        self.assertEqual(stored_fence(f"pg:invoices/{key}"), holder["fence"])
        r = self.c.request("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "still mine"}},
                           {"Fence-Token": holder["token"]})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(invoice(key)["note"], "still mine")

    def test_batch_checks_every_op(self):
        a, b = unique("inv"), unique("inv")
        insert_invoice(a, note="a")
        insert_invoice(b, note="b")
        lock_a = self.acquire(f"invoice:{a}")
        ops = [{"op": "patch", "table": "invoices", "key": a, "set": {"note": "a2"}},
               {"op": "patch", "table": "invoices", "key": b, "set": {"note": "b2"}}]
        r = self.c.post("/v1/pg/batch", {"ops": ops}, headers={"Fence-Token": lock_a["token"]})
        self.assert_other_lock(r)
        self.assertIn("ops[1]", r.body["detail"])
        self.assertEqual((invoice(a)["note"], invoice(b)["note"]), ("a", "b"))
        self.assertIsNone(stored_fence(f"pg:invoices/{a}"))
        r = self.c.post("/v1/pg/batch", {"ops": ops[:1]}, headers={"Fence-Token": lock_a["token"]})
        self.assertEqual(r.status, 200, r)

    def test_redis_prefix_bound_to_a_lock(self):
        key = bound_key("acct:")
        right = self.acquire(f"acct-lock:{key}")
        evil_lock, free_key = same_slot("evil", "app:")  # free_key: no write floor evil's fence is below
        evil = self.acquire(evil_lock)
        self.assert_other_lock(self.c.request("PUT", f"/v1/redis/{key}", {"value": "evil"},
                                              {"Fence-Token": evil["token"]}))
        with Redis() as redis:
            self.assertIsNone(redis.cmd("GET", key))
        r = self.c.request("PUT", f"/v1/redis/{key}", {"value": "ok"}, {"Fence-Token": right["token"]})
        self.assertEqual(r.status, 200, r)
        # unbound prefix: any lock's token still writes (version 1 behaviour)
        r = self.c.request("PUT", f"/v1/redis/{free_key}", {"value": "ok"}, {"Fence-Token": evil["token"]})
        self.assertEqual(r.status, 200, r)

    def test_redis_prefix_bound_to_a_semaphore(self):
        key = bound_key("slot:")
        slot = self.acquire(f"slots:{key}", semaphore=True)
        same_name_lock = self.acquire(f"slots:{key}")
        self.assert_other_lock(self.c.request("PATCH", f"/v1/redis/{key}", {"fields": {"a": "1"}},
                                              {"Fence-Token": same_name_lock["token"]}))
        r = self.c.request("PATCH", f"/v1/redis/{key}", {"fields": {"a": "1"}}, {"Fence-Token": slot["token"]})
        self.assertEqual(r.status, 200, r)


class BoundConfigTest(unittest.TestCase):
    def test_refusals_name_the_entry(self):
        cases = [
            ({"redis_prefixes": [{"prefix": "a:", "lock": "a b"}]}, "redis_prefixes[0].lock"),
            ({"redis_prefixes": [{"lock": "x"}]}, "redis_prefixes[0].prefix"),
            ({"tables": {"invoices": {"key": "id", "columns": ["note"], "lock": "i:{id}"}}},
             "tables.invoices.lock"),
            ({"tables": {"invoices": {"key": "id", "lock": "a", "semaphore": "b"}}}, "tables.invoices"),
        ]
        for cfg, named in cases:
            p = run_fencegate(config=cfg)
            self.assertEqual(p.returncode, 2, (cfg, p))
            self.assertIn(named, p.stderr)

    def test_a_prefix_listed_twice_stops_startup(self):
        # Before: the first entry served every key under the prefix, so a plain "acct:" left from an older
        # configuration silently dropped the lock (and require_live_lease) of a later {"prefix": "acct:"}:
        # any token wrote acct:1, also after its lease was released.
        cases = [
            ["acct:", {"prefix": "acct:", "lock": "acct-lock:{key}", "require_live_lease": True}],
            [{"prefix": "acct:", "lock": "acct-lock:{key}"}, "app:", {"prefix": "acct:", "semaphore": "s:{key}"}],
        ]
        for prefixes in cases:
            p = run_fencegate(config={"redis_prefixes": prefixes}, timeout=20)
            self.assertEqual(p.returncode, 2, (prefixes, p))
            later = len(prefixes) - 1
            self.assertIn(f"redis_prefixes[{later}]': prefix 'acct:' is listed twice", p.stderr)


if __name__ == "__main__":
    unittest.main()
