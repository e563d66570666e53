# SPDX-License-Identifier: Apache-2.0
"""GET /v1/locks and GET /v1/semaphores: paged listings of live leases by name prefix.

Owns: what a listing shows (holder owner, fence, time left, waiters; semaphore holders and limit; never a
token), keyset paging by name with a cursor, that idle locks leave the listing and its index, that one call
looks at a bounded number of index entries whatever the index holds, and the 400s of bad arguments.
Must not: depend on other tests' locks (every test works under a prefix of its own).
"""

import hashlib
import os
import sys
import threading
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, Redis, cluster_mode, skip_in_cluster, slot_key, wait_for, warm_semaphore_slot  # noqa: E402
from lock_helpers import acquire, assert_problem, release, wait_for_waiting  # noqa: E402

LOCK_INDEX = "fg:idx:lk"


def fresh_prefix(tag: str) -> str:
    return f"list-{tag}-{uuid.uuid4().hex[:8]}:"


def add_to_index(redis, names: list[str]) -> None:
    """Puts names into the locks' listing index, a thousand a call, as names with no lease: idle."""
    for i in range(0, len(names), 1000):
        args = []
        for n in names[i:i + 1000]:
            args += [0, n]
        redis.cmd("ZADD", LOCK_INDEX, *args)


def drop_from_index(redis, prefix: str) -> None:
    """Takes the names under prefix out of the locks' listing index: a test's idle names left there would
    make the janitor's passes of the next tests on the same Redis walk them first."""
    redis.cmd("ZREMRANGEBYLEX", LOCK_INDEX, f"[{prefix}", f"[{prefix}\xff")


def list_all(c, route: str, prefix: str, limit: int) -> tuple[list, int]:
    """Every item under prefix, page by page; returns (items, pages)."""
    items, cursor, pages = [], None, 0
    while True:
        q = f"{route}?prefix={prefix}&limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        r = c.get(q)
        assert r.status == 200, r
        assert len(r.body["items"]) <= limit, r
        items += r.body["items"]
        pages += 1
        cursor = r.body["next_cursor"]
        if cursor is None:
            return items, pages
        assert pages < 100, "the cursor never ended"


