# SPDX-License-Identifier: Apache-2.0
"""A retry of a request_id while its first attempt still waits, through another gateway (docs/api.md, Locks
"request_id"; Lock sets "request_id"): two gateways share Redis, and the test keeps its own record of who was
granted when, never the gateway's.

- a retry with wait_ms 0 whose request_id's place is queued answers 409 lock_busy and leaves the place to the
  attempt that waits in it: that attempt is granted in its turn, before those who came after it;
- a retry that waits takes the place over: the first attempt answers 409 conflict at once (the retry's script
  rings its gateway's doorbell, not its poll_ms later), and it never queues again at the back once the retry
  gave the place up;
- a retry that waits and takes over the place kept for an attempt whose client hung up keeps what it is
  granted: the ring it sends that attempt's gateway is not a grant, and that gateway gives nothing back;
- a lock set's retry with wait_ms 0 that finds the set still waiting takes it over and gives it up: the first
  attempt answers 409 conflict, the set holds nothing, and the lock it waited for goes to the next waiter, not
  to a place nobody waits in; if the set's place is granted just as that retry drops it, the retry takes the
  grant over and goes on, so that whichever gives up leaves no lock of the set held; a retry that a later
  retry takes over just as it meets that place (on its own gateway, or by taking the place over through
  another) leaves it to the later one and answers 409 conflict;
- a request_id names one set of names: a set of other names sent with it is another request, which neither
  releases the locks the first set was answered nor takes over its place.

Owns: nothing but its own lock and semaphore names. Must not: read the order of grants from the gateway.
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, TcpProxy, metric, skip_in_cluster, wait_for  # noqa: E402
from lock_helpers import raw_acquire, unique_name  # noqa: E402

KINDS = (("locks", {}), ("semaphores", {"limit": 1}))


class Turns:
    """The clients' own record of their grants: who was answered what, when, in which order. A granted client
    holds hold_s (HOLD_S), then releases (so the next one's turn comes)."""

    HOLD_S = 0.15

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.granted: list[str] = []
        self.answers: dict = {}
        self.at: dict = {}
        self.threads: list[threading.Thread] = []

    def send(self, who: str, gw: Gateway, kind: str, name: str, body: dict, hold_s: float = HOLD_S) -> None:
        def run():
            with gw.client(timeout=60) as c:
                r = c.post(f"/v1/{kind}/{name}/acquire", body)
                with self.lock:
                    self.answers[who], self.at[who] = r, time.monotonic()
                    if r.status == 200:
                        self.granted.append(who)
                if r.status == 200:
                    time.sleep(hold_s)
                    c.post(f"/v1/{kind}/{name}/release", {"token": r.body["token"]})
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)

    def join(self) -> None:
        for t in self.threads:
            t.join(30)


def send_set(box: dict, key: str, gw: Gateway, body: dict) -> threading.Thread:
    """Sends the lock set acquire body through gw on a thread of its own, started and returned: its answer goes
    to box[key]."""
    def run():
        with gw.client(timeout=60) as client:
            box[key] = client.post("/v1/locksets/acquire", body)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


