# SPDX-License-Identifier: Apache-2.0
"""A batch on the shared Redis connection is written by the thread of one of its calls, whatever time that
call has left: when the socket takes the batch slowly, the writer goes on writing until the last deadline of
the batch's calls, so the calls that still have time are answered, and the writer's own request, out of time,
answers 503 once the batch is written, no later than that last deadline.

Broken variant caught: with the writer waiting for the socket only until its own call's deadline, the batch
was left half written when that deadline passed, which broke the connection ("redis: cannot write: timed out
writing"): every fenced write of the batch answered 503 at the writer's deadline, though Redis would have
answered them well within theirs.

Owns: the deadline a batch is written by. Must not: test how calls share the connection
(test_redis_pipeline.py) or the time a request spends on a silent Redis (test_redis_deadline.py).
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Client, Gateway, TcpProxy, skip_in_cluster  # noqa: E402
from lock_helpers import unique_name  # noqa: E402

TIMEOUT_MS = 6000
VALUE_BYTES = 1000000
# Fenced writes of VALUE_BYTES each in the writer's batch: 8 MB, more than the gateway's socket buffer and the
# proxy's receive buffer take (4 MB and RCVBUF at most), so the writer waits for the socket
WRITES = 8
RCVBUF = 16384
# When, after the writer's request is sent, the writes are sent (they queue behind the writer's call), the
# writer's batch goes (its socket filling), and the proxy reads again: after the writer's deadline, well before
# the writes' deadlines (WRITES_AT + TIMEOUT_MS): 2.6 s for 8 MB through the proxy and Redis on a loaded machine
WRITES_AT_S = 3.0
BATCH_AT_S = 5.0
RESUME_AT_S = 6.4
# What a request may take beyond its deadline: reading it, answering it, a loaded machine's scheduling
MARGIN_S = 1.0


@skip_in_cluster("it puts a proxy in front of the one Redis of its own")
class RedisBatchDeadlineTest(unittest.TestCase):
    def test_a_writer_out_of_time_still_writes_the_batch_of_calls_that_have_time(self):
        """A lock status read (held) is held back by a proxy in front of Redis, so a batch is out: a second
        status read (writer) queues behind it, then WRITES fenced Redis PUTs of VALUE_BYTES each, with most of
        their request_timeout_ms ahead. The proxy lets the first read go and stops reading: the writer's thread
        writes its call and the PUTs in one batch, which fills the socket. The proxy reads again after the
        writer's deadline and before the PUTs': every PUT answers 200, and the writer 503 backend_unavailable
        within the PUTs' deadline."""
        proxy = TcpProxy(int(os.environ["FG_TEST_REDIS_PORT"]), rcvbuf=RCVBUF)
        self.addCleanup(proxy.close)
        config = {"request_timeout_ms": TIMEOUT_MS, "redis_pipeline_from": 0, "redis_prefixes": ["app:"],
                  "limits": {"max_value_bytes": VALUE_BYTES, "max_body_bytes": 2 * VALUE_BYTES}}
        with Gateway(env_overrides={"FENCEGATE_REDIS_URL": proxy.redis_url}, config=config) as gw:
            c = gw.client(timeout=30)
            tokens = []
            for _ in range(WRITES):
                r = c.post(f"/v1/locks/{unique_name('batch-held')}/acquire", {"ttl_ms": 60000})
                self.assertEqual(r.status, 200, r)
                tokens.append(r.body["token"])
            clients = [Client(gw.url(""), timeout=30) for _ in range(WRITES + 2)]
            for client in clients:  # connected before: the time measured is the gateway's
                self.assertEqual(client.get("/healthz").status, 200)
            first, writer = unique_name("batch-first"), unique_name("batch-writer")
            self.assertEqual(c.get(f"/v1/locks/{writer}").status, 200)  # its script loaded: one call each
            proxy.hold = first.encode()
            proxy.arm()
            answers = {}
            threads = [self.send(answers, "first", clients[0], "GET", f"/v1/locks/{first}")]
            self.assertTrue(proxy.held.wait(10), "the first read was never held back")
            sent = time.monotonic()
            threads.append(self.send(answers, "writer", clients[1], "GET", f"/v1/locks/{writer}"))
            time.sleep(WRITES_AT_S)
            value = "v" * VALUE_BYTES
            for k in range(WRITES):
                threads.append(self.send(answers, f"put-{k}", clients[k + 2], "PUT",
                                         f"/v1/redis/app:{unique_name('batch-key')}", {"value": value},
                                         {"Fence-Token": tokens[k]}))
            time.sleep(max(0.0, sent + BATCH_AT_S - time.monotonic()))
            proxy.stop_reading()
            proxy.let_go()
            time.sleep(max(0.0, sent + RESUME_AT_S - time.monotonic()))
            proxy.resume_reading()
            for t in threads:
                t.join(60)
            for client in clients:
                client.close()
            puts = {what: (r.status, gw.why(r)) for what, (r, _) in answers.items()
                    if what.startswith("put-") and r.status != 200}
            self.assertEqual(puts, {}, "a fenced write that had time was failed with the writer's call")
            self.assertEqual(len(answers), WRITES + 2, "a request was never answered")
            r, _ = answers["first"]
            self.assertEqual(r.status, 200, gw.why(r))
            r, seconds = answers["writer"]
            self.assertEqual((r.status, r.body.get("type")), (503, "/problems/backend_unavailable"), gw.why(r))
            self.assertGreater(seconds, RESUME_AT_S - 0.1,
                               "the writer did not wait for the socket: the batch never filled it")
            self.assertLess(seconds, WRITES_AT_S + TIMEOUT_MS / 1000 + MARGIN_S,
                            "the writer answered after the last deadline of its batch")

    @staticmethod
    def send(answers, what, client, method, path, body=None, headers=None):
        """Sends the request on its own thread (started, returned); answers[what] = (its Response, seconds)."""
        def run():
            t0 = time.monotonic()
            r = client.request(method, path, body, headers)
            answers[what] = (r, time.monotonic() - t0)
        t = threading.Thread(target=run)
        t.start()
        return t


if __name__ == "__main__":
    unittest.main()
