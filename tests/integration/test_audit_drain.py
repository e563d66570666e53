# SPDX-License-Identifier: Apache-2.0
"""The audit drain under Postgres refusals that are not an entry's own: the records of stale Redis writes wait
in the Redis stream until Postgres takes them, and an entry refused for another reason than its contents moves
to the dead letters only when Postgres refuses it again right after storing an entry behind it
(src/store/audit/audit_stream.c).

The test runs a gateway on a Redis and a Postgres database of its own: it makes Postgres refuse audit inserts
with a trigger (SQLSTATE XX000, as an internal error or a revoked privilege would), which must touch no other
test's records, and the drain of a shared stream would store other tests' entries beside the refused ones.
Broken variants caught (besides each test's own): a drain that dead-lettered every entry Postgres refused for
any reason but an unreachable server (all three records of a refusing Postgres went to the dead letters, none
reached the table once it took inserts again).

Owns: what the drain does with refusals, and with an entry whose id a stored record already has. Must not: test entries that are not UTF-8, or a Postgres outage
(test_hostile.py, OwnerAndAuditTest).
"""

import os
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, private_backends, psql, skip_in_cluster, wait_for  # noqa: E402

def refuse(pattern: str, when: str = "true") -> str:
    """SQL that makes Postgres refuse the audit inserts of resources LIKE pattern while SQL condition `when`
    holds, where {n} stands for the count of such inserts tried so far, this one included."""
    return f"""
CREATE SEQUENCE fencegate.test_refusals;
CREATE FUNCTION fencegate.test_refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.resource LIKE '{pattern}' THEN
        IF {when.format(n="nextval('fencegate.test_refusals')")} THEN
            RAISE EXCEPTION 'audit refused for the test' USING ERRCODE = 'XX000';
        END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_refuse_audit BEFORE INSERT ON fencegate.rejections
    FOR EACH ROW EXECUTE FUNCTION fencegate.test_refuse_audit();
"""


