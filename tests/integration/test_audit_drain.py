# SPDX-License-Identifier: Apache-2.0
"""The audit drain under Postgres refusals that are not an entry's own: the records of stale Redis writes wait
in the Redis stream until Postgres takes them, and only an entry Postgres refuses while it stores others moves
to the dead letters (src/store/audit/audit_stream.c).

The test runs a gateway on a Redis and a Postgres database of its own: it makes Postgres refuse audit inserts
with a trigger (SQLSTATE XX000, as an internal error or a revoked privilege would), which must touch no other
test's records, and the drain of a shared stream would store other tests' entries beside the refused ones.
Broken variant caught: a drain that dead-lettered every entry Postgres refused for any reason but an
unreachable server (all three records of a refusing Postgres went to the dead letters, none reached the table
once it took inserts again); a drain that kept an entry refused alone in the stream for good (the poisoned
entry never left).

Owns: what the drain does with refusals. Must not: test entries that are not UTF-8, or a Postgres outage
(test_hostile.py, OwnerAndAuditTest).
"""

import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, private_backends, psql, skip_in_cluster, wait_for  # noqa: E402

REFUSE = """  -- refused: a LIKE pattern of the resources refused
CREATE FUNCTION fencegate.test_refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.resource LIKE '{refused}' THEN
        RAISE EXCEPTION 'audit refused for the test' USING ERRCODE = 'XX000';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_refuse_audit BEFORE INSERT ON fencegate.rejections
    FOR EACH ROW EXECUTE FUNCTION fencegate.test_refuse_audit();
"""

ACCEPT = "DROP TRIGGER test_refuse_audit ON fencegate.rejections; DROP FUNCTION fencegate.test_refuse_audit();"


@skip_in_cluster("it runs its own one Redis")
class AuditDrainTest(unittest.TestCase):
    def setUp(self) -> None:
        own = private_backends(self, "drain")
        self.dsn, self.env = own.dsn, own.env
        self.redis = Redis(port=own.redis_port)
        self.addCleanup(self.redis.close)

    def add_entry(self, resource: str) -> str:
        """An audit entry of a stale Redis write, as the write scripts add it; its stream id."""
        return self.redis.cmd("XADD", "fg:audit", "*", "resource", resource, "lock", "l", "presented", "1",
                              "current", "2", "owner", "w", "client_addr", "127.0.0.1", "method", "PUT",
                              "reason", "stale_fence", "at_ms", "0")

    def stored(self, resource: str) -> int:
        return int(psql("SELECT count(*) FROM fencegate.rejections WHERE resource = :'r'", {"r": resource},
                        dsn=self.dsn)[0])

    def dead_letters(self) -> list[dict[str, str]]:
        return [dict(zip(e[1][::2], e[1][1::2])) for e in self.redis.cmd("XRANGE", "fg:audit:dead", "-", "+")]

    def test_entries_postgres_refuses_all_wait_in_the_stream(self):
        resource = f"redis:all-{uuid.uuid4().hex[:8]}"
        with Gateway(env_overrides=self.env) as gw:
            psql(REFUSE.format(refused="redis:all-%"), dsn=self.dsn)
            ids = [self.add_entry(resource) for _ in range(3)]
            wait_for(lambda: "audit_drain_failed" in gw.log_text() or self.dead_letters(), timeout=20,
                     what="the drain refused")
            self.assertEqual(self.dead_letters(), [])
            self.assertEqual([e[0] for e in self.redis.cmd("XRANGE", "fg:audit", "-", "+")], ids)
            self.assertIn("Postgres refuses the audit entries", gw.log_text())
            self.assertEqual(self.stored(resource), 0)
            psql(ACCEPT, dsn=self.dsn)
            wait_for(lambda: self.stored(resource) == 3, timeout=30, what="the records stored")
            wait_for(lambda: self.redis.cmd("XLEN", "fg:audit") == 0, timeout=10, what="the stream emptied")
            self.assertEqual(self.dead_letters(), [])
            self.assertEqual(self.stored(resource), 3)

    def test_an_entry_refused_alone_leaves_for_the_dead_letters(self):
        tag = uuid.uuid4().hex[:8]
        refused, fine = f"redis:poison-{tag}", f"redis:fine-{tag}"
        with Gateway(env_overrides=self.env):
            psql(REFUSE.format(refused="redis:poison-%"), dsn=self.dsn)
            self.redis.cmd("MULTI")
            self.add_entry(refused)
            for _ in range(2):
                self.add_entry(fine)
            bad_id = self.redis.cmd("EXEC")[0]
            wait_for(lambda: self.redis.cmd("XLEN", "fg:audit") == 0, timeout=30, what="the stream emptied")
            self.assertEqual(self.stored(fine), 2)
            self.assertEqual(self.stored(refused), 0)
            dead = self.dead_letters()
            self.assertEqual([d["source_id"] for d in dead], [bad_id], dead)
            self.assertIn("audit refused for the test", dead[0]["error"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
