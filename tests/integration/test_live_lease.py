# SPDX-License-Identifier: Apache-2.0
"""require_live_lease (docs/api.md "Writes under a live lease"): on a table or Redis prefix that requires it, a
write is applied only while the token's lease holds; otherwise 410 lease_lost, nothing changes, and one
audit record with reason lease_expired is kept. The fence rule still applies on top.

- the seed-003 story in strict mode: a holder with a 300 ms lease pauses 400 ms; nobody else takes the lock
  or writes; its late write is refused with 410 on the strict table and the strict Redis prefix, while the
  same late write on a table and a prefix without the option is accepted (the fence alone cannot refuse it:
  no higher fence was ever stored);
- a write while the lease holds goes through (locks and semaphores), a batch with an ended lease changes
  nothing, and a released lease counts as ended.

- a write that waits for its row (another transaction holds it) while its lease ends is refused when it gets
  the row, not committed: single writes on a default-mode and a fence_column table, and a batch; the same
  write whose lease holds throughout commits;
- a Redis write looks at its lease in its own script: one whose lease is released after the gateway took it up
  and before its script runs is refused (a proxy before Redis holds the script call back meanwhile), for a
  lock, a semaphore's first holder and one beside it; a semaphore holder beside another whose lease ran out
  is refused;
- the refusal and its audit record name the row as its reads do, with the fence stored for it: a numeric
  key's identity (12.50 is pg:live_ledger/12.5), and on a fence_column table the row's own fence.

Broken variants this file caught when tried: the check skipped for Redis prefixes (the late Redis write was
applied with 200); the refusal naming the key as sent and reading the fence from the fence table, as
before (pg:live_ledger/12.50 with current_fence 0; the fence_column row's current_fence 0).

Owns: require_live_lease. Must not: rely on a pause shorter than the lease it outlives.
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (Gateway, GatewayTest, TcpProxy, Redis, http, psql, same_slot,  # noqa: E402
                     skip_in_cluster, wait_for)
from pg_helpers import (INVOICE_COLUMNS, insert_invoice, invoice, open_transaction, quote,  # noqa: E402
                        records_listing, rejections, unique, wait_for_lock_waiter, write)

PLAIN_SQL = """
CREATE TABLE IF NOT EXISTS public.live_plain (id text PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.live_ledger (id numeric(20, 4) PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.live_col (id text PRIMARY KEY, note text, lock_fence bigint);
"""


class LiveLeaseTest(GatewayTest):
    gateway_config = {
        "tables": {"invoices": {"key": "id", "columns": INVOICE_COLUMNS, "require_live_lease": True},
                   "live_plain": {"key": "id", "columns": ["note"]},
                   "live_ledger": {"key": "id", "columns": ["note"], "require_live_lease": True},
                   "live_col": {"key": "id", "columns": ["note"], "fence_column": "lock_fence",
                                "require_live_lease": True}},
        "redis_prefixes": ["app:", {"prefix": "live:", "require_live_lease": True}]}

    @classmethod
    def setUpClass(cls):
        psql(PLAIN_SQL)  # the table first: the gateway reads its catalog at start-up
        super().setUpClass()

    def lease(self, ttl_ms=300, kind="locks", name=None, **extra):
        r = self.c.post(f"/v1/{kind}/{name or unique('live')}/acquire", {"ttl_ms": ttl_ms, **extra})
        self.assertEqual(r.status, 200, r)
        return r.body

    def assert_expired(self, r, resource):
        self.assertEqual(r.status, 410, r)
        self.assertEqual((r.body["type"], r.body["reason"], r.body["resource"]),
                         ("/problems/lease_lost", "lease_expired", resource), r)

    def test_seed_003_story_in_strict_mode(self):
        key = unique("inv")
        insert_invoice(key)
        psql("INSERT INTO public.live_plain (id) VALUES (:'k')", {"k": key})
        # app_key in the lease's slot on a Redis Cluster: no write floor there is above the lease's fence
        name, app_key = same_slot("live", "app:")
        lease = self.lease(ttl_ms=300, name=name)
        time.sleep(0.4)  # the pause: GC, a blocked event loop; nobody else takes the lock or writes
        t = lease["token"]
        self.assert_expired(write(self.c, "PATCH", "invoices", key, {"set": {"note": "late"}}, t),
                            f"pg:invoices/{key}")
        self.assertEqual(invoice(key)["note"], "")
        self.assertEqual([(a["reason"], a["presented_fence"]) for a in rejections(f"pg:invoices/{key}")],
                         [("lease_expired", lease["fence"])])
        self.assert_expired(self.c.request("PUT", f"/v1/redis/live:{key}", {"value": "late"}, {"Fence-Token": t}),
                            f"redis:live:{key}")
        with Redis() as rd:
            self.assertIsNone(rd.cmd("GET", f"live:{key}"))
        audit = self.c.get(f"/v1/audit/rejections?resource=redis:live:{key}").body["items"]
        self.assertEqual([a["reason"] for a in audit], ["lease_expired"])
        # without the option, the fence alone accepts the late write: nobody stored a higher fence
        self.assertEqual(write(self.c, "PATCH", "live_plain", key, {"set": {"note": "late"}}, t).status, 200)
        self.assertEqual(self.c.request("PUT", f"/v1/redis/{app_key}", {"value": "late"},
                                        {"Fence-Token": t}).status, 200)

    def test_writes_while_held_go_through(self):
        key = unique("inv")
        insert_invoice(key)
        # The Redis keys in the leases' slot on a Redis Cluster: no write floor there is above their fences.
        rkey, hkey, lock, sem_name = same_slot("live:inv", "live:invh", "live", "live")
        lease = self.lease(ttl_ms=10000, name=lock)
        h = {"Fence-Token": lease["token"]}
        self.assertEqual(write(self.c, "PATCH", "invoices", key, {"set": {"note": "ok"}}, lease["token"]).status, 200)
        self.assertEqual(self.c.request("PUT", f"/v1/redis/{rkey}", {"value": "ok"}, h).status, 200)
        sem = self.lease(ttl_ms=10000, kind="semaphores", name=sem_name, limit=2)
        r = self.c.request("PATCH", f"/v1/redis/{hkey}", {"fields": {"a": "1"}}, {"Fence-Token": sem["token"]})
        self.assertEqual(r.status, 200, r)

    def test_released_lease_and_batch(self):
        """docs/api.md "One record per refused request": a batch refused because its lease ended leaves one
        record, naming its first guarded row and listing every guarded row once (caught: one record per
        operation, the row patched twice recorded twice)."""
        key, other = unique("inv"), unique("inv")
        insert_invoice(key)
        insert_invoice(other)
        name = unique("live")
        lease = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 10000}).body
        self.assertEqual(write(self.c, "PATCH", "invoices", key, {"set": {"note": ""}}, lease["token"]).status, 200)
        self.assertEqual(self.c.post(f"/v1/locks/{name}/release", {"token": lease["token"]}).status, 200)
        ops = [{"op": "patch", "table": "invoices", "key": key, "set": {"note": "b"}},
               {"op": "patch", "table": "live_plain", "key": key, "set": {"note": "b"}},
               {"op": "patch", "table": "invoices", "key": other, "set": {"note": "b"}},
               {"op": "patch", "table": "invoices", "key": key, "set": {"note": "c"}}]
        r = self.c.request("POST", "/v1/pg/batch", {"ops": ops}, {"Fence-Token": lease["token"]})
        self.assert_expired(r, f"pg:invoices/{key}")
        self.assertEqual(invoice(key)["note"], "")
        self.assertEqual(records_listing(f"pg:invoices/{key}", f"pg:invoices/{other}"),
                         [{"resource": f"pg:invoices/{key}", "reason": "lease_expired",
                           "resources": [f"pg:invoices/{key}", f"pg:invoices/{other}"],
                           "current_fence": lease["fence"]}])
        self.assertEqual(self.c.request("DELETE", f"/v1/redis/live:{key}", None,
                                        {"Fence-Token": lease["token"]}).status, 410)

    def test_a_revoked_lease_is_refused_as_revoked(self):
        """A revoked lease's write on a strict table or prefix is refused as on any other: 410 with reason
        revoked, audited so (caught with the live-lease check refusing it first: reason lease_expired)."""
        self.assert_refused_as_revoked(forget_the_end=False)

    def test_a_revoked_lease_whose_end_redis_forgot_is_refused_as_revoked(self):
        """The same once Redis no longer tells how the lease ended (its record of ends is kept 10 minutes, and
        lost with Redis's data): the revocation is final, so the write is still refused and audited as
        revoked (caught with the check trusting Redis alone: reason lease_expired)."""
        self.assert_refused_as_revoked(forget_the_end=True)

    def assert_refused_as_revoked(self, forget_the_end: bool):
        key = unique("inv")
        insert_invoice(key)
        rkey, lock = same_slot("live:rv", "live")
        lease = self.lease(ttl_ms=30000, name=lock)
        self.assertEqual(self.c.post(f"/v1/locks/{lock}/revoke", {"reason": "test"}).status, 200)
        if forget_the_end:
            with Redis() as r:  # the lock's end record (its holder key) and its set of ends
                self.assertGreaterEqual(r.cmd("DEL", f"fg:lk:{{{lock}}}:h", f"fg:lk:{{{lock}}}:n"), 1)
        r = write(self.c, "PATCH", "invoices", key, {"set": {"note": "revoked"}}, lease["token"])
        self.assertEqual((r.status, r.body.get("reason")), (410, "revoked"), r)
        self.assertEqual([a["reason"] for a in rejections(f"pg:invoices/{key}")], ["revoked"])
        self.assertEqual(invoice(key)["note"], "")
        r = self.c.request("PUT", f"/v1/redis/{rkey}", {"value": "revoked"}, {"Fence-Token": lease["token"]})
        self.assertEqual((r.status, r.body.get("reason")), (410, "revoked"), r)
        audit = wait_for(lambda: self.c.get(f"/v1/audit/rejections?resource=redis:{rkey}").body["items"],
                         what="the Redis refusal's audit record")
        self.assertEqual([a["reason"] for a in audit], ["revoked"])

    @skip_in_cluster("its proxy stands before the one test Redis")
    def test_a_redis_write_looks_at_its_lease_in_its_own_script(self):
        """A gateway whose Redis connections pass through a proxy takes up a PUT on a strict prefix; the proxy
        holds its script call back while the lease is released through the test's gateway. The write is refused
        (410 lease_expired, nothing stored, one audit record), for a lock, a semaphore's first holder (kept in
        its limit key) and a holder beside it (in the holders' set). Failed before the script looked: the
        lease was asked just before the script call, and the write was applied with 200 after the release."""
        proxy = TcpProxy(int(os.environ["FG_TEST_REDIS_PORT"]), hold=b"fg_rw_put_")
        self.addCleanup(proxy.close)
        with Gateway(config=self.gateway_config, env_overrides={"FENCEGATE_REDIS_URL": proxy.redis_url}) as proxied:
            for case in ("lock", "first holder", "beside another"):
                with self.subTest(case=case):
                    key, name = unique("live:held"), unique("live")
                    if case == "lock":
                        path, lease = f"/v1/locks/{name}", self.lease(ttl_ms=30000, name=name)
                    else:
                        path, first = f"/v1/semaphores/{name}", self.lease(30000, "semaphores", name, limit=2)
                        lease = first if case == "first holder" else self.lease(30000, "semaphores", name, limit=2)
                    box: dict = {}
                    proxy.arm()

                    def put():
                        with proxied.client(timeout=60) as c:
                            box["r"] = c.request("PUT", f"/v1/redis/{key}", {"value": "late"},
                                                 {"Fence-Token": lease["token"]})
                    t = threading.Thread(target=put, daemon=True)
                    t.start()
                    self.assertTrue(proxy.held.wait(10), "the write's script call never came")
                    self.assertEqual(self.c.post(f"{path}/release", {"token": lease["token"]}).status, 200)
                    proxy.let_go()
                    t.join(15)
                    self.assert_expired(box["r"], f"redis:{key}")
                    with Redis() as rd:
                        self.assertIsNone(rd.cmd("GET", key))
                    audit = self.c.get(f"/v1/audit/rejections?resource=redis:{key}").body["items"]
                    self.assertEqual([a["reason"] for a in audit], ["lease_expired"])

    def test_a_semaphore_holder_beside_another_whose_lease_ran_out_is_refused(self):
        """A semaphore of 2: the first holder's lease holds, the second's (300 ms) runs out and stays in the
        holders' set until the next transition. The second's Redis write on a strict prefix is refused; the
        first's goes through (caught with the script taking a lease in the holders' set for live whatever its
        expiry: the late write was applied)."""
        key, name = same_slot("live:sem", "live")
        first = self.lease(30000, "semaphores", name, limit=2)
        late = self.lease(300, "semaphores", name, limit=2)
        time.sleep(0.4)
        self.assert_expired(self.c.request("PUT", f"/v1/redis/{key}", {"value": "late"},
                                           {"Fence-Token": late["token"]}), f"redis:{key}")
        r = self.c.request("PUT", f"/v1/redis/{key}", {"value": "held"}, {"Fence-Token": first["token"]})
        self.assertEqual(r.status, 200, r)

    def test_the_check_leaves_no_watch_behind(self):
        """The check of a Postgres write asks Redis with the watch script, which marks a lock watched only for
        a watcher that waits: a release after the write publishes no end nobody watches (caught with the
        check marking the lock watched for ten seconds: the release was published to every gateway)."""
        key = unique("inv")
        insert_invoice(key)
        name = unique("live")
        with Redis() as news:
            news.hear(name, "fg:ended", "fg:ended")
            lease = self.lease(ttl_ms=10000, name=name)
            r = write(self.c, "PATCH", "invoices", key, {"set": {"note": "ok"}}, lease["token"])
            self.assertEqual(r.status, 200, r)
            self.assertEqual(self.c.post(f"/v1/locks/{name}/release", {"token": lease["token"]}).status, 200)
            heard = [m for _, m in news.messages(0.3) if m.endswith("|" + name)]
        self.assertEqual(heard, [])

    def test_the_refusal_names_the_row_and_its_stored_fence(self):
        key = unique("col")
        held = self.lease(ttl_ms=10000)
        number = str(int(time.time() * 1000) % 100000000)
        for table, written, refused, resource in (
                ("live_ledger", f"{number}.5", f"{number}.50", f"pg:live_ledger/{number}.5"),
                ("live_col", key, key, f"pg:live_col/{key}")):
            with self.subTest(table=table):
                r = self.c.request("PUT", f"/v1/pg/{table}/{written}", {"row": {"note": "held"}},
                                   {"Fence-Token": held["token"]})
                self.assertEqual(r.status, 200, r)
                late = self.lease(ttl_ms=300)
                time.sleep(0.4)
                r = write(self.c, "PATCH", table, refused, {"set": {"note": "late"}}, late["token"])
                self.assert_expired(r, resource)
                audit = [(a["reason"], a["presented_fence"], a["current_fence"]) for a in rejections(resource)]
                self.assertEqual(audit, [("lease_expired", late["fence"], held["fence"])])

    def test_a_write_that_waits_for_its_row_commits_only_while_its_lease_holds(self):
        """docs/api.md "Writes under a live lease": the lease is asked once the write's statement has its row,
        before the commit. A PATCH waits for its row, which another transaction holds; meanwhile its lease is
        released and the next holder takes the lock; when the row comes free the write is refused (410
        lease_expired, one audit record) and the row keeps its note. With the lease held throughout, the same
        wait ends in a commit. Failed before the fix (the lease asked only before the statement): the late
        PATCH answered 200 and wrote its note under the next holder's lock, on both tables and in a batch."""
        for table, shape in (("invoices", "single"), ("live_col", "single"), ("invoices", "batch")):
            for released in (True, False):
                with self.subTest(table=table, shape=shape, released=released):
                    self.assert_waiting_write(table, shape, released)

    def assert_waiting_write(self, table: str, shape: str, released: bool):
        key, name = unique("wait"), unique("live-wait")
        if table == "invoices":
            insert_invoice(key, note="before")
        else:
            psql(f"INSERT INTO public.{table} (id, note) VALUES (:'k', 'before')", {"k": key})
        lease = self.lease(ttl_ms=30000, name=name)
        if shape == "batch":
            path, body = "/v1/pg/batch", {"ops": [{"op": "patch", "table": table, "key": key,
                                                   "set": {"note": "late"}}]}
            method = "POST"
        else:
            path, body, method = f"/v1/pg/{table}/{quote(key)}", {"set": {"note": "late"}}, "PATCH"
        row_lock = open_transaction(f"DO $$ BEGIN PERFORM 1 FROM public.{table} WHERE id = '{key}' FOR UPDATE; END $$;")
        got = {}
        writer = threading.Thread(target=lambda: got.setdefault("write", http(
            method, self.gw.base + path, body, headers={"Fence-Token": lease["token"]}, timeout=30)))
        try:
            writer.start()
            wait_for_lock_waiter()
            if released:
                self.assertEqual(self.c.post(f"/v1/locks/{name}/release", {"token": lease["token"]}).status, 200)
                self.lease(ttl_ms=30000, name=name)  # the next holder
        finally:
            row_lock.communicate("COMMIT;\n", timeout=10)
        writer.join(30)
        resource = f"pg:{table}/{key}"
        note = psql(f"SELECT note FROM public.{table} WHERE id = :'k'", {"k": key})[0]
        if not released:
            self.assertEqual(got["write"].status, 200, got)
            self.assertEqual(note, "late")
            self.assertEqual(rejections(resource), [])
            return
        self.assert_expired(got["write"], resource)
        self.assertEqual(note, "before")
        self.assertEqual([(a["reason"], a["presented_fence"]) for a in rejections(resource)],
                         [("lease_expired", lease["fence"])])


class OnePoolConnectionTest(LiveLeaseTest):
    """The same with one Postgres connection in the pool: a write asks about its lease while it holds its
    connection (and, before the commit, its rows), so a lease that ended is looked up among the revocations
    on that connection, never on a second one. Failed before the fix (the look-up took a connection of the
    pool): the writes of an ended lease waited for a connection they held themselves and answered 503 after
    5 s, every other Postgres request of the gateway waiting meanwhile."""
    gateway_env = {"FENCEGATE_PG_POOL_SIZE": "1"}


if __name__ == "__main__":
    unittest.main()
