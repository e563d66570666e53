# SPDX-License-Identifier: Apache-2.0
"""The lock endpoints' contract, call by call: idempotent acquire and release, fences, token checks,
renewal and max_hold, and every error code of docs/api.md for bad input, as problem+json and never a 500.

Owns: request/answer behaviour of /v1/locks on one gateway. Must not: test concurrency properties (the
exclusion, FIFO and recovery files do) or other resources' endpoints.
"""

import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, Redis, skip_in_cluster  # noqa: E402
from lock_helpers import (acquire, assert_problem, raw_request, read_response, release, renew,  # noqa: E402
                          status, unique_name, wait_for_waiting)

MAX_BODY = 8192
MAX_WAITERS_PER_LOCK = 2


class LockApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(config={"limits": {"max_body_bytes": MAX_BODY,
                                            "max_waiters_per_lock": MAX_WAITERS_PER_LOCK}})
        cls.client = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.gw.stop()

    def waiter(self, name: str, out: list, **fields) -> threading.Thread:
        def run():
            with self.gw.client(timeout=60) as c:
                out.append(acquire(c, name, **fields))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    # -- the happy path and idempotence --

    def test_acquire_status_release(self):
        name = unique_name()
        st = status(self.client, name)
        self.assertEqual((st["lock"], st["held"], st["fence"], st["waiting"]), (name, False, None, 0))
        r = acquire(self.client, name, ttl_ms=5000, owner="billing-7")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["content-type"], "application/json")
        self.assertEqual(set(r.body), {"lock", "token", "fence", "ttl_ms", "expires_at_ms"})
        self.assertEqual(r.body["lock"], name)
        self.assertEqual(r.body["ttl_ms"], 5000)
        self.assertIsInstance(r.body["token"], str)
        now_ms = Redis().cmd("TIME")
        self.assertAlmostEqual(r.body["expires_at_ms"], int(now_ms[0]) * 1000 + 5000, delta=2000)
        st = status(self.client, name)
        self.assertEqual((st["held"], st["fence"], st["owner"], st["waiting"]), (True, r.body["fence"], "billing-7", 0))
        self.assertTrue(0 < st["expires_in_ms"] <= 5000)
        self.assertNotIn(r.body["token"], str(st))
        busy = acquire(self.client, name)
        assert_problem(self, busy, 409, "lock_busy")
        self.assertEqual(busy.body["waiting"], 0)
        rel = release(self.client, name, r.body["token"])
        self.assertEqual((rel.status, rel.headers["content-type"], rel.raw), (200, "application/json",
                                                                             b'{"released":true}'))
        self.assertFalse(status(self.client, name)["held"])

    def test_an_uncontended_grant_is_dated_by_redis_time_to_the_millisecond(self):
        """The first try of an acquire writes the grant's time from TIME's two texts (seconds, then
        microseconds without leading zeros) and the gateway adds the ttl: each expiry less its ttl lies
        between Redis's TIME read before and after the acquire, also early in a second, where the
        microseconds have fewer than six digits. Caught: the milliseconds taken from the microseconds
        unpadded (off by up to 0.9 s in the first tenth of every second)."""
        r = Redis()

        def redis_time() -> tuple[int, int]:
            sec, usec = r.cmd("TIME")
            return int(sec), int(usec)

        for offset_us in (1_000, 40_000, 5_000, 300_000):
            sec, usec = redis_time()
            time.sleep(((1_000_000 - usec) + offset_us) / 1e6)  # just past the next second's start
            name = unique_name("dated")
            sec, usec = redis_time()
            before = sec * 1000 + usec // 1000
            a = acquire(self.client, name, ttl_ms=7000)
            sec, usec = redis_time()
            after = sec * 1000 + usec // 1000
            self.assertEqual(a.status, 200, a)
            self.assertTrue(before <= a.body["expires_at_ms"] - 7000 <= after, (before, a.body, after))
            self.assertEqual(release(self.client, name, a.body["token"]).status, 200)
        r.close()

    def test_retried_acquire_returns_the_same_lease(self):
        name = unique_name()
        first = acquire(self.client, name, request_id="r-1")
        again = acquire(self.client, name, request_id="r-1")
        self.assertEqual(first.status, 200, first)
        self.assertEqual(again.status, 200, again)
        self.assertEqual((again.body["token"], again.body["fence"]), (first.body["token"], first.body["fence"]))
        assert_problem(self, acquire(self.client, name, request_id="r-2"), 409, "lock_busy")
        self.assertEqual(release(self.client, name, first.body["token"]).status, 200)

    def test_retried_queued_acquire_keeps_its_place(self):
        name = unique_name()
        held = acquire(self.client, name)
        out_a: list = []
        t = self.waiter(name, out_a, wait_ms=200, request_id="q-1")
        t.join(10)
        assert_problem(self, out_a[0], 409, "lock_busy")  # gave up; a retry starts afresh
        out_b: list = []
        t1 = self.waiter(name, out_b, wait_ms=20000, request_id="q-1")
        wait_for_waiting(self.client, name, 1)
        out_c: list = []
        t2 = self.waiter(name, out_c, wait_ms=20000, request_id="q-2")
        wait_for_waiting(self.client, name, 2)
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
        t1.join(10)
        self.assertEqual(out_b[0].status, 200, out_b)
        retry = acquire(self.client, name, request_id="q-1")
        self.assertEqual((retry.status, retry.body["token"], retry.body["fence"]),
                         (200, out_b[0].body["token"], out_b[0].body["fence"]))
        self.assertEqual(release(self.client, name, retry.body["token"]).status, 200)
        t2.join(10)
        self.assertEqual(out_c[0].status, 200, out_c)
        self.assertGreater(out_c[0].body["fence"], out_b[0].body["fence"])
        self.assertEqual(release(self.client, name, out_c[0].body["token"]).status, 200)

    def test_release_to_a_waiter_of_the_same_gateway_rings_no_doorbell(self):
        """The release hands the lock to a waiter parked in the same gateway in-process: its grant
        comes with the release script's answer, so no doorbell is published (and no claim call made),
        and the waiter holds its whole lease at once."""
        name = unique_name()
        held = acquire(self.client, name, ttl_ms=30000)
        out: list = []
        t = self.waiter(name, out, wait_ms=20000, ttl_ms=25000)
        wait_for_waiting(self.client, name, 1)
        with Redis() as bells:
            me = next(g["id"] for g in self.client.get("/v1/gateways").body["gateways"] if g["self"])
            bells.hear(name, "fg:bell:*", f"fg:bell:{me}")
            self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
            t.join(10)
            rung = [m for _, m in bells.messages(0.3) if m.endswith("|" + name)]
        self.assertEqual(out[0].status, 200, out)
        self.assertGreater(out[0].body["fence"], held.body["fence"])
        self.assertEqual(rung, [], "the hand-over went through the doorbell")
        st = status(self.client, name)
        self.assertEqual((st["held"], st["fence"]), (True, out[0].body["fence"]))
        self.assertGreater(st["expires_in_ms"], 20000)
        self.assertEqual(release(self.client, name, out[0].body["token"]).status, 200)

    def test_retry_of_a_parked_wait_takes_it_over(self):
        """A second connection retrying a queued request_id keeps the place and takes the wait over:
        the first is answered 409 conflict at once, and only the retry gets the lease."""
        name = unique_name()
        held = acquire(self.client, name)
        first: list = []
        t1 = self.waiter(name, first, wait_ms=20000, request_id="dup")
        wait_for_waiting(self.client, name, 1)
        second: list = []
        t2 = self.waiter(name, second, wait_ms=20000, request_id="dup")
        t1.join(5)
        self.assertEqual(len(first), 1, "the superseded wait was not answered")
        assert_problem(self, first[0], 409, "conflict")
        self.assertEqual(status(self.client, name)["waiting"], 1)
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
        t2.join(10)
        self.assertEqual(second[0].status, 200, second)
        self.assertEqual(release(self.client, name, second[0].body["token"]).status, 200)

    def test_retried_release_answers_200(self):
        name = unique_name()
        r = acquire(self.client, name)
        for _ in range(3):
            rel = release(self.client, name, r.body["token"])
            self.assertEqual(rel.status, 200, rel)
            self.assertEqual(rel.body, {"released": True})

    def test_after_takeover_release_and_renew_are_lease_lost(self):
        name = unique_name()
        old = acquire(self.client, name, ttl_ms=200)
        time.sleep(0.4)
        new = acquire(self.client, name, ttl_ms=30000)
        self.assertEqual(new.status, 200, new)
        self.assertGreater(new.body["fence"], old.body["fence"])
        assert_problem(self, renew(self.client, name, old.body["token"]), 410, "lease_lost")
        assert_problem(self, release(self.client, name, old.body["token"]), 410, "lease_lost")
        st = status(self.client, name)
        self.assertEqual((st["held"], st["fence"]), (True, new.body["fence"]))
        self.assertEqual(renew(self.client, name, new.body["token"]).status, 200)
        self.assertEqual(release(self.client, name, new.body["token"]).status, 200)

    def test_expired_then_free_release_is_lease_lost(self):
        name = unique_name()
        old = acquire(self.client, name, ttl_ms=150)
        time.sleep(0.3)
        assert_problem(self, release(self.client, name, old.body["token"]), 410, "lease_lost")

    # -- fences and tokens --

    @skip_in_cluster("fences of different locks are not ordered in time on a cluster: each slot issues from "
                     "blocks of its own (docs/cluster.md, Fences in cluster mode)")
    def test_fences_strictly_increase_across_locks(self):
        fences = []
        names = [unique_name() for _ in range(3)]
        for i in range(12):
            r = acquire(self.client, names[i % 3], ttl_ms=5000)
            self.assertEqual(r.status, 200, r)
            fences.append(r.body["fence"])
            self.assertEqual(release(self.client, names[i % 3], r.body["token"]).status, 200)
        self.assertEqual(fences, sorted(set(fences)), fences)

    def test_tampered_or_foreign_tokens_are_refused(self):
        name, other = unique_name(), unique_name()
        r = acquire(self.client, name)
        o = acquire(self.client, other)
        token = r.body["token"]
        parts = token.split(".")
        forged_fence = ".".join(parts[:2] + [str(r.body["fence"] + 1)] + parts[3:])
        flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
        for bad in (forged_fence, flipped, token[:-5], token + ".x", "garbage", o.body["token"]):
            for call in (renew, release):
                assert_problem(self, call(self.client, name, bad), 403, "invalid_fence_token")
        self.assertEqual(status(self.client, name)["fence"], r.body["fence"])  # still held
        self.assertEqual(release(self.client, name, token).status, 200)
        self.assertEqual(release(self.client, other, o.body["token"]).status, 200)

    def test_renew_keeps_the_fence(self):
        name = unique_name()
        r = acquire(self.client, name, ttl_ms=1000)
        time.sleep(0.05)  # a later expiry; the renewal comes well within the lease
        n1 = renew(self.client, name, r.body["token"])  # no ttl_ms: the lease's own
        self.assertEqual((n1.status, n1.body["fence"], n1.body["ttl_ms"]), (200, r.body["fence"], 1000))
        self.assertEqual(n1.headers["content-type"], "application/json")
        self.assertEqual(set(n1.body), {"lock", "fence", "ttl_ms", "expires_at_ms", "hold_until_ms"})
        self.assertEqual(n1.body["lock"], name)
        self.assertGreater(n1.body["expires_at_ms"], r.body["expires_at_ms"])
        n = renew(self.client, name, r.body["token"], ttl_ms=5000)
        self.assertEqual(n.status, 200, n)
        self.assertEqual(n.body["fence"], r.body["fence"])
        self.assertGreater(n.body["expires_at_ms"], n1.body["expires_at_ms"])
        time.sleep(1.2)  # past the first ttl: the renewal kept it
        self.assertEqual(status(self.client, name)["fence"], r.body["fence"])
        self.assertEqual(release(self.client, name, r.body["token"]).status, 200)

    def test_max_hold_caps_renewals_up_to_the_deadline(self):
        """A renew whose ttl would pass the hold deadline is granted up to the deadline (hold_until_ms), and
        the lease ends there; a renew after it answers 409 max_hold_exceeded with the deadline, not 410 (a
        refusal there changes nothing). Caught: a renewal cut at the deadline that kept no mark of it, 410."""
        name = unique_name()
        # 1 s leases: each renewal comes well within the lease before it, on a machine however loaded
        r = acquire(self.client, name, ttl_ms=1000, max_hold_ms=3000)
        self.assertEqual(renew(self.client, name, r.body["token"], ttl_ms=1000).status, 200)
        n = renew(self.client, name, r.body["token"], ttl_ms=5000)
        self.assertEqual(n.status, 200, n)
        deadline = n.body["hold_until_ms"]
        self.assertEqual(n.body["expires_at_ms"], deadline)
        self.assertLessEqual(deadline - r.body["expires_at_ms"], 2000 + 50)
        self.assertLessEqual(n.body["ttl_ms"], 3000)  # capped, not the 5000 asked (3000 if in the same ms)
        self.assertEqual(status(self.client, name)["fence"], r.body["fence"])
        time.sleep(3.0 + 0.3)  # past the deadline (Redis time; generous): the lease ended there
        self.assertFalse(status(self.client, name)["held"])
        late = renew(self.client, name, r.body["token"])
        assert_problem(self, late, 409, "max_hold_exceeded")
        self.assertEqual(late.body["hold_until_ms"], deadline)
        self.assertEqual(release(self.client, name, r.body["token"]).status, 410)
        again = acquire(self.client, name, ttl_ms=1000)
        self.assertEqual(again.status, 200, again)
        self.assertEqual(renew(self.client, name, r.body["token"]).status, 409)  # a new holder changes nothing
        self.assertEqual(release(self.client, name, again.body["token"]).status, 200)

    def test_a_lease_that_ended_before_its_hold_deadline_is_lost(self):
        """Only a lease that a renewal cut at its hold deadline ended there: one that expired sooner, was
        revoked, or was renewed shorter after the cut and taken over, answers a later renew 410 lease_lost,
        also once the deadline has passed; one released after the cut answers 410 before the deadline and
        409 past it (a renewal past the deadline all the same). Caught: a hold end read without the
        deadline's time (409 before it), one that took precedence over a revoke, and a mark that outlived a
        shorter renewal (409 for a lease taken over)."""
        name = unique_name("hold-expired")
        r = acquire(self.client, name, ttl_ms=300, max_hold_ms=1200)
        time.sleep(0.6)  # expired, 0.6 s before its deadline
        assert_problem(self, renew(self.client, name, r.body["token"]), 410, "lease_lost")
        time.sleep(0.8)  # past the deadline
        assert_problem(self, renew(self.client, name, r.body["token"]), 410, "lease_lost")
        # Each end is arranged in turn, then one wait passes every deadline (the last one's comes 1.5 s after
        # its acquire, which is before the wait begins).
        arranged = []
        for end in ("release", "revoke", "shorten"):
            with self.subTest(end=end):
                name = unique_name("hold-" + end)
                r = acquire(self.client, name, ttl_ms=1000, max_hold_ms=1500)
                cut = renew(self.client, name, r.body["token"], ttl_ms=2000)
                self.assertEqual(cut.body["expires_at_ms"], cut.body["hold_until_ms"], cut)  # marked
                taker = None
                if end == "release":
                    self.assertEqual(release(self.client, name, r.body["token"]).status, 200)
                    before = renew(self.client, name, r.body["token"])  # before the deadline
                    assert_problem(self, before, 410, "lease_lost")
                elif end == "revoke":
                    self.assertEqual(self.client.post(f"/v1/locks/{name}/revoke", {}).status, 200)
                else:  # a shorter renewal: the lease ends before the deadline, and another client takes it
                    self.assertEqual(renew(self.client, name, r.body["token"], ttl_ms=100).status, 200)
                    time.sleep(0.3)
                    taker = acquire(self.client, name, ttl_ms=5000)
                    self.assertEqual(taker.status, 200, taker)
                arranged.append((end, name, r, taker))
        time.sleep(1.5 + 0.3)
        for end, name, r, taker in arranged:
            with self.subTest(end=end):
                late = renew(self.client, name, r.body["token"])
                if end == "release":
                    assert_problem(self, late, 409, "max_hold_exceeded")  # the deadline passed all the same
                else:
                    assert_problem(self, late, 410, "lease_lost")
                if end == "revoke":
                    self.assertEqual(late.body["reason"], "revoked")
                if taker:
                    self.assertEqual(release(self.client, name, taker.body["token"]).status, 200)

    # -- bad input --

    def test_invalid_json(self):
        name = unique_name()
        for body in ("{", "[]", "42", "null", '{"ttl_ms": 1, "ttl_ms": 2}', "\xff", '{"a": "\\u0000"}'):
            for action in ("acquire", "renew", "release"):
                r = self.client.post(f"/v1/locks/{name}/{action}", body)
                assert_problem(self, r, 400, "invalid_json")

    def test_invalid_fields_are_named(self):
        name = unique_name()
        cases = [({"ttl_ms": "1000"}, "ttl_ms"), ({"ttl_ms": 99}, "ttl_ms"), ({"ttl_ms": 86400001}, "ttl_ms"),
                 ({"ttl_ms": 1.5}, "ttl_ms"), ({"wait_ms": -1}, "wait_ms"), ({"wait_ms": 3600001}, "wait_ms"),
                 ({"wait_ms": True}, "wait_ms"), ({"max_hold_ms": "x"}, "max_hold_ms"),
                 ({"ttl_ms": 5000, "max_hold_ms": 1000}, "max_hold_ms"), ({"owner": 5}, "owner"),
                 ({"owner": ""}, "owner"), ({"request_id": ["a"]}, "request_id"),
                 ({"request_id": "r" * 201}, "request_id"), ({"ttl_ms": 2 ** 63}, "ttl_ms")]
        for body, field in cases:
            problem = assert_problem(self, acquire(self.client, name, **body), 400, "invalid_field")
            self.assertIn(field, problem["detail"], (body, problem))
        for action in ("renew", "release"):
            for body, field in (({}, "token"), ({"token": 5}, "token"), ({"token": ""}, "token")):
                problem = assert_problem(self, self.client.post(f"/v1/locks/{name}/{action}", body), 400,
                                         "invalid_field")
                self.assertIn(field, problem["detail"])
        problem = assert_problem(self, renew(self.client, name, "t", ttl_ms=10), 400, "invalid_field")
        self.assertIn("ttl_ms", problem["detail"])
        self.assertFalse(status(self.client, name)["held"])

    def test_invalid_names(self):
        paths = ["/v1/locks/a%00b/acquire", "/v1/locks/a%20b/acquire", "/v1/locks/caf%C3%A9/acquire",
                 "/v1/locks/a%zz/acquire", "/v1/locks/a%/acquire", "/v1/locks/a%22b/acquire",
                 "/v1/locks/a*b/acquire", "/v1/locks/%0A/acquire", f"/v1/locks/{'n' * 201}/acquire",
                 f"/v1/locks/{'n' * 5000}/acquire", "/v1/locks//acquire", "/v1/locks/a%00b"]
        for path in paths:
            method = "GET" if path.endswith("a%00b") else "POST"
            assert_problem(self, self.client.request(method, path, {} if method == "POST" else None), 400,
                           "invalid_name")
        ok = acquire(self.client, "n" * 200)
        self.assertEqual(ok.status, 200, ok)
        self.assertEqual(release(self.client, "n" * 200, ok.body["token"]).status, 200)
        # bytes http.client refuses to send: raw UTF-8 and a control character in the path
        for raw in (b"POST /v1/locks/caf\xc3\xa9/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n",
                    b"POST /v1/locks/a\x01b/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n",
                    b"GET /v1/locks/a\x7fb HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"):
            code, text = raw_request(self.gw.port, raw)
            self.assertIn(code, (400,), text)
            self.assertNotIn(b"500", text.split(b"\r\n")[0])

    def test_unknown_route_and_wrong_method(self):
        for method, path in (("GET", "/v1/lockz/x"), ("GET", "/v1/locks/"),
                             ("GET", "/v1"), ("POST", "/nope")):
            r = self.client.request(method, path, {} if method == "POST" else None)
            self.assertIn(r.status, (400, 404), (method, path, r))
            self.assertNotEqual(r.status, 500)
            self.assertTrue(r.headers["content-type"].startswith("application/problem+json"))
        assert_problem(self, self.client.request("GET", "/v1/lockz/x"), 404, "not_found")
        for method, path in (("DELETE", "/v1/locks/x/acquire"), ("PUT", "/v1/locks/x"),
                             ("POST", "/v1/locks/x"), ("PATCH", "/v1/locks/x/release"),
                             ("OPTIONS", "/v1/locks/x"), ("POST", "/v1/locks")):
            r = self.client.request(method, path)
            self.assertEqual(r.status, 405, (method, path, r))
            # /v1/locks/x/acquire is also the status route of a lock named "x/acquire".
            self.assertIn(r.headers.get("allow"), ("GET, HEAD", "GET, HEAD, POST"), r)
            self.assertTrue(r.headers["content-type"].startswith("application/problem+json"), r)

    def test_lock_busy_names_the_queue_length(self):
        name = unique_name()
        held = acquire(self.client, name)
        out: list = []
        t = self.waiter(name, out, wait_ms=20000)
        wait_for_waiting(self.client, name, 1)
        busy = assert_problem(self, acquire(self.client, name), 409, "lock_busy")
        self.assertEqual(busy["waiting"], 1)
        started = time.monotonic()
        timed_out = assert_problem(self, acquire(self.client, name, wait_ms=300), 409, "lock_busy")
        self.assertGreaterEqual(time.monotonic() - started, 0.25)
        self.assertIn("waiting", timed_out)
        self.assertEqual(status(self.client, name)["waiting"], 1)  # the timed-out waiter left the queue
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
        t.join(10)
        self.assertEqual(out[0].status, 200)
        self.assertEqual(release(self.client, name, out[0].body["token"]).status, 200)

    def test_a_retry_that_will_not_wait_names_the_queue_it_is_in(self):
        """A retry with wait_ms 0 of a request_id still queued answers 409 lock_busy with the length of the queue
        that holds it, as API.md asks of every lock_busy, and keeps its place. Caught on the code before the
        fix: "waiting": 0 with two waiters queued (lock_acquire.lua's queued answer carried no queue length)."""
        name, rid = unique_name(), unique_name("rid")
        held = acquire(self.client, name)
        first: list = []
        t1 = self.waiter(name, first, wait_ms=20000, request_id=rid)
        wait_for_waiting(self.client, name, 1)
        second: list = []
        t2 = self.waiter(name, second, wait_ms=20000)
        wait_for_waiting(self.client, name, 2)
        busy = assert_problem(self, acquire(self.client, name, request_id=rid), 409, "lock_busy")
        self.assertEqual(busy["waiting"], 2, busy)
        self.assertEqual(status(self.client, name)["waiting"], 2)
        out: list = []
        t3 = self.waiter(name, out, wait_ms=20000, request_id=rid)  # waits on in the place it kept
        self.assertEqual(release(self.client, name, held.body["token"]).status, 200)
        t3.join(10)
        self.assertEqual(out[0].status, 200, out)
        t1.join(10)
        self.assertEqual(release(self.client, name, out[0].body["token"]).status, 200)
        t2.join(10)
        self.assertEqual(second[0].status, 200, second)
        self.assertEqual(release(self.client, name, second[0].body["token"]).status, 200)

    def test_every_status_query_parameter_is_checked(self):
        """Every query parameter of GET /v1/locks/{name} is checked on every request, with or without watch, in
        the order docs/api.md lists them, and watch is true or false (or absent: a bare or empty ?watch, as
        every empty parameter, test_query_args). Caught on the code before the fix: fence=abc, fence=0,
        wait_ms=-5 and watch=false&wait_ms=99999999 answered 200 with the plain status, and waiters=101 with
        watch=true went unchecked."""
        name = unique_name()
        for query, field in (("fence=abc", "fence"), ("fence=0", "fence"), ("fence=9223372036854775808", "fence"),
                             ("wait_ms=-5", "wait_ms"), ("watch=false&wait_ms=99999999", "wait_ms"),
                             ("watch=false&fence=x", "fence"), ("watch=yes", "watch"), ("watch=TRUE", "watch"), ("watch=true", "fence"),
                             ("watch=true&fence=1&waiters=101", "waiters"), ("waiters=-1", "waiters"),
                             ("watch=maybe&fence=0&wait_ms=-1", "watch"), ("fence=0&wait_ms=-1", "fence")):
            r = self.client.get(f"/v1/locks/{name}?{query}")
            body = assert_problem(self, r, 400, "invalid_field")
            self.assertIn(f"'{field}'", body["detail"], (query, body))
        for query in ("watch=false", "watch=false&fence=1&wait_ms=0", "fence=9223372036854775807&wait_ms=3600000",
                      "waiters=100&watch=false", "watch", "watch="):
            r = self.client.get(f"/v1/locks/{name}?{query}")
            self.assertEqual((r.status, r.body["lock"], r.body["held"]), (200, name, False), (query, r))
        r = self.client.get(f"/v1/locks/{name}?watch=true&fence=1&wait_ms=0&waiters=100")
        self.assertEqual((r.status, r.body["held"], r.body["reason"]), (200, False, "expired"), r)

    def test_too_many_waiters(self):
        name = unique_name()
        held = acquire(self.client, name)
        outs: list = []
        threads = []
        for i in range(MAX_WAITERS_PER_LOCK):
            threads.append(self.waiter(name, outs, wait_ms=20000))
            wait_for_waiting(self.client, name, i + 1)
        assert_problem(self, acquire(self.client, name, wait_ms=5000), 429, "too_many_waiters")
        assert_problem(self, acquire(self.client, name), 409, "lock_busy")  # no wait: busy, not full
        self.assertEqual(status(self.client, name)["waiting"], MAX_WAITERS_PER_LOCK)
        token = held.body["token"]
        for t in threads:
            self.assertEqual(release(self.client, name, token).status, 200)
            t.join(10)
            token = outs[-1].body["token"]
        self.assertEqual(release(self.client, name, token).status, 200)

    def test_body_too_large_with_content_length(self):
        name = unique_name()
        big = '{"owner": "' + "x" * (MAX_BODY * 4) + '"}'
        with self.gw.client() as c:
            r = c.post(f"/v1/locks/{name}/acquire", big)
        assert_problem(self, r, 413, "body_too_large")
        huge = b'{"owner": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        code, text = raw_request(self.gw.port, f"POST /v1/locks/{name}/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 f"Content-Type: application/json\r\nContent-Length: {len(huge)}\r\n\r\n".encode()
                                 + huge)
        self.assertEqual(code, 413, text[:300])
        self.assertIn(b"application/problem+json", text)
        # a client that waits for 100 Continue is answered at once and never sends the body
        code, text = raw_request(self.gw.port, f"POST /v1/locks/{name}/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 f"Expect: 100-continue\r\nContent-Length: {len(huge)}\r\n\r\n".encode())
        self.assertEqual(code, 413, text[:300])
        self.assertFalse(status(self.client, name)["held"])
        ok = '{"owner": "' + "x" * 100 + '"}'
        with self.gw.client() as c:
            r = c.post(f"/v1/locks/{name}/acquire", ok)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(release(self.client, name, r.body["token"]).status, 200)

    def test_body_too_large_chunked(self):
        name = unique_name()
        with socket.create_connection(("127.0.0.1", self.gw.port), timeout=10) as s:
            s.sendall(f"POST /v1/locks/{name}/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      f"Transfer-Encoding: chunked\r\n\r\n".encode())
            chunk = b"x" * 4096
            try:
                for _ in range(MAX_BODY // len(chunk) * 4):
                    s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                s.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may stop reading once it has answered; the answer must still be there
            code, text = read_response(s)
        self.assertEqual(code, 413, text[:300])
        self.assertIn(b"/problems/body_too_large", text)
        self.assertFalse(status(self.client, name)["held"])

    def test_gateway_survived(self):
        self.assertTrue(self.gw.running)
        self.assertEqual(self.client.get("/healthz").status, 200)


class HandOverTest(GatewayTest):
    """The next waiter is granted by the release itself. The gateway's re-check (poll_ms) is set past the
    waiter's wait, so only the release can hand the lock over while the waiter waits: the bound allows a
    loaded machine seconds and is still a quarter of the wait."""

    gateway_config = {"poll_ms": 30000}

    def test_release_hands_over_at_once(self):
        name = unique_name()
        held = acquire(self.c, name, ttl_ms=30000)
        out: list = []
        t = LockApiTest.waiter(self, name, out, wait_ms=20000)
        wait_for_waiting(self.c, name, 1)
        time.sleep(0.2)
        released_at = time.monotonic()
        self.assertEqual(release(self.c, name, held.body["token"]).status, 200)
        t.join(30)
        self.assertEqual(out[0].status, 200, out)
        self.assertLess(time.monotonic() - released_at, 5.0, "the release did not hand the lock over")
        self.assertEqual(release(self.c, name, out[0].body["token"]).status, 200)


if __name__ == "__main__":
    unittest.main()
