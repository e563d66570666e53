# SPDX-License-Identifier: Apache-2.0
"""The decisions the Python client's thread and asyncio halves share, without I/O or a gateway: what to do
after each try of a call (transport.Attempts: return the answer, pause, or raise; for a write whose earlier
try may have been applied, raise OutcomeUnknown) and when to renew a lease, how long it stays valid and
what a renewal's outcome means (keeper.RenewalSchedule), and what a failed watch poll means and when to
poll again (keeper.watch_failed, keeper.watch_pause), driven by hand with a settable clock.

Broken variants caught while writing this (each tried, then reverted): a ONCE call retried after a try
that got no answer; the waited time not counted (the budget never ran out); a failed renewal rescheduled
a third of the TTL later instead of soon; a renewal counted as a whole TTL when the hold deadline cut it.

Owns: those two decision steps. Must not: open a connection (test_retries.py drives the loops through a
faulty proxy).
"""

import http.client
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyclient_helpers  # noqa: E402,F401  (puts the client on sys.path)

import fencegate  # noqa: E402
from fencegate.keeper import RETRY_MIN_S, RenewalSchedule, watch_failed, watch_pause  # noqa: E402
from fencegate.aio import AsyncTransport  # noqa: E402
from fencegate.transport import Attempts, Effect, Endpoint, RetryPolicy, _NotSent  # noqa: E402

JSON = {"content-type": "application/json"}
BUSY = b'{"type": "/problems/backend_unavailable", "status": 503}'


class EndpointTest(unittest.TestCase):
    def test_the_asyncio_host_header_is_the_one_http_client_sends(self):
        """The asyncio transport's Host header, next to the one http.client (the thread transport) sends:
        an IPv6 literal in brackets, no port when it is the scheme's default. (Caught: Host: {host}:{port},
        "::1:27481" and "gw.example.com:443".)"""
        for url in ("http://127.0.0.1:8480", "http://[::1]:27481", "https://gw.example.com",
                    "http://gw.example.com:80", "https://gw.example.com:8443/prefix", "http://LocalHost"):
            transport = AsyncTransport(url)
            cls = http.client.HTTPSConnection if url.startswith("https") else http.client.HTTPConnection
            conn = cls(transport.host, transport.port)
            conn.putrequest("GET", "/")
            expected = [line for line in conn._buffer if line.startswith(b"Host:")]
            sent = transport._head("GET", "/", {}).split(b"\r\n")
            self.assertEqual([line for line in sent if line.startswith(b"Host:")], expected, url)

    def test_header_values_are_utf8_and_never_shown(self):
        """Header values go out as UTF-8 (API.md: an owner is UTF-8); one that cannot be sent raises
        ValueError naming the header, never showing the value (it may be the key or a token); credentials
        in the URL are never printed. (Caught: values left to http.client, which sends Latin-1 and puts
        the value in its ValueError.)"""
        endpoint = Endpoint("http://user:sk-SECRET@127.0.0.1:8480", api_key="sk-SECRET")
        self.assertNotIn("SECRET", endpoint.base_url)
        headers = endpoint.headers({}, {"Fence-Owner": "账单-ü"})
        self.assertEqual(headers["Fence-Owner"], "账单-ü".encode("utf-8"))
        self.assertEqual(headers["Authorization"], b"Bearer sk-SECRET")
        for value in ("fgt2.SECRET\n", "fgt2.SECRET\r", "fgt2.\0SECRET", "fgt2.SECRET\ud800"):
            with self.assertRaises(ValueError) as caught:
                endpoint.headers({}, {"Fence-Token": value})
            self.assertIn("Fence-Token", str(caught.exception))
            self.assertNotIn("SECRET", f"{caught.exception} {caught.exception!r} {caught.exception.__context__!r}")

    def test_a_malformed_url_is_shown_without_credentials(self):
        """The ValueError for a URL the client refuses says what is wrong without user:password@, also for
        one that does not parse. (Caught: it showed the URL whole, "not 'ftp://alice:s3cret@gw:8480'".)"""
        for url in ("ftp://alice:s3cret@gw:8480", "http://alice:s3cret@", "alice:s3cret@gw:8480",
                    "http://alice:s3cret@gw:port", "http://alice:s3/cret@gw", "ftp://alice:s3cret@gw/a@b?c#d@e",
                    "http://alice:s3cret@[::1", "http://alice:s3cret@gw:99999"):
            with self.assertRaises(ValueError, msg=url) as caught:
                Endpoint(url)
            shown = f"{caught.exception} {caught.exception!r} {caught.exception.__context__!r}"
            self.assertIn("http://host[:port]", str(caught.exception), url)
            for secret in ("alice", "s3", "cret"):
                self.assertNotIn(secret, shown, url)
        with self.assertRaises(ValueError) as caught:
            Endpoint("ftp://alice:s3cret@gw:8480/x")
        self.assertTrue(str(caught.exception).endswith("not 'ftp://***@gw:8480/x'"), caught.exception)


