# SPDX-License-Identifier: Apache-2.0
"""The lease scripts of concurrent requests share one Redis connection, pipelined: every HTTP thread's calls
go out on the same connection, Redis reads several of them at once, each reply reaches the request that asked
for it, and a Redis that stops answering fails the calls out by their deadline instead of hanging them. With
redis_pipeline_from N, a call made while fewer than N others are in flight goes on its thread's own connection
instead, and the same holds of those.

Broken variants caught: with a connection per thread always (the gateway before the pipeline),
test_one_connection_for_all saw 11 connections and test_calls_share_reads one read per call; with http_threads
8 by default, test_calls_share_reads at the default left requests unread behind their threads' calls (503 once
past their deadline), and with a batch counted per command in fencegate_redis_batches_total it counted 39
batches of 39 commands; with calls on
the threads' own connections up to 8 in flight instead of 4, test_few_calls_go_alone_many_share saw calls
waiting in 9 sockets (each HTTP thread's and a janitor's), and with the shared connection whatever
redis_pipeline_from says, in 1; with no deadline on the reading (poll without a
timeout), test_a_silent_redis_fails_calls_in_time waited out the whole pause and got 200; with replies handed to
the newest call out instead of the oldest, every test got answers meant for other calls (500); with large
reads on the shared connection, test_large_reads_go_alone saw one connection, not two.

Owns: the sharing of the Redis connection. Must not: test failover (tests/ha/) or reconnection after a restart
(test_idle_reconnect.py).
"""

import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Client, Gateway, Redis, metric, skip_in_cluster  # noqa: E402

THREADS = 8
DEFAULT_THREADS = 32  # http_threads when unset
CLIENTS = 32
PAIRS = 15
TIMEOUT_MS = 300
# request_timeout_ms of the gateways whose calls wait for a stopped Redis: their waits and pauses fit in it on
# a loaded machine (the default, 5 s, did not always)
STOPPED_TIMEOUT_MS = 20000


def command_connections(redis):
    """Redis's client connections that run commands (not subscribers, not the asking one), by address."""
    out = set()
    for line in redis.cmd("CLIENT", "LIST").splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "P" not in fields.get("flags", "") and fields.get("cmd") not in ("client|list", "subscribe"):
            out.add(fields["addr"])
    return out


def stat(redis, section, field):
    for line in redis.cmd("INFO", section).splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return ""


def fcall_calls(redis):
    text = stat(redis, "commandstats", "cmdstat_fcall")
    return int(text.split("calls=")[1].split(",")[0]) if text else 0


def unread_bytes(port):
    """Bytes unread in each established socket whose local port is port, by remote address (/proc/net/tcp)."""
    out = {}
    with open("/proc/net/tcp") as f:
        for line in list(f)[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":
                out[fields[2]] = int(fields[4].split(":")[1], 16)
    return out


def wait_until(check, limit=20.0):
    deadline = time.monotonic() + limit
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return check()

def run_clients(gw, work, clients=CLIENTS):
    """work(client, index) on clients threads at once, each with a keep-alive connection; their failures."""
    failures = []
    start = threading.Barrier(clients)

    def one(ix):
        client = Client(gw.url(""))
        start.wait()
        try:
            work(client, ix)
        except AssertionError as e:
            failures.append(str(e))

    workers = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return failures


def lock_pairs(prefix):
    def work(client, ix):
        name = f"{prefix}-{ix}"
        for _ in range(PAIRS):
            r = client.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 10000})
            assert r.status == 200, r
            assert r.body["lock"] == name, (name, r.body)
            r = client.post(f"/v1/locks/{name}/release", {"token": r.body["token"]})
            assert r.status == 200, r
    return work


