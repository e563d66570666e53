# SPDX-License-Identifier: Apache-2.0
"""A refused write leaves an audit row of one shape whichever store refused it (docs/api.md, "Audit"):
the same columns filled, the same reason names, the writer named the same way. Of each store, the two ways
a write is refused: a stale fence (Postgres audits it in the write's own statement, Redis in its write
script's stream entry, which the drain copies) and a lease over on a require_live_lease resource (both
audited before any write, through fenced_refusal_audit, store/fenced/fenced_refusal.c).

Broken variant this file is meant to catch: a refusal path of one store that leaves out a column (the
owner, the fence stored for the resource, the principal) or names its reason differently.

Owns: the likeness of audit rows across stores. Must not: depend on the drain's timing (it waits for the
drained row).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, same_slot, wait_for  # noqa: E402
from pg_helpers import INVOICE_COLUMNS, insert_invoice, rejections, unique, write  # noqa: E402

# Columns that say where a row came from, not what was refused: its id and time, and the stream entry
# a drained row was copied from (the drain's guard against storing it twice).
PROVENANCE = {"id", "at", "source_id"}
WRITER = ("lock_name", "presented_fence", "owner", "client_addr", "method", "principal")


def shape(row: dict) -> set[str]:
    """The columns a row fills."""
    return {name for name, value in row.items() if value is not None and name not in PROVENANCE}


class AuditShapeTest(GatewayTest):
    gateway_config = {
        "tables": {"invoices": {"key": "id", "columns": INVOICE_COLUMNS, "require_live_lease": True}},
        "redis_prefixes": [{"prefix": "shape:", "require_live_lease": True}]}

    def lease(self, name=None) -> dict:
        r = self.c.post(f"/v1/locks/{name or unique('shape')}/acquire", {"ttl_ms": 60000})
        self.assertEqual(r.status, 200, r)
        return r.body

    def write_both(self, lease: dict, key: str, note: str) -> tuple[int, int]:
        """PATCHes the invoice key and the Redis hash shape:key under lease, as owner worker-7."""
        headers = {"Fence-Token": lease["token"], "Fence-Owner": "worker-7"}
        pg = write(self.c, "PATCH", "invoices", key, {"set": {"note": note}}, lease["token"], "worker-7")
        rd = self.c.request("PATCH", f"/v1/redis/shape:{key}", {"fields": {"note": note}}, headers)
        return pg.status, rd.status

    def test_refusals_of_both_stores_are_audited_alike(self):
        key = unique("inv")
        insert_invoice(key)
        # In the slot of the Redis key on a Redis Cluster: stale's fence below newer's, no write floor above them
        stale, newer, ended = (self.lease(name) for name in same_slot("shape", "shape", "shape", like=f"shape:{key}"))
        self.assertEqual(self.c.post(f"/v1/locks/{ended['lock']}/release", {"token": ended["token"]}).status, 200)
        self.assertEqual(self.write_both(newer, key, "newer"), (200, 200))
        self.assertEqual(self.write_both(stale, key, "stale"), (409, 409))
        self.assertEqual(self.write_both(ended, key, "ended"), (410, 410))
        pg_rows = rejections(f"pg:invoices/{key}")
        redis_rows = wait_for(lambda: len(rejections(f"redis:shape:{key}")) == 2 and rejections(f"redis:shape:{key}"),
                              timeout=60, interval=0.1, what="the stale Redis write's row, copied by the drain")
        for reason, lease in (("stale_fence", stale), ("lease_expired", ended)):
            pg = [row for row in pg_rows if row["reason"] == reason]
            rd = [row for row in redis_rows if row["reason"] == reason]
            self.assertEqual((len(pg), len(rd)), (1, 1), (reason, pg_rows, redis_rows))
            pg, rd = pg[0], rd[0]
            self.assertEqual(shape(pg), shape(rd), (reason, pg, rd))
            self.assertEqual([pg[c] for c in WRITER], [rd[c] for c in WRITER], reason)
            self.assertEqual((pg["lock_name"], pg["presented_fence"], pg["owner"], pg["method"]),
                             (lease["lock"], lease["fence"], "worker-7", "PATCH"))
            # Both name the fence the newer writer stored on their resource, and only that resource.
            self.assertEqual((pg["current_fence"], rd["current_fence"]), (newer["fence"], newer["fence"]), reason)
            self.assertEqual((pg["resources"], rd["resources"]),
                             ([f"pg:invoices/{key}"], [f"redis:shape:{key}"]), reason)


if __name__ == "__main__":
    unittest.main()
