# SPDX-License-Identifier: Apache-2.0
"""The Python client's leases against a real gateway: renewal, loss inside a `with` block while the
process is stopped (SIGSTOP), an interrupted acquire giving back its grant, semaphores, fenced writes to
Postgres and Redis, typed exceptions per problem code, and the audit trail read page by page.

Owns: the lease and write behaviour of clients/python. Must not: test retries and connections
(test_retries.py), the examples (test_examples.py) or the packaging (test_package.py).
"""

import asyncio
import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import (FaultProxy, assert_whole_durations, child_env, config, durations_sent,  # noqa: E402
                              first_acquire_refused, late_waits, refuse_while, slow_acquire_proxy, unique)

import fencegate  # noqa: E402
from fencegate import errors  # noqa: E402
from harness import Gateway, psql, wait_for  # noqa: E402

# A holder in its own process, so that SIGSTOP pauses all of it (renewal thread included), as a GC pause
# or a stopped VM would. Prints one line per event; `loop` writes until refused, `once` waits for a line
# on stdin and then writes once.
HOLDER = r"""
import sys, threading, time, fencegate
lock, key, ttl, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
client = fencegate.Client()
said = threading.Lock()
def say(*words):
    with said:  # the on_lost callback speaks from another thread
        sys.stdout.write(" ".join(map(str, words)) + "\n")
        sys.stdout.flush()
try:
    with client.lock(lock, ttl_ms=ttl, on_lost=lambda lease: say("LOST", lease.lost_reason)) as lease:
        say("HELD", lease.fence)
        while True:
            if mode == "once":
                sys.stdin.readline()
            try:
                lease.pg("invoices").patch(key, note="A")
                say("WROTE")
            except fencegate.LeaseLost as e:
                say("REFUSED_LOCAL", e.reason)
                break
            except fencegate.StaleFence as e:
                say("REFUSED_STALE", e.current_fence)
                break
            time.sleep(0.02)
except fencegate.LeaseLost:
    say("EXIT_LEASELOST")
"""


def insert_invoice(key: str, note: str = "") -> None:
    psql("INSERT INTO public.invoices (id, note) VALUES (:'k', :'n')", {"k": key, "n": note})


def note_of(key: str) -> str:
    return psql("SELECT note FROM public.invoices WHERE id = :'k'", {"k": key})[0]


