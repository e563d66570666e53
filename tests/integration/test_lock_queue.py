# SPDX-License-Identifier: Apache-2.0
"""The lean queue join of a lock (lua/lock_acquire_queue.lua) queues only where lock_acquire.lua would queue,
and does there what the full script does.

A gateway runs it for an acquire without a request_id that waits, on a name it saw held or queued for within
the last CONTENTION_HINT_MS (src/lease/contention.h); anything it does not take it answers "contended", and the
full script decides. Each test first has the gateway see the lock held (a try that does not wait, answered
busy), then brings the lock into a state the queue join must leave to the full script, or must bookkeep as the
full script would, and checks the outcome against what the contract promises, read from Redis or the API, not
from the gateway's own account. Caught (each tried):
- no look at the holder's record: a waiter queued behind a lock released a moment before (an end's record),
  waiting for a grant nobody would hand it;
- no look at whether the holder key exists: the same behind a lease that ran out (the script failed: 500);
- a holder record of another layout (a newer gateway's) taken for a holder: its first waiter left the name out
  of the listing index, where a listing had dropped it;
- no look at the queue's length: a waiter queued past limits.max_waiters_per_lock.
The waiters it queues come in arrival order, with the record the full script writes.

Owns: the lean queue join's guards and record. Must not: test the full script's queue (test_lock_fifo.py,
test_lock_waiters.py).
"""

import contextlib
import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, Redis, same_slot, wait_for  # noqa: E402

LOCKS = "/v1/locks/"
MAX_WAITERS = 2  # limits.max_waiters_per_lock of the class's gateway
WAIT_S = 6.0  # how long a waiter waits: one owed the lock must have it well before its give-up


def lease_of(token: str) -> str:
    """The lease id a token names (src/auth/token.c: fgt2.<key>.<kind>.<fence>.<lease>.<name>.<mac>)."""
    return token.split(".")[4]


