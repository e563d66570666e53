# SPDX-License-Identifier: Apache-2.0
"""Probes answered at once whatever the backends do: /healthz, /readyz and /metrics.

/readyz and /metrics ask the backends, and waited for each up to request_timeout_ms on the HTTP thread that
served them: with Redis stopped (SIGSTOP), /readyz answered after 3 s (request_timeout_ms 3000), past an
orchestrator's probe timeout. They now ask through threads of their own (http/readiness.h) and wait at most
probe_timeout_ms: test_readyz_and_metrics_wait_at_most_probe_timeout_ms failed before (3.0 s).

The probe listener (probe_listen): a handler that waits for a stalled backend holds its HTTP thread for up to
request_timeout_ms, and every connection of that thread waits behind it, a new one too: with 2 HTTP threads
and Redis stopped under lock traffic, GET /healthz on the API's port took 3.5 to 11.8 s, and an orchestrator
whose liveness probe gives up after 1 to 3 s killed a gateway that was alive and would have recovered with
Redis. On the probe listener, served by a thread of its own, no API handler runs, so a probe is answered at
once whatever the API's threads wait for. Measured from outside: each probe's time to answer on a connection
of its own, while clients keep a lock request in flight on every HTTP thread. Failed before, pointed at the
API's port (test_liveness_is_prompt_while_every_http_thread_waits_for_redis with probe_port = gw.port): two
probes in 6 s, answered after 5.7 and 9.0 s.

Also: the probe listener serves those three routes only (404 elsewhere) under the API's rules (auth,
proxies, Host), answers /healthz and 503 on /readyz while the gateway drains without holding the drain,
and a probe_listen that cannot be served stops start-up with a message naming it.

Owns: the probe listener and the deadline of /readyz and /metrics. Must not: test the API's own threads
(test_http_threads.py, test_hostile.py).
"""

import hashlib
import os
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (Client, Gateway, GatewayTest, Redis, free_port, http, private_backends,  # noqa: E402
                     run_fencegate, skip_in_cluster, wait_for)

THREADS = 2
REQUEST_TIMEOUT_MS = 3000
PROBE_TIMEOUT_MS = 500
PROMPT_S = 0.5  # a probe on the probe listener answers within this, whatever the API's threads do
MEASURE_S = 6.0  # how long the probes are timed while Redis is stopped


def timed_get(port: int, path: str, timeout: float = 15.0, headers: dict | None = None):
    """(seconds, Response) of GET path on a new connection to port."""
    started = time.monotonic()
    r = http("GET", f"http://127.0.0.1:{port}{path}", headers=headers, timeout=timeout)
    return time.monotonic() - started, r


def key_entry(key_id: str, text: str, scopes: list[str]) -> dict:
    return {"id": key_id, "sha256": hashlib.sha256(text.encode()).hexdigest(), "scopes": scopes}


def bearer(text: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {text}"}


def redis_pid(redis: Redis) -> int:
    return int(redis.cmd("INFO", "server").split("process_id:")[1].split()[0])


def backend_up(metrics_text: str, backend: str) -> int:
    line = next(line for line in metrics_text.splitlines()
                if line.startswith(f'fencegate_backend_up{{backend="{backend}"}} '))
    return int(line.split()[1])


class BusyThreads:
    """Clients that keep a lock request in flight on every HTTP thread of gw (two a thread, each on a kept-alive
    connection of its own) until stopped."""

    def __init__(self, gw: Gateway, tag: str):
        self.stop = threading.Event()
        self.answers = []
        self.workers = [threading.Thread(target=self._run, args=(gw, f"{tag}-{i}")) for i in range(2 * THREADS)]

    def _run(self, gw: Gateway, name: str) -> None:
        with Client(gw.base, timeout=30) as c:
            while not self.stop.is_set():
                try:
                    self.answers.append(c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 5000}).status)
                except OSError as e:
                    self.answers.append(repr(e))

    def __enter__(self) -> "BusyThreads":
        for w in self.workers:
            w.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for w in self.workers:
            w.join(60)


