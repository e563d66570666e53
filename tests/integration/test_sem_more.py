# SPDX-License-Identifier: Apache-2.0
"""The lean acquire and release of a semaphore in use (lua/sem_acquire_more.lua, lua/sem_release_more.lua), the
lean queue join (lua/sem_acquire_queue.lua) and the lean hand-over (lua/sem_release_handover.lua) act only where
the full scripts would, and do there what the full scripts do.

A gateway runs the first two (an acquire without a request_id) once a first try found the semaphore in use
within the last CONTENTION_HINT_MS (src/lease/contention.h), the queue join (one that waits) and the hand-over
(a release) once a call found a queue there; anything they do not take they answer "contended", and the full
script decides. Each test brings the semaphore into a state a lean script must leave to the full one, or must
bookkeep as the full one would, with the gateway's hint at "in use" (or "queue"), and checks the outcome against
what the contract promises, read from Redis or the API, not from the gateway's own account. Caught (each tried),
of the acquire:
- no look at the queue: a newcomer took a slot freed without a hand-over ahead of the waiter owed it;
- no look at the limit in force: a holder of another limit granted beside holders of the first;
- no count of the holders that ran out: their entries kept, where every acquire purges them first;
- no look at the fence sequence's limit: a fence issued past what Postgres had reserved;
- no keep_alive: the holders' keys left without a time to live, or one shorter than the new lease;
- no look at whether a holder is there: a semaphore held and missing from the listing;
- a first holder in the limit key moved out on a one-slot semaphore: two holders of one slot;
- a semaphore gone idle left to the full script (its holder in the holders' keys), or taken without moving the
  end's record of the lease before (a retried release of that lease answered 410);
of the release:
- no look at the queue: a slot released with a waiter queued and not handed over;
- the last holder's release without the semaphore's keys or its listing entry: either kept;
- no count of the holders that ran out: their entries kept, where every release purges them first;
- no news of the end: a watcher of the released lease not told;
of the queue join:
- no look at the limit in force: a waiter of another limit queued, where the full script refuses it;
- no count of the holders: a newcomer queued behind a waiter owed a slot freed without a hand-over;
- no look at the earliest expiry: a newcomer queued beside a holder that ran out (the script asked itself);
- no look at the queue's length: a waiter queued past limits.max_waiters_per_lock;
- the first waiter's keys not made fresh: a queue without a time to live;
- a slot free with nobody queued taken with a holder record other than the full script's (owner, request_id,
  claimed, ttl), or without the request_id kept for a retry, or beside a holder that ran out, which the full
  script purges first;
of the hand-over:
- no look at the lease's record: a retried release failed (500) where it is answered released again;
- no released-lease mark: a retried release answered 410 and a watcher not told; the watched mark not passed on:
  the watcher not told;
- no look at the fence sequence's limit: a fence issued past what Postgres had reserved;
- no count of the live holders (or a count of all, run out or not): one slot handed on where a holder that ran
  out, or a slot freed without a hand-over, owed the second waiter one too;
- no look at whether anybody waits: a release after the waiters left failed (500); one released beside the other
  holder without its end kept: a retried release answered 410;
- no look at the waiter record's layout: a waiter of the layout before not served (500);
- a waiter's request_id not kept past its grant (lib_lease.lua rid_hold): kept only as long as its wait had it;
  one written with an escape taken as its JSON text: the request ids' hash holding that text beside the id;
- no look at the waiter's gateway: a dead gateway's waiter granted, the live one behind left waiting;
- no claim window, or no doorbell: another gateway's waiter granted its whole lease, or never told;
- no keep_alive: the keys left with the time to live they had; the keys a one-slot hand-over makes anew not
  made fresh: the holders' keys without a time to live;
- the grant's record written claimed, where the full script keeps a grant unclaimed so that an orphan give-back
  can still free it.

Owns: the lean scripts' guards. Must not: test the full script's queue, limits or leases (see
test_sem_limits.py and test_sem_leases.py).
"""

import json
import os
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (GatewayTest, Redis, metric, request_id_kept, same_slot, skip_in_cluster, slot_key,  # noqa: E402
                     wait_for, warm_semaphore_slot)

SEM = "/v1/semaphores/"
HINT_S = 1.0  # CONTENTION_HINT_MS: how long a gateway remembers how it last saw a name
KEEP_MS = 600_000  # SEM_KEEP_MS: the keys live that long past the last holder lease
MAX_WAITERS = 2  # limits.max_waiters_per_lock of the class's gateway
NEWCOMER_WAIT_S = 6.0  # how long a newcomer waits: a waiter owed a slot must have it well before its give-up
REQUEST_ID_GRACE_MS = 60_000  # src/fglimits.h: a request_id outlives its lease so long


def lease_of(token: str) -> str:
    """The lease id a token names (src/auth/token.c: fgt2.<key>.<kind>.<fence>.<lease>.<name>.<mac>)."""
    return token.split(".")[4]


