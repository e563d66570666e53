# SPDX-License-Identifier: Apache-2.0
"""The lease janitor through a Redis outage: the give-backs it owes Redis wait for Redis, not its other work.

The lease janitor gives back orphaned grants and the leases of acquires that got no reply, and takes places
kept for a retry out of their queues, one script call each; between those it wakes parked waiters whose
deadline came. A Redis that stops answering (SIGSTOP) costs each of those calls a whole request_timeout_ms.
Here twelve acquires (wait_ms 0, no request_id) answer 503 while Redis is stopped, each leaving a lease Redis
may still grant, while a waiter parked before the stop reaches its wait_ms. Once Redis runs again, the late
acquires it then grants are given back. And a place kept for a retry whose time runs out while Redis is
stopped leaves its queue once Redis runs again. A request's own give-back that gets no reply (a grant whose
client has gone) is left to the janitor, which gives it back once Redis answers. And a primary that runs the
acquires of many locks only after they were answered 503 has every one of those locks given back, up to as many
as the gateway's list keeps (limits.max_waiters + 32 a HTTP thread); the rest are logged and counted. An acquire
that Redis refuses before running it (out of memory), that never reached Redis (no connection to a primary
could be made), or whose script answered that no fence may be issued while no block of fences could be reserved,
made no lease, and leaves the janitor nothing to give back.

Broken variants caught: a janitor that gave back every due lease in turn spent twelve deadlines on them,
and the parked waiter was answered after about 13 s where its wait_ms was 3 s; a give-back that met the
outage was logged and forgotten, and the twelve locks Redis granted once it ran again stayed held for their
60 s ttl_ms, and the kept place stayed in its queue, counted in `waiting`, until its wait_ms; a grant whose
client had gone, and whose give-back got no reply, stayed held to its ttl_ms; a list of leases to give back
of a fixed 1024 entries forgot the rest without a word, and of 1400 locks granted late hundreds stayed held
for their 60 s ttl_ms; the lease of an acquire Redis refused went to the janitor as an unanswered one's, whose
drop Redis refused in turn every GIVE_BACK_RETRY_MS, each time logged as `orphan_grant`, to drop nothing; so
did that of an acquire that failed as its connection was made (a Redis that had become a replica), and that of
an acquire answered "nofence" whose reservation of fences Postgres held back.

Owns: the lease janitor's give-backs while Redis is silent. Must not: test one request's time on a silent
Redis (test_redis_deadline.py) or an idle janitor's sleep (test_janitor_sleep.py).
"""

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (Client, Gateway, Redis, TcpProxy, free_port, metric, private_backends, psql,  # noqa: E402
                     skip_in_cluster, wait_for)
from lock_helpers import raw_acquire, unique_name  # noqa: E402
from test_grant_delivery import raw_post, reset  # noqa: E402
from test_redis_deadline import gateway_behind_proxy, process_id  # noqa: E402

TIMEOUT_MS = 1000
UNANSWERED = 12  # acquires answered 503 while Redis is stopped: each leaves a lease to give back
WAIT_MS = 3000  # the parked waiter's wait, which ends while Redis is stopped
KEPT_MS = 1000  # limits.kept_place_ms: a kept place's time runs out while Redis is stopped
GIVE_BACK_RETRY_MS = 1000  # src/fglimits.h: a janitor's give-back that met an outage is tried again
STATEMENT_MS = 1500  # statement_timeout_ms where a reservation of fences waits for a row locked in Postgres
# The waiter's answer may take beyond its wait_ms: the janitor's liveness beat and one give-back that are
# under way as its deadline comes, its own cancel, each a deadline on a silent Redis, and a loaded machine
LATE_S = 3 * TIMEOUT_MS / 1000 + 2.0

MANY = 1400  # acquires answered 503 before Redis runs them: more than a list of 1024 leases to give back held
MANY_THREADS = 64  # http_threads, and clients sending those acquires: each costs its thread a deadline
MANY_TIMEOUT_MS = 300  # request_timeout_ms for them: MANY deadlines over MANY_THREADS take a few seconds
FREED_S = 15  # every lock granted late is free by then: the janitor gives back MANY leases one call each
FULL_THREADS = 8  # http_threads where the list is full sooner: it keeps limits.max_waiters + 32 a thread
FULL_KEPT = 1 + FULL_THREADS * 32  # with limits.max_waiters 1 (src/lease/doorbell.c, orphans_max)
FULL = FULL_KEPT + 60  # acquires answered 503 before Redis runs them, more than the list keeps
FULL_TIMEOUT_MS = 150  # request_timeout_ms for them: FULL deadlines over FULL_THREADS take a few seconds


