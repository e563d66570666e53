# SPDX-License-Identifier: Apache-2.0
"""Fenced writes to fence-column tables committed in groups (src/store/fenced/write_group.c).

Writes that arrive while a group is being committed go together in the next one: one transaction, rows in key
order. The tests watch it from Postgres's side, not the gateway's: a trigger appends every new row version to a
log with the id of the transaction that wrote it (txid_current()), in the order the statements ran. They show:
  - under concurrent load writes are grouped: fewer transactions than writes, some carrying several (a gateway
    that commits each write on its own fails this);
  - one write's error fails that write alone: in bursts mixing good writes with writes whose value the
    column's type refuses, every good write is answered 200 and is in the log exactly once, every bad one is
    answered 400 naming the column and never stored (a group failed as a whole, or one whose good writes were
    committed twice when it ran again without the bad one, fails this);
  - within a transaction the rows are written in key order, so two groups never wait for each other's rows
    (a group sent in arrival order fails this), and concurrent writes of a few shared rows all succeed;
  - with more writers than two full groups hold, every write is answered and stored once: a waiting
    write's thread is woken when its group is done, and one is woken to lead each next group.

Broken variants caught while writing this (each tried, then reverted): groups sent in arrival order, not key
order (a transaction's log showed its rows out of order); groups of at most one write (as many transactions as
writes); a failed statement's group answered as committed for its other writes instead of running them again
(their writes were missing from the log); a finished group whose writes' threads were not woken (every test hung);
a finished group that woke nobody to lead the next (the crowd hung, the other tests passed).

Owns: the grouping of fence-column writes. Must not: test the fence rule itself (test_fence_column.py).
"""