class Holder:
    """A HOLDER child process and its output lines."""

    def __init__(self, url: str, lock: str, key: str, ttl_ms: int, mode: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, lock, key, str(ttl_ms), mode],
                                     env=child_env(url), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.lines: list = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.split()))

    def wait_line(self, word: str, timeout: float = 20.0) -> tuple:
        """(arrival time, words) of the first line starting with word."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, words in list(self.lines):
                if words and words[0] == word:
                    return at, words
            time.sleep(0.01)
        raise AssertionError(f"no {word} line within {timeout}s; got {self.lines}")

    def finish(self) -> None:
        try:
            self.proc.send_signal(signal.SIGCONT)
        except ProcessLookupError:
            pass
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        self.proc.stdout.close()


class LeaseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(config=config(limits={"max_body_bytes": 2048, "max_waiters_per_lock": 1}))
        cls.client = fencegate.Client(cls.gw.base, owner="pytest")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.gw.stop()

    def test_renewal_keeps_the_lease_for_many_ttls(self):
        """A 2 s lease held for 5 s inside `with`: same fence throughout, still writable at the end,
        released on exit, and no write goes out under it afterwards. (Caught: a keeper that never renews;
        the lease expired after one TTL. Writes after the release not refused; the late write was applied.)"""
        lock, key = unique("renew"), unique("inv")
        with self.client.lock(lock, ttl_ms=2000) as lease:
            time.sleep(5.0)
            status = self.client.lock_status(lock)
            self.assertEqual((status["held"], status["fence"], status["owner"]), (True, lease.fence, "pytest"))
            self.assertFalse(lease.lost.is_set())
            written = lease.pg("invoices").put(key, customer="acme", status="open")
            self.assertEqual((written["applied"], written["fence"]), (True, lease.fence))
        self.assertFalse(self.client.lock_status(lock)["held"])
        self.assertFalse(lease.held)
        with self.assertRaises(fencegate.LeaseLost) as caught:  # nobody else wrote: the fence would accept it
            lease.pg("invoices").patch(key, status="after release")
        self.assertEqual(caught.exception.reason, "released")
        self.assertEqual(self.client.pg("invoices").get(key)["row"]["status"], "open")

    def test_lease_granted_after_a_wait_longer_than_its_ttl(self):
        """A waiter with a 2 s TTL gets the lock after waiting 3 s: its lease is fresh, writable at
        once and kept alive. (Caught, with a 1 s TTL and a 2 s wait: counting validity from when the acquire
        was sent; the fresh lease was taken for expired, "unrenewed", and not even released.)"""
        lock, key = unique("waited"), unique("inv")
        holder = self.client.lock(lock, ttl_ms=30000).acquire()
        threading.Timer(3.0, holder.release).start()
        with self.client.lock(lock, ttl_ms=2000, wait_ms=10000) as waiter:
            self.assertEqual(waiter.pg("invoices").put(key, note="waited")["fence"], waiter.fence)
            time.sleep(3.0)
            self.assertFalse(waiter.lost.is_set(), waiter.lost_reason)
            self.assertEqual(self.client.lock_status(lock)["fence"], waiter.fence)
        self.assertFalse(self.client.lock_status(lock)["held"])

    def test_renewal_cut_by_max_hold_counts_only_up_to_the_deadline(self):
        """A 3 s lease whose max_hold is 3.3 s: its first renewal, at about 1 s, is granted only up to the
        hold deadline; the client must count the lease valid no longer than that and report it lost by the
        deadline (plus a margin for a loaded machine), not a whole TTL after the renewal. The watch is off,
        so that only the client's own reckoning can tell. Broken variant caught: the keeper counting every
        renewal as a full TTL held the lease valid until about 4 s (check() passed at 3.8 s while the
        gateway had ended the lease at 3.3 s)."""
        sent = time.monotonic()
        with self.assertRaises(fencegate.LeaseLost):  # leaving: the lease was lost inside
            with self.client.lock(unique("maxhold"), ttl_ms=3000, max_hold_ms=3300, watch=False) as lease:
                time.sleep(max(0.0, sent + 2.0 - time.monotonic()))  # renewed once, and still valid
                lease.check()
                lease.lost.wait(max(0.0, sent + 3.3 + 0.5 - time.monotonic()))
                with self.assertRaises(fencegate.LeaseLost, msg=f"{time.monotonic() - sent:.2f} s after the "
                                       "acquire, past the hold deadline") as caught:
                    lease.check()
                self.assertEqual(caught.exception.reason, "max_hold_exceeded")

    def _fresh_start_via(self, renew_rule) -> fencegate.Client:
        """A client whose acquires are answered after 1.2 s, over a third of a 3 s TTL, so that each is
        renewed at once; renew_rule(path) is what the proxy does with the renewals. One try per call."""
        proxy = FaultProxy(self.gw.port, lambda method, path, body, seen:
                           "stall" if path.endswith("/acquire") else
                           renew_rule(path) if path.endswith("/renew") else "forward")
        proxy.stall_s = 1.2
        client = fencegate.Client(proxy.url, owner="pytest", retry=fencegate.RetryPolicy(attempts=1))
        self.addCleanup(proxy.close)
        self.addCleanup(client.close)
        return client

    def test_fresh_start_renewal_without_answer_leaves_a_kept_lease(self):
        """The renewal right after a long acquire answers 503: as in the Go and TypeScript clients, the
        acquire succeeds, the keeper tries again, and leaving `with` releases the lock at once. Broken
        variant caught: the renewal's BackendUnavailable left __enter__, so __exit__ never ran and the lock
        stayed held until its TTL ran out."""
        lock = unique("fresh503")
        client = self._fresh_start_via(lambda path: "refuse503")
        entered = False
        try:
            with client.lock(lock, ttl_ms=3000) as lease:
                entered = True
                self.assertFalse(lease.lost.is_set(), lease.lost_reason)
                self.assertIsNotNone(lease._state.keeper)
        except fencegate.FencegateError as e:
            self.fail(f"entering raised {e!r}")
        self.assertTrue(entered)
        self.assertFalse(self.client.lock_status(lock)["held"])  # released, well before the 3 s TTL ran out

    def test_fresh_start_renewal_that_fails_counts_from_the_acquire(self):
        """The gateway grants at once but the proxy passes the answer on 1.5 s later, over a third of the
        3 s TTL, so the client renews at once, and that renewal (and every later one) answers 503. The
        gateway ends the lease about 3 s after the acquire was sent; by 3.6 s the client must count it lost
        and refuse a write without sending it. Failed before the fix: validity counted from the failed
        renewal's sending, so check() and the write passed until about 4.5 s."""
        key = unique("inv")
        insert_invoice(key, "before")
        proxy = slow_acquire_proxy(self, self.gw.port, "late", 1.5)
        client = fencegate.Client(proxy.url, owner="pytest", retry=fencegate.RetryPolicy(attempts=1))
        self.addCleanup(client.close)
        sent = time.monotonic()
        with self.assertRaises(fencegate.LeaseLost):  # leaving: the lease was lost inside
            with client.lock(unique("fresh-late"), ttl_ms=3000, watch=False) as lease:
                time.sleep(max(0.0, sent + 3.6 - time.monotonic()))
                with self.assertRaises(fencegate.LeaseLost, msg=f"{time.monotonic() - sent:.2f} s after the acquire"):
                    lease.check()
                with self.assertRaises(fencegate.LeaseLost):
                    lease.pg("invoices").patch(key, note="after")
        self.assertEqual((lease.lost_reason, proxy.seen("PATCH", "/v1/pg/")), ("unrenewed", []))
        self.assertEqual(note_of(key), "before")

    def test_error_while_starting_to_keep_releases_the_lease(self):
        """Something other than an answer goes wrong in the renewal right after a long acquire (an
        interrupt, here a RuntimeError): the acquire raises it, and since no `with` block will leave, it
        releases the lock first. Broken variant caught: the lock stayed held until its TTL ran out."""
        lock = unique("freshraise")
        client = self._fresh_start_via(lambda path: "forward")
        call = client.transport.call

        def interrupted(method, path, *args, **kwargs):
            if path.endswith("/renew"):
                raise RuntimeError("interrupted")
            return call(method, path, *args, **kwargs)
        client.transport.call = interrupted
        with self.assertRaises(RuntimeError):
            with client.lock(lock, ttl_ms=3000):
                self.fail("the block ran")
        self.assertFalse(self.client.lock_status(lock)["held"])  # released, well before the 3 s TTL ran out

    def test_fresh_start_renewal_refused_marks_the_lease_lost(self):
        """The lock is revoked just before the renewal right after a long acquire, which answers 410: as in
        the Go and TypeScript clients, the acquire succeeds with the lease marked lost ("revoked") and not
        kept, and leaving `with` raises LeaseLost. Broken variant caught: the renewal's LeaseLost left
        __enter__ before the block ran."""
        lock = unique("fresh410")

        def revoke_first(path):
            self.client.revoke_lock(lock, "test")
            return "forward"
        client = self._fresh_start_via(revoke_first)
        entered = False
        with self.assertRaises(fencegate.LeaseLost) as caught:
            with client.lock(lock, ttl_ms=3000) as lease:
                entered = True
                self.assertTrue(lease.lost.is_set())
                self.assertIsNone(lease._state.keeper)
        self.assertTrue(entered, f"entering raised {caught.exception!r}")
        self.assertEqual((lease.lost_reason, caught.exception.reason), ("revoked", "revoked"))
        self.assertFalse(self.client.lock_status(lock)["held"])

    def test_unkept_lease_is_not_renewed_by_its_acquire(self):
        """A lease acquired with renew=False after a wait longer than a third of its TTL is the lease the
        gateway granted, renewed only when its caller says so: the acquire answers it, never a LeaseLost
        of a renewal sent behind the caller's back. (Caught: the renewal a kept lease gets after a long
        wait was sent for unkept leases too, moving expires_at_ms.)"""
        lock = unique("unkept")
        holder = self.client.lock(lock, ttl_ms=30000).acquire()
        threading.Timer(0.6, holder.release).start()
        waiter = self.client.lock(lock, ttl_ms=900, wait_ms=10000, renew=False)
        granted = {}
        transport_call = self.client.transport.call

        def call(method, path, *args, **kwargs):
            answer = transport_call(method, path, *args, **kwargs)
            granted.setdefault(path.rsplit("/", 1)[-1], answer.body)
            return answer
        self.client.transport.call = call
        try:
            waiter.acquire()
        finally:
            self.client.transport.call = transport_call
        self.assertNotIn("renew", granted)
        self.assertEqual(waiter.expires_at_ms, granted["acquire"]["expires_at_ms"])
        waiter.release()

    def test_a_write_is_not_retried_once_its_lease_is_lost(self):
        """The proxy answers a PATCH's first three tries 503 with Retry-After: 1 and forwards the rest, while
        the lease (TTL 1 s, max_hold 1.5 s) runs out after the first or second try: the client knows it is
        lost, so no later try goes out, and the PATCH raises OutcomeUnknown (a refused try may have been
        applied) with the LeaseLost as its last; the row keeps its note. Failed before the fix: the token
        was checked only before the first try, and the fourth, about 3 s in, went out with the old fence
        and was applied (the PATCH succeeded) after the gateway had ended the lease. A lease released
        meanwhile alike, and its release is no loss: the client's own LeaseLost is not taken for the
        gateway's."""
        key = unique("inv")
        insert_invoice(key, "before")
        proxy = FaultProxy(self.gw.port, lambda method, path, body, seen:
                           "refuse503" if method == "PATCH" and seen < 3 else "forward")
        self.addCleanup(proxy.close)
        client = fencegate.Client(proxy.url, owner="pytest", retry=fencegate.RetryPolicy(attempts=5, budget_s=10))
        self.addCleanup(client.close)
        with self.assertRaises(fencegate.LeaseLost):  # leaving: the lease was lost inside
            with client.lock(unique("retry-lost"), ttl_ms=1000, max_hold_ms=1500, watch=False) as lease:
                with self.assertRaises(fencegate.OutcomeUnknown) as caught:
                    lease.pg("invoices").patch(key, note="after")
                self.assertIsInstance(caught.exception.last, fencegate.LeaseLost)
                self.assertIsNone(caught.exception.last.status)
                self.assertIsInstance(caught.exception.earlier, fencegate.BackendUnavailable)
                self.assertTrue(lease.lost.is_set())
        self.assertLessEqual(len(proxy.seen("PATCH", "/v1/pg/")), 3)
        self.assertEqual(note_of(key), "before")

        # Released by another thread while the write waits to try again: not sent either, and the release
        # (which succeeded) does not count as a loss.
        lease = client.lock(unique("retry-released"), ttl_ms=30000).acquire()
        patches = len(proxy.seen("PATCH", "/v1/pg/"))
        proxy.rule = lambda method, path, body, seen: "refuse503" if method == "PATCH" else "forward"
        threading.Timer(0.3, lease.release).start()
        with self.assertRaises(fencegate.OutcomeUnknown) as caught:
            lease.pg("invoices").patch(key, note="after")
        self.assertEqual(caught.exception.last.reason, "released")
        self.assertEqual(len(proxy.seen("PATCH", "/v1/pg/")), patches + 1)
        self.assertFalse(lease.lost.is_set(), lease.lost_reason)
        lease.release()

    def test_release_right_after_acquire_is_prompt(self):
        """Leaving `with` at once, twenty times: each release goes out at once, though the watch thread may
        still be connecting. (Caught, against a gateway with the watch endpoint: a watch that connected
        just after being aborted held the release back until the lease expired, which then answered 410.)
        The bound, half the TTL, leaves a loaded machine room and still tells a release held to expiry."""
        lock = unique("prompt")
        for _ in range(20):
            started = time.monotonic()
            with self.client.lock(lock, ttl_ms=5000):
                pass
            self.assertLess(time.monotonic() - started, 2.5)
        self.assertFalse(self.client.lock_status(lock)["held"])

    def _paused_holder(self, mode: str, ttl_ms: int = 1200) -> tuple:
        lock, key = unique("paused"), unique("inv")
        insert_invoice(key, "initial")
        holder = Holder(self.gw.base, lock, key, ttl_ms, mode)
        self.addCleanup(holder.finish)
        fence = int(holder.wait_line("HELD")[1][1])
        return lock, key, holder, fence

    def test_loss_inside_with_while_stopped_and_taken_over(self):
        """SIGSTOP a holder past its TTL while another worker takes the lock and writes; on SIGCONT the
        holder learns of the loss within two seconds, its writes are refused, leaving `with` raises
        LeaseLost, and the row keeps the new holder's value. (Caught: a `with` exit that swallows the
        loss; no EXIT_LEASELOST line came.)"""
        lock, key, holder, fence = self._paused_holder("loop")
        holder.wait_line("WROTE")
        holder.proc.send_signal(signal.SIGSTOP)
        time.sleep(1.8)
        with self.client.lock(lock, ttl_ms=30000, wait_ms=10000) as taker:
            self.assertGreater(taker.fence, fence)
            taker.pg("invoices").patch(key, note="B")
            resumed = time.monotonic()
            holder.proc.send_signal(signal.SIGCONT)
            lost_at, words = holder.wait_line("LOST")
            self.assertIn(words[1], ("expired", "unrenewed", "lease_lost", "stale_fence"), words)
            self.assertLess(lost_at - resumed, 2.0)
            holder.wait_line("EXIT_LEASELOST")
            refused = [w for _, w in holder.lines if w[0].startswith("REFUSED")]
            self.assertEqual(len(refused), 1, holder.lines)
            self.assertEqual(note_of(key), "B")

    def test_stopped_holder_alone_is_refused_by_the_client(self):
        """SIGSTOP a holder past its TTL with nobody else taking the lock: the fence alone would accept
        its late write, the client refuses it (LeaseLost) without sending it. (Caught: writes that skip
        the lease check; the late write was applied.)"""
        lock, key, holder, fence = self._paused_holder("once")
        holder.proc.stdin.write("go\n")
        holder.proc.stdin.flush()
        holder.wait_line("WROTE")
        holder.proc.send_signal(signal.SIGSTOP)
        time.sleep(1.8)
        psql("UPDATE public.invoices SET note = 'untouched' WHERE id = :'k'", {"k": key})
        holder.proc.send_signal(signal.SIGCONT)
        holder.proc.stdin.write("go\n")
        holder.proc.stdin.flush()
        holder.wait_line("REFUSED_LOCAL")
        holder.wait_line("EXIT_LEASELOST")
        self.assertEqual(note_of(key), "untouched")
        self.assertFalse(self.client.lock_status(lock)["held"])

    def _require(self, what: str, probe) -> None:
        """Skips the test when the gateway lacks a feature of API 1.1 (probe answered 404 or 405)."""
        try:
            probe()
        except (fencegate.NotFound, fencegate.MethodNotAllowed):
            self.skipTest(f"{what} is not on this gateway yet")

    def test_revoke_inside_with_is_noticed_at_once(self):
        """An operator revokes the lease of a holder inside `with` (30 s TTL, so the next renewal is 10 s
        away): the watch reports it long before that renewal, later writes raise LeaseLost without being
        sent, and leaving the block raises LeaseLost. (Caught: watch=False; the loss was noticed only at
        the next renewal.)"""
        self._require("revoke", lambda: self.client.revoke_lock(unique("probe")))
        lock, key = unique("revoked"), unique("inv")
        insert_invoice(key, "initial")
        reasons = []
        with self.assertRaises(fencegate.LeaseLost):
            with self.client.lock(lock, ttl_ms=30000, on_lost=lambda lease: reasons.append(lease.lost_reason)) as lease:
                lease.pg("invoices").patch(key, note="held")
                time.sleep(0.2)
                self.assertEqual(self.client.revoke_lock(lock, reason="test"), lease.fence)
                # 5 s: room for a loaded machine, and still half of the 10 s to the first renewal.
                self.assertTrue(lease.lost.wait(5), "the revoke was not noticed before the first renewal")
                wait_for(lambda: reasons, timeout=5, what="the on_lost callback")
                self.assertEqual((lease.lost_reason, reasons), ("revoked", ["revoked"]))
                with self.assertRaises(fencegate.LeaseLost):
                    lease.pg("invoices").patch(key, note="after revoke")
        self.assertEqual(note_of(key), "held")
        self.assertFalse(self.client.lock_status(lock)["held"])

    def test_revoke_of_semaphore_slot_is_noticed(self):
        """A revoked semaphore slot is noticed through the semaphore watch."""
        name = unique("semrevoke")
        self._require("semaphore revoke", lambda: self.client.revoke_semaphore(name, 1))
        lease = self.client.semaphore(name, 2, ttl_ms=30000).acquire()
        time.sleep(0.2)
        self.assertEqual(self.client.revoke_semaphore(name, lease.fence), lease.fence)
        self.assertTrue(lease.lost.wait(5))  # the watch, not a renewal 10 s away (room for a loaded machine)
        self.assertEqual(lease.lost_reason, "revoked")
        with self.assertRaises(fencegate.LeaseLost):
            lease.release()

    def test_lock_set(self):
        """A lock set held for several TTLs, written with each lock's own token, exclusive against an
        overlapping set, released together; revoking one of its locks loses the set at once, and its
        release still frees the others."""
        a, b, c = unique("set-a"), unique("set-b"), unique("set-c")
        self._require("lock sets", lambda: self.client.lockset([unique("probe")]).acquire().release())
        with self.client.lockset([a, b], ttl_ms=2000) as locks:
            time.sleep(5.0)
            self.assertFalse(locks.lost.is_set(), locks.lost_reason)
            self.assertEqual({m.name for m in locks}, {a, b})
            for member in locks:
                status = self.client.lock_status(member.name)
                self.assertEqual((status["held"], status["fence"]), (True, member.fence))
            key = unique("inv")
            self.assertEqual(locks[a].pg("invoices").put(key, note="set")["fence"], locks[a].fence)
            with self.assertRaises(fencegate.LockBusy) as busy:
                self.client.lockset([b, c]).acquire()
            self.assertEqual(busy.exception.lock, b)
            self.assertFalse(self.client.lock_status(c)["held"])
        self.assertFalse(self.client.lock_status(a)["held"] or self.client.lock_status(b)["held"])
        locks = self.client.lockset([a, b, c], ttl_ms=30000).acquire()
        self.assertEqual(self.client.revoke_lock(b), locks[b].fence)
        self.assertTrue(locks.lost.wait(5))  # the watch of b, not a renewal 10 s away (room for a loaded machine)
        self.assertEqual(locks.lost_reason, "revoked")
        with self.assertRaises(fencegate.LeaseLost):
            locks[a].pg("invoices").patch(key, note="after revoke of b")
        with self.assertRaises(fencegate.LeaseLost):
            locks.release()
        self.assertFalse(self.client.lock_status(a)["held"] or self.client.lock_status(c)["held"])

    def test_listing_pages(self):
        """client.locks(prefix) follows next_cursor over every page (5 held locks, pages of 2)."""
        prefix = unique("list") + ":"
        held = [self.client.lock(f"{prefix}{i}").acquire() for i in range(5)]
        try:
            self._require("listing", lambda: list(self.client.locks(prefix)))
            listed = list(self.client.locks(prefix, page_size=2))
            self.assertEqual([(i["lock"], i["fence"]) for i in listed], [(h.name, h.fence) for h in held])
            with self.client.semaphore(prefix + "sem", 3):
                self.assertEqual([s["holders"] for s in self.client.semaphores(prefix)], [1])
        finally:
            for lease in held:
                lease.release()
        self.assertEqual(list(self.client.locks(prefix)), [])

    def test_semaphore(self):
        name = unique("sem")
        with self.client.semaphore(name, 2, ttl_ms=2000) as one, self.client.semaphore(name, 2) as two:
            self.assertNotEqual(one.fence, two.fence)
            self.assertEqual(self.client.semaphore_status(name)["holders"], 2)
            with self.assertRaises(fencegate.LockBusy):
                self.client.semaphore(name, 2).acquire()
            with self.assertRaises(fencegate.LimitMismatch):
                self.client.semaphore(name, 3).acquire()
            self.assertGreaterEqual(self.client.semaphore_status(name)["holders"], 2)
        self.assertEqual(self.client.semaphore_status(name)["holders"], 0)

    def test_writes_to_postgres_and_redis(self):
        lock, key = unique("writes"), unique("inv")
        rkey = f"app:{key}"
        with self.client.lock(lock, owner="writer-1") as lease:
            table = lease.pg("invoices")
            self.assertEqual(table.insert(id=key, customer="c", amount_cents=10)["row"]["amount_cents"], 10)
            with self.assertRaises(fencegate.Conflict):
                table.insert({"id": key})
            self.assertEqual(table.patch(key, {"status": "open"}, note="n")["row"]["status"], "open")
            self.assertEqual(table.put(key, status="replaced")["row"]["customer"], None)
            batch = table.batch([{"op": "patch", "key": key, "set": {"note": "batched"}}])
            self.assertIn("applied", str(batch))
            self.assertEqual(self.client.pg("invoices").get(key)["row"]["note"], "batched")
            self.assertEqual(table.delete(key)["row"], None)
            with self.assertRaises(fencegate.NotFound):
                self.client.pg("invoices").get(key)
            self.assertEqual(lease.redis.put(rkey, "v1")["fence"], lease.fence)
            self.assertEqual(lease.redis.patch(rkey + ":h", a="1", b="2")["fence"], lease.fence)
            self.assertEqual(self.client.redis().get(rkey)["value"], "v1")
            lease.redis.delete(rkey)
            with self.assertRaises(fencegate.NotFound):
                self.client.redis().get(rkey)
            with self.assertRaises(ValueError):
                self.client.pg("invoices").patch(key, note="no token")

    def test_return_minimal(self):
        """return_minimal() sends Prefer: return=minimal: an applied write answers {"applied": True,
        "minimal": True} (the gateway's 204, the row not read back), the handle it came from still answers
        rows, and a refusal still raises. (Caught: the header not sent; the full answer came back.)"""
        lock, key = unique("minimal"), unique("inv")
        insert_invoice(key, "initial")
        old = self.client.lock(lock, ttl_ms=200, renew=False).acquire()
        time.sleep(0.4)
        minimal = {"applied": True, "minimal": True}
        with self.client.lock(lock, ttl_ms=5000) as lease:
            table = lease.pg("invoices")
            self.assertEqual(table.return_minimal().patch(key, note="minimal"), minimal)
            self.assertEqual(self.client.pg("invoices").get(key)["row"]["note"], "minimal")
            self.assertEqual(table.return_minimal().batch([{"op": "put", "key": key, "row": {"note": "put"}}]),
                             minimal)
            self.assertEqual(table.patch(key, note="full")["row"]["note"], "full")
            # The gateway honours the preference on Postgres writes; a Redis write answers in full.
            self.assertTrue(lease.redis.return_minimal().put(f"app:{key}", "v1")["applied"])
            self.assertEqual(self.client.redis().get(f"app:{key}")["value"], "v1")
        with self.assertRaises(fencegate.StaleFence):
            old.pg("invoices").return_minimal().patch(key, note="stale")
        self.assertEqual(note_of(key), "full")

    def test_typed_exception_per_problem_code(self):
        """Each problem code the gateway answers raises its own class, carrying the problem's members."""
        lock, key = unique("codes"), unique("inv")
        insert_invoice(key)
        c = self.client
        cases = [
            (fencegate.InvalidName, lambda: c.lock("bad name").acquire()),
            (fencegate.InvalidField, lambda: c.lock(lock, ttl_ms=5).acquire()),
            (fencegate.NotFound, lambda: c.pg("invoices").get(unique("missing"))),
            (fencegate.InvalidFenceToken, lambda: c.pg("invoices", token="fgt1.l.1.x.y.z").patch(key, note="x")),
            (fencegate.BodyTooLarge, lambda: c.pg("invoices", token="t").patch(key, note="x" * 4096)),
        ]
        for cls, call in cases:
            with self.subTest(cls=cls.__name__), self.assertRaises(cls) as caught:
                call()
            self.assertEqual(errors.PROBLEM_CLASSES[caught.exception.code], cls)
            self.assertTrue(caught.exception.request_id)  # the gateway's X-Request-Id, to find it in the log
        with c.lock(lock) as held:
            with self.assertRaises(fencegate.LockBusy) as busy:
                c.lock(lock).acquire()
            self.assertEqual((busy.exception.status, busy.exception.waiting), (409, 0))
            waiter = threading.Thread(target=lambda: self.assertRaises(fencegate.LockBusy,
                                                                       c.lock(lock, wait_ms=1500).acquire))
            waiter.start()
            try:
                deadline = time.monotonic() + 10
                while c.lock_status(lock)["waiting"] < 1 and time.monotonic() < deadline:
                    time.sleep(0.02)
                with self.assertRaises(fencegate.TooManyWaiters):
                    c.lock(lock, wait_ms=1000).acquire()
            finally:
                waiter.join()
            held.pg("invoices").patch(key, note="held")
        stale = c.lock(lock, ttl_ms=200, renew=False).acquire()
        time.sleep(0.35)
        with self.assertRaises(fencegate.LeaseLost):
            stale.renew()
        self.assertEqual(stale.lost_reason, "lease_lost")
        self.assertTrue(stale.lost.is_set())
        with self.assertRaises(fencegate.LeaseLost):
            stale.pg("invoices").patch(key, note="after loss")  # refused locally
        older = c.lock(lock, ttl_ms=200, renew=False).acquire()
        time.sleep(0.3)
        with c.lock(lock) as newer:
            newer.pg("invoices").patch(key, note="newer")
        with self.assertRaises(fencegate.StaleFence) as refused:
            older.pg("invoices").patch(key, note="older")
        self.assertEqual((refused.exception.presented_fence, refused.exception.current_fence,
                          refused.exception.resource), (older.fence, newer.fence, f"pg:invoices/{key}"))
        with self.assertRaises(fencegate.LeaseLost):
            older.release()

    def test_audit_pages(self):
        """client.audit.rejections iterates every page (page_size 2, five records: three requests)."""
        lock, key = unique("audit"), unique("inv")
        insert_invoice(key)
        olds = []
        for _ in range(5):
            lease = self.client.lock(lock, renew=False).acquire()
            lease.release()
            olds.append(lease)
        with self.client.lock(lock) as newest:
            newest.pg("invoices").patch(key, note="newest")
        for old in olds:
            with self.assertRaises(fencegate.StaleFence):
                self.client.pg("invoices", token=old.token).patch(key, note="old")
        proxy = FaultProxy(self.gw.port)
        self.addCleanup(proxy.close)
        items = list(fencegate.Client(proxy.url).audit.rejections(resource=f"pg:invoices/{key}", page_size=2))
        self.assertEqual([i["presented_fence"] for i in items], [o.fence for o in olds])
        self.assertEqual(len({i["id"] for i in items}), 5)
        self.assertGreaterEqual(len(proxy.seen("GET", "/v1/audit/rejections")), 3)
        self.assertEqual(list(self.client.audit.rejections(resource=f"pg:invoices/{key}", lock=unique())), [])

    def test_owner_outside_ascii_is_sent_as_utf8(self):
        """Fence-Owner is UTF-8 (API.md): writes with owners "billing-ü" and "账单-7" are applied, and the
        audit record of a refused one names the owner as written. (Caught: the header went out as Latin-1;
        the gateway refused "billing-ü" with 400 invalid_field, and "账单-7" raised UnicodeEncodeError.)"""
        for owner in ("billing-ü", "账单-7"):
            client = fencegate.Client(self.gw.base, owner=owner)
            self.addCleanup(client.close)
            lock, key = unique("owner"), unique("inv")
            stale = client.lock(lock, ttl_ms=200, renew=False).acquire()
            time.sleep(0.4)
            with client.lock(lock, ttl_ms=5000) as lease:
                self.assertTrue(lease.pg("invoices").put(key, status="new")["applied"])
                self.assertTrue(lease.redis.put(f"app:{key}", "new")["applied"])
            with self.assertRaises(fencegate.StaleFence):
                stale.pg("invoices").put(key, status="stale")
            records = wait_for(lambda: list(client.audit.rejections(resource=f"pg:invoices/{key}")),
                               timeout=5, what="the audit record")
            self.assertEqual([r["owner"] for r in records], [owner])

    def test_a_release_that_failed_is_sent_again(self):
        """A release answered 503 (no retries left) leaves the lease held at the gateway: writes through it
        are refused at once, nothing renews it, and the next release() sends the release again and frees
        the lock; the same for a lock set. (Caught: the lease was marked released before the release was
        sent, so the second release() sent nothing and returned, and the lock stayed held for its TTL.)"""
        refusing = threading.Event()
        proxy = FaultProxy(self.gw.port, refuse_while(refusing, "/release"))
        self.addCleanup(proxy.close)
        client = fencegate.Client(proxy.url, retry=fencegate.RetryPolicy(attempts=1))
        self.addCleanup(client.close)
        lock, a, b = unique("rerelease"), unique("rerelease-a"), unique("rerelease-b")
        for lease, names, path in ((client.lock(lock, ttl_ms=4000), [lock], f"/v1/locks/{lock}/release"),
                                   (client.lockset([a, b], ttl_ms=4000), [a, b], "/v1/locksets/release")):
            lease.acquire()
            refusing.set()
            with self.assertRaises(fencegate.BackendUnavailable):
                lease.release()
            renewals = sum(1 for _, path, _ in proxy.requests if path.endswith("/renew"))
            self.assertTrue(all(self.client.lock_status(name)["held"] for name in names))
            with self.assertRaises(fencegate.LeaseLost):
                (lease if isinstance(lease, fencegate.Lease) else lease[a]).redis.put(f"app:{lock}", "late")
            time.sleep(1.6)  # past a renewal (every 4/3 s), not past the TTL
            self.assertEqual(sum(1 for _, path, _ in proxy.requests if path.endswith("/renew")), renewals,
                             "the lease was still renewed")
            refusing.clear()
            lease.release()
            self.assertEqual(len(proxy.seen("POST", path)), 2)
            self.assertFalse(any(self.client.lock_status(name)["held"] for name in names))
            lease.release()  # done: not sent again
            self.assertEqual(len(proxy.seen("POST", path)), 2)

    def test_an_interrupted_acquire_gives_back_what_the_gateway_granted(self):
        """The proxy passes the answer to a waiting acquire on only after 2 s: the holder's release grants the
        wait at the gateway, then SIGINT interrupts the acquire (KeyboardInterrupt) before the client heard of
        it. The gateway holds the grant for the request_id until its 30 s TTL; the client must ask for it again
        and release it before the KeyboardInterrupt leaves acquire(). (Caught: the lock, the semaphore slot and
        the lock set stayed held by the lease nobody had.)"""
        proxy = FaultProxy(self.gw.port, late_waits)
        self.addCleanup(proxy.close)
        client = fencegate.Client(proxy.url)
        self.addCleanup(client.close)
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        status, sem_status = self.client.lock_status, self.client.semaphore_status
        kinds = {
            "lock": (lambda c, name, **o: c.lock(name, **o), lambda name: status(name)["waiting"],
                     lambda name: status(name)["held"]),
            "semaphore": (lambda c, name, **o: c.semaphore(name, 1, **o), lambda name: sem_status(name)["waiting"],
                          lambda name: sem_status(name)["holders"] > 0),
            "lockset": (lambda c, name, **o: c.lockset([name, name + "-b"], **o), lambda name: status(name)["waiting"],
                        lambda name: status(name)["held"] or status(name + "-b")["held"]),
        }
        leaked = []
        for kind, (take, waiting, held) in kinds.items():
            name = unique(f"interrupted-{kind}")
            holder = take(self.client, name, ttl_ms=30000, wait_ms=0, watch=False).acquire()

            def release_then_interrupt() -> None:
                wait_for(lambda: waiting(name) > 0, timeout=5, what="the acquire queued")
                holder.release()
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

            interrupter = threading.Thread(target=release_then_interrupt)
            interrupter.start()
            with self.assertRaises(KeyboardInterrupt):
                take(client, name, ttl_ms=30000, wait_ms=10000).acquire()
            interrupter.join()
            deadline = time.monotonic() + 1  # a place kept for a retry passes its turn on about 200 ms later
            while held(name) and time.monotonic() < deadline:
                time.sleep(0.05)
            if held(name):
                leaked.append(kind)
        self.assertEqual(leaked, [], "held by the lease of the interrupted acquire")

    def _failed_acquire_gives_back(self, fault: str, tag: str, error: type, check) -> None:
        """The proxy forwards an acquire's two tries (the policy's all) and does ``fault`` to each ("drop":
        no answer; "forward503": a 503 with Retry-After: 1 in its place): the gateway granted the first and
        answered the second with the same lease. Before ``error`` (given to ``check``) leaves acquire(), the
        client asks once more under the request_id with wait_ms 0 and releases what that answers: the lock,
        and a lock set's locks, are free at once, not held for the 20 s TTL."""
        proxy = FaultProxy(self.gw.port, lambda method, path, body, seen:
                           fault if path.endswith("/acquire") and seen < 2 else "forward")
        self.addCleanup(proxy.close)
        client = fencegate.Client(proxy.url, retry=fencegate.RetryPolicy(attempts=2))
        self.addCleanup(client.close)
        name = unique(tag)
        for lease, path, names in ((client.lock(name, ttl_ms=20000, wait_ms=1000), f"/v1/locks/{name}/acquire", [name]),
                                   (client.lockset([name + "-a", name + "-b"], ttl_ms=20000),
                                    "/v1/locksets/acquire", [name + "-a", name + "-b"])):
            with self.assertRaises(error) as caught:
                lease.acquire()
            check(caught.exception)
            self.assertEqual([self.client.lock_status(n)["held"] for n in names], [False] * len(names), path)
            sent = proxy.seen("POST", path)
            self.assertEqual([body["request_id"] for body in sent], [lease.request_id] * 3)
            self.assertEqual(sent[2]["wait_ms"], 0)

    def test_an_acquire_that_fails_unanswered_gives_back_what_the_gateway_granted(self):
        """The proxy forwards an acquire's two tries but answers neither, as a stopped gateway that answers
        late would, so the lease is one the client never heard of; GatewayUnreachable (sent) leaves acquire()
        only after the give-back (see _failed_acquire_gives_back). Failed before the fix: the lock and the
        lock set's locks stayed held by the lease nobody had."""
        self._failed_acquire_gives_back("drop", "unanswered", fencegate.GatewayUnreachable,
                                        lambda raised: self.assertTrue(raised.sent))

    def test_an_acquire_answered_503_on_every_try_gives_back_what_the_gateway_granted(self):
        """The proxy answers each of an acquire's two tries with a 503 (Retry-After: 1) in place of the
        gateway's grant, as a gateway whose Redis reply missed its deadline would; BackendUnavailable, with
        its retry_after, leaves acquire() only after the give-back (see _failed_acquire_gives_back). Failed
        before the fix: an acquire whose every try was answered gave nothing back, and the lock and the lock
        set's locks stayed held by the lease nobody had."""
        self._failed_acquire_gives_back("forward503", "answered503", fencegate.BackendUnavailable,
                                        lambda raised: self.assertEqual(raised.retry_after, 1))

    def test_leaving_a_failing_block_keeps_its_exception(self):
        """A block that raises and whose release then fails: the block's exception leaves `with`, the
        release's failure is logged without a token, and release() later frees the lock; for a lease and a
        lock set. (Caught: BackendUnavailable of the release replaced the block's KeyError.)"""
        refusing = threading.Event()
        proxy = FaultProxy(self.gw.port, refuse_while(refusing, "/release"))
        self.addCleanup(proxy.close)
        client = fencegate.Client(proxy.url, retry=fencegate.RetryPolicy(attempts=1))
        self.addCleanup(client.close)
        for lease in (client.lock(unique("failing"), ttl_ms=30000),
                      client.lockset([unique("failing-a"), unique("failing-b")], ttl_ms=30000)):
            refusing.set()
            with self.assertLogs("fencegate", "WARNING") as logs:
                with self.assertRaises(KeyError):
                    with lease:
                        raise KeyError("the block's own")
            tokens = [lease.token] if isinstance(lease, fencegate.Lease) else lease.tokens
            self.assertTrue(any("backend_unavailable" in line for line in logs.output), logs.output)
            self.assertFalse([t for t in tokens if any(t in line for line in logs.output)])
            refusing.clear()
            lease.release()
            names = [lease.name] if isinstance(lease, fencegate.Lease) else lease.names
            self.assertFalse(any(self.client.lock_status(name)["held"] for name in names))

    def test_a_revoked_lease_says_so_to_release_and_renew(self):
        """The 410 of a renew or release of a revoked lease carries reason "revoked", and so does
        lost_reason. (Caught: both marked the lease lost as "lease_lost", the problem code.)"""
        self._require("revoke", lambda: self.client.revoke_lock(unique("probe")))
        for call in ("release", "renew"):
            lease = self.client.lock(unique("revoked-" + call), ttl_ms=30000, renew=False).acquire()
            self.assertEqual(self.client.revoke_lock(lease.name, reason="test"), lease.fence)
            with self.assertRaises(fencegate.LeaseLost) as caught:
                getattr(lease, call)()
            self.assertEqual((caught.exception.reason, lease.lost_reason), ("revoked", "revoked"), call)

    def test_durations_go_out_in_whole_milliseconds(self):
        """Durations that are not whole milliseconds (10000 / 3) go out rounded down, on every try: the
        ttl_ms, wait_ms and max_hold_ms of an acquire of a lock, a semaphore and a lock set, tried again
        after a 503, the ttl_ms of renew(), and the lock set's background renewals. A bool or a negative
        duration still goes to the gateway, refused. (Caught: the float went out as it was, and the gateway
        refused the acquire 400 invalid_field; a lock set renewed with it.)"""
        proxy = FaultProxy(self.gw.port, first_acquire_refused)
        self.addCleanup(proxy.close)
        client = fencegate.Client(proxy.url, retry=fencegate.RetryPolicy(attempts=2))
        self.addCleanup(client.close)
        lock, sem, a, b = unique("whole-lock"), unique("whole-sem"), unique("whole-a"), unique("whole-b")
        lease = client.lock(lock, ttl_ms=10000 / 3, wait_ms=1500.5, max_hold_ms=20000 / 3, renew=False).acquire()
        self.assertEqual(lease.ttl_ms, 3333)
        lease.renew(ttl_ms=2500.9)
        lease.release()
        slot = client.semaphore(sem, 2, ttl_ms=2000.0, wait_ms=0.0, renew=False).acquire()
        slot.renew()
        slot.release()
        with client.lockset([a, b], ttl_ms=1500.5, wait_ms=700.25) as locks:
            time.sleep(1.2)  # past two background renewals (every 1500 / 3 ms)
            locks.renew()
            self.assertFalse(locks.lost.is_set(), locks.lost_reason)
        sent = assert_whole_durations(self, proxy, lock, sem)
        for duration in (True, -2.5):
            with self.assertRaises(fencegate.InvalidField):
                client.lock(unique("whole-refused"), ttl_ms=duration, renew=False).acquire()
        self.assertEqual([(type(v), v) for _, m, v in durations_sent(proxy)[len(sent):] if m == "ttl_ms"],
                         [(bool, True)] * 2 + [(int, -3)] * 2)