class LockListTest(GatewayTest):
    def test_held_lock_shows_owner_fence_time_left_and_waiters_but_no_token(self):
        prefix = fresh_prefix("held")
        name = prefix + "invoice:42"
        with self.gw.client() as c:
            held = acquire(c, name, ttl_ms=30000, owner="billing-7")
            self.assertEqual(held.status, 200, held)
            done = []

            def wait():
                with self.gw.client(timeout=30) as w:
                    done.append(acquire(w, name, wait_ms=20000, owner="billing-8"))

            waiter = threading.Thread(target=wait, daemon=True)
            waiter.start()
            wait_for_waiting(c, name, 1)
            r = c.get(f"/v1/locks?prefix={prefix}")
            self.assertEqual(r.status, 200, r)
            self.assertNotIn(held.body["token"].encode(), r.raw, "a listing must never show a token")
            self.assertIsNone(r.body["next_cursor"])
            [item] = r.body["items"]
            self.assertEqual(item["lock"], name)
            self.assertEqual((item["held"], item["owner"], item["fence"], item["waiting"]),
                             (True, "billing-7", held.body["fence"], 1))
            self.assertTrue(0 < item["expires_in_ms"] <= 30000, item)
            self.assertEqual(release(c, name, held.body["token"]).status, 200)
            waiter.join(20)
            self.assertEqual(done[0].status, 200, done)
            [item] = c.get(f"/v1/locks?prefix={prefix}").body["items"]
            self.assertEqual((item["owner"], item["waiting"]), ("billing-8", 0))
            self.assertEqual(release(c, name, done[0].body["token"]).status, 200)
            self.assertEqual(c.get(f"/v1/locks?prefix={prefix}").body["items"], [])

    def test_pages_cover_every_live_lock_once_in_name_order(self):
        prefix = fresh_prefix("pages")
        names = [f"{prefix}{i:02d}" for i in range(11)]
        tokens = {}
        with self.gw.client() as c:
            for n in names:
                r = acquire(c, n, ttl_ms=30000)
                self.assertEqual(r.status, 200, r)
                tokens[n] = r.body["token"]
            # A lock of another prefix and a released one never show up.
            other = acquire(c, fresh_prefix("other") + "x", ttl_ms=30000)
            self.assertEqual(release(c, names[5], tokens.pop(names[5])).status, 200)
            items, pages = list_all(c, "/v1/locks", prefix, 3)
            self.assertEqual([i["lock"] for i in items], sorted(tokens))
            self.assertGreaterEqual(pages, 4)
            self.assertTrue(all(i["held"] for i in items))
            everything = c.get("/v1/locks?limit=1000").body["items"]
            self.assertIn(other.body["lock"], [i["lock"] for i in everything])
            for n, t in tokens.items():
                self.assertEqual(release(c, n, t).status, 200)

    def test_released_and_expired_locks_leave_the_index(self):
        prefix = fresh_prefix("idle")
        redis = Redis()
        released, expired = prefix + "released", prefix + "expired"
        with self.gw.client() as c:
            r = acquire(c, released)
            self.assertIsNotNone(redis.cmd("ZSCORE", slot_key(LOCK_INDEX, released), released))
            self.assertEqual(release(c, released, r.body["token"]).status, 200)
            self.assertIsNone(redis.cmd("ZSCORE", slot_key(LOCK_INDEX, released), released),
                              "a release that leaves the lock idle drops it from the index")
            self.assertEqual(acquire(c, expired, ttl_ms=100).status, 200)
            wait_for(lambda: c.get(f"/v1/locks/{expired}").body["held"] is False, timeout=10)
            self.assertEqual(c.get(f"/v1/locks?prefix={prefix}").body["items"], [])
            self.assertIsNone(redis.cmd("ZSCORE", slot_key(LOCK_INDEX, expired), expired),
                              "a listing that passes over an idle name drops it")

    def test_a_waiter_behind_an_unreadable_holder_record_brings_its_lock_back(self):
        """A holder record of no layout this gateway reads (a newer gateway's, while gateways are replaced)
        looks idle to a listing, which drops the name from the index; the first waiter that queues behind it
        puts the name back, so the listing shows the lock and its waiter. Caught: a queue join that left the
        index alone whenever the lock was held."""
        prefix = fresh_prefix("unread")
        name = prefix + "x"
        redis = Redis()
        with self.gw.client() as c:
            held = acquire(c, name, ttl_ms=30000)
            self.assertEqual(held.status, 200, held)
            holder = f"fg:lk:{{{name}}}:h"
            self.assertEqual(redis.cmd("SET", holder, "v9|a layout of later|x", "PX", "30000"), "OK")
            self.assertEqual(c.get(f"/v1/locks?prefix={prefix}").body["items"], [])
            self.assertIsNone(redis.cmd("ZSCORE", slot_key(LOCK_INDEX, name), name))
            done = []

            def wait():
                with self.gw.client(timeout=30) as w:
                    done.append(acquire(w, name, wait_ms=20000))

            waiter = threading.Thread(target=wait, daemon=True)
            waiter.start()
            wait_for_waiting(c, name, 1)
            items = c.get(f"/v1/locks?prefix={prefix}").body["items"]
            self.assertEqual([(i["lock"], i["held"], i["waiting"]) for i in items], [(name, False, 1)])
            redis.cmd("DEL", holder)
            waiter.join(20)
            self.assertEqual(done[0].status, 200, done)
            self.assertEqual(release(c, name, done[0].body["token"]).status, 200)

    @skip_in_cluster("it fills the one listing index fg:idx:lk; a cluster has one per slot")
    def test_one_call_looks_at_a_bounded_part_of_the_index(self):
        """20,000 idle names in the index: a call must look at a bounded number of them (it prunes what it
        looks at, so the index shrinks by at most 2 * limit + 100, plus what a janitor pass may drop
        meanwhile) and hand back a cursor; following the
        cursor reaches the live lock behind them. Caught: a script without the LIMIT on ZRANGEBYLEX pruned
        all 20,000 in one call."""
        prefix = fresh_prefix("bound")
        redis = Redis()
        self.addCleanup(drop_from_index, redis, prefix)  # the names the listing and the janitor left
        add_to_index(redis, [f"{prefix}a{i:05d}" for i in range(20000)])
        with self.gw.client() as c:
            live = prefix + "z-live"
            held = acquire(c, live, ttl_ms=30000)
            r = c.get(f"/v1/locks?prefix={prefix}&limit=10")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body["items"], [])
            self.assertIsNotNone(r.body["next_cursor"])
            # The call looks at 2 * limit + 100 names at most (what its answer shows: it stopped short of the live
            # lock); the janitor, finding the index full of idle names, drops any number of them meanwhile.
            items, pages = list_all(c, "/v1/locks", prefix, 1000)
            self.assertEqual([i["lock"] for i in items], [live])
            self.assertGreater(pages, 1)
            self.assertEqual(release(c, live, held.body["token"]).status, 200)

    @skip_in_cluster("it fills the one listing index fg:idx:lk; a cluster has one per slot")
    def test_the_janitor_keeps_up_with_names_made_faster_than_a_pass(self):
        """Found by the resource-exhaustion pass: a name whose last lease expired unreleased stays in the
        listing index (no time to live) until a janitor pass drops it, 500 names every 5 s, so one client
        making more than 100 such names a second grew the index without bound. The janitor now runs its
        passes back to back while they keep finding idle names. 5,000 idle names (a client's 50 s of the
        old pace) must be gone within 20 s: the next pass may be 5 s away, and the passes walk the rest of
        the shared test index too, at about 5,000 names a second. Failed before the fix: 4,500 or more were
        left."""
        prefix = fresh_prefix("pace")
        redis = Redis()
        self.addCleanup(drop_from_index, redis, prefix)
        add_to_index(redis, [f"{prefix}{i:05d}" for i in range(5000)])

        def left() -> int:
            return redis.cmd("ZLEXCOUNT", LOCK_INDEX, f"[{prefix}", f"[{prefix}\xff")

        try:
            wait_for(lambda: left() == 0, timeout=20, what="the idle names pruned")
        finally:
            self.assertEqual(left(), 0, "idle names left in the index")

    def test_bad_arguments_answer_400_invalid_field(self):
        with self.gw.client() as c:
            for query in ("limit=0", "limit=1001", "limit=abc", "limit=-1", "prefix=a%20b", "prefix=" + "a" * 201,
                          "cursor=bad%20cursor", "prefix=%zz"):
                for route in ("/v1/locks", "/v1/semaphores"):
                    body = assert_problem(self, c.get(f"{route}?{query}"), 400, "invalid_field")
                    self.assertTrue(any(w in body["detail"] for w in ("limit", "prefix", "cursor")), body)


