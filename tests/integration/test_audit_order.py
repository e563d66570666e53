"""The audit trail as a tail (issue 16, item 9).

- One record per refused request: a batch refused by two stale resources leaves exactly one record, whose
  `resource` is the one the 409 names and whose `resources` holds both; `?resource=` finds it by either.
  (Broken variant caught: the former one-record-per-stale-resource loop in fenced_pg.c's audit_stale —
  two records for one 409.)
- Paging by `after_id` never skips: a record whose transaction took its id first but commits last is
  never passed over by a reader that already saw a later one. Here a slow transaction inserts a record and
  holds it uncommitted while the gateway refuses a write; a tailer that keeps `after_id` at the highest id
  it saw must still get both. (Broken variant caught: sql/011's trigger dropped — the gateway's record took
  the next id and committed first, the tailer moved past the slow record's id and never saw it.)

Owns: these properties. Must not: leave a transaction open (the slow one ends within seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import unittest
from urllib.parse import quote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Client, Gateway, env, psql, same_slot, wait_for  # noqa: E402
from pg_helpers import acquire, config, unique, write  # noqa: E402


class AuditOrder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(config=config())
        cls.c = cls.gw.client(timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.gw.stop()

    def records(self, resource: str) -> list[dict]:
        r = self.c.get(f"/v1/audit/rejections?resource={quote(resource, safe='')}&limit=1000")
        self.assertEqual(r.status, 200, r)
        return r.body["items"]

    def test_one_record_per_refused_batch(self):
        k1, k2, k3 = unique("inv"), unique("inv"), unique("inv")
        old_lock, new_lock = same_slot("old", "new")  # on a cluster too, old's fence below new's
        old, old_fence = acquire(self.c, old_lock)
        new, new_fence = acquire(self.c, new_lock)
        for k in (k1, k2):
            self.assertEqual(write(self.c, "PUT", "invoices", k, {"row": {"note": "new"}}, new).status, 200)
        r = self.c.request("POST", "/v1/pg/batch",
                           {"ops": [{"op": "patch", "table": "invoices", "key": k, "set": {"note": "old"}}
                                    for k in (k1, k2, k3)]},
                           {"Fence-Token": old})
        self.assertEqual(r.status, 409, r)
        named = r.body["resource"]
        stale = sorted([f"pg:invoices/{k1}", f"pg:invoices/{k2}"])
        self.assertEqual(named, stale[0])
        for resource in stale:
            recs = self.records(resource)
            self.assertEqual(len(recs), 1, (resource, recs))
            self.assertEqual(recs[0]["resource"], named)
            self.assertEqual(sorted(recs[0]["resources"]), stale)
            self.assertEqual((recs[0]["presented_fence"], recs[0]["current_fence"]), (old_fence, new_fence))
        self.assertEqual(self.records(f"pg:invoices/{k3}"), [])
        single = write(self.c, "PATCH", "invoices", k1, {"set": {"note": "x"}}, old)
        self.assertEqual(single.status, 409, single)
        recs = self.records(f"pg:invoices/{k1}")
        self.assertEqual(len(recs), 2)
        self.assertEqual(recs[1]["resources"], [f"pg:invoices/{k1}"])

    def test_tailing_by_after_id_never_skips(self):
        start = int(psql("SELECT coalesce(max(id), 0) FROM fencegate.rejections")[0])
        slow_resource = unique("pg:slow/")
        slow = subprocess.Popen(
            [os.path.join(env("FG_PGBIN", "/usr/lib/postgresql/15/bin"), "psql"), "-X", "-q", "-At",
             "-v", "ON_ERROR_STOP=1", "-d", env("FG_TEST_PG_DSN"), "-c",
             "BEGIN; INSERT INTO fencegate.rejections (resource, presented_fence, current_fence, method, reason)"
             f" VALUES ('{slow_resource}', 1, 2, 'PATCH', 'stale_fence'); SELECT pg_sleep(2); COMMIT;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(slow.wait, 30)
        wait_for(lambda: psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(2)%'"
                              " AND state = 'active' AND pid <> pg_backend_pid()") == ["1"],
                 what="the slow transaction holding its record")
        key = unique("inv")
        old_lock, new_lock = same_slot("old", "new")  # on a cluster too, old's fence below new's
        old, _ = acquire(self.c, old_lock)
        new, _ = acquire(self.c, new_lock)
        self.assertEqual(write(self.c, "PUT", "invoices", key, {"row": {"note": "new"}}, new).status, 200)
        refused = []

        def refuse() -> None:
            with Client(self.gw.port, timeout=30) as c:
                refused.append(write(c, "PATCH", "invoices", key, {"set": {"note": "old"}}, old))
        t = threading.Thread(target=refuse)
        t.start()
        seen, after = [], start
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len([x for x in seen if x["resource"] in
                                                   (slow_resource, f"pg:invoices/{key}")]) < 2:
            page = self.c.get(f"/v1/audit/rejections?after_id={after}&limit=100").body
            for item in page["items"]:
                seen.append(item)
                after = max(after, item["id"])
            time.sleep(0.05)
        t.join(30)
        self.assertEqual(refused[0].status, 409, refused[0])
        mine = [x["resource"] for x in seen if x["resource"] in (slow_resource, f"pg:invoices/{key}")]
        self.assertEqual(sorted(mine), sorted([slow_resource, f"pg:invoices/{key}"]),
                         "the tail skipped a record that committed after a later id")
        ids = [x["id"] for x in seen]
        self.assertEqual(ids, sorted(ids))


if __name__ == "__main__":
    unittest.main()