class AttemptsTest(unittest.TestCase):
    def test_an_answer_is_returned_at_once(self):
        tries = Attempts(RetryPolicy(), Effect.ONCE)
        answer = tries.answered(200, JSON, b'{"ok": true}')
        self.assertEqual((answer.status, answer.body, tries.attempt), (200, {"ok": True}, 1))

    def test_503_is_retried_after_retry_after_until_the_attempts_are_spent(self):
        tries = Attempts(RetryPolicy(attempts=3, budget_s=60.0), Effect.IDEMPOTENT)
        pauses = []
        with self.assertRaises(fencegate.BackendUnavailable):
            while True:
                self.assertIsNone(tries.answered(503, dict(JSON, **{"retry-after": "2"}), BUSY))
                pauses.append(tries.pause())
        self.assertEqual((pauses, tries.attempt, tries.waited), ([2.0, 2.0], 3, 4.0))

    def test_the_budget_ends_the_retries(self):
        tries = Attempts(RetryPolicy(attempts=10, budget_s=5.0), Effect.IDEMPOTENT)
        tries.answered(503, dict(JSON, **{"retry-after": "3"}), BUSY)
        self.assertEqual(tries.pause(), 3.0)
        tries.answered(503, dict(JSON, **{"retry-after": "3"}), BUSY)
        with self.assertRaises(fencegate.BackendUnavailable):
            tries.pause()

    def test_no_answer_is_retried_unless_the_call_may_act_twice(self):
        again = Attempts(RetryPolicy(), Effect.IDEMPOTENT)
        again.no_answer("POST /x: no answer")
        self.assertGreater(again.pause(), 0.0)
        once = Attempts(RetryPolicy(), Effect.ONCE)
        once.no_answer("POST /x: no answer")
        with self.assertRaises(fencegate.GatewayUnreachable) as raised:
            once.pause()
        self.assertTrue(raised.exception.sent)

    def test_a_request_never_sent_is_retried_even_once(self):
        tries = Attempts(RetryPolicy(), Effect.ONCE)
        tries.not_sent(_NotSent("cannot connect"))
        self.assertGreater(tries.pause(), 0.0)
        tries.not_sent(_NotSent("TLS failed", again=False))
        with self.assertRaises(fencegate.GatewayUnreachable) as raised:
            tries.pause()
        self.assertFalse(raised.exception.sent)

    def test_a_write_refused_after_a_try_that_may_have_been_applied_has_an_unknown_outcome(self):
        stale = b'{"type": "/problems/stale_fence", "status": 409}'
        for first in ("no answer", "503"):
            tries = Attempts(RetryPolicy(attempts=3, budget_s=60.0), Effect.IDEMPOTENT, "PATCH /v1/pg/t/1", write=True)
            if first == "503":
                self.assertIsNone(tries.answered(503, JSON, BUSY))
            else:
                tries.no_answer("reset")
            tries.pause()
            self.assertIsNone(tries.answered(409, JSON, stale))
            with self.assertRaises(fencegate.OutcomeUnknown) as caught:
                tries.pause()
            self.assertIsInstance(caught.exception.last, fencegate.StaleFence, first)
            self.assertTrue(caught.exception.sent)
        tries = Attempts(RetryPolicy(attempts=3, budget_s=60.0), Effect.IDEMPOTENT, "PATCH /v1/pg/t/1", write=True)
        tries.not_sent(_NotSent("refused"))  # certainly not applied
        tries.pause()
        tries.answered(409, JSON, stale)
        self.assertRaises(fencegate.StaleFence, tries.pause)
        tries = Attempts(RetryPolicy(attempts=3, budget_s=60.0), Effect.IDEMPOTENT, "POST /v1/locks/x/renew")
        tries.no_answer("reset")  # not a write: a refusal of the retry is the answer
        tries.pause()
        tries.answered(409, JSON, stale)
        self.assertRaises(fencegate.StaleFence, tries.pause)

    def test_a_2xx_that_is_not_the_gateways_is_no_answer(self):
        """A 2xx is the gateway's only as a JSON object, or as the 204 a call with Prefer: return=minimal
        asked for: an HTML page (a web server at a wrong URL, a proxy's page), an empty 200, a JSON text
        that is no object, or a 204 nobody asked for is no answer, retried as its effect allows, and then
        GatewayUnreachable with sent true (a write's outcome unknown). (Caught: it was returned as the
        result: an acquire raised TypeError, no FencegateError; a write answered the HTML text as if
        applied; a renewal answered so killed the keeper's thread.)"""
        html = {"content-type": "text/html"}
        for status, headers, raw in ((200, html, b"<!doctype html><p>app</p>"), (200, JSON, b""),
                                     (200, JSON, b'"ok"'), (201, JSON, b"[1]"), (204, {}, b"")):
            tries = Attempts(RetryPolicy(attempts=2, budget_s=60.0), Effect.IDEMPOTENT, "PATCH /v1/pg/t/1", write=True)
            self.assertIsNone(tries.answered(status, headers, raw), raw)
            self.assertGreater(tries.pause(), 0.0)
            self.assertIsNone(tries.answered(status, headers, raw))
            with self.assertRaises(fencegate.GatewayUnreachable) as caught:
                tries.pause()
            self.assertTrue(caught.exception.sent)
            self.assertIn(f"a {status} whose body is not the gateway's", str(caught.exception))
        once = Attempts(RetryPolicy(), Effect.ONCE, "POST /v1/pg/t", write=True)
        self.assertIsNone(once.answered(201, html, b"<p>created?</p>"))
        self.assertRaises(fencegate.GatewayUnreachable, once.pause)
        minimal = Attempts(RetryPolicy(), Effect.IDEMPOTENT, "PATCH /v1/pg/t/1", write=True, minimal=True)
        self.assertEqual(minimal.answered(204, {}, b"").status, 204)
        self.assertEqual(minimal.answered(200, JSON, b'{"applied": true}').body, {"applied": True})

    def test_a_refusal_is_not_retried(self):
        tries = Attempts(RetryPolicy(), Effect.IDEMPOTENT)
        self.assertIsNone(tries.answered(409, JSON, b'{"type": "/problems/lock_busy", "status": 409}'))
        with self.assertRaises(fencegate.LockBusy):
            tries.pause()


