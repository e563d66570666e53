# SPDX-License-Identifier: Apache-2.0
"""Connections and the HTTP threads that serve them.

A handler runs on one of http_threads polling threads and may wait there for Postgres; every other request
of the connections on that thread waits behind it. Connections opened together (a client pool starting up)
must therefore land on different threads. They did not when each thread accepted from the listening socket
itself: the first thread to wake took what was waiting, and four connections opened together went to one,
two or three threads. Measured from outside the gateway: Postgres counts the gateway's sessions waiting on
a row lock that the test holds, one per thread that has a request inside its handler; each of the two
bursts of four connections must put one request into every thread's handler. Before them the gateway is
made to hold a Postgres session for each thread (warm_pool): its pool opens one when a request first needs it,
within libpq's connect timeout of 2 s, which a Postgres slow to start sessions on a busy machine misses, and
that request is answered 503 before it reaches the row. (So one of four sessions waited, the one the gateway
opened at start-up, when three new ones took Postgres over 2 s.)

Broken variants caught: the daemon accepting on its own listening socket (1 to 3 sessions waiting, ten runs
of ten); connections handed over under the descriptor number accept gave them (libmicrohttpd then picks the
thread by that number, and the holes closed connections leave put two of the four on one thread: 3 waiting
in five runs of five).

One HTTP thread is libmicrohttpd's single polling thread, started without a word: asked for a pool of one
thread, the library warned at every start that the pool is not used.

Owns: the spreading of accepted connections over http_threads. Must not: test connection limits
(test_hostile.py).
"""

import os
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, GatewayTest, env, psql, wait_for  # noqa: E402
from pg_helpers import acquire, config, insert_invoice, quote, unique  # noqa: E402

THREADS = 4

HOLDER = "application_name = 'fg-row-holder'"  # the psql session of hold_row
WAITING_SESSIONS = ("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fencegate'"
                    " AND wait_event_type = 'Lock'")


# What each of the gateway's sessions is doing, for a failure's message.
SESSIONS = ("SELECT application_name || ' ' || state || ' ' || coalesce(wait_event_type || '/' || wait_event, '-')"
            " FROM pg_stat_activity WHERE application_name LIKE 'fencegate%'")


def early_answer(sock: socket.socket) -> str:
    """The start of what sock received so far, "" for nothing: a request answered (an error) before it
    reached the row."""
    sock.setblocking(False)
    try:
        return sock.recv(200, socket.MSG_PEEK).decode(errors="replace").split("\r\n", 1)[0]
    except BlockingIOError:
        return ""
    finally:
        sock.setblocking(True)
        sock.settimeout(30)


def status_of(sock: socket.socket) -> int:
    """The status code of the one answer sock receives."""
    data = b""
    while b"\r\n" not in data:
        piece = sock.recv(4096)
        if not piece:
            raise AssertionError(f"connection closed before an answer: {data!r}")
        data += piece
    return int(data.split(b" ", 2)[1])


