"""Lease bookkeeping at the edges (issue 16, items 5, 6, 7 and 10).

- A request_id is remembered for as long as the lease it names holds: its memory is refreshed at grant,
  claim and renew from the lease's own expiry, and by every retry, not fixed by the first request.
  (Broken variant caught: lib_lease.lua's rid_hold made a no-op and rid_keep keeping the first request's
  time, as before the fix — the entry then expired at the first request's wait + ttl + 60 s, long before
  the retry's lease and its renewal ended.)
- A retried release answers 200 however many other leases of the same lock or semaphore were released
  since: released leases are remembered by time, not by count. (Broken variant caught: mark_released
  trimming to the newest 64 entries again — the retried release answered 410; and since the ends are
  kept in one set, looked up by the token's fence, a lookup by the fence alone, without the reason.)
- Waiters of a dead gateway do not count against max_waiters_per_lock: an acquire that finds the queue
  at its cap first drops them. (Broken variant caught: the purge removed from lock_acquire.lua and
  sem_acquire.lua — the live client got 429.)
- Every key a lease script touches is one of the KEYS it was given (no key built inside a script), so
  Redis ACL key patterns can confine the gateway. Checked with MONITOR: every command a script runs names
  only keys (per COMMAND GETKEYS) of its FCALL. (Broken variant caught: the former "fg:inst:<id>"
  liveness keys and "r:<request id>" keys built inside the scripts.) The one exception, lease_list.lua
  (its only KEYS is a listing index: it reads the keys of the names it finds there), is left out: the
  janitor's index pruning runs it at any moment.

Owns: these properties. Must not: depend on timing beyond generous bounds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (Gateway, GatewayTest, Monitor, Redis, lease_keys, metric, request_id_kept,  # noqa: E402
                     same_slot, skip_in_cluster, slot_key, wait_for)
from lock_helpers import Waiter, acquire, release, renew, status, unique_name  # noqa: E402


class LeaseEdges(GatewayTest):
    gateway_config = {"limits": {"max_waiters_per_lock": 3}, "waiter_lease_ms": 1000, "poll_ms": 500}

    # -- item 5 --------------------------------------------------------------------------------------------

    def test_request_id_outlives_the_first_request_when_a_retry_holds_longer(self):
        name = unique_name("rid")
        holder = acquire(self.c, name, ttl_ms=30000)
        self.assertEqual(holder.status, 200, holder)
        first = Waiter(self.gw, f"/v1/locks/{name}/acquire",
                       {"request_id": "rid-long", "wait_ms": 20000, "ttl_ms": 100})
        first.start()
        wait_for(lambda: status(self.c, name)["waiting"] == 1, what="the first request queued")
        retry = Waiter(self.gw, f"/v1/locks/{name}/acquire",
                       {"request_id": "rid-long", "wait_ms": 20000, "ttl_ms": 200000})
        retry.start()
        first.join(30)  # the retry took its place in the queue over
        self.assertEqual(status(self.c, name)["waiting"], 1)
        self.assertEqual(release(self.c, name, holder.body["token"]).status, 200)
        retry.join(30)
        self.assertEqual(retry.response.status, 200, retry.response)
        granted = retry.response.body
        self.assertGreaterEqual(self.remembered_until(name), granted["expires_at_ms"],
                                "the request_id would be forgotten while its lease still holds")
        renewed = renew(self.c, name, granted["token"], ttl_ms=400000)
        self.assertEqual(renewed.status, 200, renewed)
        self.assertGreaterEqual(self.remembered_until(name), renewed.body["expires_at_ms"],
                                "a renewal did not keep the request_id for the renewed lease")
        again = acquire(self.c, name, request_id="rid-long", ttl_ms=60000)
        self.assertEqual((again.status, again.body.get("token")), (200, granted["token"]), again)
        self.assertEqual(release(self.c, name, granted["token"]).status, 200)

    def test_a_renewal_keeps_the_request_id_of_a_lease_granted_at_once(self):
        """A lease granted at once is claimed from the start, and its renewal leaves the record as it is; one
        with a request_id is still read whole, and the renewal keeps the id as long as the renewed lease
        (lib_holder.lua claimed_brief reads only records without one). Caught: a brief read that took records
        with a request_id too (the id then kept only until the lease's first expiry)."""
        name = unique_name("rid-renew")
        got = acquire(self.c, name, request_id="rid-long", ttl_ms=1000)
        self.assertEqual(got.status, 200, got)
        renewed = renew(self.c, name, got.body["token"], ttl_ms=400000)
        self.assertEqual(renewed.status, 200, renewed)
        self.assertGreaterEqual(self.remembered_until(name), renewed.body["expires_at_ms"],
                                "a renewal did not keep the request_id for the renewed lease")
        self.assertEqual(release(self.c, name, got.body["token"]).status, 200)

    def remembered_until(self, name: str) -> int:
        """Until when (Redis ms) lock name remembers request id rid-long, where it keeps it."""
        with Redis() as r:
            lease, till = request_id_kept(r, "locks", name, "rid-long")
        self.assertIsNotNone(lease, "the request_id is not kept")
        return till

    # -- item 6 --------------------------------------------------------------------------------------------

    def test_retried_release_answers_200_after_many_other_releases(self):
        for kind, extra in (("locks", {}), ("semaphores", {"limit": 2})):
            name = unique_name("rel")
            first = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **extra})
            self.assertEqual(first.status, 200, first)
            self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": first.body["token"]}).status, 200)
            for _ in range(70):
                r = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **extra})
                self.assertEqual(r.status, 200, r)
                self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": r.body["token"]}).status, 200)
            again = self.c.post(f"/v1/{kind}/{name}/release", {"token": first.body["token"]})
            self.assertEqual(again.status, 200, (kind, again))

    def test_a_release_that_hands_the_lock_over_keeps_its_end(self):
        """A release that hands the lock to a waiter writes the waiter's holder record over the released one
        and files the release in the lock's history instead: a retried release answers 200, and a watch of
        its fence answers released. Caught: the hand-over given no end to file (the retry answered 410, the
        watch expired)."""
        name = unique_name("rel-handover")
        first = acquire(self.c, name, ttl_ms=30000)
        self.assertEqual(first.status, 200, first)
        waiter = Waiter(self.gw, f"/v1/locks/{name}/acquire", {"ttl_ms": 30000, "wait_ms": 20000})
        waiter.start()
        wait_for(lambda: status(self.c, name)["waiting"] == 1, timeout=10)
        self.assertEqual(release(self.c, name, first.body["token"]).status, 200)
        waiter.join(20)
        self.assertEqual(waiter.response.status, 200, waiter.response)
        again = release(self.c, name, first.body["token"])
        self.assertEqual((again.status, again.body), (200, {"released": True}))
        watch = self.c.get(f"/v1/locks/{name}?watch=true&fence={first.body['fence']}&wait_ms=2000")
        self.assertEqual((watch.status, watch.body["held"], watch.body.get("reason")), (200, False, "released"),
                         watch)
        self.assertEqual(release(self.c, name, waiter.response.body["token"]).status, 200)

    def test_the_end_of_a_long_lease_is_kept_as_long_as_its_ttl(self):
        """An uncontended release keeps the end of its lease (for retried releases and watchers) for
        LEASE_RELEASED_KEPT_MS (600 s) or the lease's ttl if longer, which the first tries compare as
        decimal texts: one of more digits (1,200 s), one of as many (900 s). Caught: the end kept 600 s
        whatever the ttl (a retried release of a long lease then answers 410 after ten minutes)."""
        with Redis() as r:
            for kind, key, ttl, extra in (("locks", "lk:{%s}:h", 1_200_000, {}),
                                          ("semaphores", "sm:{%s}:l", 900_000, {"limit": 2})):
                name = unique_name("long-end")
                self.warm_slot(kind, name, extra)  # the first tries keep the end in that key
                a = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": ttl, "max_hold_ms": 3_600_000, **extra})
                self.assertEqual(a.status, 200, a)
                self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": a.body["token"]}).status, 200)
                k = "fg:" + key % name
                self.assertTrue(r.cmd("GET", k).startswith("~"), (kind, r.cmd("GET", k)))
                self.assertGreater(r.cmd("PTTL", k), ttl - 60_000, kind)
                again = self.c.post(f"/v1/{kind}/{name}/release", {"token": a.body["token"]})
                self.assertEqual(again.status, 200, (kind, again))

    def test_the_end_a_grant_moves_away_is_kept_as_long_as_its_record(self):
        """The next grant of a lock, or of an idle semaphore, writes over the end's record of the lease before
        (in the holder key, in the limit key) and moves that record to a key of its own, "<key>:<fence>"
        (lib_lease.lua end_move), with the time to live it had: a retried release still answers 200 and a
        watch of the lease "released" as long as it was to. A record an earlier gateway wrote, with its end's
        time and keep time after the reason, is read the same. Caught: the record written over (the retried
        release then answers 410, the watch "expired"), a watcher or release that does not read the moved
        record, and a reader of the three fields of now alone (the earlier record not moved)."""
        with Redis() as r:
            for kind, prefix, record_key, extra in (("locks", "lk", "h", {}), ("semaphores", "sm", "l", {"limit": 2})):
                for written_by in ("this gateway", "an earlier gateway"):
                    name = unique_name("bury")
                    base = f"fg:{prefix}:{{{name}}}:"
                    self.warm_slot(kind, name, extra)  # the first tries keep the end in the record
                    a = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 1_200_000, "max_hold_ms": 3_600_000,
                                                                  **extra})
                    self.assertEqual(a.status, 200, a)
                    self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": a.body["token"]}).status,
                                     200)
                    record = base + record_key
                    text = r.cmd("GET", record)
                    self.assertTrue(text.startswith("~") and text.endswith(f" {a.body['fence']} released"),
                                    (kind, text))
                    self.assertGreater(r.cmd("PTTL", record), 1_200_000 - 60_000, kind)
                    if written_by == "an earlier gateway":
                        text = f"{text} {int(r.cmd('TIME')[0]) * 1000} 1200000"
                        r.cmd("SET", record, text, "PX", "1200000")
                    self.assert_moved_by_the_next_grant(r, kind, name, record, text, a.body, extra)

    def test_a_revoked_lock_moved_away_is_still_told_revoked(self):
        """A lock's revoked lease leaves its end's record ("revoked") in the holder key; the next grant moves
        it to a key of its own (end_move), from which a watch of the revoked fence still answers "revoked" and
        its retried release 410. Caught: a watch that reads the ended set alone ("expired")."""
        with Redis() as r:
            name = unique_name("bury-rv")
            self.warm_slot("locks", name, {})
            a = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000})
            self.assertEqual(a.status, 200, a)
            revoked = self.c.post(f"/v1/locks/{name}/revoke", {"reason": "test"})
            self.assertEqual((revoked.status, revoked.body.get("revoked_fence")), (200, a.body["fence"]), revoked)
            b = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000})
            self.assertEqual(b.status, 200, b)
            moved = r.cmd("GET", f"fg:lk:{{{name}}}:h:{a.body['fence']}")
            self.assertTrue(moved and moved.endswith(f" {a.body['fence']} revoked"), moved)
            watch = self.c.get(f"/v1/locks/{name}?watch=true&fence={a.body['fence']}&wait_ms=1000")
            self.assertEqual((watch.status, watch.body["held"], watch.body.get("reason")), (200, False, "revoked"),
                             watch)
            self.assertEqual(self.c.post(f"/v1/locks/{name}/release", {"token": a.body["token"]}).status, 410)
            self.assertEqual(self.c.post(f"/v1/locks/{name}/release", {"token": b.body["token"]}).status, 200)

    def warm_slot(self, kind: str, name: str, extra: dict):
        """Takes and releases a lease of kind (with extra) of another name in name's slot. A slot's first lease
        since its fence sequence was recovered (on a Redis Cluster a slot no test used yet) is the full
        script's, and so, the name then seen contended, is its release, which keeps the end in the released
        and ended sets, not in the holder or limit key: a lease in the slot first, as one Redis's sequence is
        warm."""
        warm = self.c.post(f"/v1/{kind}/{same_slot('warm', like=name)[0]}/acquire", extra)
        self.assertEqual(warm.status, 200, warm)
        done = self.c.post(f"/v1/{kind}/{warm.body['lock' if kind == 'locks' else 'semaphore']}/release",
                           {"token": warm.body["token"]})
        self.assertEqual(done.status, 200, done)

    def assert_moved_by_the_next_grant(self, r, kind: str, name: str, record: str, text: str, ended: dict,
                                       extra: dict):
        """Grants kind's name again: the end's record of lease `ended` (its acquire's answer), text in key
        record kept 1,200 s, moves to record:<fence> for about that long, and the lease's retried release
        answers 200 and its watch "released"; once the moved record's time is up, 410 and "expired"."""
        b = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **extra})
        self.assertEqual(b.status, 200, b)
        moved = f"{record}:{ended['fence']}"
        self.assertEqual(r.cmd("GET", moved), text, kind)
        self.assertGreater(r.cmd("PTTL", moved), 1_200_000 - 60_000, kind)
        self.assertEqual(r.cmd("EXISTS", record.rsplit(":", 1)[0] + ":n"), 0, (kind, "an ended set written"))
        again = self.c.post(f"/v1/{kind}/{name}/release", {"token": ended["token"]})
        self.assertEqual(again.status, 200, (kind, again))
        watch = self.c.get(f"/v1/{kind}/{name}?watch=true&fence={ended['fence']}&wait_ms=1000")
        self.assertEqual((watch.status, watch.body["held"], watch.body.get("reason")), (200, False, "released"),
                         (kind, watch))
        self.assertEqual(r.cmd("PEXPIRE", moved, "1"), 1, kind)
        time.sleep(0.01)
        late = self.c.post(f"/v1/{kind}/{name}/release", {"token": ended["token"]})
        self.assertEqual(late.status, 410, (kind, late))
        watch = self.c.get(f"/v1/{kind}/{name}?watch=true&fence={ended['fence']}&wait_ms=1000")
        self.assertEqual((watch.status, watch.body["held"], watch.body.get("reason")), (200, False, "expired"),
                         (kind, watch))
        self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": b.body["token"]}).status, 200)

    def test_retried_release_answers_200_after_a_renew_of_the_released_lease(self):
        """A renew that finds its lease released answers 410 and forgets nothing: a retried release still
        answers 200. (Caught: a semaphore left idle by the release dropping its keys again on that renew,
        the record of the release with them.)"""
        for kind, extra in (("locks", {}), ("semaphores", {"limit": 2})):
            name = unique_name("rel-renew")
            got = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **extra})
            self.assertEqual(got.status, 200, got)
            self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": got.body["token"]}).status, 200)
            late = self.c.post(f"/v1/{kind}/{name}/renew", {"token": got.body["token"]})
            self.assertEqual(late.status, 410, (kind, late))
            again = self.c.post(f"/v1/{kind}/{name}/release", {"token": got.body["token"]})
            self.assertEqual(again.status, 200, (kind, again))

    def test_a_renewal_claims_a_handed_over_grant_and_then_moves_its_time_alone(self):
        """A lock handed over within one gateway is held unclaimed (an orphan give-back may still free it,
        lib_lock.lua grant_next); its first renewal claims it, and later ones move its time to live and leave
        the record as it is. A waiter's own look at the lock (the one right after it parks, or a grant that
        came before it parked) claims the grant first; the hand-over is then done again, with that waiter as
        the holder, and poll_ms keeps the waiters from looking on their own otherwise. Caught: a renewal that
        only moves the time to live (the grant stays unclaimed), and one that does not move it."""
        name = unique_name("renew-claim")
        holder = f"fg:lk:{{{name}}}:h"
        with Gateway(config={"poll_ms": 600000}) as gw, gw.client(timeout=30) as c, Redis() as r:
            claimed = lambda: r.cmd("GET", holder).split(" ")[5]  # noqa: E731 - lib_holder.lua's layout
            got = acquire(c, name, ttl_ms=30000)
            self.assertEqual(got.status, 200, got)
            for _ in range(5):
                waiter = Waiter(gw, f"/v1/locks/{name}/acquire", {"ttl_ms": 30000, "wait_ms": 20000})
                waiter.start()
                wait_for(lambda: status(c, name)["waiting"] == 1, what="the waiter queued")
                wait_for(lambda: metric(gw, "fencegate_waiters") == 1, what="the waiter parked")
                self.assertEqual(release(c, name, got.body["token"]).status, 200)
                waiter.join(30)
                got = waiter.response
                self.assertEqual(getattr(got, "status", None), 200, got)
                if claimed() == "0":
                    break
            else:
                self.fail("each waiter claimed its grant before the test could renew it")
            self.assertEqual(renew(c, name, got.body["token"], ttl_ms=5000).status, 200)
            self.assertEqual(claimed(), "1")
            self.assertTrue(4000 < r.cmd("PTTL", holder) <= 5000)
            record = r.cmd("GET", holder)
            self.assertEqual(renew(c, name, got.body["token"], ttl_ms=9000).status, 200)
            self.assertEqual(r.cmd("GET", holder), record)
            self.assertTrue(8000 < r.cmd("PTTL", holder) <= 9000)
            self.assertEqual(release(c, name, got.body["token"]).status, 200)

    def test_release_after_the_lease_ran_out_answers_410(self):
        """A release after the lease ran out answers 410, though nothing else ran on the lock or semaphore
        since to clear it away. (Caught: a semaphore's release of its only holder that did not look at the
        holder's expiry before dropping the semaphore's keys.)"""
        for kind, extra in (("locks", {}), ("semaphores", {"limit": 2})):
            name = unique_name("rel-late")
            got = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 100, **extra})
            self.assertEqual(got.status, 200, got)
            time.sleep(0.3)
            late = self.c.post(f"/v1/{kind}/{name}/release", {"token": got.body["token"]})
            self.assertEqual(late.status, 410, (kind, late))

    # -- item 7 --------------------------------------------------------------------------------------------

    def test_dead_gateways_waiters_do_not_fill_the_cap(self):
        for kind, extra in (("locks", {}), ("semaphores", {"limit": 1})):
            name = unique_name("cap")
            holder = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **extra})
            self.assertEqual(holder.status, 200, holder)
            doomed = Gateway(config={"limits": {"max_waiters_per_lock": 3}, "waiter_lease_ms": 1000})
            try:
                dead = [Waiter(doomed, f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, "wait_ms": 60000, **extra})
                        for _ in range(3)]
                for i, d in enumerate(dead):
                    d.start()
                    wait_for(lambda: self.c.get(f"/v1/{kind}/{name}").body["waiting"] == i + 1,
                             what="a waiter of the doomed gateway queued")
            finally:
                doomed.kill()
            time.sleep(1.5)  # past the dead gateway's waiter lease (1 s)
            live = Waiter(self.gw, f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, "wait_ms": 20000, **extra})
            live.start()
            wait_for(lambda: live.response is not None or self.c.get(f"/v1/{kind}/{name}").body["waiting"] == 1,
                     what="the live waiter queued")
            self.assertIsNone(live.response, f"the live client was refused: {live.response}")
            self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": holder.body["token"]}).status, 200)
            live.join(30)
            self.assertEqual(live.response.status, 200, live.response)
            self.c.post(f"/v1/{kind}/{name}/release", {"token": live.response.body["token"]})

    def test_a_waiter_whose_gateway_seemed_dead_arrives_anew(self):
        """A parked waiter whose gateway's mark lapsed (a stalled janitor) is dropped by the next grant; when
        its gateway then asks again for it, the waiter arrives anew and takes the free lock, and no waiter record
        is left behind; so too one with a request_id, which no retry took over. (Broken variants caught:
        lock_acquire.lua writing the dropped waiter's record back and answering its place in a queue it was no
        longer in: 500 "bad argument #2 to 'format'"; the same answering "queued" without a place: the lock
        came a poll later and the record stayed; a waiter with a request_id answering 409 conflict, "a retry
        with the same request_id took this wait over", when its id was forgotten with the dead waiter.)"""
        redis = Redis()
        slow_beat = {"limits": {"max_waiters_per_lock": 3}, "waiter_lease_ms": 600000, "poll_ms": 200}
        # by: who drops the waiter, the waiter's own look as the holder's lease runs out ("expiry") or a
        # release through the other gateway, after which the waiter looks again ("release"). A case is
        # arranged whole (its holder, its waiter queued, its gateway's mark removed, the release) before the
        # next one is; the holders' leases of the expiry cases then run out together, each case on a gateway of
        # its own, whose mark no other case touches (on one Redis every lock reads the one key of marks).
        cases = [("locks", {"request_id": unique_name("rid")}, "release"),
                 ("semaphores", {"limit": 1, "request_id": unique_name("rid")}, "release"),
                 ("locks", {}, "expiry"), ("semaphores", {"limit": 1}, "expiry"),
                 ("locks", {"request_id": unique_name("rid")}, "expiry"),
                 ("semaphores", {"limit": 1, "request_id": unique_name("rid")}, "expiry")]
        with contextlib.ExitStack() as gateways:
            gw = gateways.enter_context(Gateway(config=slow_beat))
            arranged = []
            for kind, extra, by in cases:
                if by == "expiry" and any(a[5] == "expiry" for a in arranged):
                    gw = gateways.enter_context(Gateway(config=slow_beat))
                me = next(g["id"] for g in gw.http("GET", "/v1/gateways").body["gateways"] if g["self"])
                name = unique_name("lapsed")
                held_extra = {k: v for k, v in extra.items() if k != "request_id"}
                # the holder's lease outlasts the waiter's queueing and the mark's removal on a loaded machine
                if by == "expiry":
                    holder = gw.http("POST", f"/v1/{kind}/{name}/acquire", {"ttl_ms": 4000, **held_extra})
                else:
                    holder = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **held_extra})
                self.assertEqual(holder.status, 200, holder)
                waiter = Waiter(gw, f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, "wait_ms": 20000, **extra})
                waiter.start()
                wait_for(lambda: gw.http("GET", f"/v1/{kind}/{name}").body["waiting"] == 1,
                         what="the waiter queued")
                marks = slot_key("fg:gateways", name)  # what the grant reads (on a cluster, the lock's slot's)
                self.assertEqual(redis.cmd("ZREM", marks, me), 1)
                if by == "release":
                    released = self.c.post(f"/v1/{kind}/{name}/release", {"token": holder.body["token"]})
                    self.assertEqual(released.status, 200, released)
                    waiter.join(30)  # the waiter arrives anew before the mark is back for the next case
                    redis.cmd("ZADD", marks, int(time.time() * 1000) + 600000, me)
                arranged.append((kind, name, holder, waiter, me if by == "expiry" else None, by))
            for kind, name, holder, waiter, me, by in arranged:
                with self.subTest(kind=kind, by=by, name=name):
                    waiter.join(30)
                    self.assertEqual(getattr(waiter.response, "status", None), 200, waiter.response)
                    self.assertGreater(waiter.response.body["fence"], holder.body["fence"])
                    prefix = "fg:lk:{" if kind == "locks" else "fg:sm:{"
                    self.assertEqual(redis.cmd("HLEN", f"{prefix}{name}}}:w"), 0, "a waiter record outlived its wait")
                if me is not None:
                    redis.cmd("ZADD", slot_key("fg:gateways", name), int(time.time() * 1000) + 600000, me)

    # -- item 10 -------------------------------------------------------------------------------------------

    def test_a_holder_record_of_the_layout_before_is_still_read(self):
        """Gateways before the record's fence-first layout wrote a holder's lease first (lua/lib_holder.lua); a
        lease granted by one and still held after it was replaced must stay held: status shows it, another
        acquire is refused, its renew and release (the first try's) work. Caught: a reader of the new layout
        alone (the holder then reads as no holder: a second grant of the lock, and 410 for its token)."""
        name = unique_name("layout-before")
        holder = f"fg:lk:{{{name}}}:h"
        held = acquire(self.c, name, ttl_ms=30000, owner="before")
        self.assertEqual(held.status, 200, held)
        with Redis() as r:
            def rewrite() -> None:
                fence, granted_at, lease, ttl, max_hold, rest = r.cmd("GET", holder).split(" ", 5)
                self.assertEqual((fence, len(lease)), (str(held.body["fence"]), 32))
                before = " ".join((lease, fence, ttl, max_hold, granted_at, rest))
                self.assertEqual(r.cmd("SET", holder, before, "KEEPTTL"), "OK")

            rewrite()
            got = status(self.c, name)
            self.assertEqual((got["held"], got["fence"], got["owner"]), (True, held.body["fence"], "before"), got)
            self.assertEqual(acquire(self.c, name, wait_ms=0).status, 409)
            before = r.cmd("GET", holder)
            self.assertEqual(renew(self.c, name, held.body["token"]).status, 200)
            self.assertEqual(r.cmd("GET", holder), before)  # a renewal moves the record's time to live alone
            self.assertEqual(release(self.c, name, held.body["token"]).status, 200)
        self.assertFalse(status(self.c, name)["held"])

    def test_a_waiter_record_with_numbers_is_still_granted(self):
        """Gateways before the waiter record's ttl and max_hold as JSON strings (lib_lease.lua waiter_json) wrote
        them as numbers; a waiter queued by one gets, once its turn comes, the lease it asked for: its ttl, and
        its ttl and max_hold in the holder's record."""
        for kind, extra in (("locks", {}), ("semaphores", {"limit": 1})):
            name = unique_name("waiter-before")
            base = ("fg:lk:{" if kind == "locks" else "fg:sm:{") + name + "}:"
            held = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 30000, **extra})
            self.assertEqual(held.status, 200, held)
            waiter = Waiter(self.gw, f"/v1/{kind}/{name}/acquire",
                            {"ttl_ms": 7000, "max_hold_ms": 20000, "wait_ms": 20000, **extra})
            waiter.start()
            wait_for(lambda: self.c.get(f"/v1/{kind}/{name}").body["waiting"] == 1, what="the waiter queued")
            with Redis() as r:
                lease, record = r.cmd("HGETALL", base + "w")  # the one waiter
                before = record.replace('"ttl":"7000","max_hold":"20000"', '"ttl":7000,"max_hold":20000')
                self.assertNotEqual(before, record, record)
                self.assertEqual(r.cmd("HSET", base + "w", lease, before), 0)
                self.assertEqual(self.c.post(f"/v1/{kind}/{name}/release", {"token": held.body["token"]}).status, 200)
                waiter.join(30)
                self.assertEqual(getattr(waiter.response, "status", None), 200, waiter.response)
                self.assertEqual(waiter.response.body["ttl_ms"], 7000, waiter.response.body)
                if kind == "locks":
                    self.assertEqual(r.cmd("GET", base + "h").split(" ")[3:5], ["7000", "20000"])
                else:
                    got = json.loads(r.cmd("HGET", base + "d", lease))
                    self.assertEqual((got["ttl"], got["max_hold"]), (7000, 20000), got)
            self.c.post(f"/v1/{kind}/{name}/release", {"token": waiter.response.body["token"]})

    def test_a_holder_record_of_no_known_layout_holds_the_lock_until_it_expires(self):
        """A holder record this gateway cannot read (say a newer gateway's layout, while gateways are replaced)
        still holds the lock: an acquire that will not wait is refused, and one that waits is granted only once
        the record's key has expired, by Redis's clock. Caught: a reader that takes an unreadable record for a
        free lock (it was granted at once, over a lease another gateway had given out)."""
        name = unique_name("layout-unknown")
        holder = f"fg:lk:{{{name}}}:h"
        held = acquire(self.c, name, ttl_ms=30000)
        self.assertEqual(held.status, 200, held)
        with Redis() as r:
            seconds, micros = r.cmd("TIME")
            written_ms = int(seconds) * 1000 + int(micros) // 1000
            self.assertEqual(r.cmd("SET", holder, "v9|a layout of later|" + held.body["token"], "PX", "1500"), "OK")
        self.assertEqual(acquire(self.c, name, wait_ms=0).status, 409)
        waited = acquire(self.c, name, wait_ms=10000, ttl_ms=5000, timeout=15)
        self.assertEqual(waited.status, 200, waited)
        granted_at = waited.body["expires_at_ms"] - 5000
        self.assertGreaterEqual(granted_at, written_ms + 1500, "granted while the unreadable record still held")
        self.assertEqual(release(self.c, name, waited.body["token"]).status, 200)

    def test_a_first_holder_record_of_no_known_layout_holds_its_slot_until_it_expires(self):
        """The same for a semaphore's first holder, kept in its limit key: with limit 1 an acquire that will not
        wait is refused, one that waits is granted once the limit key has expired. Caught: a reader that
        stops on the record (the acquire answered 500) or drops it (granted at once)."""
        name = unique_name("sem-layout-unknown")
        base = f"fg:sm:{{{name}}}:"
        path = f"/v1/semaphores/{name}/acquire"
        held = self.c.post(path, {"limit": 1, "ttl_ms": 30000})
        self.assertEqual(held.status, 200, held)
        with Redis() as r:
            seconds, micros = r.cmd("TIME")
            written_ms = int(seconds) * 1000 + int(micros) // 1000
            r.cmd("DEL", base + "d", base + "h")
            self.assertEqual(r.cmd("SET", base + "l", "=1 v9|a layout of later", "PX", "1500"), "OK")
        refused = self.c.post(path, {"limit": 1, "wait_ms": 0})
        self.assertEqual(refused.status, 409, refused)
        waited = self.c.post(path, {"limit": 1, "wait_ms": 10000, "ttl_ms": 5000}, timeout=15)
        self.assertEqual(waited.status, 200, waited)
        self.assertGreaterEqual(waited.body["expires_at_ms"] - 5000, written_ms + 1500,
                                "granted while the unreadable record still held its slot")
        self.assertEqual(self.c.post(f"/v1/semaphores/{name}/release", {"token": waited.body["token"]}).status, 200)

    def cancel(self, r: Redis, name: str, lease: str, attach: str, kind: str = "locks", mode: str = "drop") -> str:
        """Gives lease of lock or semaphore name up as the attempt with attach does when its client is gone
        (lock_cancel.lua or sem_cancel.lua, mode drop, or mode), with the one-Redis key names; its answer."""
        # The gateway loads a script at its first use: a waiter that gives up loads the cancel script.
        busy, limit = unique_name("cancel-load"), {"limit": 1} if kind == "semaphores" else {}
        held = self.c.post(f"/v1/{kind}/{busy}/acquire", {"ttl_ms": 30000, **limit})
        self.assertEqual(self.c.post(f"/v1/{kind}/{busy}/acquire", {"wait_ms": 100, **limit}).status, 409)
        self.assertEqual(self.c.post(f"/v1/{kind}/{busy}/release", {"token": held.body["token"]}).status, 200)
        short = "lock" if kind == "locks" else "sem"
        [script] = [lib[1] for lib in r.cmd("FUNCTION", "LIST", "LIBRARYNAME", f"fg_{short}_cancel_*")
                    if re.fullmatch(rf"fg_{short}_cancel_[0-9a-f]{{12}}", lib[1])]
        keys = lease_keys(kind, name)
        keep = [] if kind == "locks" else ["60000"]
        return r.cmd("FCALL", script, len(keys), *keys, name, lease, attach, mode, "30000", "600000", *keep,
                     "00")

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_a_retry_takes_a_held_lock_over_from_the_attempt_before(self):
        """A request retried with its request_id (say from another connection, its client having given up on
        the first) finds its lease holding the lock and takes it over: a give-up of the attempt before (its
        client gone: lock_cancel.lua, mode drop, with that attempt's attach) answers superseded and leaves
        the lock held. Caught: a retry that keeps the first attempt's attach (that give-up then releases the
        lock the retry was answered 200 for)."""
        name = unique_name("retry-over")
        holder = f"fg:lk:{{{name}}}:h"
        with Redis() as r:
            first = acquire(self.c, name, ttl_ms=30000, wait_ms=1000, request_id="retry-over-1")
            self.assertEqual(first.status, 200, first)
            lease, before = r.cmd("GET", holder).split(" ")[2], r.cmd("GET", holder).split(" ")[7]
            self.assertEqual(len(before), 32, "an attempt that may wait has an attach id")
            with self.gw.client() as other:
                again = acquire(other, name, ttl_ms=30000, wait_ms=1000, request_id="retry-over-1")
            self.assertEqual((again.status, again.body["fence"]), (200, first.body["fence"]), again)
            self.assertNotEqual(r.cmd("GET", holder).split(" ")[7], before, "the retry did not take it over")
            self.assertEqual(self.cancel(r, name, lease, before), "superseded")
            self.assertTrue(status(self.c, name)["held"])
        self.assertEqual(renew(self.c, name, again.body["token"]).status, 200)
        self.assertEqual(release(self.c, name, again.body["token"]).status, 200)

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_a_place_dropped_by_a_set_retry_leaves_a_grant_alone(self):
        """A lock set's retry with wait_ms 0 learns that its set's place is queued in one script and drops it
        in a second (lock_cancel.lua, mode place, naming the connection it saw waiting there); a grant that
        reached the place in between is never freed by it. The drop answers superseded and leaves the lock
        held, its place (a waiter) it drops as before. Caught: the drop freed the grant (mode drop naming no
        connection skips the guard of another connection's holder), the attempt answered 200 for a lock
        nobody held."""
        name = unique_name("place-drop")
        holder = f"fg:lk:{{{name}}}:h"
        with Redis() as r:
            granted = acquire(self.c, name, ttl_ms=30000, wait_ms=1000, request_id="place-drop-1")
            self.assertEqual(granted.status, 200, granted)
            lease = r.cmd("GET", holder).split(" ")[2]
            self.assertEqual(self.cancel(r, name, lease, "", mode="place"), "superseded")
            self.assertEqual(status(self.c, name)["fence"], granted.body["fence"])
            self.assertTrue(status(self.c, name)["held"])
            waiter = Waiter(self.gw, f"/v1/locks/{name}/acquire", {"ttl_ms": 30000, "wait_ms": 3000})
            waiter.start()
            wait_for(lambda: status(self.c, name)["waiting"] == 1, what="a waiter queued")
            [place] = r.cmd("ZRANGE", f"fg:lk:{{{name}}}:q", "0", "-1")
            attach = json.loads(r.cmd("HGET", f"fg:lk:{{{name}}}:w", place))["attach"]
            self.assertEqual(self.cancel(r, name, place, attach, mode="place").split(" ")[0], "canceled")
            waiter.join(15)
            self.assertEqual(waiter.response.status, 409, waiter.response)  # it queued again, and timed out
        self.assertEqual(release(self.c, name, granted.body["token"]).status, 200)
        self.assertFalse(status(self.c, name)["held"])

    @staticmethod
    def forget_gateway(inst: str) -> None:
        with Redis() as r:
            r.cmd("ZREM", "fg:gateways", inst)

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_a_set_retry_drops_only_the_place_of_the_attempt_it_saw(self):
        """A lock set's retry with wait_ms 0 looks (lock_acquire.lua, wait "0") and finds its request id's place
        queued, attempt A waiting in it; it then drops the place (lock_cancel.lua, mode place). A later retry B
        of the request that waits may take the place over in between. The look names A's connection and the
        drop names it: unchanged, the place leaves the queue; taken over by B, it stays in the queue, B's, and
        the drop answers superseded; granted meanwhile, the drop answers granted where the grant is still the
        connection's it names (the retry takes it over), superseded where B took it. The attempts are the
        scripts' calls as gateways make them, from a gateway nobody runs, marked alive (its grants ring nobody,
        and none is given back as an orphan). Caught: a look that named no connection, and a drop naming none
        that took B's place out of the queue (B, rung, found it left and answered 409 conflict)."""
        name = unique_name("place-seen")
        queue, waiters = f"fg:lk:{{{name}}}:q", f"fg:lk:{{{name}}}:w"
        seen, later, inst = "c1" * 16, "c2" * 16, "e0" * 8
        with open(os.path.join(os.path.dirname(os.environ["FG_BIN"]), "generated", "lua", "lock_acquire.lua")) as f:
            library = f.read()
        function = library.split("\n", 1)[0].split("name=", 1)[1].strip()
        holder = acquire(self.c, name, ttl_ms=30000)
        self.assertEqual(holder.status, 200, holder)
        with Redis() as r:
            r.cmd("FUNCTION", "LOAD", "REPLACE", library)
            r.cmd("ZADD", "fg:gateways", int(r.cmd("TIME")[0]) * 1000 + 120000, inst)
            self.addCleanup(self.forget_gateway, inst)

            def attempt(rid: str, lease: str, wait: str, attach: str) -> list[str]:
                keys = lease_keys("locks", name, rid)
                return r.cmd("FCALL", function, len(keys), *keys, name, lease, rid, "30000", "600000", "", wait, inst,
                             attach, "3000", "100", "130000", "", "20000", "3000").split(" ")

            def place_waited(rid: str) -> str:
                """A waits under rid (attach seen) and the set's retry looks: the place's lease."""
                self.assertEqual(attempt(rid, "a1" * 16, "1", seen)[0], "queued")
                look = attempt(rid, "b1" * 16, "0", "")
                self.assertEqual((look[0], "a1" * 16 in look), ("queued", True), look)
                self.assertIn(seen, look, "the look does not name the connection waiting in the place")
                return "a1" * 16

            place = place_waited("place-seen-1")
            self.assertEqual(self.cancel(r, name, place, seen, mode="place").split(" ")[0], "canceled")
            self.assertIsNone(r.cmd("ZSCORE", queue, place))
            place = place_waited("place-seen-2")
            self.assertEqual(attempt("place-seen-2", "b2" * 16, "1", later)[0], "queued")  # B takes it over
            self.assertEqual(self.cancel(r, name, place, seen, mode="place"), "superseded")
            self.assertIsNotNone(r.cmd("ZSCORE", queue, place), "B's place left the queue")
            self.assertEqual(json.loads(r.cmd("HGET", waiters, place))["attach"], later)
            self.assertEqual(release(self.c, name, holder.body["token"]).status, 200)  # granted to B's place
            self.assertGreater(status(self.c, name)["fence"], holder.body["fence"])
            self.assertEqual(self.cancel(r, name, place, seen, mode="place"), "superseded")
            self.assertEqual(self.cancel(r, name, place, later, mode="place"), "granted")
            self.assertTrue(status(self.c, name)["held"])
            self.assertEqual(self.cancel(r, name, place, later).split(" ")[0], "released")
        self.assertFalse(status(self.c, name)["held"])

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_a_grant_given_up_unanswered_leaves_its_request_id_free(self):
        """A grant whose client was never answered (it hung up while it waited; a lock set gave up after a
        reset) is given up by lock_cancel.lua, mode drop, with its attempt's attach. A retry of the request
        then acquires afresh, as the retry of a waiter that left the queue does. Caught: a give-up that keeps
        the request_id's mapping (the retry answers 410 "has ended" for a lease its client never had)."""
        name = unique_name("drop-rid")
        holder = f"fg:lk:{{{name}}}:h"
        with Redis() as r:
            first = acquire(self.c, name, ttl_ms=30000, wait_ms=1000, request_id="drop-rid-1")
            self.assertEqual(first.status, 200, first)
            fields = r.cmd("GET", holder).split(" ")
            self.assertEqual(self.cancel(r, name, fields[2], fields[7]).split(" ")[0], "released")
        again = acquire(self.c, name, ttl_ms=30000, wait_ms=0, request_id="drop-rid-1")
        self.assertEqual(again.status, 200, again)
        self.assertGreater(again.body["fence"], first.body["fence"])
        self.assertEqual(release(self.c, name, again.body["token"]).status, 200)

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_an_attempt_superseded_after_its_place_left_keeps_the_keys_bounded(self):
        """An attempt whose gateway was paused looks again (sem_acquire.lua, wait "again") after a retry of its
        request_id took its place over and gave it up, and after the semaphore went idle and a newcomer's
        first try kept its holder in the limit key. The look moves that holder into the holders' keys, which
        it makes anew, then answers superseded: the keys still get their times to live. Caught: superseded
        answered before the bookkeeping, which left holders, their data and the limit key without one, for
        good if nothing used the name again. The attempts are the script's calls as a gateway makes them."""
        name = unique_name("left-over")
        base, rid, lease = f"fg:sm:{{{name}}}:", "left-over-1", "a1" * 16
        path = f"/v1/semaphores/{name}/acquire"
        with open(os.path.join(os.path.dirname(os.environ["FG_BIN"]), "generated", "lua", "sem_acquire.lua")) as f:
            library = f.read()
        function = library.split("\n", 1)[0].split("name=", 1)[1].strip()
        with Redis() as r:
            r.cmd("FUNCTION", "LOAD", "REPLACE", library)
            [inst] = r.cmd("ZRANGE", "fg:gateways", "-1", "-1")

            def attempt(lease_id: str, wait: str, attach: str) -> str:
                keys = lease_keys("semaphores", name, rid)
                return r.cmd("FCALL", function, len(keys), *keys, name, lease_id, rid, "30000", "600000", "", wait,
                             inst, attach, "3000", "100", "130000", "1", "")

            first = self.c.post(path, {"limit": 1, "ttl_ms": 30000})
            self.assertEqual(first.status, 200, first)
            self.assertEqual(attempt(lease, "1", "c1" * 16).split(" ")[0], "queued")
            self.assertEqual(attempt("b2" * 16, "1", "c2" * 16).split(" ")[0], "queued")  # the retry takes it over
            self.assertEqual(self.cancel(r, name, lease, "c2" * 16, kind="semaphores").split(" ")[0], "canceled")
            self.assertEqual(self.c.post(f"/v1/semaphores/{name}/release", {"token": first.body["token"]}).status,
                             200)
            newcomer = self.c.post(path, {"limit": 1, "ttl_ms": 30000})
            self.assertEqual(newcomer.status, 200, newcomer)
            self.assertEqual(attempt(lease, "again", "c1" * 16).split(" ")[0], "superseded")
            lives = {suffix: r.cmd("PTTL", base + suffix) for suffix in "hdl"}
            self.assertTrue(all(ms > 0 for ms in lives.values()), lives)
        self.assertEqual(self.c.post(f"/v1/semaphores/{name}/release", {"token": newcomer.body["token"]}).status, 200)

    @skip_in_cluster("it calls a script with the one-Redis key names")
    def test_a_semaphore_grant_given_up_unanswered_leaves_its_request_id_free(self):
        """The same for a semaphore slot (sem_cancel.lua, mode drop): the retry takes a slot afresh, with a
        newer fence. Caught: the give-up kept the request_id's mapping, so the retry answered 410 "has ended"
        for a lease its client never had, where a lock's retry acquires afresh."""
        name = unique_name("drop-rid-sem")
        path = f"/v1/semaphores/{name}/acquire"
        other = self.c.post(path, {"limit": 2, "ttl_ms": 30000})
        self.assertEqual(other.status, 200, other)
        body = {"limit": 2, "ttl_ms": 30000, "request_id": "drop-rid-sem-1"}
        first = self.c.post(path, {**body, "wait_ms": 1000})
        self.assertEqual(first.status, 200, first)
        with Redis() as r:
            records = r.cmd("HGETALL", f"fg:sm:{{{name}}}:d")
            [(lease, attach)] = [(records[i], json.loads(records[i + 1])["attach"]) for i in range(0, len(records), 2)
                                 if json.loads(records[i + 1])["rid"] == "drop-rid-sem-1"]
            self.assertEqual(len(attach), 32, "an attempt that may wait has an attach id")
            self.assertEqual(self.cancel(r, name, lease, attach, "semaphores"), "released")
        again = self.c.post(path, {**body, "wait_ms": 0})
        self.assertEqual(again.status, 200, again)
        self.assertGreater(again.body["fence"], first.body["fence"])
        for token in (again.body["token"], other.body["token"]):
            self.assertEqual(self.c.post(f"/v1/semaphores/{name}/release", {"token": token}).status, 200)

    @skip_in_cluster("it watches the one test Redis with MONITOR")
    def test_scripts_touch_only_the_keys_they_are_given(self):
        """Every key a lease script touches is one of its KEYS, or a key to which a first try moves the end's
        record of a lock's holder key or a semaphore's limit key, "<key>:<fence>" (lib_lease.lua end_move), or
        the one-id key's request id, "<key>:<request_id>" (rid_take_first), in that key's hash slot."""
        with Monitor() as mon:
            self.exercise_every_lease_script()
            time.sleep(0.3)
        calls = [(set(c.args[3:3 + int(c.args[2])]), c.ran) for c in mon.calls if c.args[0].upper() == "FCALL"]
        calls = [c for c in calls if c[0] not in LISTING_KEYS]
        self.assertGreater(len(calls), 10, "MONITOR showed no script calls")
        offending = []
        with Redis() as r:
            for keys, inner in calls:
                for cmd in inner:
                    touched = command_keys(r, cmd)
                    for k in touched:
                        base, _, fence = k.rpartition(":")
                        moved = base in keys and base.endswith((":h", ":l")) and fence.isdigit()
                        moved_id = any(k.startswith(one + ":") for one in keys if one.endswith(":i"))
                        if k not in keys and not (cmd[0].upper() == "RENAME" and (moved or moved_id)):
                            offending.append((cmd[0], k))
        self.assertEqual(offending, [], "keys built inside scripts, not passed in KEYS")

    def exercise_every_lease_script(self) -> None:
        for kind, extra in (("locks", {}), ("semaphores", {"limit": 1})):
            name = unique_name("keys")
            a = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 5000, "request_id": "k-a", **extra})
            w = Waiter(self.gw, f"/v1/{kind}/{name}/acquire",
                       {"ttl_ms": 5000, "wait_ms": 10000, "request_id": "k-b", **extra})
            w.start()
            wait_for(lambda: self.c.get(f"/v1/{kind}/{name}").body["waiting"] == 1, what="a waiter")
            self.c.post(f"/v1/{kind}/{name}/renew", {"token": a.body["token"]})
            self.c.post(f"/v1/{kind}/{name}/release", {"token": a.body["token"]})
            w.join(20)
            self.c.post(f"/v1/{kind}/{name}/release", {"token": w.response.body["token"]})
            self.c.post(f"/v1/{kind}/{name}/release", {"token": w.response.body["token"]})
            t = Waiter(self.gw, f"/v1/{kind}/{name}/acquire", {"ttl_ms": 5000, "wait_ms": 200, **extra})
            b = self.c.post(f"/v1/{kind}/{name}/acquire", {"ttl_ms": 5000, **extra})
            t.start()
            t.join(20)
            self.c.post(f"/v1/{kind}/{name}/release", {"token": b.body["token"]})
            self.c.get(f"/v1/{kind}/{name}")


# The KEYS of a lease_list.lua call: a listing index alone (src/store/backend/redis_keys.h).
LISTING_KEYS = ({"fg:idx:lk"}, {"fg:idx:sm"})


def command_keys(r: Redis, cmd: list[str]) -> list[str]:
    """The keys a command names, as Redis itself says (COMMAND GETKEYS); none for key-less commands."""
    if cmd[0].upper() in ("TIME", "PUBLISH"):
        return []
    try:
        return r.cmd("COMMAND", "GETKEYS", *cmd) or []
    except Exception:  # noqa: BLE001 - "The command has no key arguments"
        return []


if __name__ == "__main__":
    unittest.main()
