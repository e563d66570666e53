# SPDX-License-Identifier: Apache-2.0
"""The Python client's asyncio API (fencegate.AsyncClient) against a real gateway: what the conformance
scenarios (run through it as conformance.python_asyncio) do not cover: cancelling the awaiting task ends a
wait and the gateway drops the waiter; many tasks share one client; a revoke inside ``async with`` stops the
writes and raises LeaseLost on leaving; leases are not reentrant; fenced writes and the audit trail.

Owns: the asyncio side of clients/python. Must not: re-test the protocol rules shared with the thread
client (test_leases.py, test_retries.py).
"""

import asyncio
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import FaultProxy, config, unique  # noqa: E402

import fencegate  # noqa: E402
from harness import Gateway  # noqa: E402


class AsyncTest(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(config=config())

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    async def asyncSetUp(self):
        self.client = fencegate.AsyncClient(self.gw.base, api_key="", owner="py-async")

    async def asyncTearDown(self):
        await self.client.close()

    async def test_cancel_ends_the_wait(self):
        """A cancelled acquire ends at once; the gateway keeps its place for a retry of its request_id, and
        its turn goes on at once when nobody retried: the lock is free right after the holder leaves."""
        name = unique("aio-cancel")
        async with self.client.lock(name, ttl_ms=5000):
            waiter = asyncio.ensure_future(self.client.lock(name, wait_ms=10000).acquire())
            for _ in range(100):
                if (await self.client.lock_status(name))["waiting"] == 1:
                    break
                await asyncio.sleep(0.02)
            self.assertEqual((await self.client.lock_status(name))["waiting"], 1)
            waiter.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await waiter
            # A release before the gateway saw the hang-up (within milliseconds) would hand the lock to the
            # wait, whose grant is kept for a retry until its TTL.
            await asyncio.sleep(0.5)
        for _ in range(60):
            status = await self.client.lock_status(name)
            if not status["held"] and status["waiting"] == 0:
                break
            await asyncio.sleep(0.05)
        self.assertEqual((status["held"], status["waiting"]), (False, 0), "the cancelled wait's place held the lock up")

    async def test_fresh_start_renewal_without_answer_leaves_a_kept_lease(self):
        """An acquire answered after 1.2 s, over a third of its 3 s TTL, is renewed at once, and that renewal
        answers 503: as with the thread client, entering succeeds, the keeper tries again, and leaving
        `async with` releases the lock at once. Broken variant caught: the renewal's BackendUnavailable left
        __aenter__, so the lock stayed held until its TTL ran out."""
        proxy = FaultProxy(self.gw.port, lambda method, path, body, seen:
                           "stall" if path.endswith("/acquire") else "refuse503" if path.endswith("/renew")
                           else "forward")
        proxy.stall_s = 1.2
        self.addCleanup(proxy.close)
        client = fencegate.AsyncClient(proxy.url, api_key="", retry=fencegate.RetryPolicy(attempts=1))
        name = unique("aio-fresh503")
        try:
            async with client.lock(name, ttl_ms=3000) as lease:
                self.assertFalse(lease.lost.is_set(), lease.lost_reason)
        except fencegate.FencegateError as e:
            self.fail(f"entering raised {e!r}")
        finally:
            await client.close()
        self.assertFalse((await self.client.lock_status(name))["held"])  # released before the TTL ran out

    async def test_tasks_take_turns_and_share_the_client(self):
        name, key = unique("aio-turns"), unique("aio-row")
        fences = []

        async def worker(i: int) -> None:
            async with self.client.lock(name, ttl_ms=5000, wait_ms=20000) as lease:
                try:
                    count = int((await self.client.pg("invoices").get(key))["row"]["note"])
                except fencegate.NotFound:
                    count = 0
                await lease.pg("invoices").put(key, status="open", note=str(count + 1))
                fences.append(lease.fence)

        started = time.monotonic()
        await asyncio.gather(*(worker(i) for i in range(12)))
        self.assertEqual((await self.client.pg("invoices").get(key))["row"]["note"], "12")
        self.assertEqual(fences, sorted(fences))
        self.assertLess(time.monotonic() - started, 10)

    async def test_revoke_inside_async_with(self):
        name, key = unique("aio-revoke"), unique("aio-revoked")
        with self.assertRaises(fencegate.LeaseLost) as caught:
            async with self.client.lock(name, ttl_ms=30000) as lease:
                await self.client.revoke_lock(name, "test")
                self.assertEqual(await asyncio.wait_for(lease.wait_lost(), 2), "revoked")
                with self.assertRaises(fencegate.LeaseLost):
                    await lease.redis.put(f"app:{key}", "late")
        self.assertEqual(caught.exception.reason, "revoked")
        with self.assertRaises(fencegate.NotFound):
            await self.client.redis().get(f"app:{key}")

    async def test_not_reentrant(self):
        name = unique("aio-reentrant")
        async with self.client.lock(name, ttl_ms=5000):
            with self.assertRaises(fencegate.LockBusy):
                async with self.client.lock(name, ttl_ms=5000):
                    pass

    async def test_return_minimal(self):
        """The asyncio client's return_minimal(): the gateway's 204 answers {"applied": True, "minimal": True}."""
        name, key = unique("aio-minimal"), unique("aio-minimal")
        async with self.client.lock(name, ttl_ms=5000) as lease:
            await lease.pg("invoices").put(key, status="new")
            self.assertEqual(await lease.pg("invoices").return_minimal().patch(key, status="paid"),
                             {"applied": True, "minimal": True})
            self.assertTrue((await lease.redis.return_minimal().put(f"app:{key}", "paid"))["applied"])
        self.assertEqual((await self.client.pg("invoices").get(key))["row"]["status"], "paid")
        self.assertEqual((await self.client.redis().get(f"app:{key}"))["value"], "paid")

    async def test_stale_write_and_audit(self):
        name, key = unique("aio-stale"), unique("aio-stale")
        old = await self.client.lock(name, ttl_ms=200, renew=False).acquire()
        await asyncio.sleep(0.4)
        async with self.client.lock(name, ttl_ms=5000) as new:
            await new.pg("invoices").put(key, status="new")
        with self.assertRaises(fencegate.StaleFence) as caught:
            await old.pg("invoices").put(key, status="old")
        self.assertEqual((caught.exception.presented_fence, caught.exception.resource),
                         (old.fence, f"pg:invoices/{key}"))
        for _ in range(100):  # audit records are written after the refusal is answered
            records = [r async for r in self.client.audit_rejections(resource=f"pg:invoices/{key}", page_size=1)]
            if records:
                break
            await asyncio.sleep(0.05)
        self.assertEqual([r["presented_fence"] for r in records], [old.fence])


if __name__ == "__main__":
    unittest.main()
