# SPDX-License-Identifier: Apache-2.0
"""Backends that restart while the gateway's connections are idle: the first requests after Redis or
Postgres is back must succeed, not answer 503 "Server closed the connection" once per thread or per
pooled connection. Every HTTP thread and every pooled Postgres connection is warmed up first, so each of
them holds a connection that the restart kills.

Broken variant caught: with the idle check of util/sock.c disabled (sock_idle_broken returning false),
test_redis_restart saw 503 on the first request of each HTTP thread and test_pg_restart on the first use
of each pooled connection.

Owns: idle-connection recovery. Must not: test outages (requests made while a backend is down).
"""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, http, services, skip_in_cluster  # noqa: E402
from pg_helpers import acquire, config, unique, write  # noqa: E402

THREADS = 4
POOL = 4


def warm_up(gw, paths):
    """Many concurrent one-shot requests, so that every HTTP thread and pooled connection is used."""
    failures = []

    def hit():
        for path in paths:
            r = http("GET", gw.url(path))
            if r.status != 200:
                failures.append(r)

    workers = [threading.Thread(target=hit) for _ in range(THREADS * 4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return failures


def answers(gw):
    return http("GET", gw.url("/readyz")).status == 200


class IdleReconnectTest(unittest.TestCase):
    def gateway(self, **settings):
        return Gateway(config={**config(), **settings}, env_overrides={"FENCEGATE_HTTP_THREADS": THREADS,
                                                                       "FENCEGATE_PG_POOL_SIZE": POOL})

    @skip_in_cluster("it restarts the one test Redis, which the gateways on a cluster do not use (it passed "
                     "without testing anything); the cluster lab kills and restarts primaries (cluster.lab)")
    def test_redis_restart(self):
        """On the shared connection, and with redis_pipeline_from 4 on each HTTP thread's own connection
        too (made by one request at a time on new connections, which the acceptor hands to each thread in
        turn)."""
        for pipeline_from in (0, 4):
            with self.subTest(redis_pipeline_from=pipeline_from):
                self.redis_restart(pipeline_from)

    def redis_restart(self, pipeline_from):
        with self.gateway(redis_pipeline_from=pipeline_from) as gw:
            self.assertEqual(warm_up(gw, ["/readyz", "/v1/locks/idle:warm"] * 3), [])
            one_at_a_time = [http("GET", gw.url("/v1/locks/idle:warm")).status for _ in range(THREADS * 2)]
            self.assertEqual(one_at_a_time, [200] * len(one_at_a_time))
            services("stop-redis")
            services("start-redis")
            statuses = [http("GET", gw.url(f"/v1/locks/idle:{i}")).status for i in range(THREADS * 6)]
            self.assertEqual(statuses, [200] * len(statuses), "a request after Redis came back failed")
            r = http("POST", gw.url(f"/v1/locks/{unique('idle')}/acquire"), {"ttl_ms": 5000})
            self.assertEqual(r.status, 200, r)

    def test_pg_restart(self):
        with self.gateway() as gw:
            c = gw.client()
            token, _ = acquire(c, unique("idlepg"))
            self.assertEqual(warm_up(gw, ["/readyz"] * 6), [])
            services("stop-pg")
            services("start-pg")
            prefix = unique("ip")
            statuses = []
            for i in range(POOL * 3):
                r = write(gw.client(), "PUT", "invoices", f"{prefix}-{i}", {"row": {"note": "x"}}, token)
                statuses.append(r.status)
            self.assertEqual(statuses, [200] * len(statuses), "a write after Postgres came back failed")
            self.assertTrue(answers(gw))


if __name__ == "__main__":
    unittest.main()
