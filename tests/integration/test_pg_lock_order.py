# SPDX-License-Identifier: Apache-2.0
"""Concurrent writes of the same rows never deadlock, in both table modes (docs/design.md, "Lock order").

Many client threads write the same two rows at once, each write under its own token (fences handed out
lowest first, so the writes in flight carry close fences and both win and lose): single PATCH, PUT, POST and
DELETE, and batches of two or three ops over the two rows, half of them with Prefer: return=minimal. Concurrent
single writes of a fence_column table are committed in write groups, which put a PATCH and a PUT of one row in
one transaction; batches, creates and groups must all take a row's locks in the one order. A group that locked
the row of its PATCH before the row's advisory lock, which its PUT takes first, deadlocked with a PUT or a batch
holding that lock and waiting for the row: Postgres rolled one back after its deadlock_timeout, and a write
that was the victim twice (a batch, a write of a group run again alone) answered 503.

The test trusts only what it saw and what Postgres saw, not the gateway's bookkeeping:
  - every answer is one of the contract's for its call: applied (200, 201, 204), 409 stale_fence naming a
    higher current fence, 409 conflict for a POST onto a row that exists, 404 for a PATCH or DELETE of a missing
    row; never a 5xx;
  - the fence rule, from the client's clock: no write was applied after a write of the same row with a higher
    fence had been answered applied, and every stale answer is justified by a higher-fenced write of one of its
    rows that the test saw applied and that was sent before the stale answer came;
  - the fence rule, from Postgres's: a trigger logs every version of the rows in commit order (an UPDATE or
    DELETE holds the row lock, a create the row's fence lock, until commit); the fences the writes put in the
    rows never decrease in that order, and the versions logged are exactly the applied writes' (no lost or
    phantom write);
  - every stale answer left exactly one audit record with its writer's owner, no other answer left one;
  - Postgres reported no deadlock: none counted in pg_stat_database, no "deadlock detected" in its log.

Caught before the fix (fence_column mode): deadlocks counted and logged, and 503 answers.

Owns: the lock order of fenced Postgres writes under concurrency. Must not: test the grouping itself
(test_write_groups.py) or single-request semantics (test_pg_writes.py, test_fence_column.py).
"""