def key_entry(key_id: str, scopes: list[str]) -> dict:
    return {"id": key_id, "sha256": hashlib.sha256(f"text-{key_id}".encode()).hexdigest(), "scopes": scopes}


def bearer(key_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer text-{key_id}"}


class ScopedListTest(unittest.TestCase):
    def test_a_key_sees_only_the_names_its_scopes_match(self):
        """Caught: a handler that did not filter (key-a saw the b: lock and the semaphore)."""
        p = fresh_prefix("scoped")
        auth = {"mode": "required", "keys": [
            key_entry("root", ["admin"]),
            key_entry("a", [f"lock:{p}a:*"]),
            key_entry("sems", [f"semaphore:{p}*"]),
            key_entry("none", ["audit:read"])]}
        with Gateway(config={"auth": auth}) as gw, gw.client() as c:
            root = bearer("root")
            tokens = {}
            for name in (f"{p}a:1", f"{p}a:2", f"{p}b:1"):
                r = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000}, headers=root)
                self.assertEqual(r.status, 200, r)
                tokens[name] = r.body["token"]
            sem = c.post(f"/v1/semaphores/{p}s/acquire", {"limit": 1, "ttl_ms": 30000}, headers=root)
            self.assertEqual(sem.status, 200, sem)

            def names(route, key, limit=100):
                items, cursor = [], None
                while True:
                    q = f"{route}?prefix={p}&limit={limit}" + (f"&cursor={cursor}" if cursor else "")
                    r = c.get(q, headers=bearer(key))
                    self.assertEqual(r.status, 200, r)
                    items += [i.get("lock") or i.get("semaphore") for i in r.body["items"]]
                    cursor = r.body["next_cursor"]
                    if cursor is None:
                        return items

            self.assertEqual(names("/v1/locks", "root"), [f"{p}a:1", f"{p}a:2", f"{p}b:1"])
            self.assertEqual(names("/v1/locks", "a"), [f"{p}a:1", f"{p}a:2"])
            self.assertEqual(names("/v1/locks", "a", limit=1), [f"{p}a:1", f"{p}a:2"])
            self.assertEqual(names("/v1/locks", "sems"), [])
            self.assertEqual(names("/v1/semaphores", "sems"), [f"{p}s"])
            self.assertEqual(names("/v1/semaphores", "a"), [])
            self.assertEqual(names("/v1/locks", "none"), [])
            self.assertEqual(c.get("/v1/locks").status, 401)
            for name, token in tokens.items():
                c.post(f"/v1/locks/{name}/release", {"token": token}, headers=root)
            c.post(f"/v1/semaphores/{p}s/release", {"token": sem.body["token"]}, headers=root)


    def test_names_out_of_scope_leave_no_trace(self):
        """A page is read only in the ranges of names the key's scopes cover: no short page with a cursor
        for names the key may not see (docs/api.md, "Listing leases"). Caught: a handler that filtered the
        page read for all names (key "none" got an empty page with a cursor, key "exact" three pages)."""
        p = fresh_prefix("trace")
        auth = {"mode": "required", "keys": [
            key_entry("root", ["admin"]),
            key_entry("exact", [f"lock:{p}a:1", f"lock:{p}c:*"]),
            key_entry("none", [f"lock:{p}q:*", f"semaphore:{p}*"]),
            key_entry("inner", [f"lock:{p}*:1"])]}
        with Gateway(config={"auth": auth}) as gw, gw.client() as c:
            root = bearer("root")
            tokens = {}
            for name in (f"{p}a:1", f"{p}a:10", f"{p}b:1", f"{p}b:2", f"{p}c:1", f"{p}z:1"):
                r = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}, headers=root)
                self.assertEqual(r.status, 200, r)
                tokens[name] = r.body["token"]

            def pages(key, limit):
                out, cursor = [], None
                while len(out) < 20:
                    q = f"/v1/locks?prefix={p}&limit={limit}" + (f"&cursor={cursor}" if cursor else "")
                    r = c.get(q, headers=bearer(key))
                    self.assertEqual(r.status, 200, r)
                    out.append([i["lock"] for i in r.body["items"]])
                    cursor = r.body["next_cursor"]
                    if cursor is None:
                        # A cluster's page may go on where a slot may hold more (docs/api.md): an empty last
                        # page of a range the key may see.
                        return out[:-1] if cluster_mode() and len(out) > 1 and not out[-1] else out
                self.fail(f"{key}: no last page in {out}")

            self.assertEqual(pages("exact", 1), [[f"{p}a:1"], [f"{p}c:1"]])
            self.assertEqual(pages("exact", 2), [[f"{p}a:1", f"{p}c:1"]])
            self.assertEqual(pages("exact", 100), [[f"{p}a:1", f"{p}c:1"]])
            for limit in (1, 100):
                self.assertEqual(pages("none", limit), [[]])
            # A '*' before the end: the range is every name that starts like the pattern; pages may be short.
            seen = [n for page in pages("inner", 1) for n in page]
            self.assertEqual(seen, [f"{p}a:1", f"{p}b:1", f"{p}c:1", f"{p}z:1"])
            self.assertEqual(pages("root", 3), [[f"{p}a:1", f"{p}a:10", f"{p}b:1"],
                                                [f"{p}b:2", f"{p}c:1", f"{p}z:1"]])
            for name, token in tokens.items():
                c.post(f"/v1/locks/{name}/release", {"token": token}, headers=root)

    def test_a_page_never_stops_among_names_the_key_may_not_see(self):
        """A key whose pattern has a '*' before its end reads a range holding names it may not see; a page
        that stopped among them (its cursor sealed one of them, or it came short just past one) was an
        oracle: the key names a lock of its own that sorts just after the last name it saw and looks
        whether a later page shows it, which tells whether that name sorts before the place the page
        stopped at. Seven such probes a character spelled out a sealed name the key may not see (found by
        an adversarial pass: `acct-08:secret-customer-352` in about 400 calls). A page now reads on until
        it is full or its range ends, so what it answers depends on the names the key may see alone.
        Caught before the fix: after `a:eu` the key got an empty page with a cursor (the first nine of
        the root's thirty names read past), and the probe `a:eu-0:eu` it then made never showed."""
        p = fresh_prefix("oracle")
        auth = {"mode": "required", "keys": [key_entry("root", ["admin"]), key_entry("inner", [f"lock:{p}*:eu"])]}
        with Gateway(config={"auth": auth}) as gw, gw.client() as c:
            root, inner = bearer("root"), bearer("inner")
            held = {}
            for i in range(30):
                r = c.post(f"/v1/locks/{p}h{i:02d}:secret/acquire", {"ttl_ms": 60000}, headers=root)
                self.assertEqual(r.status, 200, r)
                held[r.body["lock"]] = (r.body["token"], root)

            def take(name):
                r = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}, headers=inner)
                self.assertEqual(r.status, 200, r)
                held[name] = (r.body["token"], inner)

            own = [f"{p}a:eu", f"{p}z:eu"]
            for name in own:
                take(name)
            shown, probes, cursor = [], [], None
            for _ in range(40):
                q = f"/v1/locks?prefix={p}&limit=1" + (f"&cursor={cursor}" if cursor else "")
                r = c.get(q, headers=inner)
                self.assertEqual(r.status, 200, r)
                shown += [i["lock"] for i in r.body["items"]]
                cursor = r.body["next_cursor"]
                if cursor is None:
                    break
                if not r.body["items"] and shown:
                    # A name of its own right after the last it saw: a later page must show it.
                    probes.append(f"{shown[-1]}-{len(probes)}:eu")
                    take(probes[-1])
            self.assertIsNone(cursor, "the pages never ended")
            self.assertEqual(shown, sorted(own + probes))
            self.assertEqual(probes, [], "a page stopped among names the key may not see")
            for name, (token, key) in held.items():
                c.post(f"/v1/locks/{name}/release", {"token": token}, headers=key)

    def test_a_cursor_serves_the_listing_and_the_key_it_was_made_for(self):
        """A cursor of another key may sit at a name this key may not see, and would tell where that name
        sorts (a lock of its own named after it shows on the next page or not); a cursor of the other
        listing is no position of this one. Both answer 400 as a forged cursor does. Caught before the
        fix: key "a" continued the listing of key "root" after `b:1`, and the semaphores after a lock."""
        p = fresh_prefix("bound")
        auth = {"mode": "required", "keys": [
            key_entry("root", ["admin"]), key_entry("a", [f"lock:{p}*", f"semaphore:{p}*"]),
            key_entry("b", [f"lock:{p}a:*"])]}
        with Gateway(config={"auth": auth}) as gw, gw.client() as c:
            root = bearer("root")
            tokens = {}
            for name in (f"{p}a:1", f"{p}b:1", f"{p}c:1"):
                r = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}, headers=root)
                self.assertEqual(r.status, 200, r)
                tokens[name] = r.body["token"]
            r = c.get(f"/v1/locks?prefix={p}&limit=2", headers=root)
            self.assertEqual([i["lock"] for i in r.body["items"]], [f"{p}a:1", f"{p}b:1"], r)
            roots = r.body["next_cursor"]
            r = c.get(f"/v1/locks?prefix={p}&limit=1", headers=bearer("a"))
            self.assertEqual([i["lock"] for i in r.body["items"]], [f"{p}a:1"], r)
            own = r.body["next_cursor"]
            self.assertIsNotNone(own)
            # The key's own cursor goes on; root's, and its own on the semaphores, are refused.
            r = c.get(f"/v1/locks?prefix={p}&limit=1&cursor={own}", headers=bearer("a"))
            self.assertEqual([i["lock"] for i in r.body["items"]], [f"{p}b:1"], r)
            for key, route, cursor in (("a", "/v1/locks", roots), ("b", "/v1/locks", roots),
                                       ("b", "/v1/locks", own), ("a", "/v1/semaphores", own)):
                body = assert_problem(self, c.get(f"{route}?prefix={p}&cursor={cursor}", headers=bearer(key)),
                                      400, "invalid_field")
                self.assertIn("cursor", body["detail"])
            for name, token in tokens.items():
                c.post(f"/v1/locks/{name}/release", {"token": token}, headers=root)


