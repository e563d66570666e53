# SPDX-License-Identifier: Apache-2.0
"""GET /metrics: well-formed Prometheus text, and counters that move as a scripted sequence of lock and
semaphore calls says they must (acquisitions by result, renewals, releases, waiters now, wait-time and
request-latency histograms), with bounded labels: never a lock name.

Owns: the metrics the gateway exposes. Must not: test the lock semantics themselves.
"""

import os
import re
import sys
import threading
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, Redis, wait_for  # noqa: E402

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (-?[0-9.e+]+|\+Inf|NaN)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    """Series -> value; asserts the Prometheus text format line by line."""
    series, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels = m.group(1), frozenset(LABEL.findall(m.group(3) or ""))
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or family in typed, f"no TYPE for {name}"
        assert (name, labels) not in series, f"duplicate series {line!r}"
        series[(name, labels)] = float(m.group(4))
    return series


def value(series: dict, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


class MetricsTest(GatewayTest):
    def scrape(self) -> dict:
        r = self.gw.http("GET", "/metrics")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["content-type"].startswith("text/plain"), r.headers)
        self.text = r.body
        return parse(r.body)

    def acquire(self, kind: str, name: str, expect: int, **body) -> dict:
        r = self.gw.http("POST", f"/v1/{kind}/{name}/acquire", body)
        self.assertEqual(r.status, expect, r)
        return r.body

    def test_histograms_are_cumulative(self):
        s = self.scrape()
        buckets = {}
        for (name, labels), v in s.items():
            if name.endswith("_bucket"):
                rest = frozenset(kv for kv in labels if kv[0] != "le")
                le = dict(labels)["le"]
                buckets.setdefault((name, rest), []).append((float("inf") if le == "+Inf" else float(le), v))
        self.assertTrue(buckets)
        for key, points in buckets.items():
            points.sort()
            counts = [v for _, v in points]
            self.assertEqual(counts, sorted(counts), key)
            self.assertEqual(points[-1][0], float("inf"), key)
            name, rest = key
            self.assertEqual(s[(name.replace("_bucket", "_count"), rest)], counts[-1], key)

    def test_a_scripted_sequence_moves_the_counters(self):
        a, b, c, sem = (f"m-{x}-{uuid.uuid4().hex[:8]}" for x in "abcs")
        before = self.scrape()

        ta = self.acquire("locks", a, 200, ttl_ms=30000)["token"]
        self.acquire("locks", a, 409)                                   # busy
        tb = self.acquire("locks", b, 200)["token"]
        self.acquire("locks", b, 400, ttl_ms="soon")                    # invalid
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{a}/renew", {"token": ta}).status, 200)
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{a}/release", {"token": ta}).status, 200)
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{a}/renew", {"token": ta}).status, 410)

        # A waiter shows in the gauge while it waits, and its grant in the wait-time histogram.
        tc = self.acquire("locks", c, 200)["token"]
        waited = {}

        def wait_for_c():
            with self.gw.client() as client:
                waited["r"] = client.post(f"/v1/locks/{c}/acquire", {"wait_ms": 20000})

        t = threading.Thread(target=wait_for_c)
        t.start()
        wait_for(lambda: value(self.scrape(), "fencegate_waiters") >= 1, timeout=10, what="a waiter")
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{c}/release", {"token": tc}).status, 200)
        t.join(20)
        self.assertEqual(waited["r"].status, 200, waited)
        wait_for(lambda: value(self.scrape(), "fencegate_waiters") == 0, timeout=10, what="no waiter")
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{b}/release", {"token": tb}).status, 200)
        ts = self.acquire("semaphores", sem, 200, limit=2)["token"]
        self.assertEqual(self.gw.http("POST", f"/v1/semaphores/{sem}/release", {"token": ts}).status, 200)

        # A lease deleted behind the holder's back: its release answers 410.
        td = self.acquire("locks", a, 200)["token"]
        with Redis() as r:
            r.cmd("DEL", f"fg:lk:{{{a}}}:h")
        self.assertEqual(self.gw.http("POST", f"/v1/locks/{a}/release", {"token": td}).status, 410)

        after = self.scrape()

        def delta(name, **labels):
            return value(after, name, **labels) - value(before, name, **labels)

        lock = {"kind": "lock"}
        self.assertEqual(delta("fencegate_acquisitions_total", result="granted", **lock), 5)  # a, b, c, waiter, a
        self.assertEqual(delta("fencegate_acquisitions_total", result="busy", **lock), 1)
        self.assertEqual(delta("fencegate_acquisitions_total", result="invalid", **lock), 1)
        self.assertEqual(delta("fencegate_acquisitions_total", kind="semaphore", result="granted"), 1)
        self.assertEqual(delta("fencegate_renewals_total", result="ok", **lock), 1)
        self.assertEqual(delta("fencegate_renewals_total", result="lease_lost", **lock), 1)
        self.assertEqual(delta("fencegate_releases_total", result="ok", **lock), 3)
        self.assertEqual(delta("fencegate_releases_total", result="lease_lost", **lock), 1)
        self.assertEqual(delta("fencegate_wait_seconds_count", **lock), 5)
        self.assertEqual(delta("fencegate_hold_seconds_count", **lock), 3)  # a, c, b released
        self.assertEqual(delta("fencegate_hold_seconds_count", kind="semaphore"), 1)
        # The waiter waited at least until the release: some wait lies above the smallest bucket.
        self.assertGreaterEqual(delta("fencegate_wait_seconds_sum", **lock), 0.0)
        self.assertEqual(delta("fencegate_http_request_duration_seconds_count", route="lock_acquire"), 7)
        self.assertEqual(delta("fencegate_http_responses_total", route="lock_acquire", code="4xx"), 2)
        self.assertEqual(delta("fencegate_http_responses_total", route="lock_release", code="4xx"), 1)
        self.assertGreaterEqual(value(after, "fencegate_backend_connects_total", backend="redis"), 1)
        # Bounded labels: no lock name anywhere in the text.
        for name in (a, b, c, sem):
            self.assertNotIn(name, self.text)

    def test_unknown_routes_share_one_label(self):
        for path in ("/nope/1", "/nope/2", "/v1/nothing"):
            self.assertEqual(self.gw.http("GET", path).status, 404)
        s = self.scrape()
        self.assertGreaterEqual(value(s, "fencegate_http_responses_total", route="none", code="4xx"), 3)
        self.assertNotIn("nope", self.text)


if __name__ == "__main__":
    unittest.main()