class LockQueueJoinTest(GatewayTest):
    # poll_ms: no waiter looks again by itself while a test arranges the lock around it
    gateway_config = {"poll_ms": 60000, "limits": {"max_waiters_per_lock": MAX_WAITERS}}

    def acquire(self, name, c=None, **fields):
        return (c or self.c).post(LOCKS + name + "/acquire", {"ttl_ms": 30000, **fields})

    def held_and_seen(self, name: str, **fields) -> dict:
        """A holder of name, and a try that does not wait answered busy: the gateway has seen it held."""
        held = self.acquire(name, **fields)
        self.assertEqual(held.status, 200, held)
        busy = self.acquire(name, wait_ms=0)
        self.assertEqual((busy.status, busy.body.get("type")), (409, "/problems/lock_busy"), busy)
        return held.body

    def waits(self, name, c, out: list, **fields) -> threading.Thread:
        """An acquire of name on connection c that waits up to WAIT_S, its answer to go to out."""
        t = threading.Thread(target=lambda: out.append(self.acquire(name, c, wait_ms=int(WAIT_S * 1000), **fields)))
        t.start()
        return t

    def queued(self, name: str, n: int) -> None:
        deadline = time.monotonic() + 10
        while self.c.get(LOCKS + name).body["waiting"] < n:
            self.assertLess(time.monotonic(), deadline, f"waiter {n} never queued")
            time.sleep(0.01)

    def test_waiters_join_in_arrival_order_with_their_record(self):
        name = same_slot("lq-order")[0]
        holder = self.held_and_seen(name)
        owner = 'billing "7"\\/é'
        first, second = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as nc:
            t1 = self.waits(name, wc, first)
            self.queued(name, 1)
            t2 = self.waits(name, nc, second, owner=owner)
            self.queued(name, 2)
            with Redis() as r:
                order = r.cmd("ZRANGE", f"fg:lk:{{{name}}}:q", "0", "-1")
                record = json.loads(r.cmd("HGET", f"fg:lk:{{{name}}}:w", order[1]))
                seconds, micros = r.cmd("TIME")
            self.assertEqual(sorted(record), ["attach", "inst", "max_hold", "owner", "rid", "since", "ttl"], record)
            self.assertEqual((record["owner"], record["rid"], record["ttl"]), (owner, "", "30000"), record)
            self.assertLessEqual(record["since"], int(seconds) * 1000 + int(micros) // 1000, record)
            self.assertEqual(self.c.post(LOCKS + name + "/release", {"token": holder["token"]}).status, 200)
            t1.join(WAIT_S - 2)
            self.assertEqual(first[0].status, 200, first)
            self.assertEqual(lease_of(first[0].body["token"]), order[0], "the first waiter not served first")
            self.assertEqual(second, [], "the second waiter served ahead of its turn")
            self.assertEqual(self.c.post(LOCKS + name + "/release", {"token": first[0].body["token"]}).status, 200)
            t2.join(WAIT_S - 2)
        self.assertEqual(second[0].status, 200, second)
        self.assertEqual(lease_of(second[0].body["token"]), order[1])
        status = self.c.get(LOCKS + name).body
        self.assertEqual(status["owner"], owner, status)

    def assert_taken_at_once(self, name: str) -> None:
        """An acquire of name that waits is granted well before its give-up: nobody holds the lock."""
        out = []
        with self.gw.client(timeout=30) as wc:
            self.waits(name, wc, out).join(WAIT_S - 2)
        self.assertEqual(len(out), 1, "an acquire of a free lock queued, and nobody hands it the lock")
        self.assertEqual(out[0].status, 200, out)

    def test_a_lock_released_a_moment_before_is_taken_at_once(self):
        name = same_slot("lq-released")[0]
        holder = self.held_and_seen(name)
        self.assertEqual(self.c.post(LOCKS + name + "/release", {"token": holder["token"]}).status, 200)
        self.assert_taken_at_once(name)

    def test_a_lock_whose_lease_ran_out_is_taken_at_once(self):
        name = same_slot("lq-ran-out")[0]
        self.held_and_seen(name)
        with Redis() as r:  # the lease runs out, its key with it, at once: the gateway's hint is still "held"
            key = f"fg:lk:{{{name}}}:h"
            self.assertEqual(r.cmd("PEXPIRE", key, "1"), 1)
            wait_for(lambda: r.cmd("EXISTS", key) == 0, what="the holder's key to expire")
        self.assert_taken_at_once(name)

    def test_a_waiter_behind_an_unreadable_holder_record_is_listed(self):
        prefix = same_slot("lq-unread")[0] + ":"
        name = prefix + "x"
        self.held_and_seen(name)
        with Redis() as r:  # a newer gateway's record, which a listing takes for no holder and drops from the index
            self.assertEqual(r.cmd("SET", f"fg:lk:{{{name}}}:h", "v9|a layout of later|x", "PX", "30000"), "OK")
        self.assertEqual(self.c.get(f"{LOCKS[:-1]}?prefix={prefix}").body["items"], [])
        out = []
        with self.gw.client(timeout=30) as wc:
            t = threading.Thread(target=lambda: out.append(self.acquire(name, wc, wait_ms=2000)))
            t.start()
            self.queued(name, 1)
            items = self.c.get(f"{LOCKS[:-1]}?prefix={prefix}").body["items"]
            t.join(10)
        self.assertEqual([(i["lock"], i["held"], i["waiting"]) for i in items], [(name, False, 1)])
        self.assertEqual(out[0].status, 409, out)

    def test_a_full_queue_refuses_the_next_waiter(self):
        name = same_slot("lq-full")[0]
        self.held_and_seen(name)
        outs: list[list] = [[] for _ in range(MAX_WAITERS)]
        with contextlib.ExitStack() as stack:
            threads = []
            for i, out in enumerate(outs):
                threads.append(self.waits(name, stack.enter_context(self.gw.client(timeout=30)), out))
                self.queued(name, i + 1)
            refused = self.acquire(name, wait_ms=3000)
            for t in threads:
                t.join(WAIT_S + 5)
        self.assertEqual((refused.status, refused.body.get("type")), (429, "/problems/too_many_waiters"), refused)

if __name__ == "__main__":
    unittest.main()
