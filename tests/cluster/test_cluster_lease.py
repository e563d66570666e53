# SPDX-License-Identifier: Apache-2.0
"""The cluster lab for what the lease side reads across slots: the gateway's Redis client (store/backend/redis.c)
driven by cluster_lease against a single Redis and a cluster of three primaries and three replicas
(cluster_lab.py). In order:

1. batches (redis_batch): calls spread over every slot, each primary's calls queued together on its connection
   and answered with a few reads, every answer the one of its own call; a slot moved between rounds (MOVED,
   the call sent again alone) and the script libraries flushed from every primary (loaded, sent again).

Environment: FG_CLUSTER_LEASE (the cluster_lease binary), FG_TEST_DATA (where the lab keeps its nodes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from cluster_lab import SLOTS, ClusterLab, crc16, resp, wait
from cluster_lab import free_port, redis_answers  # the fault lab's helpers, as cluster_lab imports them

DRIVER = os.environ["FG_CLUSTER_LEASE"]


class Driver:
    """cluster_lease in the background: one JSON line a round, the next round when told."""

    def __init__(self, *argv: str):
        self.proc = subprocess.Popen([DRIVER, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def round(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"cluster_lease ended: {self.proc.stderr.read()[-2000:]}")
        out = json.loads(line)
        print(f"cluster_lease: {out}", file=sys.stderr)
        return out

    def next(self):
        self.proc.stdin.write("next\n")
        self.proc.stdin.flush()

    def end(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


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


class ClusterLeaseTest(unittest.TestCase):
    lab: ClusterLab

    @classmethod
    def setUpClass(cls):
        cls.lab = ClusterLab()
        try:
            cls.lab.start()
        except Exception:
            cls.lab.stop(keep=True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.lab.stop(keep=os.environ.get("FG_CLUSTER_KEEP") == "1")

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


if __name__ == "__main__":
    unittest.main()
