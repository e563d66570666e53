# SPDX-License-Identifier: Apache-2.0
"""The Postgres pool grows to `pg_pool_size` while every connection is taken; a connection it cannot add
leaves the request waiting for one given back, not answered 503.

The gateway's role has `CONNECTION LIMIT 2` against a pool of 8, and every write to the table sleeps 40 ms
in a trigger, so twelve concurrent writers keep both connections busy and each attempt to open a third is
refused by Postgres ("too many connections for role"). Every write must still answer 200 and store its row:
a pool that answered the failed attempt (503 before) fails the test. The role's sessions, read from
`pg_stat_activity` while the writers run, never pass the limit, so the writes did share two connections.
On a Redis Cluster (tests/cluster/run_integration.py) each writer's acquire needs Postgres too, to reserve
its slot's first fences: twelve at once on an empty pool, where connections opened all together were all
refused, since Postgres counts each one starting against the limit (so the pool opens one at a time), and
where an acquire that waited for a connection after a refusal answered the refusal anyway.

Owns: how the pool behaves when it cannot grow. Must not: test the connect timeout itself
(test_pg_connect.py) or a lost server (test_pg_restart.py).
"""

from __future__ import annotations

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, env, psql  # noqa: E402
from pg_helpers import acquire, unique, write  # noqa: E402

ROLE = "fg_pg_pool_writer"
LIMIT = 2
WRITERS = 12
ROUNDS = 3

SETUP_SQL = f"""
DROP TABLE IF EXISTS public.pooled;
DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}')
    THEN DROP OWNED BY {ROLE}; DROP ROLE {ROLE}; END IF; END $$;
CREATE ROLE {ROLE} LOGIN CONNECTION LIMIT {LIMIT};
GRANT CREATE ON DATABASE fencegate TO {ROLE};
GRANT USAGE, CREATE ON SCHEMA fencegate TO {ROLE};
GRANT ALL ON ALL TABLES IN SCHEMA fencegate TO {ROLE};
GRANT ALL ON ALL SEQUENCES IN SCHEMA fencegate TO {ROLE};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA fencegate TO {ROLE};
CREATE TABLE public.pooled (id text PRIMARY KEY, v text);
CREATE FUNCTION public.pooled_slow() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_sleep(0.04); RETURN NEW; END $$;
CREATE TRIGGER slow BEFORE INSERT OR UPDATE ON public.pooled FOR EACH ROW EXECUTE FUNCTION public.pooled_slow();
GRANT ALL ON public.pooled TO {ROLE};
"""


class PoolAtItsLimitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with Gateway():  # the gateway's own schema, migrated by its owner
            pass
        psql(SETUP_SQL)
        dsn = env("FG_TEST_PG_DSN").replace("//fencegate@", f"//{ROLE}@")
        cls.gw = Gateway(config={"pg_pool_size": 8, "tables": {"pooled": {"key": "id", "columns": ["v"]}}},
                         env_overrides={"FENCEGATE_PG_DSN": dsn})

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        psql(f"DROP TABLE IF EXISTS public.pooled; DROP FUNCTION IF EXISTS public.pooled_slow();"
             f" DROP OWNED BY {ROLE}; DROP ROLE {ROLE}")

    def sessions(self) -> int:
        return int(psql(f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{ROLE}'")[0])

    def test_writers_beyond_what_postgres_allows_wait_and_succeed(self):
        statuses: list[int] = []
        written: list[str] = []
        most_sessions = [0]
        lock = threading.Lock()
        running = threading.Event()
        running.set()

        def writer(n: int) -> None:
            with self.gw.client() as c:
                token, _ = acquire(c, unique("pool"))
                for round_ in range(ROUNDS):
                    key = f"w{n}-r{round_}"
                    r = write(c, "PUT", "pooled", key, {"row": {"v": key}}, token)
                    with lock:
                        statuses.append(r.status)
                        if r.status == 200:
                            written.append(key)

        def watcher() -> None:
            while running.is_set():
                most_sessions[0] = max(most_sessions[0], self.sessions())

        watching = threading.Thread(target=watcher)
        watching.start()
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        running.clear()
        watching.join()
        self.assertEqual(statuses, [200] * (WRITERS * ROUNDS))
        self.assertEqual(sorted(psql("SELECT id FROM public.pooled")), sorted(written))
        self.assertLessEqual(most_sessions[0], LIMIT)
        self.assertGreater(most_sessions[0], 0)
        self.assertNotIn("too many connections", self.gw.log_text())


if __name__ == "__main__":
    unittest.main()
