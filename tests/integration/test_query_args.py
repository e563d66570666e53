# SPDX-License-Identifier: Apache-2.0
"""How every route reads its query (docs/api.md "Conventions" and "Strict requests"): names and values
decoded once, the form way ('+' a space, %XX a byte), whatever route reads them; a malformed escape, a NUL or
text that is not UTF-8 refused naming the parameter; a parameter given twice refused; an empty value absent;
every refusal worded "query parameter 'x' ...".

Failed on the code before the fix: the status route, its watch and the bounds of every route read the query
as sent (?waiters=%31, ?limit=%31, ?since_ms=%30 answered 400, ?wait%5Fms=1 was an unknown parameter) while
the listings and the audit decoded theirs; a repeated parameter had its first value read (?limit=10&limit=
99999 answered a page); a malformed escape answered some other refusal, or none.

Owns: the query's decoding, its empty values, its repeated names and the wording of its refusals, on each
kind of route (status and watch, listings, audit, a route without parameters). Must not: test what each parameter means (test_lock_api, test_lease_list, test_audit_views do).
"""

import os
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql  # noqa: E402
from pg_helpers import assert_problem, config, unique  # noqa: E402


def escaped(text: str) -> str:
    """text with every byte percent-encoded, even the ones that need not be."""
    return "".join(f"%{b:02X}" for b in text.encode())


def add_rejection(resource: str, owner: str) -> int:
    """A refused write's audit record of now, for resource and owner; returns its id."""
    return int(psql("INSERT INTO fencegate.rejections (at, resource, lock_name, presented_fence, current_fence,"
                    " owner, client_addr, method, reason) VALUES (now(), :'r', 'l', 1, 2, :'o', '127.0.0.1',"
                    " 'PATCH', 'stale_fence') RETURNING id", {"r": resource, "o": owner})[0])