CONFIG = {"request_timeout_ms": TIMEOUT_MS, "redis_pipeline_from": 0, "limits": {"kept_place_ms": KEPT_MS}}


@skip_in_cluster("it stops the one Redis of its own")
class JanitorOutageTest(unittest.TestCase):
    def test_give_backs_wait_for_redis_not_the_waiters(self):
        """A lock held and a waiter parked on it (WAIT_MS); Redis stopped; UNANSWERED acquires of other locks
        answer 503. The waiter answers 503 within LATE_S of its wait_ms, and once Redis runs again every lock
        it granted to those acquires late is free within seconds."""
        backends = private_backends(self, "janitor")
        with Gateway(env_overrides=backends.env, config=CONFIG) as gw:
            c = gw.client(timeout=60)
            held = unique_name("outage-held")
            self.assertEqual(c.post(f"/v1/locks/{held}/acquire", {"ttl_ms": 60000}).status, 200)
            waiter = Client(gw.url(""), timeout=60)
            waited = []

            def wait():
                started = time.monotonic()
                r = waiter.post(f"/v1/locks/{held}/acquire", {"wait_ms": WAIT_MS, "ttl_ms": 60000})
                waited.append((r, time.monotonic() - started))

            waiting = threading.Thread(target=wait)
            waiting.start()
            wait_for(lambda: c.get(f"/v1/locks/{held}").body["waiting"] == 1, what="the waiter parked")
            names = [unique_name(f"outage-{i}") for i in range(UNANSWERED)]
            clients = [Client(gw.url(""), timeout=60) for _ in names]
            for client in clients:
                self.assertEqual(client.get("/healthz").status, 200)
            answers = []
            pid = process_id(backends.redis_port)
            os.kill(pid, signal.SIGSTOP)
            try:
                burst = [threading.Thread(target=lambda k=k: answers.append(clients[k].post(
                    f"/v1/locks/{names[k]}/acquire", {"wait_ms": 0, "ttl_ms": 60000}))) for k in range(UNANSWERED)]
                for t in burst:
                    t.start()
                for t in burst:
                    t.join(60)
                waiting.join(60)
            finally:
                os.kill(pid, signal.SIGCONT)
            self.assertEqual(sorted(r.status for r in answers), [503] * UNANSWERED, answers)
            self.assertEqual(len(waited), 1, "the waiter was never answered")
            r, seconds = waited[0]
            self.assertEqual(r.status, 503, gw.why(r))
            self.assertLess(seconds, WAIT_MS / 1000 + LATE_S,
                            "the waiter was answered late: the janitor was busy with give-backs Redis did not answer")
            status = gw.client(timeout=60)
            still_held = lambda: [n for n in names if status.get(f"/v1/locks/{n}").body["held"]]  # noqa: E731
            wait_for(lambda: still_held() == [], timeout=10,
                     what="the locks Redis granted late given back once it runs again")
            for client in clients + [waiter]:
                client.close()

    def test_a_kept_place_whose_time_ran_out_in_an_outage_leaves_once_redis_answers(self):
        """A lock held; an acquire with a request_id queues and its client hangs up while Redis is stopped, so
        the janitor's take-back of its kept place, KEPT_MS later, meets the outage. Within seconds of Redis
        running again the queue is empty."""
        backends = private_backends(self, "janitor")
        with Gateway(env_overrides=backends.env, config=CONFIG) as gw:
            c = gw.client(timeout=60)
            name = unique_name("outage-kept")
            self.assertEqual(c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}).status, 200)
            gone = raw_acquire(gw.port, name, {"request_id": unique_name("rid"), "wait_ms": 60000, "ttl_ms": 60000})
            wait_for(lambda: c.get(f"/v1/locks/{name}").body["waiting"] == 1, what="the place queued")
            pid = process_id(backends.redis_port)
            os.kill(pid, signal.SIGSTOP)
            try:
                gone.close()  # the place is kept for KEPT_MS, then the janitor's give-back meets the outage
                time.sleep(KEPT_MS / 1000 + 2 * TIMEOUT_MS / 1000)
            finally:
                os.kill(pid, signal.SIGCONT)
            wait_for(lambda: c.get(f"/v1/locks/{name}").body["waiting"] == 0, timeout=5,
                     what="the kept place out of its queue once Redis answers")

    def test_a_give_back_that_got_no_reply_is_left_to_the_janitor(self):
        """An acquire (wait_ms 0) through a proxy to Redis that holds it back while its client resets; let go,
        it is granted, and the gateway gives the grant back as its answer cannot be sent. The proxy holds
        that give-back past request_timeout_ms, then its connection is cut, the give-back never run. Within
        seconds the lock is free: the janitor gave it back on a new connection."""
        name = unique_name("outage-gone")
        proxy, gateway = gateway_behind_proxy(self, name, timeout_ms=TIMEOUT_MS)
        with gateway as gw:
            c = gw.client(timeout=30)
            self.assertEqual(c.post(f"/v1/locks/{unique_name('outage-warm')}/acquire", {"ttl_ms": 1000}).status,
                             200)  # Redis knows the scripts before any is held back
            gone = raw_post(gw.port, f"/v1/locks/{name}/acquire", {"wait_ms": 0, "ttl_ms": 60000})
            self.assertTrue(proxy.held.wait(10), "the acquire was never held back")
            reset(gone)
            time.sleep(0.2)  # the reset reaches the gateway's socket before the grant's answer
            acquire_go = proxy.go
            proxy.arm()  # the give-back
            acquire_go.set()
            self.assertTrue(proxy.held.wait(10), "the give-back was never held back")
            time.sleep(TIMEOUT_MS / 1000 + 0.5)  # its call gave up
            proxy.cut()  # what it held back never reaches Redis
            proxy.let_go()
            wait_for(lambda: not c.get(f"/v1/locks/{name}").body["held"], timeout=5,
                     what="the grant given back by the janitor")

    def test_more_unanswered_acquires_than_a_fixed_list_held_are_all_given_back(self):
        """MANY acquires of as many locks answer 503 while Redis holds them back (late_acquires); let go, Redis
        grants every one. Within FREED_S every one of those locks is free: an acquire by another owner
        succeeds at once."""
        config = {"request_timeout_ms": MANY_TIMEOUT_MS, "http_threads": MANY_THREADS}
        with self.late_acquires(config, MANY) as (gw, names, clients):
            held = still_held(clients, names)
            self.assertEqual(len(held), 0, f"{len(held)} of {MANY} locks granted late still held after {FREED_S} s "
                             f"(the janitor never gave their leases back), e.g. {held[:3]}")

    def test_leases_beyond_a_full_list_are_logged_and_counted(self):
        """With limits.max_waiters 1 and FULL_THREADS HTTP threads the list keeps FULL_KEPT leases to give back;
        FULL acquires answer 503 while Redis holds them back (late_acquires). Those the list had no room for are
        counted in fencegate_orphans_forgotten_total, at most FULL - FULL_KEPT (fewer if the janitor was trying
        some as Redis answered again), and logged (orphans_full, with how many); let go, within FREED_S every
        lock is free but at most as many as were forgotten."""
        config = {"request_timeout_ms": FULL_TIMEOUT_MS, "http_threads": FULL_THREADS, "limits": {"max_waiters": 1}}
        with self.late_acquires(config, FULL) as (gw, names, clients):
            forgotten = int(metric(gw, "fencegate_orphans_forgotten_total"))
            self.assertGreater(forgotten, 0)
            self.assertLessEqual(forgotten, FULL - FULL_KEPT)
            logged = re.compile(r'"orphans_full","detail":"(\d+) ')
            wait_for(lambda: sum(int(n) for n in logged.findall(gw.log_text())) == forgotten,
                     what="every lease forgotten logged")
            held = still_held(clients, names, forgotten)
            self.assertLessEqual(len(held), forgotten, "leases the list kept were not given back")

    @contextlib.contextmanager
    def late_acquires(self, config, n):
        """A gateway (config, with redis_pipeline_from 0) behind a proxy that holds back every call naming the
        test's locks, on every connection, and passes the rest (each new connection's set-up, the liveness
        mark): a primary that runs those calls only later. n acquires (wait_ms 0, no request_id) of as many
        locks, as many at a time as the gateway has HTTP threads, answer 503, each leaving a lease Redis may
        still grant; then the proxy lets them go, in the order they were sent (a give-back the janitor tried
        meanwhile runs after its acquire). Yields the gateway, the names and the clients."""
        tag = unique_name("outage-late")
        proxy = TcpProxy(int(os.environ["FG_TEST_REDIS_PORT"]), hold=tag.encode(), hold_every=True)
        self.addCleanup(proxy.close)
        with Gateway(env_overrides={"FENCEGATE_REDIS_URL": proxy.redis_url},
                     config={"redis_pipeline_from": 0, **config}) as gw:
            clients = [Client(gw.url(""), timeout=60) for _ in range(config["http_threads"])]
            self.addCleanup(lambda: [client.close() for client in clients])
            names = [f"{tag}-{i}" for i in range(n)]
            answers = [None] * n

            def send(k):
                for i in range(k, n, len(clients)):
                    answers[i] = clients[k].post(f"/v1/locks/{names[i]}/acquire", {"wait_ms": 0, "ttl_ms": 60000})

            each_client(clients, send)
            self.assertEqual([i for i, r in enumerate(answers) if r is None or r.status != 503], [],
                             "acquires answered otherwise than 503 while Redis held them back")
            proxy.let_go()
            yield gw, names, clients

    def test_an_acquire_redis_refused_leaves_nothing_to_give_back(self):
        """Redis out of memory (maxmemory 1, noeviction) refuses every acquire before running it: each answers
        503, a lock set's too, and for three GIVE_BACK_RETRY_MS the janitor logs no `orphan_grant`: it was handed
        no lease to drop. Once Redis takes writes again, those locks are free."""
        self.refused_acquires_leave_nothing("refused", lambda redis: redis.cmd("CONFIG", "SET", "maxmemory", "1"),
                                            lambda redis: redis.cmd("CONFIG", "SET", "maxmemory", "0"))

    def test_an_acquire_never_written_to_redis_leaves_nothing_to_give_back(self):
        """Redis made a replica of a server that is not there (REPLICAOF a closed port): the first acquire is
        answered READONLY and the connection retired; every later one fails as its connection is made (ROLE
        names no primary), before a byte of it is written. Each answers 503, a lock set's too, and the janitor
        logs no `orphan_grant`; after REPLICAOF NO ONE those locks are free."""
        self.refused_acquires_leave_nothing("unsent", lambda redis: redis.cmd("REPLICAOF", "127.0.0.1",
                                                                              str(free_port())),
                                            lambda redis: redis.cmd("REPLICAOF", "NO", "ONE"))

    def test_an_acquire_no_fence_could_be_reserved_for_leaves_nothing_to_give_back(self):
        """The block of fences reserved used up (fg:fence_limit set to fg:fence) and Postgres holding back the
        reservation of the next (its row locked) past statement_timeout_ms: an acquire's script answers
        "nofence", the reservation fails, and the acquire answers 503. Redis refuses writes for memory from the
        time the acquire waits on Postgres, so a drop of its lease would be refused and logged as `orphan_grant`:
        none is, for three GIVE_BACK_RETRY_MS, since the script's answer made no lease."""
        backends = private_backends(self, "janitor")
        config = dict(CONFIG, statement_timeout_ms=STATEMENT_MS)
        with Gateway(env_overrides=backends.env, config=config) as gw, Redis(port=backends.redis_port) as redis:
            c = gw.client(timeout=60)
            self.assertEqual(c.post(f"/v1/locks/{unique_name('nofence-warm')}/acquire", {"ttl_ms": 1000}).status,
                             200)  # a block reserved, and the scripts known
            redis.cmd("SET", "fg:fence_limit", redis.cmd("GET", "fg:fence"))
            name = unique_name("nofence")
            with reservation_held(backends.dsn):
                answers = []
                t = threading.Thread(target=lambda: answers.append(
                    c.post(f"/v1/locks/{name}/acquire", {"wait_ms": 0, "ttl_ms": 60000})))
                t.start()
                try:
                    wait_for(lambda: psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                          " AND query LIKE '%fence_reservation%'", dsn=backends.dsn) == ["1"],
                             what="the reservation waiting for its row")
                    redis.cmd("CONFIG", "SET", "maxmemory", "1")
                    t.join(30)
                    self.assertEqual(len(answers), 1, "the acquire was never answered")
                    self.assertEqual(answers[0].status, 503, gw.why(answers[0]))
                    time.sleep(3 * GIVE_BACK_RETRY_MS / 1000)
                finally:
                    redis.cmd("CONFIG", "SET", "maxmemory", "0")
            refused = [line for line in gw.log_text().splitlines() if '"orphan_grant"' in line]
            self.assertEqual(refused, [], "the janitor dropped the lease of an acquire answered nofence")
            self.assertFalse(c.get(f"/v1/locks/{name}").body["held"])

    def refused_acquires_leave_nothing(self, tag, refuse, allow):
        """Acquires (three locks, then a lock set of them) made while refuse(redis) holds, until allow(redis),
        each answer 503 and leave the janitor nothing to give back."""
        backends = private_backends(self, "janitor")
        with Gateway(env_overrides=backends.env, config=CONFIG) as gw, Redis(port=backends.redis_port) as redis:
            c = gw.client(timeout=60)
            self.assertEqual(c.post(f"/v1/locks/{unique_name(tag + '-warm')}/acquire", {"ttl_ms": 1000}).status,
                             200)  # Redis knows the scripts before it refuses writes
            names = [unique_name(f"{tag}-{i}") for i in range(3)]
            refuse(redis)
            try:
                for name in names:
                    r = c.post(f"/v1/locks/{name}/acquire", {"wait_ms": 0, "ttl_ms": 60000})
                    self.assertEqual(r.status, 503, gw.why(r))
                r = c.post("/v1/locksets/acquire", {"names": names, "wait_ms": 1000, "ttl_ms": 60000})
                self.assertEqual(r.status, 503, gw.why(r))  # refused as it asks for its first lock
                time.sleep(3 * GIVE_BACK_RETRY_MS / 1000)
            finally:
                allow(redis)
            refused = [line for line in gw.log_text().splitlines() if '"orphan_grant"' in line]
            self.assertEqual(refused, [], "the janitor dropped the leases of acquires Redis never ran")
            self.assertEqual([n for n in names if c.get(f"/v1/locks/{n}").body["held"]], [])