class ProblemMappingTest(unittest.TestCase):
    """Every code of docs/api.md maps to its class, without a gateway (for codes the client never provokes)."""

    def test_every_code(self):
        for code, cls in errors.PROBLEM_CLASSES.items():
            e = errors.problem_error(400, {"type": f"/problems/{code}", "title": "t", "detail": "d", "x": 1},
                                     "req-1", 2.0)
            self.assertIs(type(e), cls)
            self.assertEqual((e.code, e.detail, e.extra("x"), e.request_id, e.retry_after),
                             (code, "d", 1, "req-1", 2.0))
        self.assertIs(type(errors.problem_error(400, {"type": "/problems/new_code"})), errors.ProblemError)
        self.assertEqual(errors.problem_error(502, "<html>bad gateway</html>").code, "http_502")
        for name in ("unsupported_media_type", "misdirected_request", "unauthorized", "forbidden",
                     "max_hold_exceeded", "backend_unavailable", "invalid_json"):
            self.assertIn(name, errors.PROBLEM_CLASSES)


class WatchQuotaTest(unittest.TestCase):
    """A watch poll answered 429 too_many_waiters (the API key's quota of parked waits and watches,
    limits.max_waiters_per_key, is full) backs off as Retry-After says and polls again: once the quota has
    room, the watch parks and reports a revoke at once, long before the next renewal. (Caught: the keeper
    stopped watching at the 429, as for a gateway without the watch endpoint; the revoke went unnoticed
    until the renewal 10 s after the acquire.)"""

    @classmethod
    def setUpClass(cls):
        keys = [{"id": k, "sha256": hashlib.sha256(f"text-{k}".encode()).hexdigest(), "scopes": ["admin"]}
                for k in ("worker", "ops")]
        cls.gw = Gateway(config=config(auth={"mode": "required", "keys": keys}, limits={"max_waiters_per_key": 1}))
        cls.ops = fencegate.Client(cls.gw.base, api_key="text-ops")

    @classmethod
    def tearDownClass(cls):
        cls.ops.close()
        cls.gw.stop()

    def metric(self, pattern: str) -> float:
        text = self.gw.http("GET", "/metrics", None, {"Authorization": "Bearer text-ops"}).body
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if re.match(pattern, line))

    def refusals(self) -> float:
        return self.metric(r'fencegate_http_responses_total\{.*code="429"')

    def block_quota(self) -> socket.socket:
        """Parks a watch of the worker key on a lock of ops: the worker's quota is full until it closes."""
        name = unique("quota-block")
        fence = self.ops.lock(name, ttl_ms=30000, renew=False).acquire().fence
        s = socket.create_connection(("127.0.0.1", self.gw.port))
        s.sendall(f"GET /v1/locks/{name}?watch=true&fence={fence}&wait_ms=20000 HTTP/1.1\r\n"
                  f"Host: 127.0.0.1:{self.gw.port}\r\nAuthorization: Bearer text-worker\r\n\r\n".encode())
        wait_for(lambda: self.metric("fencegate_watches ") >= 1, timeout=10, what="the blocking watch parked")
        return s

    def test_a_watch_answered_429_goes_on(self):
        for asynchronous in (False, True):
            with self.subTest(asynchronous=asynchronous):
                name, blocker, refused = unique("quota"), self.block_quota(), self.refusals()

                def after_acquire(lease):
                    wait_for(lambda: self.refusals() > refused, timeout=5, what="the watch poll refused 429")
                    blocker.close()  # room in the quota: the next poll, a Retry-After later, parks
                    time.sleep(1.8)
                    self.assertEqual(self.ops.revoke_lock(name, "test"), lease.fence)
                    return time.monotonic()

                if asynchronous:
                    seen: list = []

                    async def run():
                        aio = fencegate.AsyncClient(self.gw.base, api_key="text-worker")
                        try:
                            async with aio.lock(name, ttl_ms=30000) as lease:
                                revoked = await asyncio.get_running_loop().run_in_executor(None, after_acquire, lease)
                                seen.append(await asyncio.wait_for(lease.wait_lost(), 5))
                                seen.append(time.monotonic() - revoked)
                        finally:
                            await aio.close()

                    with self.assertRaises(fencegate.LeaseLost):
                        asyncio.run(run())
                    self.assertEqual(seen[0], "revoked")
                    self.assertLess(seen[1], 2.0, "noticed at a renewal, not through the watch")
                    continue
                worker = fencegate.Client(self.gw.base, api_key="text-worker")
                self.addCleanup(worker.close)
                lease = worker.lock(name, ttl_ms=30000).acquire()
                revoked = after_acquire(lease)
                self.assertTrue(lease.lost.wait(5))
                self.assertEqual(lease.lost_reason, "revoked")
                self.assertLess(time.monotonic() - revoked, 2.0, "noticed at a renewal, not through the watch")
                with self.assertRaises(fencegate.LeaseLost):
                    lease.release()


if __name__ == "__main__":
    unittest.main()