class RequestIdTakeoverTest(GatewayTest):
    """gw (this class's gateway) and other, a second gateway on the same Redis; both re-check parked waiters
    every poll_ms = 2 s (the default), so an answer within a second did not wait for it."""

    gateway_config = {"poll_ms": 2000}

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.other = Gateway(config={"poll_ms": 2000})
        cls.oc = cls.other.client()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.oc.close()
        cls.other.stop()
        super().tearDownClass()

    def waiting(self, kind: str, name: str) -> int:
        r = self.c.get(f"/v1/{kind}/{name}")
        self.assertEqual(r.status, 200, r)
        return r.body["waiting"]

    def until_waiting(self, kind: str, name: str, n: int) -> None:
        wait_for(lambda: self.waiting(kind, name) == n, timeout=15, what=f"{n} waiting on {name}")

    def proxy_holding_back(self, hold: bytes) -> TcpProxy:
        """A proxy before the test Redis that holds back the first chunk a connection sends containing hold
        until let_go(); closed at the test's end."""
        proxy = TcpProxy(int(os.environ["FG_TEST_REDIS_PORT"]), hold=hold)
        self.addCleanup(proxy.close)
        return proxy

    def a_then_x_behind_a_holder(self, kind: str, name: str, rid: str, extra: dict):
        """name held here (60 s), then A (request_id rid, wait 9 s) and X (wait 9 s) queued behind it through
        gw, in that order: the holder's grant and the Turns that record A's and X's answers."""
        held = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 60000, **extra})
        self.assertEqual(held.status, 200, held)
        turns = Turns()
        turns.send("A", self.gw, kind, name, {"request_id": rid, "wait_ms": 9000, **extra})
        self.until_waiting(kind, name, 1)
        turns.send("X", self.gw, kind, name, {"wait_ms": 9000, **extra})
        self.until_waiting(kind, name, 2)
        return held, turns

    def test_a_retry_that_will_not_wait_leaves_the_place_to_the_attempt_that_waits(self):
        """Held; A (request_id R, wait 9 s) waits through gw, then X through gw and Y through other: [A, X, Y].
        R retried with wait_ms 0 through other answers 409 lock_busy with the queue's length, and the release
        grants A, X, Y in that order. Failed before the fix: the retry moved A's place to other, where nobody
        waited; the grant there was given back 200 ms later, R forgotten, and A queued again at the back at its
        next look: granted X, Y, A (A after 3.6 s), and without X and Y A timed out with 409 lock_busy."""
        for kind, extra in KINDS:
            with self.subTest(kind=kind):
                name, rid = unique_name("rt0"), unique_name("rid")
                held, turns = self.a_then_x_behind_a_holder(kind, name, rid, extra)
                turns.send("Y", self.other, kind, name, {"wait_ms": 9000, **extra})
                self.until_waiting(kind, name, 3)
                retry = self.oc.post(f"/v1/{kind}/{name}/acquire", {"request_id": rid, "wait_ms": 0, **extra})
                self.assertEqual((retry.status, retry.body.get("type"), retry.body.get("waiting")),
                                 (409, "/problems/lock_busy", 3), retry)
                self.assertEqual(self.waiting(kind, name), 3)
                released_at = time.monotonic()
                self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": held.body["token"]}).status,
                                 200)
                turns.join()
                self.assertEqual(turns.granted, ["A", "X", "Y"], turns.answers)
                self.assertLess(turns.at["A"] - released_at, 1.0, "A was granted late")

    def test_a_retry_that_waits_elsewhere_supersedes_the_first_attempt_at_once(self):
        """A (request_id R, wait 9 s) waits through gw, then X through gw; R retried through other with wait_ms
        1.5 s takes A's place over. A answers 409 conflict within a second (before gw's poll_ms), the retry times
        out with 409 lock_busy, and the queue then holds X alone: the release grants X, and A never comes back.
        Failed before the fix: A kept waiting, unaware; at its poll after the retry's give-up, R forgotten, it
        queued again behind X and was granted after it, never answering 409 conflict."""
        for kind, extra in KINDS:
            with self.subTest(kind=kind):
                name, rid = unique_name("rtw"), unique_name("rid")
                held, turns = self.a_then_x_behind_a_holder(kind, name, rid, extra)
                before = metric(self.other, "fencegate_waiters")
                turns.send("B", self.other, kind, name, {"request_id": rid, "wait_ms": 1500, **extra})
                wait_for(lambda: metric(self.other, "fencegate_waiters") == before + 1, what="the retry parked")
                parked_at = time.monotonic()
                wait_for(lambda: "A" in turns.at, timeout=5, what="A answered")
                a = turns.answers["A"]
                self.assertEqual((a.status, a.body.get("type")), (409, "/problems/conflict"), a)
                self.assertLess(turns.at["A"] - parked_at, 1.0, "A learnt of the takeover only at its poll_ms")
                wait_for(lambda: "B" in turns.at, timeout=5, what="the retry timed out")
                self.assertEqual(turns.answers["B"].status, 409, turns.answers["B"])
                time.sleep(2.5)  # past gw's poll_ms: a look again of A would have queued it anew
                self.assertEqual(self.waiting(kind, name), 1)
                self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": held.body["token"]}).status,
                                 200)
                turns.join()
                self.assertEqual(turns.granted, ["X"], turns.answers)
                self.assertEqual(self.waiting(kind, name), 0)

    def test_a_retry_that_takes_a_kept_place_over_keeps_its_grant(self):
        """H holds through other. A (request_id R, wait 20 s) queues through gw and hangs up: gw keeps its place.
        B (R, wait 10 s) waits through other and takes the place over; H releases at once and B is answered
        200 (and releases 2 s later). For a second after that, B's fence holds the lock (the slot) and a third
        client's acquire with wait_ms 0 is told 409. Failed before the fix: B's takeover rang gw, which found nobody waiting under
        the lease and filed the ring as an orphaned grant; 200 ms later it gave back the lease, now B's, and
        the third client was granted while B still believed it held."""
        for kind, extra in KINDS:
            with self.subTest(kind=kind):
                name, rid = unique_name("rtk"), unique_name("rid")
                path = f"/v1/{kind}/{name}"
                held = self.oc.post(path + "/acquire", {"ttl_ms": 60000, **extra})
                self.assertEqual(held.status, 200, held)
                gone = raw_acquire(self.gw.port, name, {"request_id": rid, "wait_ms": 20000, "ttl_ms": 30000,
                                                        **extra}, kind=kind)
                self.until_waiting(kind, name, 1)
                gone.close()
                time.sleep(0.5)  # a hang-up is seen within milliseconds
                self.assertEqual(self.waiting(kind, name), 1, "the place was not kept")
                turns = Turns()
                before = metric(self.other, "fencegate_waiters")
                turns.send("B", self.other, kind, name, {"request_id": rid, "wait_ms": 10000, "ttl_ms": 30000,
                                                         **extra}, hold_s=2.0)
                wait_for(lambda: metric(self.other, "fencegate_waiters") == before + 1, interval=0.005,
                         what="the retry parked")
                # Within the doorbell's grace (200 ms) of the takeover's ring, so a ring filed as an orphan
                # would find B's grant unclaimed.
                self.assertEqual(self.oc.post(path + "/release", {"token": held.body["token"]}).status, 200)
                wait_for(lambda: "B" in turns.at, timeout=5, what="B answered")
                b = turns.answers["B"]
                self.assertEqual(b.status, 200, b)
                until = turns.at["B"] + 1.2
                while time.monotonic() < until:
                    third = self.c.post(path + "/acquire", {"wait_ms": 0, "ttl_ms": 30000, **extra})
                    if third.status == 200:
                        self.c.post(path + "/release", {"token": third.body["token"]})
                    self.assertEqual(third.status, 409, f"granted while B holds (fence {b.body['fence']})")
                    state = self.c.get(path).body
                    if kind == "locks":
                        self.assertEqual((state["held"], state["fence"]), (True, b.body["fence"]), state)
                    else:
                        self.assertEqual(state["holders"], 1, state)
                    time.sleep(0.1)
                turns.join()  # B's client releases after its 2 s
                self.assertEqual(self.waiting(kind, name), 0)
                again = self.c.post(path + "/acquire", {"wait_ms": 0, "ttl_ms": 30000, **extra})
                self.assertEqual(again.status, 200, again)
                self.assertEqual(self.c.post(path + "/release", {"token": again.body["token"]}).status, 200)

    def test_a_set_retry_that_will_not_wait_gives_the_waiting_set_up(self):
        """b is held. The set [a, b] (request_id RS, wait 9 s, ttl 1.5 s) holds a and waits for b through gw; X
        waits for b behind it. RS retried with wait_ms 0 through other answers 409 lock_busy naming b; the first
        attempt answers 409 conflict within a second, a is free, X alone waits for b and gets it as b is
        released. A later retry of RS is told b is busy, not that its lease ended. Failed before the fix: the
        retry released a under the waiting attempt, which answered 410 lease_lost only as b was released; b was
        granted to the set's leftover place and held by nobody until its ttl, X waiting all along, and a later
        retry of RS answered 410."""
        a, b = sorted((unique_name("rts"), unique_name("rts")))
        rid = unique_name("rid")
        held = self.c.post(f"/v1/locks/{b}/acquire", {"ttl_ms": 60000})
        self.assertEqual(held.status, 200, held)
        body = {"names": [a, b], "request_id": rid, "wait_ms": 9000, "ttl_ms": 1500}
        box: dict = {}

        def first():
            with self.gw.client(timeout=60) as c:
                box["first"] = c.post("/v1/locksets/acquire", body)
            box["first_at"] = time.monotonic()
        t = threading.Thread(target=first, daemon=True)
        t.start()
        self.until_waiting("locks", b, 1)
        turns = Turns()
        turns.send("X", self.gw, "locks", b, {"wait_ms": 9000, "ttl_ms": 30000}, hold_s=1.5)
        self.until_waiting("locks", b, 2)
        self.assertTrue(self.c.get(f"/v1/locks/{a}").body["held"])
        retry = self.oc.post("/v1/locksets/acquire", {**body, "wait_ms": 0})
        retried_at = time.monotonic()
        self.assertEqual((retry.status, retry.body.get("type"), retry.body.get("lock")),
                         (409, "/problems/lock_busy", b), retry)
        t.join(5)
        self.assertIn("first", box, "the first attempt was not told within 5 s")
        self.assertEqual((box["first"].status, box["first"].body.get("type")), (409, "/problems/conflict"),
                         box["first"])
        self.assertLess(box["first_at"] - retried_at, 1.0, "the first attempt learnt of it only at its poll_ms")
        self.assertFalse(self.c.get(f"/v1/locks/{a}").body["held"], "the failed set left a held")
        self.assertEqual(self.waiting("locks", b), 1)
        released_at = time.monotonic()
        self.assertEqual(self.c.post(f"/v1/locks/{b}/release", {"token": held.body["token"]}).status, 200)
        wait_for(lambda: "X" in turns.at, timeout=5, what="X answered")
        self.assertEqual(turns.granted, ["X"], turns.answers)
        self.assertLess(turns.at["X"] - released_at, 1.0, "b went to a place nobody waited in first")
        again = self.oc.post("/v1/locksets/acquire", {**body, "wait_ms": 0})
        self.assertEqual((again.status, again.body.get("type"), again.body.get("lock")),
                         (409, "/problems/lock_busy", b), again)
        turns.join()
        again = self.oc.post("/v1/locksets/acquire", {**body, "wait_ms": 3000})
        self.assertEqual(again.status, 200, again)
        tokens = [x["token"] for x in again.body["locks"]]
        self.assertEqual(self.c.post("/v1/locksets/release", {"tokens": tokens}).status, 200)

    def set_retry_meets_a_fresh_grant(self, both_proxied: bool) -> dict:
        """b and c are held. The set [a, b, c] (request_id RS, wait 4 s) holds a and waits for b; RS is retried
        with wait_ms 0 through a third gateway whose Redis connections pass through a proxy that holds back
        the retry's drop of the place at b (lock_cancel.lua, mode place) until b was released, so that the
        place was granted meanwhile (the drop answers superseded). The first attempt runs through gw, or with
        both_proxied through the third gateway too. Once both answered, none of a, b may be held: the answers
        (by "first" and "retry") are returned."""
        a, b, c = sorted(unique_name("grant-race") for _ in range(3))
        rid = unique_name("rid")
        held = {n: self.c.post(f"/v1/locks/{n}/acquire", {"ttl_ms": 60000}) for n in (b, c)}
        self.assertEqual([r.status for r in held.values()], [200, 200], held)
        proxy = self.proxy_holding_back(b"$5\r\nplace\r\n")
        body = {"names": [a, b, c], "request_id": rid, "ttl_ms": 30000}
        box: dict = {"names": (a, b, c)}
        with Gateway(config={"poll_ms": 2000}, env_overrides={"FENCEGATE_REDIS_URL": proxy.redis_url}) as third:
            first = send_set(box, "first", third if both_proxied else self.gw, {**body, "wait_ms": 4000})
            self.until_waiting("locks", b, 1)
            retry = send_set(box, "retry", third, {**body, "wait_ms": 0})
            self.assertTrue(proxy.held.wait(10), "the retry never dropped the set's place")
            self.assertEqual(self.c.post(f"/v1/locks/{b}/release", {"token": held[b].body["token"]}).status, 200)
            if both_proxied:  # the first attempt's claim of b waits behind the held drop
                time.sleep(0.5)
            else:
                self.until_waiting("locks", c, 1)
            proxy.let_go()
            retry.join(10)
            first.join(10)
        self.assertIn("first", box, "the first attempt was not answered")
        for n in (a, b):
            self.assertFalse(self.c.get(f"/v1/locks/{n}").body["held"], f"{n} of the set stayed held")
        self.assertEqual(self.waiting("locks", c), 0)
        self.assertEqual((box["retry"].status, box["retry"].body.get("type"), box["retry"].body.get("lock")),
                         (409, "/problems/lock_busy", c), box["retry"])
        self.assertEqual(self.c.post(f"/v1/locks/{c}/release", {"token": held[c].body["token"]}).status, 200)
        return box

    @skip_in_cluster("its proxy stands before the one test Redis")
    def test_a_set_retry_meeting_a_fresh_grant_takes_it_over_and_leaves_nothing_held(self):
        """The first attempt through gw (set_retry_meets_a_fresh_grant): it holds a and b and queues for c when
        the retry's drop answers superseded. The retry takes b over and meets the attempt's place at c: it
        answers 409 lock_busy naming c, the first attempt 409 conflict, none of a, b is held, c waited for by
        nobody. Failed before the fix: the retry left the set to the first attempt (409 lock_busy naming b),
        whose give-up at its deadline released b but not a, which the retry had re-pointed to its own
        connection: a stayed held for its 30 s TTL."""
        box = self.set_retry_meets_a_fresh_grant(both_proxied=False)
        self.assertEqual((box["first"].status, box["first"].body.get("type")), (409, "/problems/conflict"),
                         box["first"])

    @skip_in_cluster("its proxy stands before the one test Redis")
    def test_a_set_attempt_taken_over_here_takes_no_further_lock(self):
        """Both attempts through the third gateway (set_retry_meets_a_fresh_grant): the retry, as it begins,
        marks the first attempt taken over, so that the attempt gives nothing back. Once b is granted to its
        place the attempt takes no further lock and answers 409 conflict; the retry takes b over, finds c
        busy and releases a and b. Failed before the fix: the retry left the set to the attempt, which went
        on to wait for c and, marked taken over, gave back nothing at its deadline: a and b stayed held for
        their 30 s TTL."""
        box = self.set_retry_meets_a_fresh_grant(both_proxied=True)
        self.assertEqual((box["first"].status, box["first"].body.get("type")), (409, "/problems/conflict"),
                         box["first"])

    @skip_in_cluster("its proxy stands before the one test Redis")
    def test_a_set_retry_taken_over_as_it_meets_the_earlier_place_answers_conflict(self):
        """b is held. The set [a, b] (request_id RS, wait 9 s) holds a and waits for b through gw. Through a
        third gateway whose Redis connection passes through a proxy, a retry R2 of RS with wait_ms 0 takes a
        over; its acquire of b is held back at the proxy while a later retry R3 of RS reaches the same gateway
        and takes R2 over. R2, let go, finds the first attempt's place at b and leaves it to R3: 409 conflict.
        R3 drops the place and answers 409 lock_busy naming b; the first attempt answers 409 conflict; a is
        not held. Failed before the fix: R2 answered 409 lock_busy, as if the set were its to give up."""
        a, b = sorted(unique_name("over-over") for _ in range(2))
        rid = unique_name("rid")
        held, box, t = self.set_waiting_for(b, [a, b], rid)
        proxy = self.proxy_holding_back(b.encode())
        body = {"names": [a, b], "request_id": rid, "wait_ms": 0, "ttl_ms": 30000}
        with Gateway(env_overrides={"FENCEGATE_REDIS_URL": proxy.redis_url}) as third:
            r2 = send_set(box, "r2", third, body)
            self.assertTrue(proxy.held.wait(10), "R2 never asked for b")
            r3 = send_set(box, "r3", third, body)
            time.sleep(0.5)  # R3 took R2 over as it began; its calls queue behind R2's held one
            proxy.let_go()
            r2.join(10)
            r3.join(10)
        t.join(10)
        self.assertEqual((box["r2"].status, box["r2"].body.get("type")), (409, "/problems/conflict"), box["r2"])
        self.assertEqual((box["r3"].status, box["r3"].body.get("type"), box["r3"].body.get("lock")),
                         (409, "/problems/lock_busy", b), box["r3"])
        self.assertEqual((box["first"].status, box["first"].body.get("type")), (409, "/problems/conflict"),
                         box["first"])
        self.assertFalse(self.c.get(f"/v1/locks/{a}").body["held"], "the set's a stayed held")
        self.assertEqual(self.waiting("locks", b), 0)
        self.assertEqual(self.c.post(f"/v1/locks/{b}/release", {"token": held.body["token"]}).status, 200)

    @skip_in_cluster("its proxy stands before the one test Redis")
    def test_a_set_retry_leaves_a_place_a_later_retry_took_over_meanwhile(self):
        """b is held. The set [a, b] (request_id RS, wait 9 s) holds a and waits for b through gw. Through a
        third gateway whose Redis connection passes through a proxy, a retry R2 of RS with wait_ms 0 takes a
        over and finds the first attempt's place at b; its drop of that place (lock_cancel.lua, mode place) is
        held back at the proxy while a later retry R3 of RS with wait_ms 9 s, through other, takes a and the
        place over (the first attempt answers 409 conflict). R2, let go, leaves the place to R3 and answers
        409 conflict; R3 still waits, is granted b as it is released, and answers 200 for a and b; nothing
        stays held once it releases them. Failed before the fix: R2's drop named no connection and took R3's
        place out of the queue: R3, rung, answered 409 conflict, R2 409 lock_busy saying no lock was held,
        and a stayed held (R3's) until its TTL."""
        a, b = sorted(unique_name("later-over") for _ in range(2))
        rid = unique_name("rid")
        held, box, t = self.set_waiting_for(b, [a, b], rid)
        proxy = self.proxy_holding_back(b"$5\r\nplace\r\n")
        body = {"names": [a, b], "request_id": rid, "ttl_ms": 30000}
        with Gateway(config={"request_timeout_ms": 20000},
                     env_overrides={"FENCEGATE_REDIS_URL": proxy.redis_url}) as third:
            r2 = send_set(box, "r2", third, {**body, "wait_ms": 0})
            self.assertTrue(proxy.held.wait(10), "R2 never dropped the first attempt's place")
            before = metric(self.other, "fencegate_waiters")
            r3 = send_set(box, "r3", self.other, {**body, "wait_ms": 9000})
            wait_for(lambda: metric(self.other, "fencegate_waiters") == before + 1, what="R3 parked")
            t.join(5)
            self.assertIn("first", box, "the first attempt was not told of R3 within 5 s")
            proxy.let_go()
            r2.join(10)
        self.assertEqual((box["first"].status, box["first"].body.get("type")), (409, "/problems/conflict"),
                         box["first"])
        self.assertEqual((box["r2"].status, box["r2"].body.get("type")), (409, "/problems/conflict"), box["r2"])
        self.assertEqual(self.waiting("locks", b), 1, "R3's place left the queue")
        self.assertNotIn("r3", box, "R3 was answered while it waited")
        self.assertEqual(self.c.post(f"/v1/locks/{b}/release", {"token": held.body["token"]}).status, 200)
        r3.join(10)
        self.assertEqual(box["r3"].status, 200, box["r3"])
        self.assertEqual([x["lock"] for x in box["r3"].body["locks"]], [a, b])
        tokens = [x["token"] for x in box["r3"].body["locks"]]
        self.assertEqual(self.c.post("/v1/locksets/release", {"tokens": tokens}).status, 200)
        for n in (a, b):
            self.assertFalse(self.c.get(f"/v1/locks/{n}").body["held"], n)

    def test_a_set_of_other_names_under_the_same_request_id_leaves_the_first_set_alone(self):
        """The set [a, b] (request_id RS) is answered 200. Through other, [a, b, c] with RS and wait_ms 0, c held
        by another client: 409 lock_busy naming a, and a and b stay the first set's (its renew answers 200, a
        third client's acquire of a 409). Failed before the fix: the second set took a and b over by request
        id and released them with its 409; a third client acquired a while the first set believed it held it."""
        a, b, c = sorted(unique_name("other-names") for _ in range(3))
        rid = unique_name("rid")
        held_c = self.c.post(f"/v1/locks/{c}/acquire", {"ttl_ms": 30000})
        first = self.c.post("/v1/locksets/acquire", {"names": [a, b], "request_id": rid, "ttl_ms": 30000})
        self.assertEqual(first.status, 200, first)
        second = self.oc.post("/v1/locksets/acquire", {"names": [a, b, c], "request_id": rid, "wait_ms": 0})
        self.assertEqual((second.status, second.body.get("type"), second.body.get("lock")),
                         (409, "/problems/lock_busy", a), second)
        tokens = [x["token"] for x in first.body["locks"]]
        self.assertEqual(self.c.post("/v1/locksets/renew", {"tokens": tokens}).status, 200)
        self.assertEqual(self.c.post(f"/v1/locks/{a}/acquire", {"wait_ms": 0}).status, 409)
        self.assertEqual(self.c.post("/v1/locksets/release", {"tokens": tokens}).status, 200)
        self.assertEqual(self.c.post(f"/v1/locks/{c}/release", {"token": held_c.body["token"]}).status, 200)

    def set_waiting_for(self, busy: str, names: list, rid: str):
        """busy held here (60 s), then the set of names (request_id rid, wait 9 s, ttl 30 s) sent through gw
        until it waits for busy: the holder's grant, the box the set's answer goes to ("first"), the thread."""
        held = self.c.post(f"/v1/locks/{busy}/acquire", {"ttl_ms": 60000})
        self.assertEqual(held.status, 200, held)
        box: dict = {}
        t = send_set(box, "first", self.gw, {"names": names, "request_id": rid, "wait_ms": 9000, "ttl_ms": 30000})
        self.until_waiting("locks", busy, 1)
        return held, box, t

    def test_a_set_of_other_names_does_not_take_a_waiting_set_over(self):
        """b is held. The set [a, b] (request_id RS, wait 9 s) holds a and waits for b through gw; through other,
        [b, c] with RS and wait_ms 0 answers 409 lock_busy naming b. The first set still waits, is granted b as
        it is released, and answers 200; no lock stays held once it releases. Failed before the fix: the
        second set took the first one's place at b over and dropped it, the first set answered 409 conflict
        and left a held by nobody until its TTL."""
        a, b, c = sorted(unique_name("other-wait") for _ in range(3))
        rid = unique_name("rid")
        held, box, t = self.set_waiting_for(b, [a, b], rid)
        second = self.oc.post("/v1/locksets/acquire", {"names": [b, c], "request_id": rid, "wait_ms": 0})
        self.assertEqual((second.status, second.body.get("type"), second.body.get("lock")),
                         (409, "/problems/lock_busy", b), second)
        self.assertEqual(self.waiting("locks", b), 1, "the first set's place left the queue")
        self.assertEqual(self.c.post(f"/v1/locks/{b}/release", {"token": held.body["token"]}).status, 200)
        t.join(10)
        self.assertEqual(box["first"].status, 200, box["first"])
        tokens = [x["token"] for x in box["first"].body["locks"]]
        self.assertEqual(self.c.post("/v1/locksets/release", {"tokens": tokens}).status, 200)
        for n in (a, b, c):
            self.assertFalse(self.c.get(f"/v1/locks/{n}").body["held"], n)

    def test_a_set_whose_lock_a_retry_took_over_answers_conflict_and_gives_back_the_rest(self):
        """b is held. The set [a, b] (request_id RS, wait 9 s) holds a and waits for b through gw. Through
        other, a takes a over under the set's own request id for it, as a retry of the set walking its locks
        does (lockset.c lockset_request_ids: "set:RS:<digest of the names>#a"), and is answered a's lease.
        When b is granted, the set's last renewal finds a named for the retry's connection: it answers 409
        conflict and gives b back; a stays the retry's. Failed before the fix: the renewal did not look at
        whose a was and the set answered 200 for a and b, while the retry, had it failed, would have released
        a under it."""
        a, b = sorted(unique_name("renew-over") for _ in range(2))
        rid = unique_name("rid")
        held, box, t = self.set_waiting_for(b, [a, b], rid)
        digest = 14695981039346656037
        for byte in f"{a}\0{b}\0".encode():
            digest = ((digest ^ byte) * 1099511628211) % 2**64
        retry = self.oc.post(f"/v1/locks/{a}/acquire",
                             {"request_id": f"set:{rid}:{digest:016x}#{a}", "wait_ms": 0, "ttl_ms": 30000})
        self.assertEqual(retry.status, 200, retry)
        self.assertEqual(self.c.post(f"/v1/locks/{b}/release", {"token": held.body["token"]}).status, 200)
        t.join(10)
        self.assertEqual((box["first"].status, box["first"].body.get("type")), (409, "/problems/conflict"),
                         box["first"])
        self.assertFalse(self.c.get(f"/v1/locks/{b}").body["held"], "the set kept b")
        self.assertEqual(self.c.get(f"/v1/locks/{a}").body["fence"], retry.body["fence"])
        self.assertEqual(self.c.post(f"/v1/locks/{a}/release", {"token": retry.body["token"]}).status, 200)

if __name__ == "__main__":
    unittest.main()