@skip_in_cluster("it counts the reads and connections of the one pipelined connection to a single Redis")
class RedisPipelineTest(unittest.TestCase):
    def gateway(self, **config):
        return Gateway(env_overrides={"FENCEGATE_HTTP_THREADS": THREADS}, config=config or None)

    def test_one_connection_for_all(self):
        with Redis() as redis:
            before = command_connections(redis)
            with self.gateway(redis_pipeline_from=0) as gw:
                self.assertEqual(run_clients(gw, lock_pairs("pipe-conn")), [])
                mine = command_connections(redis) - before
        self.assertEqual(len(mine), 1, mine)

    def test_calls_share_reads(self):
        """Redis is stopped (SIGSTOP) while one status call goes out and one request per other HTTP thread comes
        in: the calls that arrive while a batch is out wait for it to be answered and then go out together, so
        once Redis runs again it reads the first call, answers it, and reads the other calls at once: two reads
        for all of them (a connection per thread: one read per call). The count is the design's, not the
        scheduler's: the first call is in Redis's socket, and every other request was read by the gateway a
        second before, before Redis runs again. The gateway's janitor calls Redis too, now and then: each of
        its calls is allowed a read of its own. At the default http_threads, DEFAULT_THREADS requests on as
        many connections are all read and in one batch; with 8 threads (the default before) 24 of them were
        left unread behind their threads' calls."""
        for threads in (THREADS, None):
            with self.subTest(http_threads=threads or "default"):
                self.calls_share_reads(threads, threads or DEFAULT_THREADS)

    def calls_share_reads(self, threads, requests):
        statuses = []

        def status(client, ix):
            statuses.append(client.get(f"/v1/locks/pipe-reads-{ix}").status)

        def stopped_round(gw, redis, pid):
            batches = metric(gw, "fencegate_redis_batches_total")
            commands = metric(gw, "fencegate_redis_batched_commands_total")
            calls, reads = fcall_calls(redis), int(stat(redis, "stats", "total_reads_processed"))
            os.kill(pid, signal.SIGSTOP)
            try:
                first = threading.Thread(target=run_clients, args=(gw, status), kwargs={"clients": 1})
                first.start()
                out = wait_until(lambda: sum(unread_bytes(redis.port).values()) > 0)
                before = set(unread_bytes(gw.port))
                rest = threading.Thread(target=run_clients, args=(gw, status), kwargs={"clients": requests - 1})
                rest.start()

                def all_read():
                    now = unread_bytes(gw.port)
                    return len(set(now) - before) >= requests - 1 and not any(now.values())

                taken = wait_until(all_read)
                time.sleep(1.0)  # from connected to sent, and from read off the socket to queued: far less
            finally:
                os.kill(pid, signal.SIGCONT)
            first.join()
            rest.join()
            calls = fcall_calls(redis) - calls
            reads = int(stat(redis, "stats", "total_reads_processed")) - reads
            batches = metric(gw, "fencegate_redis_batches_total") - batches
            commands = metric(gw, "fencegate_redis_batched_commands_total") - commands
            return out and taken, calls, reads, batches, commands

        env = {"FENCEGATE_HTTP_THREADS": threads} if threads else {}
        with Redis() as redis, Gateway(env_overrides=env, config={"redis_pipeline_from": 0,
                                                                  "request_timeout_ms": STOPPED_TIMEOUT_MS}) as gw:
            self.assertEqual(run_clients(gw, lock_pairs("pipe-warm"), clients=requests), [])
            pid = int(stat(redis, "server", "process_id"))
            ready, calls, reads, batches, commands = stopped_round(gw, redis, pid)
        self.assertEqual(statuses, [200] * requests)
        self.assertTrue(ready, "the calls did not reach the gateway in time")
        self.assertGreaterEqual(calls, requests)
        # Two of the reads are this test's own INFO commands.
        self.assertLessEqual(reads - 2, 2 + (calls - requests), f"{reads} reads for {calls} script calls")
        # The gateway's own count agrees: the calls went out in two batches, and the janitor's and the
        # second scrape's ping (backend_up) in at most one each.
        self.assertGreaterEqual(commands, requests)
        self.assertLessEqual(batches, 2 + (commands - requests), f"{batches} batches of {commands} commands")

    def test_few_calls_go_alone_many_share(self):
        """Redis is stopped while one request per HTTP thread comes in at once, with redis_pipeline_from
        4: the first four calls in flight go out on their threads' own connections, every
        later one on the shared connection, so the calls wait unread in five sockets at Redis. The count is the
        design's: no call can finish while Redis is stopped, so the calls in flight only grow, and a janitor's
        call that comes meanwhile takes a place as any other call does. Each thread's own connection is made
        before (one request at a time on new connections, which the acceptor hands to each thread in turn), and
        the shared one by many requests at once."""
        statuses = []

        def status(client, ix):
            statuses.append(client.get(f"/v1/locks/pipe-alone-{ix}").status)

        with Redis() as redis, self.gateway(redis_pipeline_from=4, request_timeout_ms=STOPPED_TIMEOUT_MS) as gw:
            for ix in range(THREADS):
                self.assertEqual(run_clients(gw, lock_pairs(f"pipe-alone-warm-{ix}"), clients=1), [])
            self.assertEqual(run_clients(gw, lock_pairs("pipe-alone-many")), [])
            pid = int(stat(redis, "server", "process_id"))
            os.kill(pid, signal.SIGSTOP)
            try:
                everyone = threading.Thread(target=run_clients, args=(gw, status), kwargs={"clients": THREADS})
                everyone.start()
                sockets = lambda: {a for a, n in unread_bytes(redis.port).items() if n > 0}  # noqa: E731
                wait_until(lambda: len(sockets()) >= 5, limit=10.0)  # within request_timeout_ms
                time.sleep(1.0)  # any call still on its way to a socket gets there
                waiting = sockets()
            finally:
                os.kill(pid, signal.SIGCONT)
            everyone.join()
        self.assertEqual(len(waiting), 5, waiting)
        self.assertEqual(statuses, [200] * THREADS)

    def test_large_reads_go_alone(self):
        """The read of a fenced key whose content comes to more than LARGE_READ_BYTES (8192, src/fglimits.h)
        goes on its HTTP thread's own connection, after a look at the key on the shared one, whatever
        redis_pipeline_from says: on the shared one every call behind it would wait while its answer comes
        through. Lease calls, writes (a large one too: measured, it made Redis slower for every client) and
        small reads share. One HTTP thread, so that a thread's own connection is one more than the shared
        one."""
        with Redis() as redis:
            before = command_connections(redis)
            with Gateway(env_overrides={"FENCEGATE_HTTP_THREADS": 1},
                         config={"redis_prefixes": ["app:"], "redis_pipeline_from": 0}) as gw:
                client = Client(gw.url(""))
                lock = client.post("/v1/locks/pipe-large/acquire", {"ttl_ms": 10000})
                self.assertEqual(lock.status, 200, lock)
                fence = {"Fence-Token": lock.body["token"]}
                for size in (8192, 60000):
                    r = client.request("PUT", "/v1/redis/app:pipe-large", {"value": "x" * size}, fence)
                    self.assertEqual(r.status, 200, r)
                redis.cmd("SET", "app:pipe-large", "y" * 8192)  # written around the gateway
                self.assertEqual(client.get("/v1/redis/app:pipe-large").body.get("value"), "y" * 8192)
                shared = command_connections(redis) - before
                redis.cmd("SET", "app:pipe-large", "z" * 8193)
                r = client.get("/v1/redis/app:pipe-large")
                self.assertEqual((r.status, r.body.get("value")), (200, "z" * 8193), r)
                mine = command_connections(redis) - before
                client.post("/v1/locks/pipe-large/release", {"token": lock.body["token"]})
        self.assertEqual(len(shared), 1, shared)
        self.assertEqual(len(mine), 2, mine)
        self.assertLessEqual(shared, mine)

    def test_each_reply_reaches_its_request(self):
        """Tokens and fences are the lease's own: each release takes the token its acquire got, and every
        fence is issued once; on the shared connection alone, and with calls on the threads' own too."""
        for pipeline_from in (0, 4):
            with self.subTest(redis_pipeline_from=pipeline_from):
                self.each_reply_reaches_its_request(pipeline_from)

    def each_reply_reaches_its_request(self, pipeline_from):
        fences = []

        def work(client, ix):
            for k in range(PAIRS):
                name = f"pipe-own-{ix}-{k}"
                r = client.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 10000, "owner": name})
                assert r.status == 200 and r.body["lock"] == name, (name, r)
                fences.append(r.body["fence"])
                status = client.get(f"/v1/locks/{name}")
                assert status.body["owner"] == name and status.body["fence"] == r.body["fence"], status
                assert client.post(f"/v1/locks/{name}/release", {"token": r.body["token"]}).status == 200

        with self.gateway(redis_pipeline_from=pipeline_from) as gw:
            self.assertEqual(run_clients(gw, work), [])
        self.assertEqual(len(fences), len(set(fences)))

    def test_a_silent_redis_fails_calls_in_time(self):
        for pipeline_from in (0, 4):
            with self.subTest(redis_pipeline_from=pipeline_from):
                self.a_silent_redis_fails_calls_in_time(pipeline_from)

    def a_silent_redis_fails_calls_in_time(self, pipeline_from):
        with Redis() as redis, self.gateway(request_timeout_ms=TIMEOUT_MS,
                                            redis_pipeline_from=pipeline_from) as gw:
            self.assertEqual(run_clients(gw, lock_pairs(f"pipe-pause-{pipeline_from}")), [])
            results = []

            def work(client, ix):
                t0 = time.monotonic()
                r = client.get(f"/v1/locks/pipe-pause-{ix}")
                results.append((r.status, time.monotonic() - t0))

            redis.cmd("CLIENT", "PAUSE", 4000, "ALL")
            try:
                run_clients(gw, work, clients=THREADS)  # one request per HTTP thread: all in at once
            finally:
                redis.cmd("CLIENT", "UNPAUSE")  # answered once the pause is over (it pauses every client)
            self.assertEqual(sorted({s for s, _ in results}), [503])
            # Each request waits for Redis one deadline in all, queued behind the call out or not: well under
            # the pause.
            self.assertLess(max(t for _, t in results), TIMEOUT_MS / 1000 + 1.0, results)
            self.assertEqual(run_clients(gw, lock_pairs(f"pipe-after-{pipeline_from}")), [])


if __name__ == "__main__":
    unittest.main()