@skip_in_cluster("it stops a Redis of its own")
class StalledRedisTest(unittest.TestCase):
    """Redis stopped (SIGSTOP) while every HTTP thread serves lock requests."""

    def gateway(self, tag: str):
        own = private_backends(self, tag)
        self.probe_port = free_port()
        config = {"request_timeout_ms": REQUEST_TIMEOUT_MS, "probe_timeout_ms": PROBE_TIMEOUT_MS,
                  "probe_listen": f"127.0.0.1:{self.probe_port}"}
        gw = Gateway(config=config, env_overrides=dict(own.env, FENCEGATE_HTTP_THREADS=str(THREADS)))
        self.addCleanup(gw.stop, check=False)
        redis = Redis(port=own.redis_port)
        self.addCleanup(redis.close)
        self.assertEqual(http("POST", gw.url(f"/v1/locks/{tag}-warm/acquire"), {"ttl_ms": 1000}).status, 200)
        return gw, redis_pid(redis)

    def stopped(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        self.addCleanup(os.kill, pid, signal.SIGCONT)  # also when the test fails midway

    def test_readyz_and_metrics_wait_at_most_probe_timeout_ms(self):
        """On the API's port, its threads free: /readyz answers 503 naming Redis, and /metrics
        fencegate_backend_up 0, within probe_timeout_ms and a margin, not request_timeout_ms; probes that
        come while the ping is still out do too; once Redis answers again, /readyz answers 200."""
        gw, pid = self.gateway("probe-bound")
        margin = PROBE_TIMEOUT_MS / 1000 + 1.0
        self.stopped(pid)
        for _ in range(3):
            took, r = timed_get(gw.port, "/readyz")
            self.assertEqual((r.status, r.body.get("redis"), r.body.get("postgres")), (503, "down", "up"), r)
            self.assertLess(took, margin)
            took, r = timed_get(gw.port, "/metrics")
            self.assertEqual((r.status, backend_up(r.body, "redis"), backend_up(r.body, "postgres")), (200, 0, 1))
            self.assertLess(took, margin)
        os.kill(pid, signal.SIGCONT)
        wait_for(lambda: http("GET", gw.url("/readyz"), timeout=5).status == 200,
                 timeout=3 * REQUEST_TIMEOUT_MS / 1000, what="/readyz 200 once Redis answers")

    def test_liveness_is_prompt_while_every_http_thread_waits_for_redis(self):
        """Every /healthz on the probe listener answers 200 within PROMPT_S while each HTTP thread holds a lock
        request for request_timeout_ms; the same probe on the API's port waits behind them (the reason for the
        probe listener, shown here: over a second at least once). Then /readyz and /metrics on the probe
        listener say Redis is down within probe_timeout_ms and a margin, and /readyz answers 200 once it
        is back."""
        gw, pid = self.gateway("probe-stall")
        probe_port = self.probe_port
        probe_times, api_times, failures = [], [], []

        def probe(port: int, times: list, pause: float) -> None:
            until = time.monotonic() + MEASURE_S
            while time.monotonic() < until:
                try:
                    took, r = timed_get(port, "/healthz")
                    times.append(round(took, 3))
                    if r.status != 200:
                        failures.append((port, r))
                except OSError as e:
                    failures.append((port, repr(e)))
                time.sleep(pause)

        self.stopped(pid)
        with BusyThreads(gw, "probe-stall") as busy:
            time.sleep(0.5)  # every thread inside a request
            probers = [threading.Thread(target=probe, args=(probe_port, probe_times, 0.2)),
                       threading.Thread(target=probe, args=(gw.port, api_times, 0.05))]
            for t in probers:
                t.start()
            for t in probers:
                t.join(60)
            readyz_took, readyz = timed_get(probe_port, "/readyz")
            metrics_took, metrics = timed_get(probe_port, "/metrics")
        os.kill(pid, signal.SIGCONT)
        print(f"/healthz while Redis was stopped, seconds: probe listener {probe_times}; API port {api_times}",
              file=sys.stderr)
        self.assertEqual(failures, [])
        self.assertGreaterEqual(len(probe_times), 10, probe_times)
        self.assertLess(max(probe_times), PROMPT_S,
                        f"/healthz on the probe listener: {probe_times}; on the API's port: {api_times}")
        self.assertGreater(max(api_times), 1.0,
                           f"the API's threads were not held: /healthz on its port {api_times}; {busy.answers}")
        self.assertIn(503, busy.answers)
        margin = PROBE_TIMEOUT_MS / 1000 + 1.0
        self.assertEqual((readyz.status, readyz.body.get("redis"), readyz.body.get("postgres")),
                         (503, "down", "up"), readyz)
        self.assertEqual(readyz.headers["content-type"], "application/problem+json", readyz)
        self.assertLess(readyz_took, margin)
        self.assertEqual(metrics.status, 200, metrics)
        self.assertLess(metrics_took, margin)
        self.assertEqual((backend_up(metrics.body, "redis"), backend_up(metrics.body, "postgres")), (0, 1))

        def ready():
            return http("GET", f"http://127.0.0.1:{probe_port}/readyz", timeout=5).status == 200

        wait_for(ready, timeout=3 * REQUEST_TIMEOUT_MS / 1000, what="/readyz 200 on the probe listener")
        self.assertEqual(backend_up(http("GET", f"http://127.0.0.1:{probe_port}/metrics").body, "redis"), 1)

    def test_a_draining_gateway_answers_its_probes_until_it_exits(self):
        """SIGTERM while lock requests wait for a stopped Redis: the drain waits for them, and meanwhile the
        probe listener answers /healthz 200 (the process is alive: a liveness probe must not kill it mid-drain)
        and /readyz 503 (take it out of rotation) at once, while the API's port takes no new connection; the
        gateway then exits 0 and the probe listener is gone."""
        gw, pid = self.gateway("probe-drain")
        self.stopped(pid)
        with BusyThreads(gw, "probe-drain"):
            time.sleep(0.5)
            gw.signal(signal.SIGTERM)
            time.sleep(0.3)
            healthz_took, healthz = timed_get(self.probe_port, "/healthz")
            readyz_took, readyz = timed_get(self.probe_port, "/readyz")
            self.assertTrue(gw.running, "the drain did not wait for the requests in flight")
            os.kill(pid, signal.SIGCONT)
        self.assertEqual(healthz.status, 200, healthz)
        self.assertLess(healthz_took, PROMPT_S)
        self.assertEqual(readyz.status, 503, readyz)
        self.assertLess(readyz_took, PROBE_TIMEOUT_MS / 1000 + 1.0)
        self.assertEqual(gw.stop(), 0)
        self.assertIn("the gateway is draining", gw.log_text())
        with self.assertRaises(OSError):
            timed_get(self.probe_port, "/healthz", timeout=2)


@skip_in_cluster("it stops a Redis of its own")
class ProbesInDrainTest(unittest.TestCase):
    """Probes that keep coming while the gateway drains."""

    def gateway_over_stopped_redis(self, label: str, request_timeout_ms: int) -> tuple[Gateway, int]:
        """A gateway on backends of its own with a probe listener (its port is returned), its Redis stopped
        (SIGCONT at clean-up, before the gateway stops)."""
        own = private_backends(self, label)
        probe_port = free_port()
        config = {"probe_listen": f"127.0.0.1:{probe_port}", "probe_timeout_ms": PROBE_TIMEOUT_MS,
                  "request_timeout_ms": request_timeout_ms}
        gw = Gateway(config=config, env_overrides=own.env)
        self.addCleanup(gw.stop, check=False)
        redis = Redis(port=own.redis_port)
        pid = redis_pid(redis)
        redis.close()
        os.kill(pid, signal.SIGSTOP)
        self.addCleanup(os.kill, pid, signal.SIGCONT)
        return gw, probe_port

    def test_probes_do_not_hold_the_drain(self):
        """Redis stopped, SIGTERM with no API request in flight while scrapers ask /metrics and /readyz on the
        probe listener one after another, each answered after probe_timeout_ms: the drain ends at once, so the
        probe listener, which serves until then, answers no probe later than a second or two after the
        signal, and the gateway exits 0. Failed before the fix: the drain waited while any request was in flight, a
        probe's too, so the scrapers held it to its 10 s cap (probes answered 10.2 s after SIGTERM)."""
        gw, probe_port = self.gateway_over_stopped_redis("probe-held-drain", 1000)
        stop, answered = threading.Event(), []  # (status, when)

        def scrape(path: str) -> None:
            while not stop.is_set():
                try:
                    with Client(f"http://127.0.0.1:{probe_port}", timeout=5) as c:
                        while not stop.is_set():
                            answered.append((c.get(path).status, time.monotonic()))
                except OSError:
                    time.sleep(0.01)

        scrapers = [threading.Thread(target=scrape, args=(path,)) for path in ("/metrics", "/readyz") * 2]
        for t in scrapers:
            t.start()
        try:
            wait_for(lambda: len(answered) >= 4, what="the scrapers answered")
            signalled = time.monotonic()
            gw.signal(signal.SIGTERM)
            gw.proc.wait(60)
        finally:
            stop.set()
            for t in scrapers:
                t.join(30)
        self.assertEqual(gw.stop(), 0)
        after = [round(when - signalled, 2) for _, when in answered if when > signalled]
        self.assertLess(max(after, default=0), 2.5, f"probes held the drain: answered {after} s after SIGTERM")

    def test_a_stopped_redis_holds_the_exit_a_second_at_most(self):
        """Redis stopped while the readiness thread, the janitor and the doorbell wait for it, then SIGTERM with
        no API request in flight: the drain ends at once, the threads still in a Redis call are left behind
        after a second, and the gateway exits 0 well within request_timeout_ms. Failed before the fix: the
        exit joined them one after another, each after its call gave up (5.9 to 10.5 s with request_timeout_ms
        6000: the readiness ping, then the janitor's calls)."""
        request_timeout_ms = 6000
        gw, probe_port = self.gateway_over_stopped_redis("probe-stalled-exit", request_timeout_ms)
        time.sleep(1.0)  # the janitor's calls wait for Redis
        # answered after probe_timeout_ms; the readiness thread's PING waits on for request_timeout_ms
        self.assertEqual(http("GET", f"http://127.0.0.1:{probe_port}/readyz", timeout=5).status, 503)
        took = gw.seconds_to_exit()
        self.assertEqual(gw.stop(), 0)
        bound = request_timeout_ms / 1000 - 2.5  # a second's grace, and room for a loaded machine
        self.assertLess(took, bound, f"the gateway exited {took:.1f} s after SIGTERM; log {gw.log_path}")
        self.assertIn("exit_without_waiting", gw.log_text())

KEYS = [key_entry("scraper", "scraper-key", ["metrics"]), key_entry("worker", "worker-key", ["lock:*"])]


class ProbeRoutesTest(GatewayTest):
    """What the probe listener serves, and under which rules (auth off by default on loopback)."""

    probe_port = free_port()
    gateway_config = {"probe_listen": f"127.0.0.1:{probe_port}"}

    def get(self, path: str, **kw):
        return http("GET", f"http://127.0.0.1:{self.probe_port}{path}", **kw)

    def test_the_probes_are_served(self):
        self.assertEqual((self.get("/healthz").status, self.get("/healthz").body), (200, {"status": "ok"}))
        self.assertEqual(self.get("/readyz").body, {"redis": "up", "postgres": "up"})
        metrics = self.get("/metrics")
        self.assertEqual(metrics.status, 200, metrics)
        self.assertTrue(metrics.headers["content-type"].startswith("text/plain"), metrics)
        self.assertEqual(backend_up(metrics.body, "redis"), 1)
        self.assertIn('fencegate_http_responses_total{route="readyz",code="200"}', metrics.body)
        # the API's port serves them as before
        self.assertEqual(self.gw.http("GET", "/healthz").status, 200)

    def test_nothing_else_is_served(self):
        for path in ("/v1/locks/probe-x", "/v1/openapi.json", "/ui/", "/", "/healthz/x", "/v1/whoami"):
            r = self.get(path)
            self.assertEqual((r.status, r.headers["content-type"], r.body.get("type")),
                             (404, "application/problem+json", "/problems/not_found"), (path, r))
        r = http("POST", f"http://127.0.0.1:{self.probe_port}/v1/locks/probe-x/acquire", {"ttl_ms": 1000})
        self.assertEqual(r.status, 404, r)
        r = http("POST", f"http://127.0.0.1:{self.probe_port}/healthz", {})
        self.assertEqual((r.status, r.headers.get("allow")), (405, "GET, HEAD"), r)
        self.assertEqual(self.c.get("/v1/locks/probe-x").status, 200)  # on the API's port

    def test_the_api_rules_hold(self):
        """Through a proxy while auth is off by default: the probes are served, /metrics is not (401); a Host
        the listener does not serve: 421."""
        proxied = {"X-Forwarded-For": "203.0.113.9"}
        self.assertEqual(self.get("/healthz", headers=proxied).status, 200)
        self.assertEqual(self.get("/readyz", headers=proxied).status, 200)
        self.assertEqual(self.get("/metrics", headers=proxied).status, 401)
        self.assertEqual(self.get("/healthz", headers={"Host": "evil.example"}).status, 421)
        self.assertEqual(self.get("/healthz", headers={"Host": f"localhost:{self.probe_port}"}).status, 200)

    def test_the_listener_is_logged_at_start(self):
        line = next(line for line in self.gw.log_text().splitlines() if '"serving_probes"' in line)
        self.assertIn(f'"port":{self.probe_port}', line.replace(" ", ""))
        self.assertIn('"host":"127.0.0.1"', line.replace(" ", ""))


class ProbeAuthTest(GatewayTest):
    """With auth required: the probes are open, /metrics needs the metrics scope, as on the API's port."""

    probe_port = free_port()
    gateway_config = {"probe_listen": f"127.0.0.1:{probe_port}", "auth": {"mode": "required", "keys": KEYS}}

    def get(self, path: str, **kw):
        return http("GET", f"http://127.0.0.1:{self.probe_port}{path}", **kw)

    def test_scopes(self):
        self.assertEqual(self.get("/healthz").status, 200)
        self.assertEqual(self.get("/readyz").status, 200)
        r = self.get("/metrics")
        self.assertEqual((r.status, r.headers.get("www-authenticate")), (401, 'Bearer realm="fencegate"'), r)
        r = self.get("/metrics", headers=bearer("worker-key"))
        self.assertEqual((r.status, r.body.get("scope")), (403, "metrics"), r)
        self.assertEqual(self.get("/metrics", headers=bearer("scraper-key")).status, 200)
        self.assertEqual(self.get("/v1/locks/x", headers=bearer("worker-key")).status, 404)


class ProbeConfigTest(unittest.TestCase):
    """A probe_listen that cannot be served stops start-up (exit 2) with a message naming it."""

    def refused(self, needle: str, env: dict | None = None, config: dict | None = None):
        r = run_fencegate(env_overrides=env, config=config, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr[-2000:])
        self.assertIn(needle, r.stderr, r.stderr[-2000:])
        return r

    def test_the_listen_port_is_refused(self):
        port = free_port()
        for probe in (f"127.0.0.1:{port}", f"0.0.0.0:{port}"):
            self.refused("probe_listen (FENCEGATE_PROBE_LISTEN) must not take the port of listen",
                         env={"FENCEGATE_LISTEN": f"127.0.0.1:{port}", "FENCEGATE_PROBE_LISTEN": probe})
        self.refused("must not take the port of listen",
                     env={"FENCEGATE_LISTEN": f"0.0.0.0:{port}", "FENCEGATE_AUTH_MODE": "off"},
                     config={"probe_listen": f"127.0.0.1:{port}"})

    def test_bad_values_are_refused(self):
        for value, needle in (("8481", "FENCEGATE_PROBE_LISTEN: expected host:port, got '8481'"),
                              ("127.0.0.1:", "expected host:port"),
                              ("127.0.0.1:0", "FENCEGATE_PROBE_LISTEN: bad port in '127.0.0.1:0' (1 to 65535)"),
                              ("127.0.0.1:65536", "bad port in '127.0.0.1:65536'"),
                              ("localhost:8481", "probe_listen: 'localhost' is not an IP address")):
            self.refused(needle, env={"FENCEGATE_PROBE_LISTEN": value})
        self.refused("config key 'probe_listen' must be a string", config={"probe_listen": 8481})
        self.refused("probe_timeout_ms: must be between 50 and 600000", config={"probe_timeout_ms": 10})

    def test_an_address_in_use_is_refused(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            self.refused(f"cannot listen on 127.0.0.1:{port} (probe_listen): Address already in use",
                         env={"FENCEGATE_PROBE_LISTEN": f"127.0.0.1:{port}"})


if __name__ == "__main__":
    unittest.main()