ACCEPT = ("DROP TRIGGER test_refuse_audit ON fencegate.rejections; DROP FUNCTION fencegate.test_refuse_audit();"
          "DROP SEQUENCE fencegate.test_refusals;")


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

    def add_entries(self, *resources: str) -> list[str]:
        """Entries of resources, in one step (one drain reads them together): their ids."""
        self.redis.cmd("MULTI")
        for resource in resources:
            self.add_entry(resource)
        return self.redis.cmd("EXEC")

    def stream_ids(self) -> list[str]:
        return [e[0] for e in self.redis.cmd("XRANGE", "fg:audit", "-", "+")]

    def test_entries_postgres_refuses_all_wait_in_the_stream(self):
        resource = f"redis:all-{uuid.uuid4().hex[:8]}"
        with Gateway(env_overrides=self.env) as gw:
            psql(refuse("redis:all-%"), dsn=self.dsn)
            ids = self.add_entries(*[resource] * 3)
            wait_for(lambda: "audit_held" in gw.log_text() or self.dead_letters(), timeout=20,
                     what="the drain refused")
            self.assertEqual(self.dead_letters(), [])
            self.assertEqual(self.stream_ids(), ids)
            self.assertIn("audit refused for the test", gw.log_text())
            self.assertEqual(self.stored(resource), 0)
            psql(ACCEPT, dsn=self.dsn)
            wait_for(lambda: self.stored(resource) == 3, timeout=30, what="the records stored")
            wait_for(lambda: self.redis.cmd("XLEN", "fg:audit") == 0, timeout=10, what="the stream emptied")
            self.assertEqual(self.dead_letters(), [])
            self.assertEqual(self.stored(resource), 3)

    def test_a_refusal_that_begins_within_a_drain_keeps_the_entries_it_refuses(self):
        """Postgres stores two entries of a drain, then refuses every one: the refused ones stay in the stream.
        Caught: a drain that took the two stored ones for proof that the refusals were the entries' own (four
        dead letters)."""
        resource = f"redis:late-{uuid.uuid4().hex[:8]}"
        with Gateway(env_overrides=self.env) as gw:
            psql(refuse("redis:late-%", "{n} > 2"), dsn=self.dsn)
            ids = self.add_entries(*[resource] * 6)
            wait_for(lambda: "audit_held" in gw.log_text() or self.dead_letters(), timeout=20,
                     what="the drain refused")
            self.assertEqual(self.dead_letters(), [])
            self.assertEqual((self.stored(resource), self.stream_ids()), (2, ids[2:]))
            psql(ACCEPT, dsn=self.dsn)
            wait_for(lambda: self.stored(resource) == 6, timeout=30, what="the records stored")
            self.assertEqual(self.dead_letters(), [])

    def test_a_refusal_that_ends_within_a_drain_loses_nothing(self):
        """Postgres refuses two entries of a drain, then stores the rest: the two are tried again and stored.
        Caught: a drain that dead-lettered every entry refused before one was stored."""
        resource = f"redis:early-{uuid.uuid4().hex[:8]}"
        with Gateway(env_overrides=self.env):
            psql(refuse("redis:early-%", "{n} <= 2"), dsn=self.dsn)
            self.add_entries(*[resource] * 6)
            wait_for(lambda: self.stored(resource) == 6, timeout=30, what="the records stored")
            wait_for(lambda: self.redis.cmd("XLEN", "fg:audit") == 0, timeout=10, what="the stream emptied")
            self.assertEqual(self.dead_letters(), [])

    def test_entries_refused_alone_leave_for_the_dead_letters(self):
        """Entries refused for themselves, more than a batch of them (20), ahead of two that Postgres stores: the
        two are stored and the refused ones dead-lettered. Caught: a drain that read one batch only (all
        refused: nothing ever stored, the stream stuck)."""
        tag = uuid.uuid4().hex[:8]
        refused, fine = f"redis:poison-{tag}", f"redis:fine-{tag}"
        with Gateway(env_overrides=self.env):
            psql(refuse("redis:poison-%"), dsn=self.dsn)
            bad = self.add_entries(*[refused] * 21, fine, fine)[:21]
            wait_for(lambda: self.redis.cmd("XLEN", "fg:audit") == 0, timeout=30, what="the stream emptied")
            self.assertEqual(self.stored(fine), 2)
            self.assertEqual(self.stored(refused), 0)
            dead = self.dead_letters()
            self.assertEqual(sorted(d["source_id"] for d in dead), sorted(bad), dead)
            self.assertIn("audit refused for the test", dead[0]["error"])


    def test_no_run_of_held_entries_stops_the_ones_behind(self):
        """More entries refused than a drain reads (two batches of 20) ahead of two that Postgres stores: the two
        are stored, and each refused one is either still in the stream or a dead letter, none lost. Caught: a
        drain that read its two batches from the head every time (nothing ever stored, the stream stuck)."""
        tag = uuid.uuid4().hex[:8]
        refused, fine = f"redis:many-{tag}", f"redis:after-{tag}"
        with Gateway(env_overrides=self.env):
            psql(refuse("redis:many-%"), dsn=self.dsn)
            bad = self.add_entries(*[refused] * 45, fine, fine)[:45]
            wait_for(lambda: self.stored(fine) == 2, timeout=30, what="the entries behind stored")
            dead = [d["source_id"] for d in self.dead_letters()]
            self.assertEqual(sorted(dead + self.stream_ids()), sorted(bad))
            self.assertEqual(self.stored(refused), 0)


    def test_entries_held_behind_a_run_are_stored_once_postgres_takes_them(self):
        """A run of entries refused for themselves (more than a drain reads), then a time Postgres refuses every
        entry: the entries held meanwhile are stored once it takes them again, without an entry after them.
        Caught: a look at the held entries that read from the head only (it held the run and never reached
        them)."""
        tag = uuid.uuid4().hex[:8]
        refused, meanwhile = f"redis:run-{tag}", f"redis:meanwhile-{tag}"
        with Gateway(env_overrides=self.env) as gw:
            psql("CREATE TABLE fencegate.test_refuse_all ()", dsn=self.dsn)
            psql(refuse("redis:%", "NEW.resource LIKE 'redis:run-%' OR EXISTS (SELECT FROM fencegate.test_refuse_all)"),
                 dsn=self.dsn)
            self.add_entries(*[refused] * 45)
            wait_for(lambda: "audit_held" in gw.log_text(), timeout=20, what="the run held")
            psql("INSERT INTO fencegate.test_refuse_all DEFAULT VALUES", dsn=self.dsn)
            self.add_entries(*[meanwhile] * 3)
            time.sleep(1.5)  # passes after the run hold the three too
            self.assertEqual(self.stored(meanwhile), 0)
            psql("DELETE FROM fencegate.test_refuse_all", dsn=self.dsn)
            wait_for(lambda: self.stored(meanwhile) == 3, timeout=30, what="the three stored")
            self.assertEqual(self.stored(refused), 0)

    def rows(self, like: str) -> list[tuple[str, ...]]:
        """(resource, presented, current, at_ms, source_id) of every record of resources LIKE like, by resource."""
        return [tuple(line.split("|")) for line in psql(
            "SELECT resource, presented_fence, current_fence, floor(extract(epoch FROM at) * 1000)::bigint,"
            " source_id FROM fencegate.rejections WHERE resource LIKE :'p' ORDER BY resource, id",
            {"p": like}, dsn=self.dsn)]

    def test_a_record_whose_entry_id_was_stored_before_is_kept(self):
        """A Redis that lost its audit stream (a FLUSHALL, a restart without persistence, a failover to a replica
        behind) may give a new refusal the entry id of one already copied: Postgres holds a record under that
        source_id with other contents. Here the drain is held while three stale writes are refused, and rows of
        another refusal are stored under the source ids of the first two entries; the three records are stored
        once each (the two under a derived source id), the rows before them untouched, and the same entries
        drained again (back in the stream with their ids, as after a crash between the insert and the
        acknowledgement) store nothing more. Caught: an insert that took any row of the source_id for the entry
        (the two records dropped, their refusals answered 409 with no record)."""
        tag = uuid.uuid4().hex[:8]
        keys = [f"app:{tag}-{i}" for i in range(3)]
        earlier = f"redis:earlier-{tag}"
        with Gateway(env_overrides=self.env, config={"redis_prefixes": ["app:"]}) as gw:
            c = gw.client()
            self.addCleanup(c.close)
            old, new = (c.post(f"/v1/locks/{tag}-{n}/acquire").body for n in ("old", "new"))
            for key in keys:
                r = c.request("PUT", f"/v1/redis/{key}", {"value": "new"}, headers={"Fence-Token": new["token"]})
                self.assertEqual(r.status, 200, r)
            psql(refuse("redis:app:%"), dsn=self.dsn)
            for key in keys:
                r = c.request("PUT", f"/v1/redis/{key}", {"value": "old"}, headers={"Fence-Token": old["token"]})
                self.assertEqual(r.status, 409, r)
            wait_for(lambda: "audit_held" in gw.log_text(), timeout=20, what="the drain held")
            entries = self.redis.cmd("XRANGE", "fg:audit", "-", "+")
            ids = [e[0] for e in entries]
            self.assertEqual(len(ids), 3, entries)
            psql("INSERT INTO fencegate.rejections (at, resource, lock_name, presented_fence, current_fence, owner,"
                 " client_addr, method, reason, source_id)"
                 " SELECT now() - interval '1 hour', :'r', 'other', 5, 6, 'earlier', '10.0.0.9', 'PATCH',"
                 " 'stale_fence', 'fg:audit/' || id FROM unnest(ARRAY[:'a', :'b']) id",
                 {"r": earlier, "a": ids[0], "b": ids[1]}, dsn=self.dsn)
            before = self.rows(earlier)
            psql(ACCEPT, dsn=self.dsn)
            wait_for(lambda: self.redis.cmd("XLEN", "fg:audit") == 0, timeout=30, what="the stream drained")
            stored = self.rows(f"redis:app:{tag}-%")
            self.assertEqual([r[:3] for r in stored],
                             [(f"redis:{key}", str(old["fence"]), str(new["fence"])) for key in keys], stored)
            self.assertRegex(stored[0][4], rf"^fg:audit/{ids[0]}#[0-9a-f]{{32}}$")
            self.assertRegex(stored[1][4], rf"^fg:audit/{ids[1]}#[0-9a-f]{{32}}$")
            self.assertEqual(stored[2][4], f"fg:audit/{ids[2]}")  # no collision: the source id as ever
            self.assertEqual(self.rows(earlier), before)
            self.assertEqual(self.dead_letters(), [])
            # The same entries again, as a drain that stored them and died before it deleted them leaves them.
            self.redis.cmd("MULTI")
            self.redis.cmd("DEL", "fg:audit")
            for entry_id, fields in entries:
                self.redis.cmd("XADD", "fg:audit", entry_id, *fields)
            self.redis.cmd("EXEC")
            wait_for(lambda: self.redis.cmd("XLEN", "fg:audit") == 0, timeout=30, what="the stream drained again")
            self.assertEqual(self.rows(f"redis:app:{tag}-%"), stored)
            self.assertEqual(self.rows(earlier), before)
            self.assertEqual(self.dead_letters(), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
