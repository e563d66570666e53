# SPDX-License-Identifier: Apache-2.0
"""The cluster lab for what the lease side reads across slots: the gateway's Redis client (store/backend/redis.c)
driven by cluster_lease against a single Redis and a cluster of three primaries and three replicas
(cluster_lab.py). In order:

1. batches (redis_batch): calls spread over every slot, each primary's calls queued together on its connection
   and answered with a few reads, every answer the one of its own call; a slot moved between rounds (MOVED,
   the call sent again alone) and the script libraries flushed from every primary (loaded, sent again).

2. the listing merged across primaries (lease/lease_list.c on the per-slot layout): 3000 locks taken through the
   lock scripts, pages of 100 read from every slot's index and merged, every name once and in order, and the
   Redis time a page costs; again while a live reshard moves FG_CLUSTER_RESHARD_SLOTS slots (default 1000);
3. the fence headroom (lease/fence.c fence_headroom): the least of the slots in use, 0 for a slot whose limit
   is not under its node's run_id; the slots in use found by a scan of every slot at most once a minute
   (lease/fence_slots.c).

Environment: FG_CLUSTER_LEASE (the cluster_lease binary), FG_TEST_DATA (where the lab keeps its nodes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from cluster_lab import SLOTS, LabTestCase, crc16, resp, slot_tag, wait
from cluster_lab import free_port, redis_answers  # the fault lab's helpers, as cluster_lab imports them

DRIVER = os.environ["FG_CLUSTER_LEASE"]
RESHARD_SLOTS = int(os.environ.get("FG_CLUSTER_RESHARD_SLOTS", "1000"))


class Driver:
    """cluster_lease in the background: one JSON line a round, the next round when told."""

    def __init__(self, *argv: str):
        self.proc = subprocess.Popen([DRIVER, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def round(self, quiet: bool = False) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"cluster_lease ended: {self.proc.stderr.read()[-2000:]}")
        out = json.loads(line)
        if not quiet:
            print(f"cluster_lease: {out}", file=sys.stderr)
        return out

    def next(self):
        self.proc.stdin.write("next\n")
        self.proc.stdin.flush()

    def end(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def redis_usec(port: int) -> int:
    """Microseconds Redis spent in commands so far (INFO commandstats), scripts with what they ran."""
    text = resp(port, "INFO", "commandstats")
    return sum(int(l.split("usec=")[1].split(",")[0]) for l in text.splitlines() if "usec=" in l)


def reads(port: int) -> int:
    """Reads Redis made from its clients' sockets so far (INFO stats)."""
    text = resp(port, "INFO", "stats")
    return int(next(l for l in text.splitlines() if l.startswith("total_reads_processed:")).split(":")[1])