class SemaphoreListTest(unittest.TestCase):
    def test_semaphore_shows_limit_holders_waiters_and_their_fences(self):
        prefix = fresh_prefix("sem")
        name = prefix + "exporters"
        with Gateway() as gw, gw.client() as c:
            # The first holder, which the first try keeps in the limit key (lua/lib_sem.lua), is listed too.
            warm_semaphore_slot(c, name)
            held = [c.post(f"/v1/semaphores/{name}/acquire", {"limit": 2, "owner": "exp-0", "ttl_ms": 30000})]
            self.assertTrue(Redis().cmd("GET", f"fg:sm:{{{name}}}:l").startswith("="))
            [item] = c.get(f"/v1/semaphores?prefix={prefix}").body["items"]
            self.assertEqual((item["limit"], item["holders"], item["waiting"]), (2, 1, 0), item)
            self.assertEqual([(x["fence"], x["owner"]) for x in item["leases"]], [(held[0].body["fence"], "exp-0")])
            self.assertTrue(0 < item["leases"][0]["expires_in_ms"] <= 30000, item)
            held.append(c.post(f"/v1/semaphores/{name}/acquire", {"limit": 2, "owner": "exp-1", "ttl_ms": 30000}))
            self.assertEqual([h.status for h in held], [200, 200], held)
            done = []

            def wait():
                with gw.client(timeout=30) as w:
                    done.append(w.post(f"/v1/semaphores/{name}/acquire", {"limit": 2, "wait_ms": 20000}))

            t = threading.Thread(target=wait, daemon=True)
            t.start()
            wait_for(lambda: c.get(f"/v1/semaphores/{name}").body["waiting"] == 1, timeout=15)
            r = c.get(f"/v1/semaphores?prefix={prefix}")
            self.assertEqual(r.status, 200, r)
            for h in held:
                self.assertNotIn(h.body["token"].encode(), r.raw)
            [item] = r.body["items"]
            self.assertEqual((item["semaphore"], item["limit"], item["holders"], item["waiting"]), (name, 2, 2, 1))
            self.assertEqual(sorted((x["fence"], x["owner"]) for x in item["leases"]),
                             sorted((h.body["fence"], f"exp-{i}") for i, h in enumerate(held)))
            self.assertTrue(all(0 < x["expires_in_ms"] <= 30000 for x in item["leases"]), item)
            for h in held:
                c.post(f"/v1/semaphores/{name}/release", {"token": h.body["token"]})
            t.join(20)
            c.post(f"/v1/semaphores/{name}/release", {"token": done[0].body["token"]})
            self.assertEqual(c.get(f"/v1/semaphores?prefix={prefix}").body,
                             {"items": [], "next_cursor": None})
            self.assertIsNone(Redis().cmd("ZSCORE", slot_key("fg:idx:sm", name), name))


if __name__ == "__main__":
    unittest.main()
