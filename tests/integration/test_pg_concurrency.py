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

Owns: the concurrency contract of fenced Postgres writes. Must not: test single-request semantics.
"""

import os
import random
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, psql  # noqa: E402
from pg_helpers import config, rejections, stored_fence, tokens, unique, write  # noqa: E402

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.pg_conc_rows (id text PRIMARY KEY, fence bigint, note text);
CREATE TABLE IF NOT EXISTS public.pg_conc_log (seq bigserial PRIMARY KEY, id text NOT NULL, fence bigint);
CREATE OR REPLACE FUNCTION public.pg_conc_log_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.pg_conc_log (id, fence) VALUES (NEW.id, NEW.fence);
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS pg_conc_log_version ON public.pg_conc_rows;
CREATE TRIGGER pg_conc_log_version AFTER INSERT OR UPDATE ON public.pg_conc_rows
    FOR EACH ROW EXECUTE FUNCTION public.pg_conc_log_version();
"""

WRITERS = 8
TOKENS = 120


class ConcurrentWritersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)
        cls.gw = Gateway(config=config(pg_conc_rows={"key": "id", "columns": ["fence", "note"]}),
                         env_overrides={"FENCEGATE_HTTP_THREADS": WRITERS, "FENCEGATE_PG_POOL_SIZE": WRITERS})
        cls.c = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.gw.stop()

    def run_writers(self, key, toks, method, body_of):
        """Sends one write per token from WRITERS threads at once; returns {fence: status}."""
        queue = list(toks)
        random.shuffle(queue)
        lock = threading.Lock()
        statuses, errors = {}, []
        start = threading.Barrier(WRITERS)

        def worker():
            client = self.gw.client()
            start.wait()
            try:
                while True:
                    with lock:
                        if not queue:
                            return
                        token, fence = queue.pop()
                    r = write(client, method, "pg_conc_rows", key, body_of(fence), token, owner=f"w{fence}")
                    with lock:
                        statuses[fence] = r.status
                        if r.status not in (200, 409):
                            errors.append(r)
            except Exception as e:  # noqa: BLE001 - reported by the test below
                errors.append(e)
            finally:
                client.close()

        threads = [threading.Thread(target=worker) for _ in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(len(statuses), len(toks))
        return statuses

    def check(self, key, statuses, create_fence=None):
        accepted = sorted(f for f, s in statuses.items() if s == 200)
        refused = sorted(f for f, s in statuses.items() if s == 409)
        log = [int(x) for x in psql("SELECT fence FROM public.pg_conc_log WHERE id = :'k' ORDER BY seq", {"k": key})]
        if create_fence is not None:
            self.assertEqual(log[0], create_fence)
            log = log[1:]
        # Commit order never goes back to a lower fence.
        self.assertEqual(log, sorted(log), f"accepted fences out of order in commit order: {log}")
        # Exactly the acknowledged writes happened.
        self.assertEqual(sorted(log), accepted)
        self.assertEqual(max(statuses), accepted[-1], "the highest fence must win")
        row = psql("SELECT fence, note FROM public.pg_conc_rows WHERE id = :'k'", {"k": key})
        self.assertEqual(row, [f"{accepted[-1]}|w{accepted[-1]}"])
        resource = f"pg:pg_conc_rows/{key}"
        self.assertEqual(stored_fence(resource), accepted[-1])
        audit = rejections(resource)
        self.assertEqual(sorted(a["presented_fence"] for a in audit), refused, "one audit row per refusal")
        for a in audit:
            self.assertGreater(a["current_fence"], a["presented_fence"])
            self.assertEqual(a["owner"], f"w{a['presented_fence']}")
        self.assertGreater(len(refused), 0, "shuffled fences must produce refusals")
        return accepted, refused

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


if __name__ == "__main__":
    unittest.main()