class LeanScriptsTest(GatewayTest):
    # poll_ms: no waiter looks again by itself while a test arranges the semaphore around it
    gateway_config = {"poll_ms": 60000, "limits": {"max_waiters_per_lock": MAX_WAITERS}}

    def acquire(self, name, c=None, **fields):
        return (c or self.c).post(SEM + name + "/acquire", {"ttl_ms": 30000, **fields})

    def granted(self, name, **fields) -> dict:
        got = self.acquire(name, **fields)
        self.assertEqual(got.status, 200, got)
        return got.body

    def in_use(self, name: str, limit: int, **fields) -> list[dict]:
        """Two holders of name: the first try's, kept in the limit key, then the lean script's, which moves it
        into the holders' keys; the gateway's hint is then "in use"."""
        warm_semaphore_slot(self.c, name)
        first = self.granted(name, limit=limit, **fields)
        with Redis() as r:
            self.assertTrue(r.cmd("GET", f"fg:sm:{{{name}}}:l").startswith("="), "not the first try's holder")
        second = self.granted(name, limit=limit)
        with Redis() as r:
            self.assertEqual(r.cmd("ZCARD", f"fg:sm:{{{name}}}:h"), 2, "the first holder not moved")
        return [first, second]

    def queue_waiter(self, name: str, wc, out: list) -> threading.Thread:
        """A two-slot acquire of name on connection wc that waits, its answer to go to out; returns once it
        is queued."""
        t = threading.Thread(target=lambda: out.append(self.acquire(name, wc, limit=2, wait_ms=20000)))
        t.start()
        self.queued(name, 1)
        return t

    def queued(self, name: str, n: int) -> None:
        """Returns once n waiters are queued at name, as its status read counts them."""
        deadline = time.monotonic() + 10
        while self.c.get(SEM + name).body["waiting"] < n:
            self.assertLess(time.monotonic(), deadline, f"waiter {n} never queued")
            time.sleep(0.01)

    def test_a_slot_freed_without_a_hand_over_goes_to_the_waiter(self):
        name = same_slot("more-queue")[0]
        _, second = self.in_use(name, 2)
        out = []
        with self.gw.client(timeout=30) as wc:
            t = self.queue_waiter(name, wc, out)
            with Redis() as r:  # a slot frees, and no release hands it over
                self.assertEqual(r.cmd("ZREM", f"fg:sm:{{{name}}}:h", lease_of(second["token"])), 1)
                self.assertEqual(r.cmd("HDEL", f"fg:sm:{{{name}}}:d", lease_of(second["token"])), 1)
            time.sleep(HINT_S + 0.1)  # the waiter's queueing hinted "queue": only "in use" runs the lean script
            newcomer = self.acquire(name, limit=2, wait_ms=0)
            self.assertEqual((newcomer.status, newcomer.body.get("type")), (409, "/problems/lock_busy"), newcomer)
            t.join(10)
        self.assertEqual(out[0].status, 200, out)

    def test_a_holder_of_another_limit_is_refused(self):
        name = same_slot("more-limit")[0]
        self.in_use(name, 2)
        other = self.acquire(name, limit=3)
        self.assertEqual((other.status, other.body.get("type")), (409, "/problems/limit_mismatch"), other)
        self.assertEqual(other.body["limit"], 2, other)
        self.assertEqual(self.c.get(SEM + name).body["holders"], 2)

    def run_out(self, name: str, holder: dict) -> None:
        """Marks holder's lease of name run out a second ago, at once: nobody has looked since, and the
        gateway's hint stays what the last call left it (a lease that really runs out would have to outlast
        the calls before it, on a machine however loaded, and end within CONTENTION_HINT_MS of the next)."""
        with Redis() as r:
            seconds, _ = r.cmd("TIME")
            self.assertEqual(r.cmd("ZADD", f"fg:sm:{{{name}}}:h", "XX", "CH", str(int(seconds) * 1000 - 1000),
                                   lease_of(holder["token"])), 1)

    def test_holders_that_ran_out_are_purged_first(self):
        name = same_slot("more-purge")[0]
        first, _ = self.in_use(name, 3)
        self.run_out(name, first)  # the hint is still "in use"
        self.granted(name, limit=3)
        with Redis() as r:
            self.assertEqual(r.cmd("ZCARD", f"fg:sm:{{{name}}}:h"), 2, "a holder that ran out kept")
            self.assertEqual(r.cmd("HLEN", f"fg:sm:{{{name}}}:d"), 2, "a record of a holder that ran out kept")

    @skip_in_cluster("a slot's fence limit is named after the run id of the primary it lives on (lease_keys.c)")
    def test_no_fence_is_issued_past_the_reserved_limit(self):
        name = same_slot("more-fence")[0]
        self.in_use(name, 3)
        fence, fence_limit = slot_key("fg:fence", name), slot_key("fg:fence_limit", name)
        with Redis() as r:  # every fence reserved is issued
            r.cmd("SET", fence_limit, r.cmd("GET", fence))
        third = self.granted(name, limit=3)
        with Redis() as r:
            issued, reserved = int(r.cmd("GET", fence)), int(r.cmd("GET", fence_limit))
        self.assertEqual(third["fence"], issued)
        self.assertLessEqual(issued, reserved, "a fence issued that Postgres had not reserved")

    def test_the_keys_live_past_the_lease_it_grants(self):
        name = same_slot("more-keep")[0]
        self.in_use(name, 3)
        keys = [f"fg:sm:{{{name}}}:{suffix}" for suffix in "hdl"]
        with Redis() as r:
            for k in keys:  # the keys the first holder's move made anew
                self.assertGreaterEqual(r.cmd("PTTL", k), KEEP_MS + 20_000, k)
            self.granted(name, limit=3, ttl_ms=3_600_000, max_hold_ms=7_200_000)
            for k in keys:
                self.assertGreaterEqual(r.cmd("PTTL", k), KEEP_MS + 3_590_000, k)

    def test_a_semaphore_with_no_holder_is_left_to_the_full_script(self):
        prefix = same_slot("more-listed")[0] + "-"
        name = prefix + "s"
        with Redis() as r:  # a limit in force and nothing else: no holder, so not in the listing
            r.cmd("SET", f"fg:sm:{{{name}}}:l", "2", "PX", "60000")
        self.granted(name, limit=2)
        [item] = self.c.get("/v1/semaphores?prefix=" + prefix).body["items"]
        self.assertEqual((item["semaphore"], item["holders"]), (name, 1), item)

    def test_a_first_holder_of_one_slot_keeps_it_alone(self):
        name = same_slot("more-one")[0]
        warm_semaphore_slot(self.c, name)
        self.granted(name, limit=1)
        busy = self.acquire(name, limit=1, wait_ms=0)
        self.assertEqual((busy.status, busy.body.get("type")), (409, "/problems/lock_busy"), busy)
        self.assertEqual(self.c.get(SEM + name).body["holders"], 1)

    def release(self, name, holder):
        done = self.c.post(SEM + name + "/release", {"token": holder["token"]})
        self.assertEqual(done.status, 200, done)

    def test_a_release_with_a_waiter_hands_the_slot_over(self):
        name = same_slot("more-hand")[0]
        first, _ = self.in_use(name, 2)
        out = []
        with self.gw.client(timeout=30) as wc:
            t = self.queue_waiter(name, wc, out)
            time.sleep(HINT_S + 0.1)  # the waiter's queueing hinted "queue": only "in use" runs the lean script
            self.release(name, first)
            t.join(5)  # the waiter looks again by itself only after poll_ms (60 s)
        self.assertEqual(len(out), 1, "the slot released was not handed to the waiter")
        self.assertEqual(out[0].status, 200, out)

    def test_the_last_holders_release_forgets_the_semaphore(self):
        name = same_slot("more-last")[0]
        holders = self.in_use(name, 2)
        for holder in reversed(holders):
            self.release(name, holder)
        with Redis() as r:
            self.assertEqual([r.cmd("EXISTS", f"fg:sm:{{{name}}}:{suffix}") for suffix in "hdl"], [0, 0, 0])
            self.assertIsNone(r.cmd("ZSCORE", slot_key("fg:idx:sm", name), name), "an idle name kept listed")

    def test_a_semaphore_gone_idle_is_taken_again_in_its_limit_key(self):
        name = same_slot("more-idle")[0]
        listed = lambda: [i["semaphore"] for i in self.c.get("/v1/semaphores?prefix=" + name).body["items"]]  # noqa: E731
        holders = self.in_use(name, 2)
        for holder in reversed(holders):
            self.release(name, holder)
        limit_key = f"fg:sm:{{{name}}}:l"
        kept = []
        for _ in range(2):  # the second finds the end's record of the first in the limit key
            kept.append(self.granted(name, limit=2))
            with Redis() as r:
                self.assertTrue(r.cmd("GET", limit_key).startswith("=2 "), "the holder not kept in the limit key")
                self.assertGreater(r.cmd("PTTL", limit_key), 20_000, "the limit key not kept as long as the lease")
            self.assertEqual(listed(), [name], "a held name missing from the listing")
            self.release(name, kept[-1])
            self.assertEqual(listed(), [], "an idle name kept listed")
        again = self.c.post(SEM + name + "/release", {"token": kept[0]["token"]})
        self.assertEqual((again.status, again.body), (200, {"released": True}), "the end of the lease before lost")
        self.assertEqual(self.c.get(SEM + name).body["holders"], 0)

    def test_a_release_purges_holders_that_ran_out_first(self):
        name = same_slot("more-purge-release")[0]
        first, _ = self.in_use(name, 3)
        third = self.granted(name, limit=3)
        self.run_out(name, first)  # the hint is still "in use"
        self.release(name, third)
        with Redis() as r:
            self.assertEqual(r.cmd("ZCARD", f"fg:sm:{{{name}}}:h"), 1, "a holder that ran out kept")

    def test_a_watcher_hears_of_the_release(self):
        name = same_slot("more-watch")[0]
        _, second = self.in_use(name, 2)
        out = []
        with self.gw.client(timeout=30) as wc:
            url = f"{SEM}{name}?watch=true&fence={second['fence']}&wait_ms=20000"
            t = threading.Thread(target=lambda: out.append(wc.get(url)))
            t.start()
            wait_for(lambda: metric(self.gw, "fencegate_watches") == 1, what="the watcher parked")
            self.release(name, second)
            t.join(5)
        self.assertEqual(len(out), 1, "the watcher was not told")
        self.assertEqual((out[0].status, out[0].body["held"], out[0].body["reason"]), (200, False, "released"), out)


    def waits(self, name, c, out: list, wait_s: float = NEWCOMER_WAIT_S, **fields) -> threading.Thread:
        """A two-slot acquire of name on connection c that waits up to wait_s, its answer to go to out. (Its
        give-up, as every semaphore script, hands on the slots it finds free.)"""
        t = threading.Thread(target=lambda: out.append(self.acquire(name, c, limit=2, wait_ms=int(wait_s * 1000),
                                                                    **fields)))
        t.start()
        return t

    def with_a_queue(self, name: str, wc, out: list) -> tuple[list[dict], threading.Thread]:
        """Two holders of a two-slot semaphore and a waiter on connection wc, its answer to go to out; the
        waiter's queueing leaves the gateway's hint at "queue" for the next CONTENTION_HINT_MS."""
        holders = self.in_use(name, 2)
        return holders, self.queue_waiter(name, wc, out)

    def test_a_waiter_joins_the_queue_behind_the_others(self):
        name = same_slot("queue-join")[0]
        owner = 'billing "7"\\/é'
        first, second = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as nc:
            holders, t = self.with_a_queue(name, wc, first)
            t2 = self.waits(name, nc, second, owner=owner)
            self.queued(name, 2)
            with Redis() as r:
                queued = r.cmd("ZRANGE", f"fg:sm:{{{name}}}:q", "0", "-1")
                record = json.loads(r.cmd("HGET", f"fg:sm:{{{name}}}:w", queued[1]))
                seconds, micros = r.cmd("TIME")
                for suffix in "qw":
                    self.assertGreaterEqual(r.cmd("PTTL", f"fg:sm:{{{name}}}:{suffix}"), KEEP_MS, suffix)
            self.assertEqual(sorted(record), ["attach", "inst", "max_hold", "owner", "rid", "since", "ttl"], record)
            self.assertEqual((record["owner"], record["rid"], record["ttl"]), (owner, "", "30000"), record)
            self.assertLessEqual(record["since"], int(seconds) * 1000 + int(micros) // 1000, record)
            self.release(name, holders[0])
            t.join(5)
            self.assertEqual(first[0].status, 200, first)
            self.assertEqual(lease_of(first[0].body["token"]), queued[0], "the first waiter not served first")
            self.assertEqual(second, [], "the second waiter served ahead of its turn")
            self.release(name, holders[1])
            t2.join(5)
        self.assertEqual(second[0].status, 200, second)
        self.assertEqual(lease_of(second[0].body["token"]), queued[1])

    def test_a_queue_emptied_releases_and_grants_in_the_lean_scripts(self):
        """With the hint at "queue" and nobody queued any more, a release leaves beside the other holder in the
        lean hand-over, its end kept for a retried release, and an acquire that waits takes the slot it frees in
        the queue join, with the holder record the full script writes: owner and request_id as sent, claimed,
        its ttl; a retry of its request_id is answered the same lease."""
        name = same_slot("queue-emptied")[0]
        owner, rid = 'billing "7"\\/é', uuid.uuid4().hex
        holders = self.in_use(name, 2)
        self.queue_hint(name)
        self.release(name, holders[0])
        again = self.c.post(SEM + name + "/release", {"token": holders[0]["token"]})
        self.assertEqual((again.status, again.body), (200, {"released": True}), "the end of the release lost")
        got = self.granted(name, limit=2, wait_ms=5000, owner=owner, request_id=rid)
        rec, expires_at = self.holder_record(name, lease_of(got["token"]))
        self.assertEqual((rec["owner"], rec["rid"], rec["claimed"], rec["ttl"], rec["fence"]),
                         (owner, rid, 1, 30000, got["fence"]), rec)
        self.assertEqual(expires_at, got["expires_at_ms"], rec)
        retry = self.granted(name, limit=2, wait_ms=5000, owner=owner, request_id=rid)
        self.assertEqual(retry["token"], got["token"], "a retry of the request_id given another lease")
        with Redis() as r:
            self.assertEqual(r.cmd("ZCARD", f"fg:sm:{{{name}}}:h"), 2)

    def test_a_waiter_that_finds_a_slot_free_purges_holders_that_ran_out_first(self):
        name = same_slot("queue-free-purge")[0]
        first, _ = self.in_use(name, 3)
        third = self.granted(name, limit=3)
        self.queue_hint(name, limit=3)
        self.release(name, third)  # a slot free, nobody queued
        self.run_out(name, first)  # the hint is still "queue"
        self.granted(name, limit=3, wait_ms=5000)
        with Redis() as r:
            self.assertEqual(r.cmd("ZCARD", f"fg:sm:{{{name}}}:h"), 2, "a holder that ran out kept")
            self.assertEqual(r.cmd("HLEN", f"fg:sm:{{{name}}}:d"), 2, "a record of a holder that ran out kept")

    def test_a_waiter_of_another_limit_is_refused(self):
        name = same_slot("queue-limit")[0]
        out = []
        with self.gw.client(timeout=30) as wc:
            self.with_a_queue(name, wc, out)
            refused = self.acquire(name, limit=1, wait_ms=3000)  # its slots are all held too
        self.assertEqual((refused.status, refused.body.get("type")), (409, "/problems/limit_mismatch"), refused)

    def test_a_slot_freed_without_a_hand_over_goes_to_the_waiter_not_behind_it(self):
        name = same_slot("queue-free")[0]
        out, newcomer = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as nc:
            holders, t = self.with_a_queue(name, wc, out)
            with Redis() as r:  # a slot frees, and no release hands it over
                lease = lease_of(holders[1]["token"])
                self.assertEqual(r.cmd("ZREM", f"fg:sm:{{{name}}}:h", lease), 1)
                self.assertEqual(r.cmd("HDEL", f"fg:sm:{{{name}}}:d", lease), 1)
            t2 = self.waits(name, nc, newcomer)
            t.join(NEWCOMER_WAIT_S - 2)  # the waiter looks again by itself only after poll_ms (60 s)
            self.assertEqual(len(out), 1, "the slot freed was not handed to the waiter")
            self.assertEqual(out[0].status, 200, out)
            t2.join(NEWCOMER_WAIT_S + 5)
        self.assertEqual((newcomer[0].status, newcomer[0].body.get("type")), (409, "/problems/lock_busy"), newcomer)

    def test_a_holder_that_ran_out_is_purged_and_its_slot_handed_on(self):
        name = same_slot("queue-purge")[0]
        out, newcomer = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as nc:
            holders, t = self.with_a_queue(name, wc, out)
            lease = lease_of(holders[1]["token"])
            with Redis() as r:  # the holder's lease runs out, and nobody has looked since
                seconds, _ = r.cmd("TIME")
                self.assertEqual(r.cmd("ZADD", f"fg:sm:{{{name}}}:h", "XX", "CH", str(int(seconds) * 1000 - 1000),
                                       lease), 1)
            t2 = self.waits(name, nc, newcomer)
            t.join(NEWCOMER_WAIT_S - 2)  # the waiter looks again by itself only after poll_ms (60 s)
            self.assertEqual(len(out), 1, "the slot of the holder that ran out was not handed to the waiter")
            self.assertEqual(out[0].status, 200, out)
            with Redis() as r:
                self.assertIsNone(r.cmd("ZSCORE", f"fg:sm:{{{name}}}:h", lease), "a holder that ran out kept")
            t2.join(NEWCOMER_WAIT_S + 5)
        self.assertEqual(newcomer[0].status, 409, newcomer)

    @skip_in_cluster("it calls the lean script itself, with the keys of the one-Redis layout")
    def test_a_holder_that_ran_out_is_left_to_the_full_script(self):
        """The newcomer's own answer (a holder's lease ended, -1 ms ago) would bring it back within 50 ms to a
        full script that purges and hands on: the gateway would mend what the lean script left. So the script
        is asked itself, as the gateway asks it."""
        name = same_slot("queue-ran-out")[0]
        holders = self.in_use(name, 2)
        with open(os.path.join(os.path.dirname(os.environ["FG_BIN"]), "generated", "lua",
                               "sem_acquire_queue.lua")) as f:
            library = f.read()
        function = library.split("\n", 1)[0].split("name=", 1)[1].strip()
        keys = [f"fg:sm:{{{name}}}:{suffix}" for suffix in "hdqwlt"] + ["fg:gateways"] + \
            [f"fg:sm:{{{name}}}:{suffix}" for suffix in "rei"] + [f"fg:sm:{{{name}}}:i:"]  # request_id ""
        record = '{"inst":"%s","attach":"%s","ttl":"30000","max_hold":"30000","owner":"","rid":"","since":' % (
            "0" * 32, "1" * 32)
        with Redis() as r:
            r.cmd("FUNCTION", "LOAD", "REPLACE", library)
            seconds, _ = r.cmd("TIME")
            self.assertEqual(r.cmd("ZADD", keys[0], "XX", "CH", str(int(seconds) * 1000 - 1000),
                                   lease_of(holders[1]["token"])), 1)
            answer = r.cmd("FCALL", function, len(keys), *keys, "2" * 32, "2", str(MAX_WAITERS), "0" * 32, "",
                           record, "", "60000")
            self.assertEqual(answer, "contended", "a newcomer queued beside a holder that ran out")
            self.assertEqual(r.cmd("EXISTS", keys[2], keys[3]), 0)

    def test_a_full_queue_refuses_the_next_waiter(self):
        name = same_slot("queue-full")[0]
        out, second = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as nc:
            self.with_a_queue(name, wc, out)
            t2 = self.waits(name, nc, second)
            self.queued(name, MAX_WAITERS)
            refused = self.acquire(name, limit=2, wait_ms=3000)
            t2.join(NEWCOMER_WAIT_S + 5)
        self.assertEqual((refused.status, refused.body.get("type")), (429, "/problems/too_many_waiters"), refused)

    def test_the_first_waiter_makes_the_queue_with_a_time_to_live(self):
        name = same_slot("queue-first")[0]
        self.in_use(name, 2)
        gave_up = self.acquire(name, limit=2, wait_ms=200)  # queues, and leaves: the hint stays at "queue"
        self.assertEqual(gave_up.status, 409, gave_up)
        out = []
        with Redis() as r, self.gw.client(timeout=30) as wc:
            self.assertEqual(r.cmd("EXISTS", f"fg:sm:{{{name}}}:q", f"fg:sm:{{{name}}}:w"), 0, "the queue kept")
            t = self.waits(name, wc, out)
            self.queued(name, 1)
            for suffix in "qw":
                self.assertGreaterEqual(r.cmd("PTTL", f"fg:sm:{{{name}}}:{suffix}"), KEEP_MS, suffix)
            t.join(NEWCOMER_WAIT_S + 5)
        self.assertEqual(out[0].status, 409, out)

    # The lean hand-over (lua/sem_release_handover.lua): a release on a name the gateway found with a queue in the
    # last CONTENTION_HINT_MS. Each test refreshes that hint (queue_hint) just before it arranges the state in
    # Redis and releases, so the release meets the lean script first whatever the machine's pace.

    def queue_hint(self, name: str, limit: int = 2) -> None:
        """An acquire of name that does not wait, answered busy: the gateway's hint for name is "queue" for the
        next CONTENTION_HINT_MS, and its next release runs the lean hand-over first. (The full acquire that
        answers it purges and hands on as every semaphore script does: a test arranges its state after.)"""
        busy = self.acquire(name, limit=limit, wait_ms=0)
        self.assertEqual((busy.status, busy.body.get("type")), (409, "/problems/lock_busy"), busy)

    def head_of(self, name: str) -> str:
        with Redis() as r:
            return r.cmd("ZRANGE", f"fg:sm:{{{name}}}:q", "0", "0")[0]

    def holder_record(self, name: str, lease: str) -> tuple[dict, int]:
        """The holder record of lease in name's data hash, decoded, and its expiry (the holders' score)."""
        with Redis() as r:
            raw = r.cmd("HGET", f"fg:sm:{{{name}}}:d", lease)
            score = r.cmd("ZSCORE", f"fg:sm:{{{name}}}:h", lease)
        self.assertIsNotNone(raw, f"{lease} holds no slot")
        return json.loads(raw), int(score)

    def test_a_hand_over_grants_the_oldest_waiter_its_whole_lease(self):
        name = same_slot("hand-grant")[0]
        owner = 'billing "7"\\/é'
        first, second = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as nc:
            holders = self.in_use(name, 2)
            t = self.waits(name, wc, first, ttl_ms=25000, max_hold_ms=50000, owner=owner)
            self.queued(name, 1)
            t2 = self.waits(name, nc, second)
            self.queued(name, 2)
            oldest = self.head_of(name)
            self.queue_hint(name)
            self.release(name, holders[0])
            t.join(5)  # the waiter looks again by itself only after poll_ms (60 s)
            self.assertEqual(first[0].status, 200, first)
            got = first[0].body
            self.assertEqual(lease_of(got["token"]), oldest, "the slot went to another than the oldest waiter")
            self.assertEqual(second, [], "the second waiter served as well")
            record, expiry = self.holder_record(name, oldest)
            me = next(g["id"] for g in self.c.get("/v1/gateways").body["gateways"] if g["self"])
            # As sem_release.lua writes it (lib_sem_holder.lua): granted here, unclaimed, the whole lease.
            self.assertEqual(list(record), ["fence", "ttl", "max_hold", "granted_at", "claimed", "rid", "inst",
                                            "attach", "owner"], record)
            self.assertEqual((record["fence"], record["ttl"], record["max_hold"], record["claimed"], record["rid"],
                              record["inst"], record["owner"]), (got["fence"], 25000, 50000, 0, "", me, owner), record)
            self.assertEqual((expiry, got["expires_at_ms"]), (record["granted_at"] + 25000,) * 2, record)
            self.assertGreater(got["fence"], holders[1]["fence"])
            self.release(name, holders[1])
            t2.join(5)
        self.assertEqual(second[0].status, 200, second)

    def test_a_hand_over_retried_is_answered_released_again(self):
        name = same_slot("hand-again")[0]
        out, second = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as nc:
            holders, t = self.with_a_queue(name, wc, out)
            t2 = self.waits(name, nc, second, wait_s=1.5)  # somebody still waits when the release is retried
            self.queued(name, 2)
            self.queue_hint(name)
            self.release(name, holders[0])
            t.join(5)
            self.assertEqual(out[0].status, 200, out)
            self.queue_hint(name)
            again = self.c.post(SEM + name + "/release", {"token": holders[0]["token"]})
            t2.join(10)
        self.assertEqual((again.status, again.body), (200, {"released": True}), again)
        self.assertEqual(second[0].status, 409, "a slot handed over twice")

    @skip_in_cluster("a slot's fence limit is named after the run id of the primary it lives on (lease_keys.c)")
    def test_a_hand_over_issues_no_fence_past_the_reserved_limit(self):
        name = same_slot("hand-fence")[0]
        out = []
        with self.gw.client(timeout=30) as wc:
            holders = self.in_use(name, 2)
            t = self.waits(name, wc, out, wait_s=1.5)
            self.queued(name, 1)
            self.queue_hint(name)
            fence, fence_limit = slot_key("fg:fence", name), slot_key("fg:fence_limit", name)
            with Redis() as r:  # every fence reserved is issued
                r.cmd("SET", fence_limit, r.cmd("GET", fence))
            self.release(name, holders[0])
            with Redis() as r:
                issued, reserved = int(r.cmd("GET", fence)), int(r.cmd("GET", fence_limit))
            t.join(10)
        self.assertLessEqual(issued, reserved, "a fence issued that Postgres had not reserved")

    def two_waiters_and_a_lost_slot(self, name: str, lose) -> None:
        """Two holders of a two-slot semaphore and two waiters; lose(r, lease) takes the second holder's slot
        away as nobody hands it over, and the first holder releases: both waiters are owed a slot."""
        first, second = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as nc:
            holders, t = self.with_a_queue(name, wc, first)
            t2 = self.waits(name, nc, second)
            self.queued(name, 2)
            self.queue_hint(name)
            with Redis() as r:
                lose(r, lease_of(holders[1]["token"]))
            self.release(name, holders[0])
            t.join(5)  # the waiters look again by themselves only after poll_ms (60 s)
            t2.join(NEWCOMER_WAIT_S - 3)
            self.assertEqual(len(first) + len(second), 2, "a waiter owed a slot was not handed it")
        self.assertEqual((first[0].status, second[0].status), (200, 200), (first, second))
        with Redis() as r:
            self.assertEqual(r.cmd("ZCARD", f"fg:sm:{{{name}}}:h"), 2)

    def test_a_hand_over_purges_a_holder_that_ran_out_and_hands_its_slot_on(self):
        def run_out(r, lease):
            seconds, _ = r.cmd("TIME")
            self.assertEqual(r.cmd("ZADD", f"fg:sm:{{{name}}}:h", "XX", "CH", str(int(seconds) * 1000 - 1000),
                                   lease), 1)
        name = same_slot("hand-purge")[0]
        self.two_waiters_and_a_lost_slot(name, run_out)

    def test_a_hand_over_hands_on_a_slot_freed_without_one(self):
        def free(r, lease):
            self.assertEqual(r.cmd("ZREM", f"fg:sm:{{{name}}}:h", lease), 1)
            self.assertEqual(r.cmd("HDEL", f"fg:sm:{{{name}}}:d", lease), 1)
        name = same_slot("hand-free")[0]
        self.two_waiters_and_a_lost_slot(name, free)

    def test_a_release_after_the_waiters_left_forgets_the_semaphore(self):
        name = same_slot("hand-left")[0]
        holders = self.in_use(name, 2)
        gave_up = self.acquire(name, limit=2, wait_ms=200)  # queues, and leaves: the hint stays at "queue"
        self.assertEqual(gave_up.status, 409, gave_up)
        self.queue_hint(name)
        for holder in holders:
            self.release(name, holder)
        with Redis() as r:
            self.assertEqual([r.cmd("EXISTS", f"fg:sm:{{{name}}}:{suffix}") for suffix in "hdl"], [0, 0, 0])
            self.assertIsNone(r.cmd("ZSCORE", slot_key("fg:idx:sm", name), name), "an idle name kept listed")

    def test_a_waiter_of_the_layout_before_is_handed_the_slot(self):
        """A waiter's record written by a gateway from before, ttl and max_hold as JSON numbers."""
        name = same_slot("hand-layout")[0]
        out = []
        with self.gw.client(timeout=30) as wc:
            holders, t = self.with_a_queue(name, wc, out)
            self.queue_hint(name)
            waiter = self.head_of(name)
            with Redis() as r:
                record = json.loads(r.cmd("HGET", f"fg:sm:{{{name}}}:w", waiter))
                record.update(ttl=int(record["ttl"]), max_hold=int(record["max_hold"]))
                r.cmd("HSET", f"fg:sm:{{{name}}}:w", waiter, json.dumps(record, separators=(",", ":")))
            self.release(name, holders[0])
            t.join(5)
        self.assertEqual(out[0].status, 200, out)
        self.assertEqual(self.holder_record(name, waiter)[0]["ttl"], 30000)

    def handed_over_with(self, name: str, rid: str, before_release=None) -> tuple[dict, int]:
        """Two holders of a two-slot semaphore and a waiter asking with request_id rid; before_release(r) runs on
        Redis right before the first holder releases. Returns the record and expiry of the waiter's grant."""
        out = []
        with self.gw.client(timeout=30) as wc:
            holders = self.in_use(name, 2)
            t = self.waits(name, wc, out, request_id=rid)
            self.queued(name, 1)
            self.queue_hint(name)
            if before_release is not None:
                with Redis() as r:
                    before_release(r)
            self.release(name, holders[0])
            t.join(5)
        self.assertEqual(out[0].status, 200, out)
        lease = lease_of(out[0].body["token"])
        record, expiry = self.holder_record(name, lease)
        self.assertEqual(record["rid"], rid, record)
        with Redis() as r:  # a waiter's request_id is kept in the request-id set (lib_lease.lua rid_join)
            self.assertEqual(r.cmd("HGET", f"fg:sm:{{{name}}}:r", rid), lease)
            self.assertIsNone(r.cmd("GET", f"fg:sm:{{{name}}}:i"), "a waiter's request_id in the one-id key")
        return record, expiry

    def test_a_waiters_request_id_is_kept_past_its_grant(self):
        name = same_slot("hand-rid")[0]
        rid = "hand-" + uuid.uuid4().hex

        def ends_soon(r):  # the request_id kept a second longer only, as if its wait had almost run out
            seconds, _ = r.cmd("TIME")
            soon = str(int(seconds) * 1000 + 1000)
            self.assertEqual(r.cmd("ZADD", f"fg:sm:{{{name}}}:e", "XX", "CH", soon, rid), 1)
        _, expiry = self.handed_over_with(name, rid, ends_soon)
        with Redis() as r:  # kept a grace past the lease (lib_lease.lua rid_extend)
            _, until = request_id_kept(r, "semaphores", name, rid)
        self.assertGreaterEqual(until, expiry + REQUEST_ID_GRACE_MS)

    def test_a_request_id_written_with_an_escape_is_kept_as_it_reads(self):
        """The waiter's record holds the request_id as JSON text, "/" written "\\/" (cjson); the request ids'
        hash keeps it as it reads."""
        name = same_slot("hand-rid-escape")[0]
        rid = "hand/" + uuid.uuid4().hex
        self.handed_over_with(name, rid)
        with Redis() as r:
            self.assertEqual(r.cmd("HKEYS", f"fg:sm:{{{name}}}:r"), [rid], "a request_id kept as its JSON text")
            self.assertEqual(r.cmd("ZRANGE", f"fg:sm:{{{name}}}:e", "0", "-1"), [rid],
                             "a request_id kept as its JSON text")

    def put_first(self, name: str, inst: str) -> str:
        """Puts a waiter of gateway inst, asking a 30 s lease, at the head of name's queue; returns its lease."""
        lease = uuid.uuid4().hex
        with Redis() as r:
            _, ticket = r.cmd("ZRANGE", f"fg:sm:{{{name}}}:q", "0", "0", "WITHSCORES")
            r.cmd("ZADD", f"fg:sm:{{{name}}}:q", str(int(float(ticket)) - 1), lease)
            r.cmd("HSET", f"fg:sm:{{{name}}}:w", lease,
                  '{"inst":"%s","attach":"%s","ttl":"30000","max_hold":"60000","owner":"","rid":"","since":1}'
                  % (inst, uuid.uuid4().hex))
        return lease

    def test_a_dead_gateways_waiter_is_passed_over(self):
        name = same_slot("hand-dead")[0]
        out = []
        with self.gw.client(timeout=30) as wc:
            holders, t = self.with_a_queue(name, wc, out)
            self.queue_hint(name)
            dead = self.put_first(name, uuid.uuid4().hex)  # a gateway never marked alive
            self.release(name, holders[0])
            t.join(5)
        self.assertEqual(len(out), 1, "the live waiter behind a dead gateway's was not handed the slot")
        self.assertEqual(out[0].status, 200, out)
        with Redis() as r:
            self.assertEqual(r.cmd("HEXISTS", f"fg:sm:{{{name}}}:w", dead), 0, "the dead gateway's waiter kept")
            self.assertIsNone(r.cmd("ZSCORE", f"fg:sm:{{{name}}}:h", dead), "the dead gateway's waiter granted")

    def test_another_gateways_waiter_is_rung_and_given_the_claim_window(self):
        name = same_slot("hand-bell")[0]
        other = uuid.uuid4().hex
        out = []
        with self.gw.client(timeout=30) as wc, Redis() as bells:
            holders, t = self.with_a_queue(name, wc, out)
            bells.hear(name, "fg:bell:*", f"fg:bell:{other}")
            self.queue_hint(name)
            with Redis() as r:  # a gateway alive, whose waiter is first
                seconds, _ = r.cmd("TIME")
                r.cmd("ZADD", slot_key("fg:gateways", name), str(int(seconds) * 1000 + 60000), other)
            lease = self.put_first(name, other)
            self.release(name, holders[0])
            rung = [m for _, m in bells.messages(1.0)]
            record, expiry = self.holder_record(name, lease)
            self.assertEqual(rung, [f"s|{lease}|{name}"], "the other gateway's doorbell did not ring")
            self.assertEqual((record["inst"], record["claimed"], record["ttl"]), (other, 0, 30000), record)
            # Until its gateway claims it: waiter_lease_ms (3 s by default), not the 30 s asked.
            self.assertEqual(expiry, record["granted_at"] + 3000, record)
            self.assertEqual(out, [], "the waiter behind served as well")
            self.release(name, holders[1])
            t.join(5)
        self.assertEqual(out[0].status, 200, out)

    def test_the_keys_live_past_the_lease_a_hand_over_grants(self):
        name = same_slot("hand-keep")[0]
        out = []
        keys = [f"fg:sm:{{{name}}}:{suffix}" for suffix in "hdqwlt"]
        with self.gw.client(timeout=30) as wc:
            holders = self.in_use(name, 2)
            t1 = self.waits(name, wc, out)
            self.queued(name, 1)
            with self.gw.client(timeout=30) as nc:
                t2 = self.waits(name, nc, [], wait_s=1.5)  # a second waiter, so the queue stays
                self.queued(name, 2)
                self.queue_hint(name)
                with Redis() as r:
                    for k in keys:
                        self.assertEqual(r.cmd("PEXPIRE", k, "5000"), 1, k)
                self.release(name, holders[0])
                t1.join(5)
                with Redis() as r:
                    left = {k: r.cmd("PTTL", k) for k in keys}
                t2.join(10)
        self.assertEqual(out[0].status, 200, out)
        for k, ms in left.items():
            self.assertGreaterEqual(ms, KEEP_MS + 25_000, k)

    def test_a_one_slot_hand_over_makes_its_keys_with_a_time_to_live(self):
        """The only holder's release takes its keys with it, and the grant makes them anew."""
        name = same_slot("hand-one")[0]
        warm_semaphore_slot(self.c, name)
        holder = self.granted(name, limit=1)
        out = []
        with self.gw.client(timeout=30) as wc:
            t = threading.Thread(target=lambda: out.append(self.acquire(name, wc, limit=1, wait_ms=20000)))
            t.start()
            self.queued(name, 1)
            self.queue_hint(name, limit=1)
            self.release(name, holder)
            t.join(5)
        self.assertEqual(out[0].status, 200, out)
        with Redis() as r:
            for suffix in "hd":
                self.assertGreaterEqual(r.cmd("PTTL", f"fg:sm:{{{name}}}:{suffix}"), KEEP_MS, suffix)

    def test_a_watcher_hears_of_a_hand_over(self):
        name = same_slot("hand-watch")[0]
        out, heard = [], []
        with self.gw.client(timeout=30) as wc, self.gw.client(timeout=30) as vc:
            holders, t = self.with_a_queue(name, wc, out)
            url = f"{SEM}{name}?watch=true&fence={holders[0]['fence']}&wait_ms=20000"
            tw = threading.Thread(target=lambda: heard.append(vc.get(url)))
            tw.start()
            wait_for(lambda: metric(self.gw, "fencegate_watches") == 1, what="the watcher parked")
            self.queue_hint(name)
            self.release(name, holders[0])
            tw.join(5)
            t.join(5)
        self.assertEqual(len(heard), 1, "the watcher was not told")
        self.assertEqual((heard[0].status, heard[0].body["held"], heard[0].body["reason"]), (200, False, "released"),
                         heard)
        self.assertEqual(out[0].status, 200, out)

if __name__ == "__main__":
    unittest.main()