class QueryArgsTest(GatewayTest):
    gateway_config = config()

    def refused(self, path: str, detail: str) -> None:
        r = self.c.get(path)
        assert_problem(self, r, 400, "invalid_field")
        self.assertEqual(r.body["detail"], detail, path)

    def held(self, kind: str, name: str) -> int:
        """Takes a lease of the lock or semaphore name; returns its fence."""
        r = self.c.post(f"/v1/{kind}/{name}/acquire", {"limit": 2} if kind == "semaphores" else {})
        self.assertEqual(r.status, 200, r)
        return r.body["fence"]

    def test_status_and_watch_read_encoded_values(self):
        """?waiters=%31 is ?waiters=1 as a client library may send it: it answered 400."""
        for kind in ("locks", "semaphores"):
            name = unique("enc")
            fence = self.held(kind, name)
            plain = self.c.get(f"/v1/{kind}/{name}?waiters=1")
            self.assertEqual(plain.status, 200, plain)
            self.assertIn("waiters", plain.body)
            for query in ("waiters=%31", "w%61iters=1", "waiters=1&wait%5Fms=%31"):
                r = self.c.get(f"/v1/{kind}/{name}?{query}")
                self.assertEqual(r.status, 200, (query, r))
                self.assertEqual(sorted(r.body), sorted(plain.body), query)
            r = self.c.get(f"/v1/{kind}/{name}?watch=tru%65&fence={escaped(str(fence))}&wait_ms=%30")
            self.assertEqual(r.status, 200, r)
            self.assertEqual((r.body["fence"], r.body["held"]), (fence, True), r)

    def test_listings_read_encoded_values(self):
        """?limit=%32 answered 400 (its bound was checked on the text as sent); the handler decoded it."""
        prefix = unique("encl") + ":"
        for i in range(3):
            self.held("locks", f"{prefix}{i}")
        plain = self.c.get(f"/v1/locks?prefix={prefix}&limit=2")
        self.assertEqual([i["lock"] for i in plain.body["items"]], [f"{prefix}0", f"{prefix}1"], plain)
        r = self.c.get(f"/v1/locks?prefix={escaped(prefix)}&lim%69t=%32")
        self.assertEqual(r.status, 200, r)
        self.assertEqual([i["lock"] for i in r.body["items"]], [f"{prefix}0", f"{prefix}1"], r)
        r = self.c.get(f"/v1/locks?prefix={prefix}&limit=%32&cursor={escaped(r.body['next_cursor'])}")
        self.assertEqual([i["lock"] for i in r.body["items"]], [f"{prefix}2"], r)
        r = self.c.get(f"/v1/semaphores?limit=%31&prefix={escaped(prefix)}")
        self.assertEqual((r.status, r.body["items"]), (200, []), r)

    def test_audit_reads_encoded_values(self):
        """?limit=%31 and ?since_ms=%30 answered 400. Text filters are decoded once, '+' as a space."""
        u = unique("q")
        spaced, percent = f"pg:{u}/a b+c", f"pg:{u}/%41"
        first, second = add_rejection(spaced, "o 1"), add_rejection(percent, "%41")
        for query in (f"resource={urllib.parse.quote(spaced, safe='')}", f"resource={urllib.parse.quote_plus(spaced)}",
                      f"resource={escaped(spaced)}&owner=o+1", "owner=o%201&resource=" + urllib.parse.quote(spaced)):
            r = self.c.get(f"/v1/audit/rejections?{query}&limit=%31%30&since_ms=%30")
            self.assertEqual(r.status, 200, (query, r))
            self.assertEqual([i["id"] for i in r.body["items"]], [first], query)
        r = self.c.get(f"/v1/audit/rejections?resource=pg:{u}/%2541&owner=%2541")  # once: "%41", never "A"
        self.assertEqual([i["id"] for i in r.body["items"]], [second], r)
        now_ms = int(time.time() * 1000)
        r = self.c.get(f"/v1/audit/summary?since_ms={escaped(str(now_ms - 60000))}&until%5Fms={escaped(str(now_ms))}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.body["since_ms"], r.body["until_ms"]), (now_ms - 60000, now_ms), r)

    def test_an_empty_value_is_absent_on_every_route(self):
        """?x= is read as ?x is and as a query without x: the parameter's default, on every route, as the
        listings and the audit views read it and as the public contract writes its first pages
        (?prefix=invoice:&limit=100&cursor=). Failed on the code before the fix: the status route and its watch
        answered 400 to ?waiters=, ?wait_ms=, ?fence= and ?watch= (and to a bare ?watch). An empty segment
        (?&&&, a trailing '&') is no parameter; it answered 400 "query parameter '' is unknown"."""
        for kind in ("locks", "semaphores"):
            name = unique("empty")
            fence = self.held(kind, name)
            plain = self.c.get(f"/v1/{kind}/{name}")
            self.assertEqual(plain.status, 200, plain)
            self.assertNotIn("waiters", plain.body)
            for query in ("waiters=", "waiters", "wait_ms=", "fence=", "watch=", "watch",
                          "watch=&fence=&wait_ms=&waiters=", f"watch=&fence={fence}", "&&&", "waiters=&"):
                r = self.c.get(f"/v1/{kind}/{name}?{query}")
                self.assertEqual(r.status, 200, (kind, query, r))
                self.assertEqual(sorted(r.body), sorted(plain.body), (kind, query, r))
            # A watch with an empty wait_ms waits its default, here not at all: no lease has that fence.
            r = self.c.get(f"/v1/{kind}/{name}?watch=true&fence={fence + 1000}&wait_ms=")
            self.assertEqual((r.status, r.body.get("held")), (200, False), (kind, r))
            r = self.c.get(f"/v1/{kind}/{name}?watch=true&fence=&wait_ms=0")
            assert_problem(self, r, 400, "invalid_field")
            self.assertIn("'fence'", r.body["detail"], r)
        prefix = unique("emptyl") + ":"
        for i in range(2):
            self.held("locks", f"{prefix}{i}")
        for query in (f"prefix={prefix}&limit=&cursor=", f"limit&prefix={prefix}&cursor"):
            r = self.c.get(f"/v1/locks?{query}")
            self.assertEqual((r.status, [i["lock"] for i in r.body["items"]], r.body["next_cursor"]),
                             (200, [f"{prefix}0", f"{prefix}1"], None), (query, r))
        r = self.c.get("/v1/semaphores?limit=&cursor=&prefix=")
        self.assertEqual(r.status, 200, r)
        u = unique("emptya")
        first = add_rejection(f"pg:{u}/1", "o")
        for query in (f"resource=pg:{u}/1&lock=&owner=&since_ms=&until_ms=&limit=&after_id=",
                      f"resource=pg:{u}/1&since_ms&after_id&limit"):
            r = self.c.get(f"/v1/audit/rejections?{query}")
            self.assertEqual((r.status, [i["id"] for i in r.body["items"]]), (200, [first]), (query, r))
        r = self.c.get("/v1/audit/rejections?resource=&lock=&owner=&since_ms=&until_ms=&limit=&after_id=")
        self.assertEqual(r.status, 200, r)
        r = self.c.get("/v1/audit/summary?since_ms=&until_ms=")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["until_ms"] - r.body["since_ms"], 3600000, r)
        self.assertLess(abs(r.body["until_ms"] - time.time() * 1000), 60000, r)
        # Empty or not, a parameter named twice is still refused.
        self.refused(f"/v1/locks/{name}?waiters=&waiters=1", "query parameter 'waiters' given twice")

    def test_a_parameter_given_twice_is_refused(self):
        """The first value was checked and read; a second reader could have read another."""
        name = unique("twice")
        for kind in ("locks", "semaphores"):
            self.held(kind, name)
        for path, param in [(f"/v1/locks/{name}?waiters=1&waiters=abc", "waiters"),
                            (f"/v1/semaphores/{name}?waiters=1&waiters=2", "waiters"),
                            (f"/v1/locks/{name}?watch=true&fence=1&fence=2", "fence"),
                            (f"/v1/semaphores/{name}?watch&watch=true&fence=1", "watch"),
                            (f"/v1/locks/{name}?wait_ms=1&wait%5Fms=2", "wait_ms"),
                            ("/v1/locks?limit=10&limit=99999", "limit"),
                            ("/v1/semaphores?prefix=a&prefix=b", "prefix"),
                            ("/v1/locks?cursor=&cursor=x", "cursor"),
                            ("/v1/audit/rejections?limit=5&limit=abc", "limit"),
                            ("/v1/audit/rejections?owner=a&owner=a", "owner"),
                            ("/v1/audit/summary?since_ms=0&until_ms=1&since_ms=1", "since_ms")]:
            with self.subTest(path=path):
                self.refused(path, f"query parameter '{param}' given twice")
        self.refused(f"/v1/locks/{name}?verbose=1&verbose=2", "query parameter 'verbose' is unknown")

    def test_every_query_problem_says_query_parameter(self):
        """Every refusal of a query reads "query parameter 'x' ...", whichever check or route answers it. Failed
        on the code before the fix: "query 'waiters' must be...", "query argument 'limit' must be...",
        "unknown query parameter 'x'" and "query parameter 'x' given twice" came from one gateway."""
        name = unique("word")
        too_long = "a" * 5000
        for path, detail in [
                (f"/v1/locks/{name}?waiters=x", "query parameter 'waiters' must be an integer from 0 to 100"),
                (f"/v1/semaphores/{name}?wait_ms=-1",
                 "query parameter 'wait_ms' must be an integer from 0 to 3600000"),
                (f"/v1/locks/{name}?fence=0",
                 "query parameter 'fence' must be an integer from 1 to 9223372036854775807 without leading zeros"),
                (f"/v1/semaphores/{name}?watch=yes", "query parameter 'watch' must be true or false"),
                (f"/v1/locks/{name}?watch=true", "query parameter 'fence' is required with watch=true"),
                (f"/v1/locks/{name}?waiters=%zz", "query parameter 'waiters' has a malformed percent-escape"),
                (f"/v1/locks/{name}?verbose", "query parameter 'verbose' is unknown"),
                (f"/v1/locks/{name}?fence=1&fence=1", "query parameter 'fence' given twice"),
                ("/v1/locks?limit=0", "query parameter 'limit' must be an integer from 1 to 1000"),
                ("/v1/semaphores?prefix=a+b",
                 "query parameter 'prefix' must be empty or 1 to 200 bytes of A-Z a-z 0-9 . _ : / -"),
                ("/v1/locks?cursor=abc", "query parameter 'cursor' must be the next_cursor of a previous page"),
                ("/v1/audit/rejections?limit=1001", "query parameter 'limit' must be an integer from 1 to 1000"),
                ("/v1/audit/rejections?since_ms=-1",
                 "query parameter 'since_ms' must be an integer from 0 to 253402300799999"),
                ("/v1/audit/rejections?after_id=x",
                 "query parameter 'after_id' must be an integer from 0 to 9223372036854775807"),
                ("/v1/audit/rejections?since_ms=5&until_ms=5",
                 "query parameter 'until_ms' must be later than since_ms"),
                ("/v1/audit/summary?until_ms=0",
                 "query parameter 'until_ms' must be an integer from 1 to 253402300799999"),
                ("/v1/audit/summary?since_ms=0&until_ms=86400001",
                 "query parameters 'since_ms' and 'until_ms' must make a range of 1 ms to 86400000 ms"),
                ("/v1/audit/summary?owner=a", "query parameter 'owner' is unknown")]:
            with self.subTest(path=path):
                self.refused(path, detail)
        for path, param in [(f"/v1/locks?cursor={too_long}", "cursor"),
                            (f"/v1/audit/rejections?owner={too_long}", "owner")]:
            r = self.c.get(path)
            assert_problem(self, r, 400, "invalid_field")
            self.assertRegex(r.body["detail"], rf"^query parameter '{param}' is longer than \d+ bytes$", r)
        r = self.c.post("/v1/locksets/acquire?wait_ms=1", {"names": [name]})  # a route without parameters
        assert_problem(self, r, 400, "invalid_field")
        self.assertEqual(r.body["detail"], "query parameter 'wait_ms' is unknown", r)

    def test_bad_escapes_and_text_are_refused_naming_the_parameter(self):
        """A malformed escape was read as text (and refused, when at all, as some other fault)."""
        name = unique("bad")
        for kind in ("locks", "semaphores"):
            self.held(kind, name)
        for path, detail in [
                (f"/v1/locks/{name}?waiters=%zz", "query parameter 'waiters' has a malformed percent-escape"),
                (f"/v1/semaphores/{name}?wait_ms=1%", "query parameter 'wait_ms' has a malformed percent-escape"),
                (f"/v1/locks/{name}?watch=%ff&fence=1", "query parameter 'watch' must be UTF-8 text"),
                (f"/v1/semaphores/{name}?fence=1%00", "query parameter 'fence' must not contain NUL"),
                (f"/v1/locks/{name}?w%zaiters=1", "query parameter 'w%zaiters' has a malformed percent-escape"),
                ("/v1/locks?prefix=%G1", "query parameter 'prefix' has a malformed percent-escape"),
                ("/v1/semaphores?cursor=%e2%82", "query parameter 'cursor' must be UTF-8 text"),
                ("/v1/audit/rejections?lock=%", "query parameter 'lock' has a malformed percent-escape"),
                ("/v1/audit/rejections?limit=%ed%a0%80", "query parameter 'limit' must be UTF-8 text"),
                ("/v1/audit/summary?until_ms=1%0", "query parameter 'until_ms' has a malformed percent-escape")]:
            self.refused(path, detail)
        r = self.c.post(f"/v1/locks/{name}/acquire?x=%ff")  # a route without parameters decodes them too
        assert_problem(self, r, 400, "invalid_field")
        self.assertEqual(r.body["detail"], "query parameter 'x' must be UTF-8 text", r)
        # Decoded once: an escaped '%' is a '%', never the start of another escape.
        self.refused(f"/v1/locks/{name}?waiters=%2531", "query parameter 'waiters' must be an integer from 0 to 100")
        self.refused("/v1/locks?limit=%2531", "query parameter 'limit' must be an integer from 1 to 1000")


if __name__ == "__main__":
    unittest.main()