class RenewalScheduleTest(unittest.TestCase):
    def test_renews_every_third_counted_from_the_sending(self):
        s = RenewalSchedule(3.0, sent_at=100.0)
        self.assertEqual((s.delay(100.0), s.valid_until), (1.0, 103.0))
        self.assertEqual(s.delay(101.5), 0.0)
        s.renewed(101.0)  # the answer came later; the lease counts from the sending
        self.assertEqual((s.next_at, s.valid_until), (102.0, 104.0))
        self.assertIsNone(s.lapsed(103.99))
        self.assertEqual(s.lapsed(104.0), "unrenewed")

    def test_a_renewal_counts_for_what_it_granted(self):
        """A 30 s lease whose max_hold is 65 s (gateway clock: acquired at 1,000 s): the renewal sent at 40
        is granted 25 s, up to the hold deadline; it counts until 65, and nothing renews it after. A lock
        set counts its shortest grant. Broken variant caught: every renewal counted as a whole TTL (valid
        until 70, renewed again at 50)."""
        s = RenewalSchedule(30.0, sent_at=0.0)
        self.assertIsNone(s.outcome(10.0, None, 10.2, {"ttl_ms": 30000, "expires_at_ms": 1040000,
                                                        "hold_until_ms": 1065000}))
        self.assertEqual((s.valid_until, s.next_at), (40.0, 20.0))
        self.assertIsNone(s.outcome(40.0, None, 40.2, {"ttl_ms": 25000, "expires_at_ms": 1065000,
                                                        "hold_until_ms": 1065000}))
        self.assertEqual((s.valid_until, s.next_at), (65.0, 65.0))
        self.assertIsNone(s.lapsed(64.99))
        self.assertEqual(s.lapsed(65.0), "max_hold_exceeded")
        locks = {"locks": [{"lock": "a", "ttl_ms": 30000, "expires_at_ms": 1040000, "hold_until_ms": 1090000},
                           {"lock": "b", "ttl_ms": 12000, "expires_at_ms": 1022000, "hold_until_ms": 1022000}]}
        s = RenewalSchedule(30.0, sent_at=0.0)
        self.assertIsNone(s.outcome(10.0, None, 10.2, locks))
        self.assertEqual((s.valid_until, s.next_at, s.lapsed(22.0)), (22.0, 22.0, "max_hold_exceeded"))

    def test_a_failed_renewal_is_tried_again_soon(self):
        s = RenewalSchedule(30.0, sent_at=0.0)
        s.failed(10.0)
        self.assertEqual(s.next_at, 11.0)  # a second at most
        s.failed(29.9)
        self.assertEqual(s.next_at, 29.9 + RETRY_MIN_S)  # at least RETRY_MIN_S
        s.failed(29.0)
        self.assertAlmostEqual(s.next_at, 29.25)  # a quarter of what is left

    def test_an_outcome_ends_the_lease_or_reschedules(self):
        s = RenewalSchedule(30.0, sent_at=0.0)
        self.assertIsNone(s.outcome(10.0, None, 10.5))
        self.assertEqual((s.valid_until, s.next_at), (40.0, 20.0))
        busy = fencegate.errors.problem_error(503, {"type": "/problems/backend_unavailable"})
        self.assertIsNone(s.outcome(20.0, busy, 20.5))
        self.assertEqual(s.next_at, 21.5)
        self.assertIsNone(s.outcome(21.5, fencegate.GatewayUnreachable("reset"), 22.0))
        self.assertEqual(s.next_at, 23.0)
        lost = fencegate.errors.problem_error(410, {"type": "/problems/lease_lost", "reason": "revoked"})
        self.assertEqual(s.outcome(23.0, lost, 23.1), "revoked")
        forbidden = fencegate.errors.problem_error(403, {"type": "/problems/forbidden"})
        self.assertEqual(s.outcome(23.0, forbidden, 23.1), "forbidden")

    def test_a_watch_ends_on_a_refusal_and_polls_again_otherwise(self):
        self.assertEqual(watch_failed(fencegate.errors.problem_error(400, {"type": "/problems/invalid_field"})),
                         "invalid_field")
        self.assertIsNone(watch_failed(fencegate.errors.problem_error(503, {"type": "/problems/backend_unavailable"})))
        self.assertIsNone(watch_failed(fencegate.GatewayUnreachable("reset")))
        # 429: the key's quota of parked waits and watches is full for now; poll again after Retry-After
        full = fencegate.errors.problem_error(429, {"type": "/problems/too_many_waiters"}, retry_after=1.0)
        self.assertIsNone(watch_failed(full))
        self.assertEqual(watch_pause(full, 3), 1.0)
        reset = fencegate.GatewayUnreachable("reset")
        self.assertEqual([watch_pause(reset, n) for n in (1, 2, 3, 5, 6, 9)], [1.0, 2.0, 4.0, 16.0, 25.0, 25.0])

    def test_a_renewal_never_outlasts_the_lease(self):
        s = RenewalSchedule(30.0, sent_at=0.0)
        self.assertEqual(s.call_timeout(10.0, 10.0), 10.0)
        self.assertEqual(s.call_timeout(25.0, 10.0), 5.0)
        self.assertEqual(s.call_timeout(30.0, 10.0), RETRY_MIN_S)


if __name__ == "__main__":
    unittest.main()
