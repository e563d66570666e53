# SPDX-License-Identifier: Apache-2.0
"""The monitoring that ships with the gateway: deploy/prometheus/fencegate-rules.yml passes
`promtool check rules` and its unit tests (`promtool test rules`), and every metric that the alert rules
and the Grafana dashboard (deploy/grafana/fencegate.json) query is one the gateway exports, as a running
gateway's /metrics names them (a histogram by its _bucket, _sum and _count series).

Broken variants this caught when tried: a rule on fencegate_http_responses_total{code="5xx"} (the code is
the status), a dashboard panel on a metric renamed since (fencegate_pg_pool_size), `up` in a rule (not the
gateway's), and a rules file whose alert fired on an idle gateway at the end of its fence block.

Owns: deploy/prometheus/ and deploy/grafana/. Must not: test the metrics' values (test_metrics.py does).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES_DIR = os.path.join(ROOT, "deploy", "prometheus")
RULES = os.path.join(RULES_DIR, "fencegate-rules.yml")
RULES_TEST = os.path.join(RULES_DIR, "fencegate-rules.test.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "fencegate.json")

# PromQL words that are not metric names: functions, aggregations, operators, modifiers.
PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values",
    "group", "rate", "irate", "increase", "delta", "idelta", "deriv", "histogram_quantile", "abs", "absent",
    "absent_over_time", "avg_over_time", "max_over_time", "min_over_time", "sum_over_time", "clamp_min",
    "clamp_max", "changes", "resets", "time", "vector", "scalar", "label_replace", "label_values", "and", "or",
    "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "inf", "nan",
}


def metric_names(expr: str) -> set[str]:
    """The metric names an expression (PromQL, or a Grafana label_values query) reads."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # strings (label values, regexes)
    text = re.sub(r"\{[^}]*\}", "", text)                         # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)                        # range selectors ($__rate_interval too)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\$\w+", "", text)                            # Grafana variables
    text = re.sub(r",\s*[a-zA-Z_]\w*\s*\)", ")", text)          # label_values(metric, LABEL)
    words = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", text))
    return {w for w in words if w.lower() not in PROMQL_WORDS and not re.fullmatch(r"[0-9.e]+", w)}


def dashboard_queries(dashboard: dict) -> list[str]:
    queries = []
    for panel in dashboard["panels"]:
        queries += [t["expr"] for t in panel.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            queries.append(var["query"]["query"] if isinstance(var["query"], dict) else var["query"])
    return queries


def rule_queries(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    return [rule["expr"] for group in doc["groups"] for rule in group["rules"]]


class MonitoringTest(GatewayTest):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        text = cls.gw.http("GET", "/metrics").body
        cls.exported = set()
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, family, kind = line.split()
                cls.exported.add(family)
                if kind == "histogram":
                    cls.exported |= {family + "_bucket", family + "_sum", family + "_count"}

    def test_the_parser_finds_names(self):
        self.assertEqual(metric_names('sum by (le, kind) (rate(fencegate_wait_seconds_bucket{job=~"$job"}'
                                      '[$__rate_interval])) / on (job) up'),
                         {"fencegate_wait_seconds_bucket", "up"})
        self.assertEqual(metric_names('label_values(fencegate_build_info{job=~"$job"}, instance)'),
                         {"fencegate_build_info"})

    def test_rules_check_and_their_unit_tests_pass(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool not found: scripts/deps.sh installs Debian's prometheus")
        for args in (["check", "rules", RULES], ["test", "rules", RULES_TEST]):
            r = subprocess.run([promtool, *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, f"promtool {' '.join(args)}:\n{r.stdout}\n{r.stderr}")

    def test_rules_query_only_exported_metrics(self):
        queries = rule_queries(RULES)
        self.assertGreaterEqual(len(queries), 5)
        for expr in queries:
            names = metric_names(expr)
            self.assertTrue(names, expr)
            self.assertLessEqual(names, self.exported, f"not exported: {names - self.exported} in {expr}")

    def test_dashboard_queries_only_exported_metrics(self):
        with open(DASHBOARD, encoding="utf-8") as f:
            dashboard = json.load(f)
        queries = dashboard_queries(dashboard)
        self.assertGreaterEqual(len(queries), 20)
        seen = set()
        for expr in queries:
            names = metric_names(expr)
            self.assertTrue(names, expr)
            self.assertLessEqual(names, self.exported, f"not exported: {names - self.exported} in {expr}")
            seen |= names
        # What the dashboard is for: leases, waits, refusals by reason, backends, waiters, shared trips.
        for needed in ("fencegate_acquisitions_total", "fencegate_wait_seconds_bucket", "fencegate_waiters",
                       "fencegate_fenced_writes_total", "fencegate_backend_up",
                       "fencegate_backend_request_duration_seconds_bucket", "fencegate_redis_batches_total"):
            self.assertIn(needed, seen)
        ids = [p["id"] for p in dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")


if __name__ == "__main__":
    unittest.main()