import os
import random
import sys
import threading
import unittest
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, metric, psql  # noqa: E402
from pg_helpers import acquire, unique, write  # noqa: E402

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.wg_rows (id text PRIMARY KEY, note text, n integer, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.wg_log (seq bigserial PRIMARY KEY, id text NOT NULL, note text, tx bigint);
CREATE OR REPLACE FUNCTION public.wg_log_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.wg_log (id, note, tx) VALUES (NEW.id, NEW.note, txid_current());
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS wg_log_version ON public.wg_rows;
CREATE TRIGGER wg_log_version AFTER UPDATE ON public.wg_rows
    FOR EACH ROW EXECUTE FUNCTION public.wg_log_version();
"""

TABLE = {"key": "id", "columns": ["note", "n"], "fence_column": "lock_fence"}
CLIENTS = 16
WRITES = 24
GROUP_MAX = 32  # writes in one group (src/store/fenced/write_group.c)


def logged(prefix):
    """(seq, id, note, tx) of the logged versions of the rows whose id starts with prefix, in run order."""
    out = psql("SELECT seq, id, note, tx FROM public.wg_log WHERE id LIKE :'p' ORDER BY seq", {"p": prefix + "%"})
    return [tuple(line.split("|")) for line in out]


class GroupsTest(GatewayTest):
    """A gateway that writes wg_rows; the tests of the classes below."""

    gateway_config = {"tables": {"wg_rows": TABLE}}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the table first: the gateway reads its catalog at start-up
        super().setUpClass()

    def run_clients(self, work, clients=CLIENTS):
        """Runs work(client, k) in clients threads at once, each with its own connection; returns the
        exceptions they raised."""
        errors = []
        start = threading.Barrier(clients)

        def worker(k):
            client = self.gw.client()
            start.wait()
            try:
                work(client, k)
            except Exception as e:  # noqa: BLE001 - reported by the caller
                errors.append(e)
            finally:
                client.close()

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        return errors


class WriteGroupTest(GroupsTest):
    gateway_env = {"FENCEGATE_HTTP_THREADS": 8, "FENCEGATE_PG_POOL_SIZE": 8}

    def test_one_bad_write_fails_alone_and_the_rest_commit_once(self):
        prefix = unique("wg") + "-"
        for k in range(CLIENTS):
            psql("INSERT INTO public.wg_rows (id, note) VALUES (:'k', 'start')", {"k": f"{prefix}{k:02}"})
        token, _ = acquire(self.c, unique("wg-lock"))
        answers = defaultdict(list)  # note -> statuses
        groups_before = metric(self.gw, "fencegate_pg_write_groups_total")
        writes_before = metric(self.gw, "fencegate_pg_grouped_writes_total")

        def work(client, k):
            key = f"{prefix}{k:02}"
            for i in range(WRITES):
                bad = i % 4 == 3
                note = f"bad-{k}-{i}" if bad else f"ok-{k}-{i}"
                r = write(client, "PATCH", "wg_rows", key, {"set": {"note": note, "n": "nope" if bad else i}}, token)
                answers[note].append((r.status, r.body))

        self.assertEqual(self.run_clients(work), [])
        for note, got in answers.items():
            (status, body), = got
            if note.startswith("bad"):
                self.assertEqual((status, body.get("type")), (400, "/problems/invalid_field"), note)
                self.assertIn("'n'", body.get("detail", ""), note)
            else:
                self.assertEqual(status, 200, (note, body))
        log = logged(prefix)
        notes = [note for _, _, note, _ in log]
        good = sorted(n for n in answers if n.startswith("ok"))
        self.assertEqual(sorted(notes), good, "every good write committed exactly once, no bad one")
        per_tx = defaultdict(int)
        for _, _, _, tx in log:
            per_tx[tx] += 1
        self.assertLess(len(per_tx), len(good), "concurrent writes were committed in groups")
        self.assertGreater(max(per_tx.values()), 1)
        # The metrics count what Postgres saw: every good write, in as many groups as transactions.
        self.assertEqual(metric(self.gw, "fencegate_pg_grouped_writes_total") - writes_before, len(good))
        self.assertEqual(metric(self.gw, "fencegate_pg_write_groups_total") - groups_before, len(per_tx))

    def test_a_group_writes_its_rows_in_key_order(self):
        prefix = unique("wgo") + "-"
        keys = [f"{prefix}{k}" for k in "abcdef"]
        for key in keys:
            psql("INSERT INTO public.wg_rows (id, note) VALUES (:'k', 'start')", {"k": key})
        token, _ = acquire(self.c, unique("wgo-lock"))
        statuses = []

        def work(client, k):
            rnd = random.Random(k)
            for i in range(WRITES):
                r = write(client, "PATCH", "wg_rows", rnd.choice(keys), {"set": {"note": f"{k}-{i}", "n": i}}, token)
                statuses.append((r.status, r.body))

        self.assertEqual(self.run_clients(work), [])
        self.assertEqual([s for s in statuses if s[0] != 200], [])
        by_tx = defaultdict(list)
        for _, key, _, tx in logged(prefix):
            by_tx[tx].append(key.encode())
        self.assertTrue(any(len(set(ids)) > 1 for ids in by_tx.values()), "some group wrote several rows")
        for tx, ids in by_tx.items():
            self.assertEqual(ids, sorted(ids), f"transaction {tx} wrote its rows out of key order")


class CrowdedWriteGroupTest(GroupsTest):
    """More writers at once than a group takes (GROUP_MAX): the thread that leads a group may find
    its own write left for the next one, and each finished group must wake a queued write's thread to
    lead the next. A write whose thread is never woken (its group done, or the next group to be led)
    hangs past the client's timeout and fails the test."""

    gateway_env = {"FENCEGATE_HTTP_THREADS": 100, "FENCEGATE_PG_POOL_SIZE": 8}
    CROWD = 100  # more than two full groups (two are committed at a time) and a queue behind them

    def test_every_write_of_a_crowd_larger_than_a_group_is_answered_and_stored_once(self):
        prefix = unique("wgc") + "-"
        for k in range(self.CROWD):
            psql("INSERT INTO public.wg_rows (id, note) VALUES (:'k', 'start')", {"k": f"{prefix}{k:02}"})
        token, _ = acquire(self.c, unique("wgc-lock"))
        statuses = []

        def work(client, k):
            for i in range(WRITES):
                r = write(client, "PATCH", "wg_rows", f"{prefix}{k:02}", {"set": {"note": f"{k}-{i}", "n": i}}, token)
                statuses.append((r.status, r.body))

        self.assertEqual(self.run_clients(work, self.CROWD), [])
        self.assertEqual(len(statuses), self.CROWD * WRITES)
        self.assertEqual([s for s in statuses if s[0] != 200], [])
        log = logged(prefix)
        per_tx = defaultdict(int)
        for _, _, _, tx in log:
            per_tx[tx] += 1
        self.assertEqual(max(per_tx.values()), GROUP_MAX, "some group was full, with more writes queued behind it")
        notes = sorted(note for _, _, note, _ in log)
        self.assertEqual(notes, sorted(f"{k}-{i}" for k in range(self.CROWD) for i in range(WRITES)))


if __name__ == "__main__":
    unittest.main()
