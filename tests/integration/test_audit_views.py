# SPDX-License-Identifier: Apache-2.0
"""The audit views of the operator console: GET /v1/audit/rejections narrowed by owner and until_ms, and
GET /v1/audit/summary (rejections per minute and the most refused resources of a time range).

Owns: those filters and the summary's counts. Must not: depend on other tests' audit rows (records made
here sit in a minute range of their own, in 2001, or under keys of their own).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql  # noqa: E402
from pg_helpers import assert_problem, config, insert_invoice, tokens, unique, write  # noqa: E402

BASE_MS = 978307200000  # 2001-01-01T00:00:00Z, a range no other test writes in


def add_rejection(at_ms: int, resource: str, owner: str = "w", resources: list[str] | None = None) -> None:
    """One record; resources: every resource that refused it (a batch's), its resource alone by default."""
    psql("INSERT INTO fencegate.rejections (at, resource, lock_name, presented_fence, current_fence, owner,"
         " client_addr, method, reason, resources) VALUES (to_timestamp(:'at'::bigint / 1000.0), :'r', 'l', 1, 2,"
         " :'o', '127.0.0.1', 'PATCH', 'stale_fence', string_to_array(NULLIF(:'rs', ''), ' '))",
         {"at": at_ms, "r": resource, "o": owner, "rs": " ".join(resources or [])})


class AuditViewsTest(GatewayTest):
    # records dated 2001 must outlive the background retention (90 days by default) during the test
    gateway_config = dict(config(), limits={"audit_retention_days": 36500})

    def test_owner_and_until_narrow_the_records(self):
        lock, key = unique("own"), unique("inv")
        insert_invoice(key)
        toks = tokens(self.c, lock, 4)
        self.assertEqual(write(self.c, "PATCH", "invoices", key, {"set": {"note": "n"}}, toks[-1][0]).status, 200)
        for i, (token, _) in enumerate(toks[:3]):
            r = write(self.c, "PATCH", "invoices", key, {"set": {"note": "old"}}, token, owner=f"worker-{i % 2}")
            assert_problem(self, r, 409, "stale_fence")
        r = self.c.get(f"/v1/audit/rejections?lock={lock}&owner=worker-0")
        self.assertEqual([i["presented_fence"] for i in r.body["items"]], [toks[0][1], toks[2][1]], r)
        items = self.c.get(f"/v1/audit/rejections?lock={lock}").body["items"]
        middle = items[1]["at_ms"]
        r = self.c.get(f"/v1/audit/rejections?lock={lock}&until_ms={items[0]['at_ms'] + 1}")
        self.assertTrue(all(i["at_ms"] <= items[0]["at_ms"] for i in r.body["items"]), r)
        self.assertIn(items[0]["id"], [i["id"] for i in r.body["items"]])
        r = self.c.get(f"/v1/audit/rejections?lock={lock}&since_ms={middle}&until_ms={int(time.time() * 1000) + 60000}")
        self.assertEqual([i["id"] for i in r.body["items"]], [i["id"] for i in items if i["at_ms"] >= middle])
        for bad in ("until_ms=0", "until_ms=x", "since_ms=10&until_ms=10", "until_ms=-5"):
            assert_problem(self, self.c.get(f"/v1/audit/rejections?{bad}"), 400, "invalid_field")

    def test_summary_counts_per_minute_and_ranks_resources(self):
        psql("DELETE FROM fencegate.rejections WHERE at < to_timestamp(:'t'::bigint / 1000.0)",
             {"t": BASE_MS + 86400000})
        for at, resource in [(0, "pg:a/1"), (1000, "pg:a/1"), (59999, "pg:b/2"),  # minute 0: 3
                             (120000, "pg:a/1"), (150000, "redis:c"),              # minute 2: 2
                             (180000 + 5, "pg:a/1")]:                             # minute 3: 1
            add_rejection(BASE_MS + at, resource)
        r = self.c.get(f"/v1/audit/summary?since_ms={BASE_MS}&until_ms={BASE_MS + 180000}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["per_minute"], [{"minute_ms": BASE_MS, "rejections": 3},
                                                {"minute_ms": BASE_MS + 120000, "rejections": 2}])
        self.assertEqual(r.body["top_resources"], [{"resource": "pg:a/1", "rejections": 3},
                                                   {"resource": "pg:b/2", "rejections": 1},
                                                   {"resource": "redis:c", "rejections": 1}])
        self.assertEqual((r.body["since_ms"], r.body["until_ms"]), (BASE_MS, BASE_MS + 180000))

    def test_summary_counts_every_resource_of_a_batch(self):
        """A batch refused because two of its rows held newer fences leaves one record naming the first
        (resource) and both (resources); ?resource= finds it under either. The summary ranked the records by
        their first resource alone: a row refused only as the second of batches was never among the most
        refused resources, and the console's count of a resource differed from the trail it opens. Now a
        record counts once for each resource it lists, as ?resource= matches it. Failed before the fix:
        pg:b/2 was missing from top_resources."""
        since = BASE_MS + 5 * 86400000
        until = since + 60000
        psql("DELETE FROM fencegate.rejections WHERE at >= to_timestamp(:'s'::bigint / 1000.0)"
             " AND at < to_timestamp(:'u'::bigint / 1000.0)", {"s": since, "u": until})
        for i in range(3):
            add_rejection(since + i, "pg:a/1", resources=["pg:a/1", "pg:b/2"])
        add_rejection(since + 10, "pg:b/2")
        add_rejection(since + 20, "pg:c/3", resources=["pg:c/3", "pg:c/3"])
        r = self.c.get(f"/v1/audit/summary?since_ms={since}&until_ms={until}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["top_resources"], [{"resource": "pg:b/2", "rejections": 4},
                                                   {"resource": "pg:a/1", "rejections": 3},
                                                   {"resource": "pg:c/3", "rejections": 1}])
        for top in r.body["top_resources"]:
            trail = self.c.get(f"/v1/audit/rejections?resource={top['resource']}&since_ms={since}&until_ms={until}")
            self.assertEqual(len(trail.body["items"]), top["rejections"], (top, trail))
        self.assertEqual(sum(m["rejections"] for m in r.body["per_minute"]), 5)

    def test_summary_of_the_last_hour_by_default_and_its_bounds(self):
        lock, key = unique("sum"), unique("inv")
        insert_invoice(key)
        toks = tokens(self.c, lock, 2)
        self.assertEqual(write(self.c, "PATCH", "invoices", key, {"set": {"note": "n"}}, toks[1][0]).status, 200)
        assert_problem(self, write(self.c, "PATCH", "invoices", key, {"set": {"note": "o"}}, toks[0][0]), 409,
                       "stale_fence")
        r = self.c.get("/v1/audit/summary")
        self.assertEqual(r.status, 200, r)
        self.assertAlmostEqual(r.body["until_ms"] - r.body["since_ms"], 3600000)
        self.assertGreaterEqual(sum(m["rejections"] for m in r.body["per_minute"]), 1)
        now_minute = int(time.time() // 60 * 60000)
        self.assertTrue(any(abs(m["minute_ms"] - now_minute) <= 60000 for m in r.body["per_minute"]), r)
        for bad in ("since_ms=10&until_ms=5", f"since_ms=0&until_ms={86400001}", "until_ms=abc", "since_ms=-1"):
            assert_problem(self, self.c.get(f"/v1/audit/summary?{bad}"), 400, "invalid_field")

    def test_text_filters_must_be_utf8(self):
        """?resource=%ff reached Postgres, which refused it: 400 quoting "invalid byte sequence for encoding
        UTF8" after a round trip. Now the gateway refuses it itself, naming the parameter; UTF-8 text passes.
        Failed before the fix: the detail quoted Postgres."""
        for name in ("resource", "lock", "owner"):
            for value in ("%ff", "a%c3", "%ed%a0%80"):  # a stray byte, a cut sequence, a surrogate
                r = self.c.get(f"/v1/audit/rejections?{name}={value}")
                assert_problem(self, r, 400, "invalid_field")
                self.assertEqual(r.body["detail"], f"query parameter '{name}' must be UTF-8 text", r)
            r = self.c.get(f"/v1/audit/rejections?{name}=caf%c3%a9")
            self.assertEqual((r.status, r.body["items"]), (200, []), r)

    def test_summary_ranges_start_at_the_epoch(self):
        """until_ms within the first hour of 1970 answered since_ms -3599999: the default hour before until_ms
        now starts at 0 at the earliest."""
        r = self.c.get("/v1/audit/summary?until_ms=1")
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.body["since_ms"], r.body["until_ms"]), (0, 1))
        r = self.c.get("/v1/audit/summary?until_ms=3600001")
        self.assertEqual((r.body["since_ms"], r.body["until_ms"]), (1, 3600001))


if __name__ == "__main__":
    unittest.main()