@contextlib.contextmanager
def reservation_held(dsn):
    """For a with-block, a session of Postgres dsn that holds fencegate.fence_reservation's row locked: a
    gateway's reservation of fences waits for it."""
    locker = subprocess.Popen([os.path.join(os.environ.get("FG_PGBIN", "/usr/lib/postgresql/15/bin"), "psql"),
                               "-X", "-q", "-d", dsn, "-f", "-"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        locker.stdin.write("BEGIN; SELECT 1 FROM fencegate.fence_reservation FOR UPDATE; SELECT pg_sleep(60);\n")
        locker.stdin.flush()
        wait_for(lambda: psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%'"
                              " AND state = 'active' AND pid <> pg_backend_pid()", dsn=dsn) == ["1"],
                 what="the reservation's row locked")
        yield
    finally:
        locker.kill()
        locker.wait(10)


def each_client(clients, work):
    """Runs work(k) for each client k, each on a thread of its own, and waits for them all."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


def still_held(clients, names, allowed=0):
    """Those of names that no acquire by another owner (wait_ms 0) took, tried again and again for FREED_S or
    until allowed are left."""
    held = names
    deadline = time.monotonic() + FREED_S
    while len(held) > allowed and time.monotonic() < deadline:
        taken = set()

        def take(k, pending=held):
            for name in pending[k::len(clients)]:
                r = clients[k].post(f"/v1/locks/{name}/acquire", {"wait_ms": 0, "ttl_ms": 60000, "owner": "another"})
                if r.status == 200:
                    taken.add(name)

        each_client(clients, take)
        held = [name for name in held if name not in taken]
        time.sleep(0.2)
    return held

if __name__ == "__main__":
    unittest.main()