import os
import random
import sys
import threading
import time
import unittest
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, psql  # noqa: E402
from pg_helpers import quote, tokens, unique  # noqa: E402

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.lo_side (id integer PRIMARY KEY, w bigint, note text);
CREATE TABLE IF NOT EXISTS public.lo_col (id integer PRIMARY KEY, w bigint, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.lo_log (seq bigserial PRIMARY KEY, tbl text, id integer, w bigint, op text);
CREATE OR REPLACE FUNCTION public.lo_log_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO public.lo_log (tbl, id, w, op) VALUES (TG_TABLE_NAME, OLD.id, OLD.w, 'D');
    ELSE
        INSERT INTO public.lo_log (tbl, id, w, op) VALUES (TG_TABLE_NAME, NEW.id, NEW.w, left(TG_OP, 1));
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS lo_log_version ON public.lo_side;
CREATE TRIGGER lo_log_version AFTER INSERT OR UPDATE OR DELETE ON public.lo_side
    FOR EACH ROW EXECUTE FUNCTION public.lo_log_version();
DROP TRIGGER IF EXISTS lo_log_version ON public.lo_col;
CREATE TRIGGER lo_log_version AFTER INSERT OR UPDATE OR DELETE ON public.lo_col
    FOR EACH ROW EXECUTE FUNCTION public.lo_log_version();
"""

TABLES = {"lo_side": {"key": "id", "columns": ["w", "note"]},
          "lo_col": {"key": "id", "columns": ["w", "note"], "fence_column": "lock_fence"}}
WRITERS = 12
TOKENS = 420
KINDS = ["patch"] * 6 + ["put"] * 4 + ["post"] * 2 + ["delete"] * 3 + ["batch"] * 5

# What a call may answer besides being applied: (status, problem type) per op kind.
REFUSALS = {
    "patch": {(409, "stale_fence"), (404, "not_found")},
    "put": {(409, "stale_fence")},
    "post": {(409, "stale_fence"), (409, "conflict")},
    "delete": {(409, "stale_fence"), (404, "not_found")},
    "batch": {(409, "stale_fence"), (404, "not_found"), (409, "conflict")},
}


def pg_log_path():
    """The test Postgres's log (scripts/services.sh), or None where the services are not the harness's."""
    svc = os.environ.get("FG_TEST_SVC_DIR")
    path = os.path.join(svc, "pg", "postgres.log") if svc else None
    return path if path and os.path.exists(path) else None


def pg_log_size():
    path = pg_log_path()
    return os.path.getsize(path) if path else 0


def pg_log_since(offset):
    path = pg_log_path()
    if path is None:
        return ""
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def deadlocks_counted():
    return int(psql("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")[0])


class Write:
    """One request of the test: its ops [(kind, key)], fence, owner, when it was sent and answered, its answer."""

    def __init__(self, ops, fence, owner, batch, minimal):
        self.ops, self.fence, self.owner, self.batch, self.minimal = ops, fence, owner, batch, minimal
        self.sent = self.answered = 0.0
        self.status, self.body = 0, None

    @property
    def kind(self):
        return "batch" if self.batch else self.ops[0][0]

    @property
    def applied(self):
        return self.status in (200, 201, 204)

    @property
    def problem(self):
        t = self.body.get("type", "") if isinstance(self.body, dict) else ""
        return t.rsplit("/", 1)[-1]

    def __repr__(self):
        return f"{self.kind}{self.ops} fence {self.fence} -> {self.status} {self.body}"


def op_body(table, kind, key, fence, n):
    note = f"n{fence}-{n}"
    if kind == "patch":
        return {"set": {"w": fence, "note": note}}
    if kind == "put":
        return {"row": {"w": fence, "note": note}}
    if kind == "post":
        return {"row": {"id": key, "w": fence, "note": note}}
    return None


def send(client, table, w, token):
    headers = {"Fence-Token": token, "Fence-Owner": w.owner}
    if w.minimal:
        headers["Prefer"] = "return=minimal"
    if w.batch:
        ops = []
        for i, (kind, key) in enumerate(w.ops):
            op = {"op": kind, "table": table}
            if kind != "post":
                op["key"] = str(key)
            body = op_body(table, kind, key, w.fence, i)
            if body is not None:
                op.update(body)
            ops.append(op)
        return client.request("POST", "/v1/pg/batch", {"ops": ops}, headers)
    kind, key = w.ops[0]
    path = f"/v1/pg/{quote(table)}" + ("" if kind == "post" else f"/{key}")
    return client.request(kind.upper(), path, op_body(table, kind, key, w.fence, 0), headers)


class LockOrderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the tables first: the gateway reads their catalog at start-up

    def run_writes(self, table):
        """The writes of WRITERS threads on two new rows of table; returns (writes, keys, deadlocks counted,
        the Postgres log written meanwhile)."""
        base = random.randrange(1, 1 << 30)
        keys = [base, base + 1]
        run = unique("lo")
        log_from, counted_from = pg_log_size(), deadlocks_counted()
        writes, queue = [], []
        lock = threading.Lock()
        env = {"FENCEGATE_HTTP_THREADS": 2 * WRITERS, "FENCEGATE_PG_POOL_SIZE": 8}
        with Gateway(config={"tables": TABLES}, env_overrides=env) as gw:
            with gw.client() as c:
                queue = tokens(c, unique("lo-lock"), TOKENS)  # fences increasing, the lowest sent first
                queue.reverse()
            start = threading.Barrier(WRITERS)

            def writer(k):
                rnd = random.Random(f"{run}-{k}")
                with gw.client() as client:
                    start.wait()
                    n = 0
                    while True:
                        with lock:
                            if not queue:
                                return
                            token, fence = queue.pop()
                        n += 1
                        kind = rnd.choice(KINDS)
                        batch = kind == "batch"
                        ops = ([(rnd.choice(["patch", "put", "post", "delete"]), rnd.choice(keys))
                                for _ in range(rnd.choice([2, 2, 3]))] if batch
                               else [(kind, rnd.choice(keys))])
                        w = Write(ops, fence, f"{run}-{k}-{n}", batch, rnd.random() < 0.5)
                        w.sent = time.monotonic()
                        r = send(client, table, w, token)
                        w.answered = time.monotonic()
                        w.status, w.body = r.status, r.body
                        with lock:
                            writes.append(w)

            threads = [threading.Thread(target=writer, args=(k,)) for k in range(WRITERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
        time.sleep(0.5)  # the gateway's backends have exited: their counts are in pg_stat_database
        return writes, keys, run, deadlocks_counted() - counted_from, pg_log_since(log_from)

    def check_mode(self, table):
        writes, keys, run, counted, pg_log = self.run_writes(table)
        self.assertEqual(len(writes), TOKENS)
        statuses = Counter(w.status for w in writes)
        summary = (f"answers {dict(statuses)}, deadlocks counted {counted}, "
                   f"logged {pg_log.count('deadlock detected')}")
        # Every answer is one the contract gives for its call.
        wrong = [w for w in writes
                 if not w.applied and (w.status, w.problem) not in REFUSALS[w.kind]]
        self.assertEqual(wrong[:5], [], f"{len(wrong)} answers outside the contract; {summary}")
        self.assertEqual(pg_log.count("deadlock detected"), 0, summary)
        self.assertEqual(counted, 0, summary)
        for w in writes:
            if w.applied:
                self.assertEqual(w.status, 204 if w.minimal else 201 if w.kind == "post" else 200, w)
        self.assertGreater(statuses[200] + statuses[201] + statuses[204], TOKENS // 4, summary)
        self.assertGreater(statuses[409], 0, summary)
        self.check_fence_rule(table, writes, keys)
        self.check_audit(writes, run)

    def check_fence_rule(self, table, writes, keys):
        applied = defaultdict(list)  # key -> writes applied to it
        for w in writes:
            if w.applied:
                for key in {key for _, key in w.ops}:
                    applied[key].append(w)
        # From the client's clock: nothing applied after a higher fence was answered applied.
        for key, done in applied.items():
            for a in done:
                later = [b for b in done if b.fence > a.fence and b.answered < a.sent]
                self.assertEqual(later, [], f"{a} applied after a higher fence was answered on row {key}")
        # Every stale answer is justified by a higher fence the test saw applied to one of its rows, sent before
        # the refusal came: a write answered 404 stored no fence, in either mode.
        for w in writes:
            if w.status == 409 and w.problem == "stale_fence":
                self.assertGreater(w.body["current_fence"], w.fence, w)
                rows = {key for _, key in w.ops}
                why = [b for key in rows for b in applied[key] if b.fence > w.fence and b.sent < w.answered]
                self.assertTrue(why, f"{w} refused stale with no higher fence applied to its rows")
        # From Postgres's: the rows' versions in commit order carry fences that never decrease, and they are
        # exactly the versions the applied writes made.
        for key in keys:
            log = psql("SELECT op, coalesce(w, 0) FROM public.lo_log WHERE tbl = :'t' AND id = :'k' ORDER BY seq",
                       {"t": table, "k": key})
            versions = [tuple(line.split("|")) for line in log]
            made = [int(f) for op, f in versions if op != "D"]
            self.assertEqual(made, sorted(made), f"row {key}: fences out of order in commit order")
            expected = Counter()
            for w in applied[key]:
                for kind, k in w.ops:
                    if k == key:
                        expected["D" if kind == "delete" else "W", w.fence if kind != "delete" else 0] += 1
            seen = Counter(("D", 0) if op == "D" else ("W", int(f)) for op, f in versions)
            self.assertEqual(seen, expected, f"row {key}: the versions Postgres logged are not the applied writes'")

    def check_audit(self, writes, run):
        rows = psql("SELECT owner, reason FROM fencegate.rejections WHERE owner LIKE :'p'", {"p": run + "-%"})
        audited = Counter(tuple(line.split("|")) for line in rows)
        expected = Counter((w.owner, "stale_fence") for w in writes if w.status == 409 and w.problem == "stale_fence")
        self.assertEqual(audited, expected, "one audit record per stale answer, none for another")

    def test_side_table_mode(self):
        self.check_mode("lo_side")

    def test_fence_column_mode(self):
        self.check_mode("lo_col")


TRIGGER_SQL = """
CREATE TABLE IF NOT EXISTS public.lo_trig (id integer PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.lo_trig_col (id integer PRIMARY KEY, note text, lock_fence bigint);
CREATE OR REPLACE FUNCTION public.lo_trig_lock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(70460001);
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS lo_trig_lock ON public.lo_trig;
CREATE TRIGGER lo_trig_lock BEFORE UPDATE ON public.lo_trig FOR EACH ROW EXECUTE FUNCTION public.lo_trig_lock();
DROP TRIGGER IF EXISTS lo_trig_lock ON public.lo_trig_col;
CREATE TRIGGER lo_trig_lock BEFORE UPDATE ON public.lo_trig_col
    FOR EACH ROW EXECUTE FUNCTION public.lo_trig_lock();
CREATE TABLE IF NOT EXISTS public.lo_twice (id integer PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.lo_twice_col (id integer PRIMARY KEY, note text, lock_fence bigint);
CREATE OR REPLACE FUNCTION public.lo_twice_lock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(70460002);
    PERFORM pg_advisory_xact_lock(70460003);
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS lo_twice_lock ON public.lo_twice;
CREATE TRIGGER lo_twice_lock BEFORE UPDATE ON public.lo_twice FOR EACH ROW EXECUTE FUNCTION public.lo_twice_lock();
DROP TRIGGER IF EXISTS lo_twice_lock ON public.lo_twice_col;
CREATE TRIGGER lo_twice_lock BEFORE UPDATE ON public.lo_twice_col
    FOR EACH ROW EXECUTE FUNCTION public.lo_twice_lock();
"""


def until_waited_for(lock: int, marker: str) -> str:
    """A statement that ends once some session waits for advisory lock `lock` (30 s at most), not after a fixed
    sleep, which a loaded machine may outlast before the write gets there; `marker` starts its text, so that
    pg_stat_activity shows who runs it (began_to_wait)."""
    return (f"DO $$ /* {marker} */ DECLARE n int := 0; BEGIN WHILE n < 6000 AND NOT EXISTS (SELECT 1 FROM pg_locks "
            f"WHERE locktype = 'advisory' AND objid = {lock} AND NOT granted) LOOP PERFORM pg_sleep(0.005); "
            "n := n + 1; END LOOP; END$$;\n")


def began_to_wait(marker: str) -> None:
    """Returns once a session runs until_waited_for(..., marker): it holds the lock taken before it."""
    for _ in range(250):
        if psql(f"SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'DO $$ /* {marker} */%'"
                " AND state = 'active'") != ["0"]:
            return
        time.sleep(0.02)


class TriggerDeadlockTest(GatewayTest):
    """A lock that a table's own trigger takes is outside the gateway's lock order, so Postgres may still roll a
    write back as a deadlock's victim: here the trigger of an UPDATE takes an advisory lock that another session
    holds while it waits to update the same row. The victim, rolled back whole, is tried once more, after the
    write it deadlocked with has gone ahead, and answered as any write, not 503. Caught: without the retry the
    default mode's write answered 503 (a fence_column write ran again alone after its group, mostly passed);
    retried at once, a write answered 503 in 5 of 6 runs (the retry took the row back before the
    other session's update, which its trigger's lock then waited for again)."""

    gateway_config = {"tables": {"lo_trig": {"key": "id", "columns": ["note"]},
                                 "lo_trig_col": {"key": "id", "columns": ["note"], "fence_column": "lock_fence"},
                                 "lo_twice": {"key": "id", "columns": ["note"]},
                                 "lo_twice_col": {"key": "id", "columns": ["note"], "fence_column": "lock_fence"}}}

    @classmethod
    def setUpClass(cls):
        psql(TRIGGER_SQL)
        super().setUpClass()

    def victim(self, table):
        key = random.randrange(1, 1 << 30)
        psql(f"INSERT INTO public.{table} (id, note) VALUES (:'k', 'start')", {"k": key})
        token, _ = tokens(self.c, unique("lo-trig"), 1)[0]
        log_from = pg_log_size()

        def other():  # takes the trigger's lock, then, while the write waits for it, the write's row
            psql("SET deadlock_timeout = '60s';\nBEGIN;\nSELECT pg_advisory_xact_lock(70460001);\n"
                 + until_waited_for(70460001, "lo-trig") +
                 f"UPDATE public.{table} SET note = 'other' WHERE id = :'k';\nCOMMIT;\n", {"k": key})
        t = threading.Thread(target=other)
        t.start()
        began_to_wait("lo-trig")  # the other session holds the trigger's lock
        r = self.c.request("PATCH", f"/v1/pg/{table}/{key}", {"set": {"note": "gateway"}}, {"Fence-Token": token})
        t.join()
        self.assertEqual(r.status, 200, self.gw.why(r))
        self.assertEqual(psql(f"SELECT note FROM public.{table} WHERE id = :'k'", {"k": key}), ["gateway"])
        if pg_log_path():
            self.assertGreaterEqual(pg_log_since(log_from).count("deadlock detected"), 1, "the write was a victim")

    def test_a_single_write_chosen_as_a_deadlocks_victim_is_tried_again(self):
        for table in ("lo_trig", "lo_trig_col"):
            with self.subTest(table=table):
                self.victim(table)

    def victim_twice(self, table, write):
        """The scenario of test_a_deadlocks_victim_waits_before_it_runs_again on a new row of table, written by
        write(key, token) (its answer); asserts the write was applied and Postgres logged one deadlock."""
        key = random.randrange(1, 1 << 30)
        psql(f"INSERT INTO public.{table} (id, note) VALUES (:'k', 'start')", {"k": key})
        token, _ = tokens(self.c, unique("lo-twice"), 1)[0]
        log_from = pg_log_size()

        def other():  # holds B; asks for A once the write waits for B; then updates the write's row
            # A, the 15 ms and the update are one statement: psql's round trips between statements, which a
            # loaded machine may hold back past the write's 50 ms, are not part of the scenario.
            psql("SET deadlock_timeout = '60s';\nBEGIN;\nSELECT pg_advisory_xact_lock(70460003);\n"
                 + until_waited_for(70460003, "lo-twice") +
                 "DO $$BEGIN PERFORM pg_advisory_xact_lock(70460002); PERFORM pg_sleep(0.015); "
                 f"UPDATE public.{table} SET note = 'other' WHERE id = {int(key)}; END$$;\nCOMMIT;\n")
        t = threading.Thread(target=other)
        t.start()
        began_to_wait("lo-twice")  # the other session holds B
        r = write(key, token)
        t.join()
        self.assertEqual(r.status, 200, self.gw.why(r))
        self.assertEqual(psql(f"SELECT note FROM public.{table} WHERE id = :'k'", {"k": key}), ["gateway"])
        self.assertEqual(pg_log_since(log_from).count("deadlock detected"), 1)

    def test_a_deadlocks_victim_waits_before_it_runs_again(self):
        """The victim of a deadlock runs again only after the write it deadlocked with went ahead, whether it ran
        alone (the default mode) or in a write group (a fence_column table, whose group hands it back to run
        alone). The table's trigger takes advisory lock A, then B; another session holds B and, once the write
        holds A and waits for B, asks for A: Postgres rolls the write back. The session then takes A, waits 15 ms
        and updates the write's row. A write run again at once takes the row back first, its trigger waits for A,
        the session waits for the row: the same cycle, a second deadlock (then the write's own retry, 50 ms
        later, goes through). Run again 50 ms later, the write finds the session's update committed. So Postgres
        logs one deadlock per write. Caught: the write of a group ran again at once (two deadlocks logged)."""
        if pg_log_path() is None:
            self.skipTest("the test Postgres's log is not the harness's")
        for table in ("lo_twice", "lo_twice_col"):
            with self.subTest(table=table):
                self.victim_twice(table, lambda key, token, table=table: self.c.request(
                    "PATCH", f"/v1/pg/{table}/{key}", {"set": {"note": "gateway"}}, {"Fence-Token": token}))

    def test_a_batch_chosen_as_a_deadlocks_victim_waits_before_it_runs_again(self):
        """The same scenario with a batch as the victim: it runs again once, 50 ms later, after the session's
        update committed, and is applied; one deadlock logged. Caught: the batch ran again at once, took the row
        back before the session, deadlocked a second time and answered 503 (two deadlocks logged)."""
        if pg_log_path() is None:
            self.skipTest("the test Postgres's log is not the harness's")
        for table in ("lo_twice", "lo_twice_col"):
            with self.subTest(table=table):
                self.victim_twice(table, lambda key, token, table=table: self.c.request(
                    "POST", "/v1/pg/batch",
                    {"ops": [{"op": "patch", "table": table, "key": str(key), "set": {"note": "gateway"}}]},
                    {"Fence-Token": token}))


if __name__ == "__main__":
    unittest.main()
