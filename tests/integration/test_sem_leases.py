# SPDX-License-Identifier: Apache-2.0
"""Semaphore leases: a killed holder's slot comes back within its lease (also to a waiter that is already
queued, with nobody releasing), renewal keeps a hold longer than the lease alive, renew and release after
expiry answer 410, a retried release answers 200, max_hold_ms caps renewals, a renewal touches its own
holder alone, the waiters of a gateway that died leave the queue, and a release hands the slot to a waiter
in the same step, even when the waiter's gateway looks at nothing just then, with the slot of a holder whose
lease ran out. (Caught:
a first try of the release that dropped an idle-looking semaphore's keys without asking whether anybody
waits.)

Owns: time-related behaviour of /v1/semaphores. Must not: test FIFO or the holder limit under load (see
test_sem_limits.py).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, Redis, metric, wait_for, warm_semaphore_slot  # noqa: E402

SEM = "/v1/semaphores/"

HOLDER_SCRIPT = """
import json, sys, time, http.client
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
c.request("POST", sys.argv[2], body=json.dumps({"limit": 1, "ttl_ms": int(sys.argv[3])}),
          headers={"Content-Type": "application/json"})
r = c.getresponse()
print(r.status, json.loads(r.read()).get("expires_at_ms"), flush=True)
time.sleep(600)
"""


def acquire_through(gw: Gateway, name: str):
    """A two-slot acquire of name through gw that waits, on a connection of its own."""
    with gw.client(timeout=30) as c:
        return c.post(SEM + name + "/acquire", {"limit": 2, "ttl_ms": 30000, "wait_ms": 20000})


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns()}"


class SemaphoreLeaseTest(GatewayTest):
    # Its liveness mark outlasts a stall of a loaded machine: no test here wants its waiters skipped.
    gateway_config = {"waiter_lease_ms": 10000}

    def acquire(self, name, **fields):
        return self.c.post(SEM + name + "/acquire", fields)

    def test_killed_holder_slot_frees_within_its_lease(self):
        name, ttl = unique("sem-kill"), 800
        holder = subprocess.Popen([sys.executable, "-c", HOLDER_SCRIPT, str(self.gw.port),
                                   SEM + name + "/acquire", str(ttl)], stdout=subprocess.PIPE, text=True)
        try:
            status, expires_at = holder.stdout.readline().split()
            self.assertEqual(status, "200")
            out = []
            with self.gw.client(timeout=30) as wc:
                # Queued before the crash: nobody will release, the slot comes back by expiry alone.
                t = threading.Thread(target=lambda: out.append(wc.post(SEM + name + "/acquire",
                                                                       {"limit": 1, "wait_ms": 5000})))
                t.start()
                holder.kill()
                holder.wait()
                t.join(10)
            r = out[0]
            self.assertEqual(r.status, 200, r)
            # On Redis's clock, which both leases are timed by (the holder's answer may reach it late).
            after = (r.body["expires_at_ms"] - r.body["ttl_ms"] - int(expires_at)) / 1000
            self.assertLess(after, 0.3, "the slot took longer than one lease")
            self.assertGreaterEqual(after, 0, "the slot came back before the lease ended")
        finally:
            holder.kill()
            holder.wait()
            holder.stdout.close()
        self.assertEqual(self.c.post(SEM + name + "/release", {"token": r.body["token"]}).status, 200)

    def test_renew_keeps_a_hold_longer_than_the_lease(self):
        name = unique("sem-renew")
        # 2 s leases renewed every 0.5 s: a renew may come 1.5 s late on a loaded machine.
        a = self.acquire(name, limit=1, ttl_ms=2000).body
        for _ in range(7):  # 7 x 0.5 s = 3.5 s, well past the 2 s lease
            time.sleep(0.5)
            r = self.c.post(SEM + name + "/renew", {"token": a["token"]})
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body["fence"], a["fence"])
            self.assertEqual(r.body["ttl_ms"], 2000)
            self.assertEqual(self.acquire(name, limit=1).status, 409)  # still held
        r = self.c.post(SEM + name + "/renew", {"token": a["token"], "ttl_ms": 1000})
        self.assertEqual((r.status, r.body["ttl_ms"]), (200, 1000))
        self.assertEqual(self.c.post(SEM + name + "/release", {"token": a["token"]}).status, 200)

    def test_after_expiry_renew_and_release_answer_410(self):
        name = unique("sem-expired")
        a = self.acquire(name, limit=2, ttl_ms=200).body
        time.sleep(0.35)
        for op in ("renew", "release"):
            r = self.c.post(SEM + name + "/" + op, {"token": a["token"]})
            self.assertEqual(r.status, 410, (op, r))
            self.assertEqual(r.body["type"], "/problems/lease_lost")
        self.assertEqual(self.c.get(SEM + name).body["holders"], 0)

    def test_a_renewal_touches_its_own_holder_alone(self):
        """A renewal (lua/sem_renew.lua) purges no expired holder, so it must look at its own holder's expiry:
        a holder that expired among others answers 410 and stays ended; a live one is renewed, and the first
        renewal of a slot handed over within one gateway (held unclaimed) writes it claimed. A waiter's own
        look at the semaphore (the one right after it parks, or a grant that came before it parked) claims the
        grant first; the hand-over is then done again, with that waiter as a holder, and poll_ms keeps the
        waiters from looking on their own otherwise. Caught: a renewal that did not look at the expiry (the
        expired holder renewed, a third holder of a two-slot semaphore), and one that never wrote the record
        claimed."""
        name = unique("sem-renew-own")
        data = f"fg:sm:{{{name}}}:d"
        config = {"waiter_lease_ms": 600, "poll_ms": 600000}
        with Gateway(config=config) as gw, gw.client(timeout=30) as cl, Redis() as redis:
            def acquire(**fields):
                return cl.post(SEM + name + "/acquire", {"limit": 2, "ttl_ms": 30000, **fields})

            def claimed(lease):
                return json.loads(redis.cmd("HGET", data, lease.body["token"].split(".")[4]))["claimed"]

            a = acquire()
            b = acquire(ttl_ms=200).body
            time.sleep(0.35)
            r = cl.post(SEM + name + "/renew", {"token": b["token"], "ttl_ms": 30000})
            self.assertEqual(r.status, 410, r)
            c = acquire()
            self.assertEqual(c.status, 200, c)  # b's slot
            self.assertEqual(acquire(wait_ms=0).status, 409)
            for _ in range(5):
                out: list = []
                waiter = threading.Thread(target=lambda: out.append(acquire_through(gw, name)))
                waiter.start()
                wait_for(lambda: cl.get(SEM + name).body["waiting"] == 1, what="the waiter queued")
                wait_for(lambda: metric(gw, "fencegate_waiters") == 1, what="the waiter parked")
                self.assertEqual(cl.post(SEM + name + "/release", {"token": a.body["token"]}).status, 200)
                waiter.join(30)
                a = d = out[0]
                self.assertEqual(d.status, 200, d)
                if claimed(d) == 0:
                    break
            else:
                self.fail("each waiter claimed its grant before the test could renew it")
            r = cl.post(SEM + name + "/renew", {"token": d.body["token"], "ttl_ms": 60000})
            self.assertEqual((r.status, r.body["fence"]), (200, d.body["fence"]), r)
            self.assertEqual(claimed(d), 1)
            for token in (c.body["token"], d.body["token"]):
                self.assertEqual(cl.post(SEM + name + "/release", {"token": token}).status, 200)

    def test_retried_release_answers_200(self):
        name = unique("sem-rerelease")
        a = self.acquire(name, limit=2).body
        self.assertEqual(set(a), {"semaphore", "token", "fence", "ttl_ms", "expires_at_ms"})
        for _ in range(2):
            r = self.c.post(SEM + name + "/release", {"token": a["token"]})
            self.assertEqual((r.status, r.body), (200, {"released": True}))
        r = self.c.post(SEM + name + "/renew", {"token": a["token"]})
        self.assertEqual(r.status, 410, r)

    def test_max_hold_caps_renewals(self):
        """A renewal is granted up to the hold deadline and the lease ends there: a renewal after it answers
        409 max_hold_exceeded with the deadline, for a first holder kept in the limit key and for a holder
        beside another alike; one renewed shorter after the cut ends sooner, and a renewal after the deadline
        answers 410. Caught: a renewal cut at the deadline that kept no mark of it (410), and a mark a shorter
        renewal left (409)."""
        # Each case is arranged in turn, then one wait passes every deadline (the last one's comes 1.2 s after
        # its acquire, which is before the wait begins).
        arranged = []
        for beside, shorten in ((False, False), (True, False), (False, True), (True, True)):
            with self.subTest(beside=beside, shorten=shorten):
                name = unique("sem-maxhold")
                limit = 2 if beside else 1  # one holder of one slot is kept in the limit key
                other = self.acquire(name, limit=limit, ttl_ms=30000).body if beside else None
                # The renewal comes 0.3 s in, 0.7 s before the lease would expire (room for a loaded
                # machine), and asks for 1 s more where only 0.9 s of the hold is left.
                a = self.acquire(name, limit=limit, ttl_ms=1000, max_hold_ms=1200).body
                time.sleep(0.3)
                r = self.c.post(SEM + name + "/renew", {"token": a["token"]})  # granted up to the deadline
                self.assertEqual(r.status, 200, r)
                self.assertEqual(set(r.body), {"semaphore", "fence", "ttl_ms", "expires_at_ms", "hold_until_ms"})
                self.assertEqual((r.body["semaphore"], r.body["fence"]), (name, a["fence"]))
                self.assertEqual(r.body["expires_at_ms"], r.body["hold_until_ms"])
                self.assertLess(r.body["ttl_ms"], 1000)
                if shorten:  # renewed shorter after the cut: the lease ends before the deadline
                    s = self.c.post(SEM + name + "/renew", {"token": a["token"], "ttl_ms": 100})
                    self.assertEqual(s.status, 200, s)
                arranged.append((beside, shorten, name, a, r, other))
        time.sleep(0.9 + 0.3)  # past the deadline
        for beside, shorten, name, a, r, other in arranged:
            with self.subTest(beside=beside, shorten=shorten):
                late = self.c.post(SEM + name + "/renew", {"token": a["token"]})
                if shorten:
                    self.assertEqual((late.status, late.body["type"]), (410, "/problems/lease_lost"), late)
                else:
                    self.assertEqual((late.status, late.body["type"], late.body.get("hold_until_ms")),
                                     (409, "/problems/max_hold_exceeded", r.body["hold_until_ms"]), late)
                self.assertEqual(self.c.post(SEM + name + "/release", {"token": a["token"]}).status, 410)
                if other:
                    self.assertEqual(self.c.post(SEM + name + "/release", {"token": other["token"]}).status, 200)

    def test_a_first_holder_renewed_in_its_limit_key_keeps_its_slot(self):
        """The first try keeps an idle semaphore's first holder in its limit key, which expires with the lease
        (lua/lib_sem.lua); its renewal moves that key's time to live alone, and every call that moves the
        holder into the holders' keys later takes its expiry from there. Here a one-slot holder granted for
        1 s and renewed for 30 s must still hold its slot after 1.5 s, when others come to the semaphore.
        Caught (each tried): a renewal that leaves the key's time to live (410 and a second holder), and a
        move into the holders' keys that takes the expiry the holder was granted with (a second holder)."""
        name = unique("sem-first-renew")
        key = f"fg:sm:{{{name}}}:l"
        warm_semaphore_slot(self.c, name)
        a = self.acquire(name, limit=1, ttl_ms=1000).body
        renewed = self.c.post(SEM + name + "/renew", {"token": a["token"], "ttl_ms": 30000})
        self.assertEqual((renewed.status, renewed.body["fence"], renewed.body["ttl_ms"]), (200, a["fence"], 30000),
                         renewed)
        with Redis() as r:
            self.assertTrue(r.cmd("GET", key).startswith("="), "not renewed in the limit key")
            self.assertTrue(25000 < r.cmd("PTTL", key) <= 30000, r.cmd("PTTL", key))
            self.assertEqual(r.cmd("EXISTS", f"fg:sm:{{{name}}}:h", f"fg:sm:{{{name}}}:d"), 0)
        time.sleep(1.5)  # past the expiry it was granted with
        self.assertEqual(self.c.post(SEM + name + "/renew", {"token": a["token"], "ttl_ms": 30000}).status, 200)
        busy = self.acquire(name, limit=1, wait_ms=0)  # the full script: it moves the holder first
        self.assertEqual((busy.status, busy.body.get("type")), (409, "/problems/lock_busy"), busy)
        self.assertEqual(self.c.get(SEM + name).body["holders"], 1)
        self.assertEqual(self.c.post(SEM + name + "/renew", {"token": a["token"]}).status, 200)
        self.assertEqual(self.c.post(SEM + name + "/release", {"token": a["token"]}).status, 200)
        self.assertEqual(self.c.get(SEM + name).body["holders"], 0)

    def test_waiters_of_a_dead_gateway_leave_the_queue(self):
        name = unique("sem-deadgw")
        a = self.acquire(name, limit=1).body
        other = Gateway(config={"waiter_lease_ms": 600})
        try:
            stuck = other.client(timeout=30)
            stuck._connection(30).sock.sendall(
                b"POST " + (SEM + name).encode() + b"/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 30\r\n\r\n"
                b'{"limit": 1, "wait_ms": 30000}')
            deadline = time.monotonic() + 10
            while self.c.get(SEM + name).body["waiting"] < 1:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.01)
            out = []
            with self.gw.client(timeout=30) as wc:
                t = threading.Thread(target=lambda: out.append(
                    wc.post(SEM + name + "/acquire", {"limit": 1, "wait_ms": 10000})))
                t.start()
                while self.c.get(SEM + name).body["waiting"] < 2:
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.01)
                other.kill()  # SIGKILL: its waiter stays queued until its liveness key expires
                time.sleep(0.8)
                self.assertEqual(self.c.post(SEM + name + "/release", {"token": a["token"]}).status, 200)
                t.join(10)
                stuck.close()
            self.assertEqual(out[0].status, 200, out)  # the live waiter, not the dead gateway's
            self.assertEqual(self.c.get(SEM + name).body, {"semaphore": name, "limit": 1, "holders": 1,
                                                            "waiting": 0})
            self.assertEqual(self.c.post(SEM + name + "/release", {"token": out[0].body["token"]}).status, 200)
        finally:
            other.kill()

    def test_release_of_the_only_holder_hands_the_slot_to_a_waiter(self):
        name = unique("sem-handover")
        a = self.acquire(name, limit=1).body
        # Its liveness mark and the claim window of its waiter's grant outlast the stop below.
        other = Gateway(config={"waiter_lease_ms": 10000})
        try:
            out = []
            with other.client(timeout=30) as wc:
                t = threading.Thread(target=lambda: out.append(
                    wc.post(SEM + name + "/acquire", {"limit": 1, "wait_ms": 20000})))
                t.start()
                deadline = time.monotonic() + 10
                while self.c.get(SEM + name).body["waiting"] < 1:
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.01)
                other.signal(signal.SIGSTOP)  # its waiter cannot look again: only the release can grant
                try:
                    self.assertEqual(self.c.post(SEM + name + "/release", {"token": a["token"]}).status, 200)
                    self.assertEqual(self.c.get(SEM + name).body,
                                     {"semaphore": name, "limit": 1, "holders": 1, "waiting": 0},
                                     "the release did not hand the slot to the waiter")
                finally:
                    other.signal(signal.SIGCONT)
                t.join(20)
            self.assertEqual(out[0].status, 200, out)
            self.assertEqual(self.c.post(SEM + name + "/release", {"token": out[0].body["token"]}).status, 200)
        finally:
            other.kill()

    def waiter(self, name: str, out: list, **fields) -> threading.Thread:
        """An acquire of name that waits, on a connection of its own; its answer goes into out."""
        def run():
            with self.gw.client(timeout=60) as c:
                out.append(c.post(SEM + name + "/acquire", fields))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def wait_waiting(self, name: str, n: int) -> None:
        wait_for(lambda: self.c.get(SEM + name).body["waiting"] == n, what=f"{n} waiting on {name}")

    def test_a_retry_that_will_not_wait_names_the_queue_it_is_in(self):
        """A retry with wait_ms 0 of a request_id still queued answers 409 lock_busy with the length of the
        queue that holds it, and keeps its place. Caught on the code before the fix: "waiting": 0 with two
        waiters queued (sem_acquire.lua's queued answer carried no queue length)."""
        name, rid = unique("sem-retry"), unique("rid")
        held = self.acquire(name, limit=1).body
        first: list = []
        t1 = self.waiter(name, first, limit=1, wait_ms=20000, request_id=rid)
        self.wait_waiting(name, 1)
        second: list = []
        t2 = self.waiter(name, second, limit=1, wait_ms=20000)
        self.wait_waiting(name, 2)
        busy = self.acquire(name, limit=1, request_id=rid)
        self.assertEqual((busy.status, busy.body["type"], busy.body.get("waiting")),
                         (409, "/problems/lock_busy", 2), busy)
        self.assertEqual(self.c.get(SEM + name).body["waiting"], 2)
        out: list = []
        t3 = self.waiter(name, out, limit=1, wait_ms=20000, request_id=rid)  # waits on in the place it kept
        self.assertEqual(self.c.post(SEM + name + "/release", {"token": held["token"]}).status, 200)
        t3.join(10)
        self.assertEqual(out[0].status, 200, out)
        t1.join(10)
        self.assertEqual(self.c.post(SEM + name + "/release", {"token": out[0].body["token"]}).status, 200)
        t2.join(10)
        self.assertEqual(second[0].status, 200, second)
        self.assertEqual(self.c.post(SEM + name + "/release", {"token": second[0].body["token"]}).status, 200)

    def test_every_status_query_parameter_is_checked(self):
        """Every query parameter of GET /v1/semaphores/{name} is checked on every request, with or without
        watch; a bare or empty ?watch is absent, as every empty parameter (test_query_args). Caught on the
        code before the fix: fence=0, wait_ms=-5 and watch=false&wait_ms=99999999 answered 200 with the plain
        status."""
        name = unique("sem-query")
        for query, field in (("fence=abc", "fence"), ("fence=0", "fence"), ("wait_ms=-5", "wait_ms"),
                             ("watch=false&wait_ms=99999999", "wait_ms"), ("watch=1", "watch"), ("watch=true&fence=1&waiters=101", "waiters")):
            r = self.c.get(f"{SEM}{name}?{query}")
            self.assertEqual((r.status, r.body.get("type")), (400, "/problems/invalid_field"), (query, r))
            self.assertIn(f"'{field}'", r.body["detail"], (query, r))
        for query in ("watch=false&fence=1&wait_ms=0&waiters=0", "watch", "watch=&fence=1"):
            r = self.c.get(f"{SEM}{name}?{query}")
            self.assertEqual((r.status, r.body["semaphore"]), (200, name), (query, r))

    def test_a_release_hands_on_the_slot_of_an_expired_holder_too(self):
        """Every script that finds a semaphore in use purges the holders whose lease ran out, a release
        included: a crashed holder's slot goes to a waiter with the released one, in the same step. The
        waiters' gateway is stopped meanwhile, so that its waiters cannot look again when the crashed
        lease ends and take that slot themselves. Caught: a release that counted the expired holder
        (one waiter granted, one left waiting)."""
        name = unique("sem-purge")
        # Its liveness mark outlasts the stop below: its waiters stay in the queue. Started first: the crashed
        # lease must outlast only the two waiters' queueing, not a gateway's start too.
        other = Gateway(config={"waiter_lease_ms": 10000})
        try:
            crashed = self.acquire(name, limit=2, ttl_ms=4000)
            self.assertEqual(crashed.status, 200, crashed)
            held = self.acquire(name, limit=2, ttl_ms=30000)
            self.assertEqual(held.status, 200, held)
            out = []
            threads = [threading.Thread(target=lambda: out.append(acquire_through(other, name))) for _ in range(2)]
            for t in threads:
                t.start()
            wait_for(lambda: self.c.get(SEM + name).body["waiting"] == 2, 10, what="two waiters queued")
            other.signal(signal.SIGSTOP)
            try:
                with Redis() as r:  # the crashed holder's lease ends, on Redis's clock
                    wait_for(lambda: int(r.cmd("TIME")[0]) * 1000 > crashed.body["expires_at_ms"] + 50, 10,
                             what="the first lease to run out")
                self.assertEqual(self.c.post(SEM + name + "/release", {"token": held.body["token"]}).status, 200)
                self.assertEqual(self.c.get(SEM + name).body,
                                 {"semaphore": name, "limit": 2, "holders": 2, "waiting": 0},
                                 "the release did not hand both free slots on")
            finally:
                other.signal(signal.SIGCONT)
            for t in threads:
                t.join(20)
            self.assertEqual([r.status for r in out], [200, 200], out)
            for r in out:
                self.assertEqual(self.c.post(SEM + name + "/release", {"token": r.body["token"]}).status, 200)
        finally:
            other.kill()


if __name__ == "__main__":
    unittest.main()
