# SPDX-License-Identifier: Apache-2.0
"""Fenced writes to Redis keys: the stale-holder story, concurrent writers with interleaved fences,
prefixes, body and header rules, Prefer: return=minimal (204 without a body, as for Postgres), and the
audit record of every refusal, also while Postgres is down (the refusal waits in the Redis stream fg:audit
until the janitor copies it).

Broken variant caught: the Redis handlers answering every applied write 200 with its body, whatever
the Prefer header asked (test_return_minimal).

Owns: /v1/redis/{key}. Must not: test Postgres writes (test_pg_*.py) or the audit query's pagination.
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, Redis, psql, same_slot, services, slot_key, wait_for, write_fence_key  # noqa: E402

PREFIXES = ["app:", "cache/"]


def audit_rows(c, resource: str) -> list[dict]:
    """Audit records of resource, through GET /v1/audit/rejections (or the table, if that is missing)."""
    from urllib.parse import quote
    r = c.get(f"/v1/audit/rejections?resource={quote(resource, safe='')}&limit=1000")
    if r.status == 200:
        return r.body["items"]
    rows = psql("SELECT resource, lock_name, presented_fence, current_fence, coalesce(owner, ''), method, reason"
                " FROM fencegate.rejections WHERE resource = :'r' ORDER BY id", {"r": resource})
    keys = ("resource", "lock", "presented_fence", "current_fence", "owner", "method", "reason")
    return [dict(zip(keys, (int(v) if k.endswith("fence") else v for k, v in zip(keys, row.split("|")))))
            for row in rows]


class RedisWriteTest(GatewayTest):
    gateway_config = {"redis_prefixes": PREFIXES, "limits": {"max_hash_fields": 10000}}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.r = Redis()

    @classmethod
    def tearDownClass(cls):
        cls.r.close()
        super().tearDownClass()

    def lock(self, name: str, **fields) -> dict:
        r = self.c.post(f"/v1/locks/{name}/acquire", fields)
        self.assertEqual(r.status, 200, r)
        return r.body

    def write(self, method: str, key: str, token: str | None, body=None, owner: str | None = None,
              prefer: str | None = None):
        headers = {} if prefer is None else {"Prefer": prefer}
        if token is not None:
            headers["Fence-Token"] = token
        if owner is not None:
            headers["Fence-Owner"] = owner
        return self.c.request(method, "/v1/redis/" + key, body, headers)

    def test_stale_holder_story(self):
        key, name = same_slot("app:story/", "story")
        a = self.lock(name, ttl_ms=300)
        time.sleep(0.4)  # A pauses past its lease
        b = self.lock(name, ttl_ms=5000)
        self.assertGreater(b["fence"], a["fence"])
        r = self.write("PUT", key, b["token"], {"value": "from B"}, owner="B")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, {"applied": True, "resource": "redis:" + key, "fence": b["fence"], "value": "from B"})
        self.assertEqual(list(r.body), ["applied", "resource", "fence", "value"])
        # An owner of digits and colons: the refusal's audit fields travel packed as "<length>:<bytes>"
        # (lua/lib_rw.lua), which a reader splitting at the colons would misread.
        r = self.write("PUT", key, a["token"], {"value": "from A"}, owner="A:12:b c:")
        self.assertEqual(r.status, 409, r)
        self.assertEqual(r.body["type"], "/problems/stale_fence")
        self.assertEqual((r.body["presented_fence"], r.body["current_fence"], r.body["resource"]),
                         (a["fence"], b["fence"], "redis:" + key))
        self.assertEqual(self.c.get("/v1/redis/" + key).body, {"value": "from B", "fence": b["fence"]})
        self.assertEqual(self.r.cmd("GET", key), "from B")
        rows = wait_for(lambda: audit_rows(self.c, "redis:" + key), timeout=10, interval=0.05,
                        what="the audit record, which follows from the stream")
        self.assertEqual(len(rows), 1, rows)
        row = rows[0]
        self.assertEqual((row["presented_fence"], row["current_fence"], row["owner"], row["method"], row["reason"]),
                         (a["fence"], b["fence"], "A:12:b c:", "PUT", "stale_fence"))
        self.assertEqual(row.get("lock", row.get("lock_name")), name)

    def test_hash_patch_delete_and_get(self):
        key, skey, bkey, mkey, hash_lock, old_lock, new_lock = same_slot("app:h/", "app:h/s", "app:h/b", "app:h/m",
                                                                          "hash", "old", "new")
        tok = self.lock(hash_lock)["token"]
        r = self.write("PATCH", key, tok, {"fields": {"a": "1", "b": "2"}})
        self.assertEqual((r.status, r.body["fields"]), (200, {"a": "1", "b": "2"}), r)
        r = self.write("PATCH", key, tok, {"fields": {"a": None, "c": "3"}})
        self.assertEqual(r.body["fields"], {"a": None, "c": "3"}, r)  # what it wrote, not the whole hash
        fence = r.body["fence"]
        self.assertEqual(self.c.get("/v1/redis/" + key).body, {"fields": {"b": "2", "c": "3"}, "fence": fence})
        for bad in ({"fields": {"a": 1}}, {"fields": {"a": True}}, {"fields": {"a": ["x"]}}, {"fields": {}},
                    {"fields": "x"}, {}):
            r = self.write("PATCH", key, tok, bad)
            self.assertEqual((r.status, r.body["type"]), (400, "/problems/invalid_field"), (bad, r))
        # A patch that only deletes fields of a key that is not there: 404, and no fence is kept for it
        # (caught with rw_patch.lua storing the fence first: 200, and the key's fence answered by GET).
        r = self.write("PATCH", mkey, tok, {"fields": {"a": None}})
        self.assertEqual((r.status, r.body["type"]), (404, "/problems/not_found"), r)
        r = self.c.get("/v1/redis/" + mkey)
        self.assertEqual((r.status, r.body["fence"]), (404, None), r)
        r = self.write("PUT", skey, tok, {"value": "x"})
        self.assertEqual(r.status, 200)
        r = self.write("PATCH", skey, tok, {"fields": {"a": "1"}})  # a string is not a hash
        self.assertEqual((r.status, r.body["type"]), (409, "/problems/conflict"), r)
        self.r.cmd("SET", bkey, b"\xff\xfe not text")  # written around the gateway
        r = self.c.get("/v1/redis/" + bkey)
        self.assertEqual((r.status, r.body["type"]), (409, "/problems/conflict"), r)
        r = self.write("DELETE", key, tok)
        self.assertEqual((r.status, r.body["deleted"]), (200, True), r)
        r = self.c.get("/v1/redis/" + key)
        self.assertEqual((r.status, r.body["type"], r.body["fence"]), (404, "/problems/not_found", fence), r)
        # The fence outlives the key: a stale holder cannot bring it back.
        old = self.lock(old_lock)
        newer = self.lock(new_lock)
        self.assertEqual(self.write("PUT", key, newer["token"], {"value": "n"}).status, 200)
        self.assertEqual(self.write("DELETE", key, newer["token"]).status, 200)
        r = self.write("PUT", key, old["token"], {"value": "o"})
        self.assertEqual(r.status, 409, r)
        self.assertEqual(self.r.cmd("EXISTS", key), 0)

    def test_return_minimal(self):
        """Prefer: return=minimal on an applied PUT, PATCH or DELETE answers 204 with Preference-Applied and
        no body, and the write is in Redis (read around the gateway); a stale write with the preference is
        refused as usual, 409 with its problem body, and changes nothing."""
        key, hkey, old_lock, new_lock = same_slot("app:min/", "app:min/h", "min-old", "min-new")
        old, new = self.lock(old_lock), self.lock(new_lock)
        self.assertGreater(new["fence"], old["fence"])
        for method, k, body, prefer in (("PUT", key, {"value": "v1"}, "return=minimal"),
                                        ("PATCH", hkey, {"fields": {"a": "1", "b": "2"}}, "return=minimal"),
                                        ("PATCH", hkey, {"fields": {"a": None}}, 'handling=lenient, Return="minimal"'),
                                        ("PUT", key, {"value": "v2"}, "respond-async,return=minimal")):
            r = self.write(method, k, new["token"], body, prefer=prefer)
            self.assertEqual((r.status, r.raw), (204, b""), (method, body, r))
            self.assertEqual(r.headers.get("preference-applied"), "return=minimal", (method, r))
            self.assertNotIn("content-type", r.headers, (method, r))
        self.assertEqual(self.r.cmd("GET", key), "v2")
        self.assertEqual(self.r.cmd("HGETALL", hkey), ["b", "2"])
        self.assertEqual(int(self.r.cmd("GET", write_fence_key(key))), new["fence"])
        r = self.write("PUT", key, old["token"], {"value": "stale"}, prefer="return=minimal")
        self.assertEqual((r.status, r.body["type"]), (409, "/problems/stale_fence"), r)
        self.assertEqual((r.body["presented_fence"], r.body["current_fence"], r.body["resource"]),
                         (old["fence"], new["fence"], "redis:" + key))
        self.assertNotIn("preference-applied", r.headers)
        self.assertEqual(self.r.cmd("GET", key), "v2")
        r = self.write("DELETE", key, new["token"], prefer="return=minimal")
        self.assertEqual((r.status, r.raw, r.headers.get("preference-applied")), (204, b"", "return=minimal"), r)
        self.assertEqual(self.r.cmd("EXISTS", key), 0)
        r = self.write("PUT", key, new["token"], {"value": "v3"}, prefer="return=representation")
        self.assertEqual((r.status, r.body["value"]), (200, "v3"), r)  # another preference: the body as usual
        self.assertNotIn("preference-applied", r.headers)

    def test_a_patch_of_thousands_of_fields(self):
        """A PATCH hands its fields to rw_patch.lua as arguments, thousands of them (more than Lua's stack
        takes at once): every field set and every one deleted lands, counted against the cap exactly."""
        key, lock = same_slot("app:wide/", "wide")
        tok = self.lock(lock)["token"]
        old = {f"old{i}": "o" for i in range(2500)}
        self.r.cmd("HSET", key, *[x for pair in old.items() for x in pair])  # written around the gateway
        fields = {f"f{i}": f"v{i}" for i in range(8000)}
        fields.update({f"old{i}": None for i in range(1200)})
        fields["old7"] = "kept"  # set, not deleted: 1,199 deletions beside 8,001 fields set
        r = self.write("PATCH", key, tok, {"fields": fields})  # 2,500 + 8,001 > 10,000 were every field new
        self.assertEqual(r.status, 200, r)
        old.update(fields)
        flat = self.r.cmd("HGETALL", key)
        stored = dict(zip(flat[::2], flat[1::2]))
        self.assertEqual(stored, {name: value for name, value in old.items() if value is not None})
        self.assertEqual(len(stored), 9301)
        over = {f"g{i}": "v" for i in range(700)}  # 9,301 + 700 > 10,000: nothing written
        r = self.write("PATCH", key, tok, {"fields": over})
        self.assertEqual((r.status, r.body["type"]), (400, "/problems/invalid_field"), r)
        self.assertEqual(self.r.cmd("HLEN", key), 9301)

    def test_a_nul_byte_is_refused_on_write_and_answered_409_on_read(self):
        """A NUL byte is valid UTF-8, but the write side refuses it in a value and in a field's name or
        value, so a read of one written around the gateway answers 409 conflict, as one that is not UTF-8
        does, never a 500. Caught on the code before the fix: each of the three reads answered 500
        (rw_get.lua's reply "bad JSON: \\u0000 is not allowed without JSON_ALLOW_NUL")."""
        key, nul, nulf, nulv, lock = same_slot("app:nul/", "app:nul/s", "app:nul/f", "app:nul/v", "nul")
        tok = self.lock(lock)["token"]
        for method, body in (("PUT", {"value": "a\0b"}), ("PATCH", {"fields": {"a\0b": "v"}}),
                             ("PATCH", {"fields": {"f": "a\0b"}})):
            r = self.write(method, key, tok, body)
            self.assertEqual(r.status, 400, (method, body, r))
            self.assertIn(r.body["type"], ("/problems/invalid_json", "/problems/invalid_field"), r)
        self.assertEqual(self.r.cmd("EXISTS", key), 0)
        self.r.cmd("SET", nul, b"a\x00b")  # written around the gateway
        self.r.cmd("HSET", nulf, b"a\x00b", "v")
        self.r.cmd("HSET", nulv, "f", b"a\x00b")
        for k in (nul, nulf, nulv):
            r = self.c.get("/v1/redis/" + k)
            self.assertEqual((r.status, r.body["type"]), (409, "/problems/conflict"), (k, r))
            request_id = r.body["detail"].rsplit(" ", 1)[1].rstrip(")")  # the detail is logged, not answered
            logged = [line for line in self.gw.log_text().splitlines() if request_id in line]
            self.assertTrue(any("NUL" in line for line in logged), logged)

    def test_a_read_answers_by_the_keys_type(self):
        """rw_get.lua measures a string first, asks a hash's length only when that fails, and a key's type
        only when both fail: every kind of key still answers as its type says."""
        empty, lst, st, none, plain, lock = same_slot("app:kinds/", "app:kinds/l", "app:kinds/s", "app:kinds/n",
                                                      "app:kinds/p", "kinds")
        tok = self.lock(lock)["token"]
        r = self.write("PUT", empty, tok, {"value": ""})
        self.assertEqual(r.status, 200, r)
        r = self.c.get("/v1/redis/" + empty)
        self.assertEqual((r.status, r.body), (200, {"value": "", "fence": r.body.get("fence")}), r)
        self.assertIsInstance(r.body["fence"], int)
        self.r.cmd("RPUSH", lst, "a")  # written around the gateway
        self.r.cmd("SADD", st, "a")
        for key, kind in ((lst, "list"), (st, "set")):
            r = self.c.get("/v1/redis/" + key)
            self.assertEqual((r.status, r.body["type"]), (409, "/problems/conflict"), r)
            request_id = r.body["detail"].rsplit(" ", 1)[1].rstrip(")")  # the detail is logged, not answered
            logged = [line for line in self.gw.log_text().splitlines() if request_id in line]
            self.assertTrue(any(f"the key holds a {kind};" in line for line in logged), logged)
        r = self.c.get("/v1/redis/" + none)
        self.assertEqual((r.status, r.body["type"], r.body["fence"]), (404, "/problems/not_found", None), r)
        self.r.cmd("SET", plain, 'say "hi"\n')  # a string never written through the gateway: no fence
        self.assertEqual(self.c.get("/v1/redis/" + plain).body, {"value": 'say "hi"\n', "fence": None})
        for garbage in ("", "x"):  # a fence key written around the gateway is no fence
            self.r.cmd("SET", write_fence_key(plain), garbage)
            r = self.c.get("/v1/redis/" + plain)
            self.assertEqual((r.status, r.body), (200, {"value": 'say "hi"\n', "fence": None}), (garbage, r))

    def test_a_large_read_answers_whole(self):
        """Content over LARGE_READ_BYTES (8192, src/fglimits.h) is read again on the thread's own connection
        (lua/rw_get_large.lua): a string of 8193 bytes and a hash whose names and values come to more answer
        whole with their fence; a string over limits.max_value_bytes still answers 409 with its size. Caught:
        the look on the shared connection answered as the read ({"large": ...} taken for the key's type)."""
        text, fields, over, lock = same_slot("app:large/t", "app:large/h", "app:large/o", "large")
        tok = self.lock(lock)["token"]
        r = self.write("PUT", text, tok, {"value": "t" * 8193})
        self.assertEqual(r.status, 200, r)
        r = self.c.get("/v1/redis/" + text)
        self.assertEqual((r.status, r.body.get("value"), r.body.get("fence")), (200, "t" * 8193, r.body["fence"]))
        self.assertIsInstance(r.body["fence"], int)
        big = {f"f{i}": str(i) * 3000 for i in range(3)}
        r = self.write("PATCH", fields, tok, {"fields": big})
        self.assertEqual(r.status, 200, r)
        r = self.c.get("/v1/redis/" + fields)
        self.assertEqual((r.status, r.body.get("fields")), (200, big), r)
        self.r.cmd("SET", over, "o" * (65536 + 1))  # written around the gateway, over limits.max_value_bytes
        r = self.c.get("/v1/redis/" + over)
        self.assertEqual((r.status, r.body.get("type"), r.body.get("size")), (409, "/problems/conflict", 65537), r)

    def test_put_and_delete_leave_keys_of_other_types(self):
        """A PUT of a key that holds anything but a string (a hash, a list, a set, a sorted set, a stream), and a
        DELETE of one that holds neither a string nor a hash, answers 409 conflict and changes nothing: the key
        holds what it held, no fence is stored for it and no audit record is written (the scripts refuse before
        they raise the fence). Caught on the code before the fix: each PUT answered 200 and replaced the key
        with a string, each DELETE answered 200 and deleted it, and both stored the fence."""
        lock = same_slot("kinds-w")[0]
        names = same_slot("app:other/h", "app:other/l", "app:other/s", "app:other/z", "app:other/x", like=lock)
        made = {
            "hash": (names[0], ("HSET", "f", "v"), ("HGETALL",)),
            "list": (names[1], ("RPUSH", "1", "2"), ("LRANGE", 0, -1)),
            "set": (names[2], ("SADD", "m"), ("SMEMBERS",)),
            "zset": (names[3], ("ZADD", 1, "m"), ("ZRANGE", 0, -1, "WITHSCORES")),
            "stream": (names[4], ("XADD", "1-1", "f", "v"), ("XRANGE", "-", "+")),
        }
        tok = self.lock(lock)["token"]
        for kind, (key, write, read) in made.items():
            self.r.cmd(write[0], key, *write[1:])  # written around the gateway
            held = self.r.cmd(read[0], key, *read[1:])
            refused = [("PUT", {"value": "new"}, "a string")]
            if kind != "hash":  # a hash is the gateway's own: PATCH writes it, DELETE deletes it
                refused += [("DELETE", None, "a string or hash"), ("PATCH", {"fields": {"a": "b"}}, "a hash")]
            for method, body, want in refused:
                r = self.write(method, key, tok, body)
                self.assertEqual((r.status, r.body.get("type")), (409, "/problems/conflict"), (kind, method, r))
                request_id = r.body["detail"].rsplit(" ", 1)[1].rstrip(")")  # logged, not answered
                logged = [line for line in self.gw.log_text().splitlines() if request_id in line]
                self.assertTrue(any(f"holds a {kind}, not {want}" in line for line in logged), (kind, logged))
                self.assertEqual((self.r.cmd("TYPE", key), self.r.cmd(read[0], key, *read[1:])), (kind, held),
                                 (kind, method))
                self.assertEqual(self.r.cmd("EXISTS", write_fence_key(key)), 0, (kind, method))
        # No audit record, neither in the stream nor copied to Postgres (the stream's entries alternate names
        # and values).
        streamed = [fields[fields.index("resource") + 1]
                    for _, fields in self.r.cmd("XRANGE", slot_key("fg:audit", names[0]), "-", "+")]
        for key in names:
            self.assertNotIn("redis:" + key, streamed)
            self.assertEqual(audit_rows(self.c, "redis:" + key), [], key)
        # A hash is the gateway's own (PATCH writes it): a DELETE deletes it, as it does a string.
        r = self.write("DELETE", made["hash"][0], tok)
        self.assertEqual((r.status, r.body["deleted"]), (200, True), r)
        self.assertEqual(self.r.cmd("EXISTS", made["hash"][0]), 0)

    def test_keys_outside_the_prefixes_are_refused(self):
        tok = self.lock(same_slot("pref", like="cache/a/b/c")[0])["token"]
        for key in ("other:x", "fg:fence", "fg:rf:app:x", "fg:inst:x", "ap", "cache"):
            for method, body in (("PUT", {"value": "x"}), ("PATCH", {"fields": {"a": "b"}}), ("DELETE", None)):
                r = self.write(method, key, tok, body)
                self.assertEqual((r.status, r.body["type"]), (403, "/problems/forbidden"), (method, key, r))
            r = self.c.get("/v1/redis/" + key)
            self.assertEqual(r.status, 403, (key, r))
        self.assertEqual(self.r.cmd("GET", "other:x"), None)
        r = self.write("PUT", "cache/a/b/c", tok, {"value": "deep"})  # keys may hold '/'
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.r.cmd("GET", "cache/a/b/c"), "deep")

    def test_token_header_rules(self):
        key, lock_name, sem_name = same_slot("app:tok/", "tok", "s")
        lock = self.lock(lock_name)
        r = self.write("PUT", key, None, {"value": "x"})
        self.assertEqual((r.status, r.body["type"]), (400, "/problems/invalid_field"), r)
        forged = lock["token"].replace(".l.", ".l.9", 1)
        sig = lock["token"][-10]  # a character whose six bits are all signature bits
        altered = lock["token"][:-10] + ("B" if sig == "A" else "A") + lock["token"][-9:]
        for bad in (forged, altered, "garbage", "fgt1.l.999999.x.y.z"):
            r = self.write("PUT", key, bad, {"value": "x"})
            self.assertEqual((r.status, r.body["type"]), (403, "/problems/invalid_fence_token"), (bad, r))
        self.assertEqual(self.r.cmd("EXISTS", key, write_fence_key(key)), 0)
        for body in ({"value": 5}, {"value": None}, {}, "[1]", "{bad"):
            r = self.write("PUT", key, lock["token"], body)
            self.assertEqual(r.status, 400, (body, r))
        sem = self.c.post("/v1/semaphores/" + sem_name + "/acquire", {"limit": 2}).body
        r = self.write("PUT", key, sem["token"], {"value": "by semaphore holder"})  # any lease's token fences
        self.assertEqual((r.status, r.body["fence"]), (200, sem["fence"]), r)

    def test_concurrent_writers_with_interleaved_fences(self):
        key, *names = same_slot("app:race/", *[f"w{i}" for i in range(6)])
        tokens = [self.lock(name) for name in names]
        results, lock = [], threading.Lock()

        def writer(tok):
            with self.gw.client(timeout=30) as c:
                for seq in range(15):
                    sent = time.monotonic()
                    r = c.request("PUT", "/v1/redis/" + key, {"value": f"{tok['fence']}:{seq}"},
                                  {"Fence-Token": tok["token"]})
                    with lock:
                        results.append((sent, time.monotonic(), tok["fence"], seq, r))

        threads = [threading.Thread(target=writer, args=(t,)) for t in reversed(tokens)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(len(results), 6 * 15)
        accepted = [x for x in results if x[4].status == 200]
        refused = [x for x in results if x[4].status == 409]
        self.assertEqual(len(accepted) + len(refused), len(results), [x[4] for x in results if x[4].status
                                                                     not in (200, 409)])
        for x in refused:
            self.assertEqual(x[4].body["type"], "/problems/stale_fence")
            self.assertLess(x[4].body["presented_fence"], x[4].body["current_fence"])
        # Accepted fences never decrease: a write answered before another was sent was applied first.
        for a in accepted:
            for b in accepted:
                if a[1] < b[0]:
                    self.assertLessEqual(a[2], b[2], "an accepted write went back in fences")
        top = max(x[2] for x in accepted)
        last_seq = max(x[3] for x in accepted if x[2] == top)
        final = self.c.get("/v1/redis/" + key).body
        self.assertEqual(final, {"value": f"{top}:{last_seq}", "fence": top})
        self.assertEqual(top, max(t["fence"] for t in tokens), "the newest holder's writes must win")
        # A refusal is answered at once; its record follows from the audit stream.
        wait_for(lambda: len(audit_rows(self.c, "redis:" + key)) >= len(refused), timeout=30,
                 interval=0.2, what="the audit records drained from the stream")
        wait_for(lambda: self.r.cmd("XLEN", slot_key("fg:audit", key)) == 0, timeout=10, what="the stream emptied")
        rows = audit_rows(self.c, "redis:" + key)
        self.assertEqual(len(rows), len(refused), "one audit record per refusal")

    def test_refusal_is_recorded_while_postgres_is_down(self):
        if not os.environ.get("FG_SERVICES"):
            self.skipTest("FG_SERVICES not set: cannot stop Postgres")
        # One slot for all on a Redis Cluster: old's fence below new's, and the hash's slot written before the
        # outage (a slot's first write there reads its write floor and revoked set from Postgres).
        key, hkey, old_lock, new_lock = same_slot("app:pgdown/", "app:pgdown/h", "o", "n")
        old, new = self.lock(old_lock), self.lock(new_lock)
        self.assertEqual(self.write("PUT", key, new["token"], {"value": "new"}).status, 200)
        stream = slot_key("fg:audit", key)
        services("stop-pg")
        try:
            r = self.write("PATCH", hkey, new["token"], {"fields": {"f": "1"}})
            self.assertEqual(r.status, 200, r)  # Redis writes do not need Postgres
            r = self.write("PUT", key, old["token"], {"value": "old"})
            self.assertEqual(r.status, 409, r)
            self.assertEqual(self.r.cmd("XLEN", stream), 1)  # waiting in the stream
        finally:
            services("start-pg")
        rows = wait_for(lambda: audit_rows(self.c, "redis:" + key), timeout=30, interval=0.2,
                        what="the audit row drained from the stream")
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual((rows[0]["presented_fence"], rows[0]["current_fence"]), (old["fence"], new["fence"]))
        wait_for(lambda: self.r.cmd("XLEN", stream) == 0, timeout=10, what="the stream emptied")
        self.assertEqual(self.c.get("/v1/redis/" + key).body["value"], "new")


if __name__ == "__main__":
    unittest.main()
