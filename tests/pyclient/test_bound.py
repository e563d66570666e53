# SPDX-License-Identifier: Apache-2.0
"""The Python client against tables bound to locks: a token of another lock raises InvalidFenceToken and
leaves the lease alone; under require_live_lease, a write after the lease ended raises LeaseLost (410)
and marks the lease lost, where the fence alone would have accepted it.

Owns: how the client reports the refusals of bound resources. Must not: test the gateway's binding rules
(its own tests do).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import INVOICE_COLUMNS, unique  # noqa: E402

import fencegate  # noqa: E402
from harness import Gateway, HarnessError, psql  # noqa: E402

LIVE_TABLE_SQL = "CREATE TABLE IF NOT EXISTS public.pyclient_live (id text PRIMARY KEY, note text)"


class BoundTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        psql(LIVE_TABLE_SQL)
        tables = {"invoices": {"key": "id", "columns": INVOICE_COLUMNS, "lock": "invoice:{key}"}}
        cls.live = True
        try:
            live = {"key": "id", "columns": ["note"], "lock": "live:{key}", "require_live_lease": True}
            cls.gw = Gateway(config={"tables": dict(tables, pyclient_live=live)})
        except HarnessError:
            cls.live = False  # a gateway without require_live_lease refuses the unknown key
            cls.gw = Gateway(config={"tables": tables})
        cls.client = fencegate.Client(cls.gw.base)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.gw.stop()

    def test_token_of_another_lock(self):
        key = unique("bound")
        psql("INSERT INTO public.invoices (id, note) VALUES (:'k', 'before')", {"k": key})
        with self.client.lock(unique("evil")) as evil:
            with self.assertRaises(fencegate.InvalidFenceToken) as caught:
                evil.pg("invoices").patch(key, note="evil")
            self.assertEqual(caught.exception.status, 403)
            self.assertFalse(evil.lost.is_set())
        with self.client.lock(f"invoice:{key}") as right:
            self.assertEqual(right.pg("invoices").patch(key, note="right")["row"]["note"], "right")

    def test_write_after_the_lease_ended_under_require_live_lease(self):
        """1.5 s lease (the first write comes well within it on a loaded machine), 1.7 s pause, nobody else
        writes: the gateway refuses with 410 and the client marks the lease lost."""
        if not self.live:
            self.skipTest("require_live_lease is not on this gateway yet")
        key = unique("live")
        psql("INSERT INTO public.pyclient_live (id, note) VALUES (:'k', 'before')", {"k": key})
        lease = self.client.lock(f"live:{key}", ttl_ms=1500, renew=False).acquire()
        self.assertEqual(lease.pg("pyclient_live").patch(key, note="in time")["row"]["note"], "in time")
        time.sleep(1.7)
        with self.assertRaises(fencegate.LeaseLost) as caught:
            lease.pg("pyclient_live").patch(key, note="late")
        self.assertEqual(caught.exception.status, 410)
        self.assertTrue(lease.lost.is_set())
        self.assertEqual(psql("SELECT note FROM public.pyclient_live WHERE id = :'k'", {"k": key}), ["in time"])


if __name__ == "__main__":
    unittest.main()
