# SPDX-License-Identifier: Apache-2.0
"""The Python client's retries and connections, through a fault-injecting proxy in front of a real
gateway: lost replies, 503 with Retry-After, refused connections, keep-alive reuse, idle connections the
gateway closed, and renewals that get no answer.

Owns: the retry rule of clients/python (repeat only what cannot do more when repeated). Must not: test
lease semantics (test_leases.py).
"""

import asyncio
import http.server
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import FaultProxy, config, unique  # noqa: E402

import fencegate  # noqa: E402
from fencegate.transport import Attempts, _NotSent  # noqa: E402
from harness import Gateway, psql  # noqa: E402


def first(method: str, path_part: str, action: str, times: int = 1):
    """A proxy rule: `action` for the first `times` requests of `method` whose path contains path_part."""
    return lambda m, p, body, seen: action if m == method and path_part in p and seen < times else "forward"


def rows(key: str) -> int:
    return int(psql("SELECT count(*) FROM public.invoices WHERE id = :'k'", {"k": key})[0])


class RetryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(config=config())
        cls.direct = fencegate.Client(cls.gw.base)

    @classmethod
    def tearDownClass(cls):
        cls.direct.close()
        cls.gw.stop()

    def via(self, rule=None, retry_after: int = 1, **client_args) -> tuple:
        proxy = FaultProxy(self.gw.port, rule, retry_after=retry_after)
        client = fencegate.Client(proxy.url, **client_args)
        self.addCleanup(proxy.close)
        self.addCleanup(client.close)
        return proxy, client

    def test_lost_acquire_reply_is_retried_with_the_same_request_id(self):
        """The gateway granted the lock but the reply was lost: the retry carries the same request_id
        and gets the same lease, never a second one. (Caught: a fresh request_id per try; the retry
        answered lock_busy.)"""
        lock = unique("lost-reply")
        proxy, client = self.via(first("POST", "/acquire", "drop"))
        lease = client.lock(lock, renew=False).acquire()
        sent = proxy.seen("POST", f"/v1/locks/{lock}/acquire")
        self.assertEqual(len(sent), 2)
        self.assertEqual(sent[0]["request_id"], sent[1]["request_id"])
        self.assertEqual(sent[0]["request_id"], lease.request_id)
        self.assertEqual(self.direct.lock_status(lock)["fence"], lease.fence)
        lease.release()
        self.assertFalse(self.direct.lock_status(lock)["held"])

    def test_503_is_retried_after_retry_after(self):
        """A 503 with Retry-After: 1 is retried one second later. (Caught: ignoring Retry-After; the
        retry came after 50 ms.)"""
        lock = unique("busy")
        proxy, client = self.via(first("GET", "/v1/locks/", "refuse503"))
        started = time.monotonic()
        self.assertFalse(client.lock_status(lock)["held"])
        self.assertGreaterEqual(time.monotonic() - started, 0.95)
        self.assertEqual(len(proxy.seen("GET", "/v1/locks/")), 2)
        proxy, client = self.via(lambda m, p, b, seen: "refuse503",
                                 retry=fencegate.RetryPolicy(attempts=3, budget_s=10))
        with self.assertRaises(fencegate.BackendUnavailable) as caught:
            client.lock_status(lock)
        self.assertEqual((caught.exception.retry_after, len(proxy.requests)), (1.0, 3))

    def test_calls_that_could_mislead_are_not_retried_once_sent(self):
        """Insert, delete and a batch with an insert whose replies are lost raise GatewayUnreachable
        (sent=True) after one try, and a 503 to an insert is raised at once (as OutcomeUnknown). (Caught:
        inserts marked idempotent; the retry answered Conflict for the row the first try inserted.)"""
        key = unique("once")
        proxy, client = self.via(first("POST", "/v1/pg/", "drop", times=2))
        with self.direct.lock(unique("once")) as lease:
            table = client.pg("invoices", token=lease.token)
            with self.assertRaises(fencegate.GatewayUnreachable) as caught:
                table.insert(id=key, note="once")
            self.assertTrue(caught.exception.sent)
            self.assertEqual(len(proxy.seen("POST", "/v1/pg/invoices")), 1)
            self.assertEqual(rows(key), 1)
            with self.assertRaises(fencegate.GatewayUnreachable):
                table.batch([{"op": "post", "row": {"id": key + "-b"}}])
            self.assertEqual(len(proxy.seen("POST", "/v1/pg/batch")), 1)
            self.assertEqual(rows(key + "-b"), 1)
            proxy.rule = first("DELETE", "/v1/pg/", "drop")
            with self.assertRaises(fencegate.GatewayUnreachable):
                table.delete(key)
            self.assertEqual((len(proxy.seen("DELETE", "/v1/pg/")), rows(key)), (1, 0))
            proxy.rule = first("POST", "/v1/pg/", "refuse503", times=100)
            with self.assertRaises(fencegate.OutcomeUnknown):
                table.insert(id=key)
            self.assertEqual(len(proxy.seen("POST", "/v1/pg/invoices")), 2)

    def test_a_write_answered_5xx_has_an_unknown_outcome(self):
        """The gateway answers 503 when its backend fails, also after the commit: here the proxy forwards
        each write and answers 503 in place of the gateway's answer. An insert, a delete, a batch with an
        insert and a Redis delete (sent once) and a PATCH whose one try is all the policy allows raise
        OutcomeUnknown (sent, with the 503 as earlier and last), never BackendUnavailable, which says that
        nothing changed, though each was applied; in the asyncio client too. A read answered 503 still
        raises BackendUnavailable. Failed before the fix: the insert raised BackendUnavailable."""
        key = unique("ambiguous")
        proxy, client = self.via(lambda m, p, b, seen: "forward503" if m != "GET" and "/v1/pg/" in p or
                                 m == "DELETE" else "forward", retry=fencegate.RetryPolicy(attempts=1))
        with self.direct.lock(unique("ambiguous")) as lease:
            table, keys = client.pg("invoices", token=lease.token), client.redis(token=lease.token)
            self.direct.redis(token=lease.token).put("app:" + key, "v")

            def redis_gone() -> bool:
                with self.assertRaises(fencegate.NotFound):
                    self.direct.redis().get("app:" + key)
                return True
            writes = [(lambda: table.insert(id=key), lambda: rows(key) == 1),
                      (lambda: table.patch(key, note="patched"),
                       lambda: self.direct.pg("invoices").get(key)["row"]["note"] == "patched"),
                      (lambda: table.batch([{"op": "post", "row": {"id": key + "-b"}}]), lambda: rows(key + "-b") == 1),
                      (lambda: table.delete(key), lambda: rows(key) == 0),
                      (lambda: keys.delete("app:" + key), redis_gone)]
            for i, (write, applied) in enumerate(writes):
                with self.assertRaises(fencegate.OutcomeUnknown, msg=i) as caught:
                    write()
                self.assertTrue(caught.exception.sent)
                self.assertIsInstance(caught.exception.last, fencegate.BackendUnavailable)
                self.assertIs(caught.exception.earlier, caught.exception.last)
                self.assertTrue(applied(), i)
            self.assertEqual(len(proxy.requests), len(writes))

            async def insert():
                aio = fencegate.AsyncClient(proxy.url, retry=fencegate.RetryPolicy(attempts=1))
                try:
                    with self.assertRaises(fencegate.OutcomeUnknown):
                        await aio.pg("invoices", token=lease.token).insert(id=key + "-c")
                finally:
                    await aio.close()

            asyncio.run(insert())
            self.assertEqual(rows(key + "-c"), 1)
        proxy.rule = lambda m, p, b, seen: "refuse503"
        with self.assertRaises(fencegate.BackendUnavailable):
            client.pg("invoices").get(key)

    def test_a_revoke_answered_5xx_has_an_unknown_outcome(self):
        """The proxy forwards every revoke and answers 503 in place of the gateway's 200, as a gateway whose
        backend failed to answer after recording the revocation would: revoke_lock raises OutcomeUnknown
        (sent, with the 503 as earlier and last) after one try, and revoke_semaphore, which names the fence
        it ends and so is tried again (a repeat ends nobody else), after the policy's two (earlier the
        first 503, last the second); never BackendUnavailable, which says the holder kept its lease, though
        the lease ended; in the asyncio client too. Failed before the fixes: each raised BackendUnavailable
        (revoke_semaphore still did once revoke_lock was fixed)."""
        retry = fencegate.RetryPolicy(attempts=2)
        proxy, client = self.via(lambda m, p, b, seen: "forward503" if p.endswith("/revoke") else "forward",
                                 retry=retry)
        kinds = {  # how to take a lease on name, how to revoke it, its route, the revoke's tries, whether held
            "lock": (lambda name: self.direct.lock(name, ttl_ms=30000, renew=False, watch=False),
                     lambda c, name, fence: c.revoke_lock(name, reason="test"), "locks", 1,
                     lambda name: self.direct.lock_status(name)["held"]),
            "semaphore": (lambda name: self.direct.semaphore(name, 1, ttl_ms=30000, renew=False, watch=False),
                          lambda c, name, fence: c.revoke_semaphore(name, fence, reason="test"), "semaphores", 2,
                          lambda name: self.direct.semaphore_status(name)["holders"] > 0),
        }

        async def on_asyncio(call) -> None:
            aio = fencegate.AsyncClient(proxy.url, retry=retry)
            try:
                await call(aio)
            finally:
                await aio.close()

        for kind, (take, revoke, route, tries, held) in kinds.items():
            for what, run in (("thread", lambda call: call(client)),
                              ("asyncio", lambda call: asyncio.run(on_asyncio(call)))):
                name = unique(f"revoke503-{kind}")
                fence = take(name).acquire().fence
                with self.assertRaises(fencegate.OutcomeUnknown, msg=f"{kind}, {what}") as caught:
                    run(lambda c: revoke(c, name, fence))
                self.assertTrue(caught.exception.sent)
                self.assertIsInstance(caught.exception.earlier, fencegate.BackendUnavailable)
                self.assertIsInstance(caught.exception.last, fencegate.BackendUnavailable)
                self.assertEqual(caught.exception.earlier is caught.exception.last, tries == 1, f"{kind}, {what}")
                self.assertEqual(len(proxy.seen("POST", f"/v1/{route}/{name}/revoke")), tries, f"{kind}, {what}")
                self.assertFalse(held(name), f"{kind}, {what}")

    def test_idempotent_writes_renew_and_release_are_retried(self):
        """PATCH, PUT, renew and release whose replies are lost are sent again and succeed."""
        key = unique("idem")
        psql("INSERT INTO public.invoices (id) VALUES (:'k')", {"k": key})
        lock = unique("idem")
        rule = lambda m, p, b, seen: "drop" if m in ("PATCH", "PUT", "POST") and seen == 0 and "acquire" not in p \
            else "forward"  # noqa: E731
        proxy, client = self.via(rule)
        lease = client.lock(lock, renew=False).acquire()
        self.assertEqual(lease.pg("invoices").patch(key, note="patched")["row"]["note"], "patched")
        self.assertEqual(lease.pg("invoices").put(key, note="put")["row"]["note"], "put")
        lease.renew()
        lease.release()
        for method, path in (("PATCH", "/v1/pg/"), ("PUT", "/v1/pg/"), ("POST", f"/v1/locks/{lock}/renew"),
                             ("POST", f"/v1/locks/{lock}/release")):
            self.assertEqual(len(proxy.seen(method, path)), 2, (method, path))
        self.assertFalse(self.direct.lock_status(lock)["held"])

    def test_write_refused_after_a_lost_reply_has_an_unknown_outcome(self):
        """A PATCH the gateway committed but whose reply was lost is sent again with the same fence, which
        the gateway accepts (a fence equal to the stored one passes), so a retry alone is never refused for
        the first try's write. But when a newer holder writes the row between the two tries, the retry is
        refused stale_fence although the first try was applied; and when the lease is revoked in between,
        410. The client cannot tell: it raises GatewayUnreachable (sent) saying the outcome is unknown, with
        the refusal, instead of the refusal, which promises that nothing changed; the lease still hears the
        410. (Caught: the retry's StaleFence raised as if the write had changed nothing.)"""
        key = unique("unknown")
        psql("INSERT INTO public.invoices (id) VALUES (:'k')", {"k": key})
        newer_wrote = []

        def rule(method, path, body, seen):
            if method != "PATCH" or key not in path:
                return "forward"
            if seen == 0:
                return "drop"  # forwarded and committed, then the reply is lost
            if seen == 1:
                with self.direct.lock(unique("newer")) as newer:
                    newer_wrote.append(newer.pg("invoices").patch(key, note="newer")["fence"])
            return "forward"

        proxy, client = self.via(rule)
        with client.lock(unique("unknown"), renew=False) as lease:
            with self.assertRaises(fencegate.GatewayUnreachable) as caught:
                lease.pg("invoices").patch(key, status="first")
            self.assertTrue(caught.exception.sent)
            self.assertIn("outcome unknown", str(caught.exception))
            self.assertIsInstance(caught.exception, fencegate.OutcomeUnknown)
            self.assertIsInstance(caught.exception.last, fencegate.StaleFence)
            self.assertFalse(lease.lost.is_set())
        row = self.direct.pg("invoices").get(key)
        self.assertEqual((row["row"]["status"], row["row"]["note"], row["fence"]), ("first", "newer", newer_wrote[0]))
        self.assertEqual(len(proxy.seen("PATCH", "/v1/pg/invoices/")), 2)

        lock = unique("unknown")

        def revoke_between(method, path, body, seen):
            if method == "PUT" and seen == 0:
                return "drop"
            if method == "PUT" and seen == 1:
                self.direct.revoke_lock(lock, "test")
            return "forward"

        proxy.rule = revoke_between
        lease = client.lock(lock, renew=False).acquire()
        with self.assertRaises(fencegate.GatewayUnreachable) as caught:
            lease.pg("invoices").put(key, status="put")
        self.assertIn("outcome unknown", str(caught.exception))
        self.assertIsInstance(caught.exception.last, fencegate.LeaseLost)
        self.assertEqual((self.direct.pg("invoices").get(key)["row"]["status"], lease.lost_reason), ("put", "revoked"))
        with self.assertRaises(fencegate.LeaseLost):
            lease.release()

        key = unique("unknown")  # the asyncio client alike, through the first rule
        psql("INSERT INTO public.invoices (id) VALUES (:'k')", {"k": key})
        proxy.rule = rule

        async def patch():
            aio = fencegate.AsyncClient(proxy.url)
            try:
                async with aio.lock(unique("unknown"), renew=False) as lease:
                    with self.assertRaises(fencegate.OutcomeUnknown) as caught:
                        await lease.pg("invoices").patch(key, status="first")
                    return caught.exception
            finally:
                await aio.close()

        self.assertIsInstance(asyncio.run(patch()).last, fencegate.StaleFence)
        self.assertEqual(self.direct.pg("invoices").get(key)["row"]["status"], "first")

    def test_a_redirect_is_an_error(self):
        """A 301 to a fenced PATCH and to a read raises UnexpectedStatus naming the status and the Location,
        after one try, and the row is unchanged; in the asyncio client too. Failed before the fix: the
        PATCH returned None and the read the empty body, as if both had succeeded."""
        key = unique("redirect")
        psql("INSERT INTO public.invoices (id, note) VALUES (:'k', 'before')", {"k": key})
        proxy, client = self.via(lambda m, p, b, seen: "redirect" if "/v1/pg/" in p else "forward")
        with self.direct.lock(unique("redirect")) as lease:
            for call in (lambda: client.pg("invoices", token=lease.token).patch(key, note="after"),
                         lambda: client.pg("invoices").get(key)):
                with self.assertRaises(fencegate.UnexpectedStatus) as caught:
                    call()
                self.assertEqual((caught.exception.status, caught.exception.code), (301, "http_301"))
                self.assertEqual(caught.exception.location, f"{proxy.url}/v1/pg/invoices/{key}")

            async def patch():
                aio = fencegate.AsyncClient(proxy.url)
                try:
                    with self.assertRaises(fencegate.UnexpectedStatus) as caught:
                        await aio.pg("invoices", token=lease.token).patch(key, note="after")
                    return caught.exception.status
                finally:
                    await aio.close()

            self.assertEqual(asyncio.run(patch()), 301)
        self.assertEqual(len(proxy.seen("PATCH", "/v1/pg/")), 2)
        self.assertEqual(self.direct.pg("invoices").get(key)["row"]["note"], "before")

    def test_refused_connection_is_retried_even_for_inserts(self):
        """A connection the gateway's address refused never carried the request: even an insert is sent
        again once something listens."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        client = fencegate.Client(f"http://127.0.0.1:{port}")
        self.addCleanup(client.close)
        started: list = []
        timer = threading.Timer(0.3, lambda: started.append(FaultProxy(self.gw.port, port=port)))
        timer.start()
        key = unique("refused")
        with self.direct.lock(unique("refused")) as lease:
            client.pg("invoices", token=lease.token).insert(id=key)
        timer.join()
        self.addCleanup(started[0].close)
        self.assertEqual((rows(key), len(started[0].requests)), (1, 1))
        with self.assertRaises(fencegate.GatewayUnreachable) as caught:
            fencegate.Client("http://127.0.0.1:1", retry=fencegate.RetryPolicy(attempts=2)).lock_status("x")
        self.assertFalse(caught.exception.sent)

    def test_a_call_unanswered_once_was_sent(self):
        """A call whose first try got no answer and whose retry found the connection refused may have reached
        the gateway: its GatewayUnreachable says sent, so that an acquire gives back what it may have been
        granted. Failed before the fix: sent was the last try's alone, False."""
        tries = Attempts(fencegate.RetryPolicy(attempts=2, backoff_s=0.0), fencegate.Effect.IDEMPOTENT)
        tries.no_answer("no answer")
        tries.pause()
        tries.not_sent(_NotSent("connection refused"))
        with self.assertRaises(fencegate.GatewayUnreachable) as caught:
            tries.pause()
        self.assertTrue(caught.exception.sent)
        tries = Attempts(fencegate.RetryPolicy(attempts=2, backoff_s=0.0), fencegate.Effect.IDEMPOTENT)
        tries.not_sent(_NotSent("connection refused"))
        tries.pause()
        tries.not_sent(_NotSent("connection refused"))
        with self.assertRaises(fencegate.GatewayUnreachable) as caught:
            tries.pause()
        self.assertFalse(caught.exception.sent)

    def test_timeouts(self):
        """A call answered later than the timeout raises GatewayUnreachable after it; an acquire's
        timeout is extended by its wait_ms. (Caught: an acquire timeout without the wait; the acquire
        timed out and was sent twice.)"""
        proxy, client = self.via(first("GET", "/v1/locks/", "stall"), timeout=0.5,
                                 retry=fencegate.RetryPolicy(attempts=1))
        started = time.monotonic()
        with self.assertRaises(fencegate.GatewayUnreachable) as caught:
            client.lock_status("slow")
        self.assertTrue(caught.exception.sent)
        self.assertTrue(0.4 < time.monotonic() - started < 1.9)
        lock = unique("slow")
        holder = self.direct.lock(lock).acquire()
        threading.Timer(1.0, holder.release).start()
        with client.lock(lock, wait_ms=5000) as lease:
            self.assertEqual(self.direct.lock_status(lock)["fence"], lease.fence)
        self.assertEqual(len(proxy.seen("POST", f"/v1/locks/{lock}/acquire")), 1)

    def test_acquire_without_wait_ms_waits_as_long_as_the_gateway_default(self):
        """A gateway whose defaults.wait_ms is 5 s holds an acquire that names no wait while the lock is
        busy: the client (timeout 0.5 s) waits for the grant 1.5 s later, asking once, without wait_ms; the
        asyncio client too. (Caught: a per-try timeout without room for the gateway's wait; the acquire
        timed out after 0.5 s and was sent again.)"""
        gw = Gateway(config=config(defaults={"wait_ms": 5000}))
        self.addCleanup(gw.stop)
        direct = fencegate.Client(gw.base)
        self.addCleanup(direct.close)
        proxy = FaultProxy(gw.port)
        self.addCleanup(proxy.close)
        client = fencegate.Client(proxy.url, timeout=0.5)
        self.addCleanup(client.close)
        for asynchronous in (False, True):
            lock = unique("default-wait")
            holder = direct.lock(lock, renew=False).acquire()
            threading.Timer(1.5, holder.release).start()
            started = time.monotonic()
            if asynchronous:
                async def acquire():
                    aio = fencegate.AsyncClient(proxy.url, timeout=0.5)
                    try:
                        async with aio.lock(lock, renew=False) as lease:
                            return lease.fence, direct.lock_status(lock)["fence"]
                    finally:
                        await aio.close()
                fence, held = asyncio.run(acquire())
            else:
                with client.lock(lock, renew=False) as lease:
                    fence, held = lease.fence, direct.lock_status(lock)["fence"]
            self.assertEqual(fence, held)
            self.assertGreater(time.monotonic() - started, 1.2)
            sent = proxy.seen("POST", f"/v1/locks/{lock}/acquire")
            self.assertEqual(len(sent), 1, (asynchronous, sent))
            self.assertNotIn("wait_ms", sent[0])

    def test_one_keepalive_connection_per_thread(self):
        proxy, client = self.via()
        for _ in range(20):
            client.lock_status("keepalive")
        self.assertEqual(proxy.connections, 1)
        threads = [threading.Thread(target=lambda: [client.lock_status("keepalive") for _ in range(5)])
                   for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual((proxy.connections, len(proxy.requests)), (4, 35))

    def test_a_header_that_cannot_be_sent_is_not_sent(self):
        """A token or key with a line break cannot be sent: ValueError naming the header and not its value,
        nothing sent; an owner outside Latin-1 goes out in UTF-8. (Caught: http.client's ValueError showed
        the value, "Invalid header value b'fgt2.TOKEN-SECRET\\n'"; the owner raised UnicodeEncodeError.)"""
        proxy, client = self.via(retry=fencegate.RetryPolicy(attempts=1))
        with self.assertRaises(ValueError) as caught:
            client.pg("invoices", token="fgt2.TOKEN-SECRET\n").patch(1, status="x")
        self.assertIn("Fence-Token", str(caught.exception))
        proxy_key, client_key = self.via(api_key="sk-SECRET-API-KEY\n")
        with self.assertRaises(ValueError) as key_caught:
            client_key.lock_status(unique("key"))
        self.assertIn("Authorization", str(key_caught.exception))
        for error in (caught.exception, key_caught.exception):
            self.assertNotIn("SECRET", f"{error} {error!r} {error.__context__!r}")
        self.assertEqual((proxy.requests, proxy_key.requests), ([], []))
        with self.assertRaises(fencegate.InvalidFenceToken) as refused:
            client.pg("invoices", token="fgt2.TOKEN-SECRET", owner="账单").patch(1, status="x")
        self.assertNotIn("TOKEN-SECRET", f"{refused.exception} {refused.exception!r}")

    def test_idle_connection_closed_by_the_gateway_is_noticed_before_use(self):
        """The gateway closes a keep-alive connection while it is idle; the next call, even an insert,
        opens a new one instead of failing. (Caught: reusing the socket unchecked; the insert raised
        GatewayUnreachable.)"""
        proxy, client = self.via(first("GET", "/v1/locks/", "close_after"))
        client.lock_status("idle")
        time.sleep(0.1)
        key = unique("idle")
        with self.direct.lock(unique("idle")) as lease:
            client.pg("invoices", token=lease.token).insert(id=key)
        self.assertEqual((rows(key), proxy.connections), (1, 2))

    def test_renewals_without_answer(self):
        """Renewals answered 503 are retried until the lease would run out, then it is lost
        ("unrenewed"); a short outage is bridged. (Caught: a keeper that gives up at the first failed
        renewal; the lease was lost during the short outage.)"""
        lock = unique("outage")
        proxy, client = self.via(first("POST", "/renew", "refuse503", times=2), retry_after=0)
        # 3 s: the third try, about 1.9 s in, comes well before the lease would run out on a loaded machine
        with client.lock(lock, ttl_ms=3000, watch=False) as lease:
            time.sleep(5.0)
            self.assertFalse(lease.lost.is_set(), lease.lost_reason)
            self.assertGreaterEqual(len(proxy.seen("POST", f"/v1/locks/{lock}/renew")), 4)
        lock = unique("outage")
        proxy, client = self.via(lambda m, p, b, seen: "refuse503" if p.endswith("/renew") else "forward",
                                 retry_after=0)
        lease = client.lock(lock, ttl_ms=1500, watch=False).acquire()
        started = time.monotonic()
        self.assertTrue(lease.lost.wait(5))
        self.assertEqual(lease.lost_reason, "unrenewed")
        self.assertLess(time.monotonic() - started, 2.5)
        with self.assertRaises(fencegate.LeaseLost):
            lease.release()


class NotTheGatewayTest(unittest.TestCase):
    """A web server at the gateway's URL that answers 200 with an HTML page to every request (a single-page
    app's fallback, a captive portal): nothing it answers is taken for the gateway's answer."""

    def setUp(self):
        seen = self.seen = []
        answer = self.answer = {"type": "text/html", "body": b"<!doctype html><html><body>app</body></html>"}

        class Page(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                seen.append((self.command, self.path, self.rfile.read(length) if length else b""))
                page = answer["body"]
                self.send_response(200)
                self.send_header("Content-Type", answer["type"])
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.client = fencegate.Client(f"http://127.0.0.1:{server.server_address[1]}", api_key="",
                                       retry=fencegate.RetryPolicy(attempts=2, budget_s=5.0))
        self.addCleanup(self.client.close)

    def test_a_page_answered_200_is_no_grant_no_write_and_no_read(self):
        """(Caught: an acquire raised TypeError, no FencegateError, and gave nothing back; a write and a read
        returned the page's text as their result.)"""
        with self.assertRaises(fencegate.GatewayUnreachable) as caught:
            self.client.lock(unique("page"), ttl_ms=3000).acquire()
        self.assertTrue(caught.exception.sent)
        acquires = [body for method, path, body in self.seen if path.endswith("/acquire")]
        self.assertEqual(len(acquires), 4, "two tries, then the give-back of what they may have been granted "
                         "(as after a lost reply: retried as the policy allows)")
        self.assertEqual(json.loads(acquires[-1])["wait_ms"], 0)
        with self.assertRaises(fencegate.GatewayUnreachable) as caught:
            self.client.pg("invoices", token="t").patch(1, status="paid")
        self.assertTrue(caught.exception.sent, "a write answered so may have been applied")
        self.assertRaises(fencegate.GatewayUnreachable, self.client.pg("invoices").get, 1)
        self.assertRaises(fencegate.GatewayUnreachable, self.client.lock_status, "x")

    def test_a_json_object_without_a_grant_is_no_lease_and_no_write(self):
        """Another JSON service at the gateway's URL, answering {"status": "ok"} to everything: an acquire
        answered so holds no lease, a write answered so was not applied by the gateway. (Caught: the acquire
        raised KeyError, no FencegateError; the write returned {"status": "ok"} as its result.)"""
        self.answer.update(type="application/json", body=b'{"status": "ok"}')
        for acquire in (lambda: self.client.lock(unique("json"), ttl_ms=3000).acquire(),
                        lambda: self.client.lockset([unique("json-a"), unique("json-b")], ttl_ms=3000).acquire()):
            with self.assertRaises(fencegate.GatewayUnreachable) as caught:
                acquire()
            self.assertTrue(caught.exception.sent)
            self.assertIn("no grant", str(caught.exception))
        for write in (lambda t: t.patch(1, status="paid"), lambda t: t.insert(id="1")):
            with self.assertRaises(fencegate.GatewayUnreachable) as caught:
                write(self.client.pg("invoices", token="t"))
            self.assertTrue(caught.exception.sent, "a write answered so may have been applied")
        self.assertEqual(self.client.lock_status("x"), {"status": "ok"}, "reads are not judged by their members")


if __name__ == "__main__":
    unittest.main()