class AcceptSpreadTest(GatewayTest):
    gateway_config = dict(config(), statement_timeout_ms=30000)
    gateway_env = {"FENCEGATE_HTTP_THREADS": str(THREADS), "FENCEGATE_PG_POOL_SIZE": str(2 * THREADS)}

    def hold_row(self, key: str) -> subprocess.Popen:
        """A psql session that locks the invoice row key until let_go; returns once it holds the lock."""
        holder = subprocess.Popen(
            [os.path.join(env("FG_PGBIN", "/usr/lib/postgresql/15/bin"), "psql"), "-X", "-q", "-At",
             "-v", "ON_ERROR_STOP=1", "-d", env("FG_TEST_PG_DSN"), "-c",
             f"BEGIN; SELECT 1 FROM public.invoices WHERE id = '{key}' FOR UPDATE; SELECT pg_sleep(60);"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, PGAPPNAME="fg-row-holder"))
        self.addCleanup(holder.wait, 30)
        self.addCleanup(self.let_go)
        # In pg_sleep, past its FOR UPDATE. (A session counted while merely active could be the one the round
        # before ended, not gone yet: the burst then met no lock, and no session waited.)
        wait_for(lambda: psql(f"SELECT count(*) FROM pg_stat_activity WHERE {HOLDER} AND wait_event = 'PgSleep'")
                 == ["1"], what="the session holding the row")
        return holder

    @staticmethod
    def let_go() -> None:
        """Ends the session of hold_row (its lock with it), and waits until Postgres no longer lists it."""
        psql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {HOLDER}")
        wait_for(lambda: psql(f"SELECT count(*) FROM pg_stat_activity WHERE {HOLDER}") == ["0"],
                 what="the row holder's session to end")

    def send_burst(self, key: str, token: str) -> list[socket.socket]:
        """Opens THREADS connections at once and sends a PATCH of the held row on each."""
        socks = [socket.create_connection(("127.0.0.1", self.gw.port), timeout=30) for _ in range(THREADS)]
        for s in socks:
            self.addCleanup(s.close)
        body = b'{"set": {"note": "spread"}}'
        request = (f"PATCH /v1/pg/invoices/{quote(key)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   f"Content-Type: application/json\r\nFence-Token: {token}\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        for s in socks:
            s.sendall(request)
        return socks

    def warm_pool(self, key: str, token: str) -> None:
        """Has the gateway open a Postgres session for each thread: rounds like those judged, each of which
        ends once THREADS sessions waited on the row at once (within 10 s) and its answers came, whatever
        they are, until one such round (at most three: the judged bursts then say what failed). The pool
        hands out its lowest free session first, so the bursts after take these (but for one the audit
        janitor may hold a moment a minute) and open none."""
        for _ in range(3):
            holder = self.hold_row(key)
            socks = self.send_burst(key, token)
            try:
                wait_for(lambda: psql(WAITING_SESSIONS) == [str(THREADS)], timeout=10, what="a warm pool")
                warm = True
            except AssertionError:
                warm = False
            self.let_go()
            holder.wait(30)
            for s in socks:
                status_of(s)
                s.close()
            if warm:
                return

    def burst(self, key: str, token: str) -> list[socket.socket]:
        """send_burst: every thread must get one of the requests, so that THREADS gateway sessions wait on
        the row."""
        socks = self.send_burst(key, token)
        waiting: list[str] = []

        def all_waiting() -> bool:
            waiting[:] = psql(WAITING_SESSIONS)
            return waiting == [str(THREADS)]

        # Up to 20 s, under the gateway's statement timeout (30 s): a busy machine (the suite runs three
        # tests at once, under the sanitizers) can take seconds to bring four requests to Postgres; a
        # thread given two of them never brings more than three.
        try:
            wait_for(all_waiting, timeout=20, what=f"{THREADS} gateway sessions waiting on the row")
        except AssertionError as failure:
            raise AssertionError(f"{failure} (last count {waiting}); sessions: {psql(SESSIONS)};"
                                 f" answered early: {[early_answer(s) for s in socks]}") from None
        return socks

    def test_a_burst_of_connections_is_spread_over_every_thread(self):
        key = unique("spread")
        insert_invoice(key)
        token, _ = acquire(self.c, unique("spread-lock"))
        self.warm_pool(key, token)
        for _ in range(2):
            holder = self.hold_row(key)
            socks = self.burst(key, token)
            self.let_go()
            holder.wait(30)
            self.assertEqual([status_of(s) for s in socks], [200] * THREADS)
            for s in socks:
                s.close()


class OneThreadTest(unittest.TestCase):
    def test_one_thread_serves_and_starts_without_a_warning(self):
        with Gateway(config={"http_threads": 1}) as gw:
            self.assertEqual(gw.client().get("/healthz").status, 200)
            library = [line for line in gw.log_text().splitlines() if '"event":"http_library"' in line]
            self.assertEqual(library, [], "libmicrohttpd spoke at the start of a gateway of one HTTP thread")


if __name__ == "__main__":
    unittest.main()