class SingleRedis:
    """One plain Redis on a free port, its state in a scratch directory."""

    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="fencegate-lease-", dir=os.environ.get("FG_TEST_DATA") or "/var/tmp")
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait(lambda: redis_answers(self.port), 15, "the single redis")

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class ClusterLeaseTest(LabTestCase):
    def assert_round(self, r: dict, what: str):
        self.assertEqual((r["wrong"], r["failed"]), (0, 0), f"{what}: {r['first_error']}")
        self.assertEqual(r["ok"], r["calls"], what)

    def test_1_batch_single_redis(self):
        """On one Redis a batch is one queue on the one connection: 3 x 2000 calls answered with far fewer
        reads than calls (40 for 6000). Finishing each call before queuing the next made Redis read 8006 times and
        failed here. The round after FUNCTION FLUSH checks that a batch's scripts load their library."""
        redis = SingleRedis()
        try:
            before = reads(redis.port)
            d = Driver("--batch", f"redis://127.0.0.1:{redis.port}", "2000", "2")
            self.assert_round(d.round(), "single redis")
            taken = reads(redis.port) - before
            print(f"single redis: {taken} reads for 6000 calls", file=sys.stderr)
            self.assertLess(taken, 6000 / 20, "the calls of a batch did not share reads")
            self.assertEqual(resp(redis.port, "FUNCTION", "FLUSH"), "OK")
            d.next()
            self.assert_round(d.round(), "single redis, libraries flushed")
            d.end()
        finally:
            redis.stop()

    def test_2_batch_cluster(self):
        """On a cluster each call goes to the primary of its key's slot, each primary's calls in one queue: every
        answer is its own call's (a reply handed to the wrong call reads another key's value), each primary reads
        far fewer times than it gets calls. Then a slot moved by hand between rounds: its calls meet MOVED and
        are sent again; then the libraries flushed from every primary. Without the resend of a redirected call
        the round after the move failed its moved keys ("MOVED 7320"); with each call finished before the next
        was queued, a primary read 4018 times for its 3000 calls."""
        primaries = self.lab.primaries()
        before = {p: reads(p) for p in primaries}
        d = Driver("--batch", self.lab.url(), "3000", "3")
        self.assert_round(d.round(), "cluster")
        for p in primaries:
            taken = reads(p) - before[p]
            print(f"primary {p}: {taken} reads", file=sys.stderr)
            self.assertLess(taken, 3 * 3000 / 3 / 20, f"primary {p}: the calls of a batch did not share reads")
        src, dst = self.lab.shards()[0], self.lab.shards()[1]
        slot = crc16(b"bt:7") % SLOTS
        if not any(src["ranges"][i] <= slot <= src["ranges"][i + 1] for i in range(0, len(src["ranges"]), 2)):
            src, dst = next(s for s in self.lab.shards() if s["primary"] == self.lab.owner(slot)), src
        moved = self.lab.errors(src["primary"], "MOVED")
        self.lab.move_slot(slot, src, dst)
        d.next()
        self.assert_round(d.round(), "cluster, a slot moved")
        self.assertGreater(self.lab.errors(src["primary"], "MOVED"), moved, "no call met the moved slot")
        for p in self.lab.primaries():
            self.assertEqual(resp(p, "FUNCTION", "FLUSH"), "OK")
        d.next()
        self.assert_round(d.round(), "cluster, libraries flushed")
        d.end()

    def list_pass(self, d: Driver, expected: list[str], what: str) -> dict:
        d.next()
        r = d.round(quiet=True)
        names = r["names"]
        self.assertEqual(len(names), len(set(names)), f"{what}: a name listed twice")
        self.assertEqual(names, expected, f"{what}: names missing or out of order ({r['first_error']})")
        return r

    def test_3_listing_cluster(self):
        """3000 locks spread over the three primaries, listed in pages of 100 merged from every slot's index:
        every name once and in order, each page's Redis time measured; then passes while a reshard moves
        slots between primaries (indexes and locks migrate, MOVED and ASK on the way): still every name once
        and in order. The names "ls:<i>" share slots (about 580 slots hold two). With the status reads looking from
        the start of each slot's index instead of after the cursor, 3569 names were listed for 3000; with
        redirected calls of a batch not sent again, the pages failed from the reshard on and names went
        missing."""
        expected = sorted(f"ls:{i}" for i in range(3000))   # about 580 slots hold two
        d = Driver("--list", self.lab.url(), "3000", "600000")
        self.assertEqual(d.round()["granted"], 3000)
        primaries = self.lab.primaries()
        before, t0 = {p: redis_usec(p) for p in primaries}, time.monotonic()
        r = self.list_pass(d, expected, "a quiet cluster")
        took = time.monotonic() - t0
        spent, pages = {p: redis_usec(p) - before[p] for p in primaries}, r["pages"]
        print(f"listing: {len(expected)} names in {pages} pages of 100: "
              f"{sum(spent.values()) / pages / 1000:.1f} ms of Redis time a page in all "
              f"({', '.join(f'{v / pages / 1000:.1f}' for v in spent.values())} on each primary), "
              f"{took / pages * 1000:.0f} ms a page for the client", file=sys.stderr)
        shards = self.lab.shards()
        done = threading.Event()
        result = {}

        def reshard():
            result["run"] = self.lab.reshard(f"{shards[0]['primary_id']},{shards[1]['primary_id']}",
                                             shards[2]["primary_id"], RESHARD_SLOTS)
            done.set()

        redirects = sum(self.lab.errors(p, "MOVED") + self.lab.errors(p, "ASK") for p in primaries)
        threading.Thread(target=reshard, daemon=True).start()
        passes, retries, took = 0, 0, []
        while not done.is_set() or passes == 0:
            r = self.list_pass(d, expected, f"pass {passes} during the reshard")
            retries, passes = retries + r["retries"], passes + 1
            took.append(r["ms"])
        self.assertEqual(result["run"].returncode, 0, result["run"].stdout[-2000:])
        self.lab.wait_converged()
        self.list_pass(d, expected, "after the reshard")
        redirects = sum(self.lab.errors(p, "MOVED") + self.lab.errors(p, "ASK") for p in primaries) - redirects
        print(f"listing: {passes} passes during a reshard of {RESHARD_SLOTS} slots ({took} ms each), "
              f"{redirects} redirects followed, {retries} pages tried again", file=sys.stderr)
        d.end()

    def headroom(self) -> int:
        out = subprocess.run([DRIVER, "--headroom", self.lab.url()], stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        return json.loads(out.stdout.strip().splitlines()[-1])["headroom"]

    def test_4_fence_headroom(self):
        """fence_headroom on a cluster is the least of the slots in use: after test 3's reshard the moved slots'
        limits are named after their old node's run_id, so the headroom is 0 until they are raised again; then
        every slot's sequence stands near 10^12 below its limit; one slot's limit lowered to 42 above its fence
        makes the headroom 42, and that limit gone (a node restarted or failed over: none under its run_id)
        makes it 0 again. Taking the greatest slot instead of the least read 999999999999 where 0 was due."""
        self.assertEqual(self.headroom(), 0, "slots moved by test 3's reshard wait for a recovery")
        d = Driver("--list", self.lab.url(), "0", "1000")   # raises every slot's sequence again
        self.assertEqual(d.round()["granted"], 0)
        d.end()
        first = self.headroom()
        self.assertGreater(first, 10**12 - 100, "every slot was raised to a limit of 10^12")
        slot = crc16(b"ls:7") % SLOTS
        owner = self.lab.owner(slot)
        run_id = self.lab.info(owner, "server")["run_id"]
        fence_key, limit_key = f"fg:fence:{{{slot_tag(slot)}}}", f"fg:fence_limit:{{{slot_tag(slot)}}}:{run_id}"
        fence = int(resp(owner, "GET", fence_key))
        self.assertEqual(resp(owner, "SET", limit_key, str(fence + 42)), "OK")
        self.assertEqual(self.headroom(), 42)
        self.assertEqual(resp(owner, "DEL", limit_key), 1)
        self.assertEqual(self.headroom(), 0, "a slot whose limit is not under its node's run_id may issue nothing")
        print(f"fence headroom: {first} on every slot, then 42 and 0 as one slot's limit was lowered and lost",
              file=sys.stderr)

    def test_5_fence_headroom_scans_the_slots_once_a_minute(self):
        """A gateway finds the slots in use (a fence sequence, made by a slot's first lease) by an EXISTS of each
        of the 16,384 slots, and its fence headroom, read at every scrape of /metrics, scans at most once a
        minute: in between it reads the slots it found, whose values are read afresh each time (a limit lowered
        and lost between two reads shows at once). Before: every read scanned every slot (a Debug gateway's
        /metrics on the lab took 116 ms, 16 ms since)."""
        d = Driver("--list", self.lab.url(), "0", "1000")   # every slot raised again after test 4
        self.assertEqual(d.round()["granted"], 0)
        d.end()
        primaries = self.lab.primaries()

        def exists() -> int:
            return sum(self.lab.calls(p, "exists") for p in primaries)

        before = exists()
        d = Driver("--headroom", self.lab.url())
        self.assertGreater(d.round()["headroom"], 10**12 - 100)
        scanned = exists() - before
        self.assertGreaterEqual(scanned, SLOTS, "the first read scans every slot")
        slot = crc16(b"ls:9") % SLOTS
        owner = self.lab.owner(slot)
        run_id = self.lab.info(owner, "server")["run_id"]
        fence_key, limit_key = f"fg:fence:{{{slot_tag(slot)}}}", f"fg:fence_limit:{{{slot_tag(slot)}}}:{run_id}"
        self.assertEqual(resp(owner, "SET", limit_key, str(int(resp(owner, "GET", fence_key)) + 42)), "OK")
        d.next()
        self.assertEqual(d.round()["headroom"], 42)
        self.assertEqual(resp(owner, "DEL", limit_key), 1)
        d.next()
        self.assertEqual(d.round()["headroom"], 0)
        d.end()
        self.assertLess(exists() - before, scanned + 100, "a read within a minute of the scan scanned again")


if __name__ == "__main__":
    unittest.main()
